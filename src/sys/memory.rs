//! What a new mapping can have: the room the process's memory cgroup and
//! the system (`MemAvailable`) leave for memory, the free space of the file
//! system a file lies on, and the address space `RLIMIT_AS` leaves. A filter
//! is refused before anything is created when it needs more than the
//! tightest of these (doc/DESIGN.md, §5 Room): shared memory taken past a
//! memory cgroup's limit is not an error the call can see, but the OOM
//! killer, which ends this process or another.
//!
//! Each source is read from `/proc` or `/sys` when it is there; a source
//! that cannot be read is unknown and skipped, so the check never refuses
//! for want of `/proc`. The parsing is pure and tested at the bottom.

use std::os::fd::RawFd;

use crate::error::{Error, ErrorKind, Result};

/// Where a new mapping's storage comes from.
#[derive(Clone, Copy, Debug)]
pub enum Store {
    /// Memory: an anonymous filter, a memfd.
    Memory,
    /// The file behind this descriptor: the free space of its file
    /// system, and memory too when that is tmpfs (or ramfs).
    File(RawFd),
}

/// The source a figure of room comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A memory cgroup's limit less its usage (the leaf or an ancestor).
    Cgroup,
    /// `MemAvailable` of `/proc/meminfo`.
    MemAvailable,
    /// The file system's free space (`f_bavail * f_frsize`).
    FreeSpace,
    /// `RLIMIT_AS` less the process's `VmSize`.
    AddressSpace,
}

/// The room for a new mapping: the tightest known figure and its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    pub bytes: u64,
    pub source: Source,
}

/// Refuse, naming `what`, what was asked, what is available and which
/// limit says so, when a mapping of `need` bytes from `store` does not fit
/// (`need > room`: no headroom beyond that). `tail` ends the message
/// ("nothing was created"). Unknown room (no source readable): accepted.
pub fn check_room(need: u64, store: Store, what: &str, tail: &str) -> Result<()> {
    match room(store) {
        Some(r) if need > r.bytes => Err(Error::new(ErrorKind::Io, no_room_message(need, r, what, tail))),
        _ => Ok(()),
    }
}

/// When `need` bytes from `store` do not fit: which limit says so, and
/// what it leaves ("the memory cgroup allows 512 MiB more (536870912
/// bytes)"), for a message of the caller's own.
pub fn shortfall(need: u64, store: Store) -> Option<String> {
    room(store).filter(|r| need > r.bytes).map(limit_phrase)
}

/// The tightest known room for a new mapping from `store`.
pub fn room(store: Store) -> Option<Room> {
    let mut all = vec![address_space()];
    let memory = match store {
        Store::Memory => true,
        Store::File(fd) => {
            let (in_memory, free) = file_system(fd);
            all.push(free.map(|bytes| Room {
                bytes,
                source: Source::FreeSpace,
            }));
            in_memory
        }
    };
    if memory {
        all.push(cgroup());
        all.push(mem_available());
    }
    tightest(all)
}

/// The smallest of the known figures (the first of equals).
fn tightest(all: impl IntoIterator<Item = Option<Room>>) -> Option<Room> {
    all.into_iter()
        .flatten()
        .fold(None, |best: Option<Room>, r| match best {
            Some(b) if b.bytes <= r.bytes => Some(b),
            _ => Some(r),
        })
}

/// The message of `check_room`'s refusal.
fn no_room_message(need: u64, r: Room, what: &str, tail: &str) -> String {
    format!(
        "{what} needs {need} bytes ({}), but {}; {tail}",
        human(need),
        limit_phrase(r)
    )
}

/// Which limit leaves how much. A file system's says what the kernel would
/// have said (ENOSPC), as the messages of a failed reservation always have.
fn limit_phrase(r: Room) -> String {
    let have = r.bytes;
    let h = human(have);
    match r.source {
        Source::Cgroup => format!("the memory cgroup allows {h} more ({have} bytes)"),
        Source::MemAvailable => format!("the system has {h} available (MemAvailable, {have} bytes)"),
        Source::FreeSpace => format!(
            "the file system has {h} free (free space on the file system, {have} bytes; \
             ENOSPC: No space left on device)"
        ),
        Source::AddressSpace => format!("the address space limit leaves {h} (RLIMIT_AS less VmSize, {have} bytes)"),
    }
}

/// `n` bytes for people: in the largest binary unit it reaches, one
/// decimal where it is not whole ("512 MiB", "1.5 GiB", "100 bytes").
pub fn human(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut unit = 0;
    while unit + 1 < UNITS.len() && n >> (10 * (unit + 2)) > 0 {
        unit += 1;
    }
    let v = n as f64 / (1u64 << (10 * (unit + 1))) as f64;
    let s = format!("{v:.1}");
    format!("{} {}", s.strip_suffix(".0").unwrap_or(&s), UNITS[unit])
}

// ---------------------------------------------------------------- sources

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The room the process's memory cgroup leaves: over the cgroup and each
/// of its ancestors that has a limit, the least of `limit - (usage -
/// inactive file cache)` (the inactive file cache is given back before a
/// limit is enforced, so counting it would refuse memory that is there).
fn cgroup() -> Option<Room> {
    let (v, path) = memory_cgroup(&read("/proc/self/cgroup")?)?;
    let (mount, limit, usage, inactive) = match v {
        Version::V1 => (
            "/sys/fs/cgroup/memory",
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "total_inactive_file",
        ),
        Version::V2 => ("/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"),
    };
    let rooms = ancestors(&path).into_iter().map(|dir| {
        let dir = format!("{mount}{dir}");
        let limit = parse_limit(&read(&format!("{dir}/{limit}"))?)?;
        let usage = parse_limit(&read(&format!("{dir}/{usage}"))?)?;
        let cache = read(&format!("{dir}/memory.stat")).and_then(|s| stat_value(&s, inactive));
        Some(Room {
            bytes: cgroup_room(limit, usage, cache.unwrap_or(0)),
            source: Source::Cgroup,
        })
    });
    tightest(rooms)
}

fn mem_available() -> Option<Room> {
    Some(Room {
        bytes: meminfo_available(&read("/proc/meminfo")?)?,
        source: Source::MemAvailable,
    })
}

fn address_space() -> Option<Room> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let used = status_kib(&read("/proc/self/status")?, "VmSize")?;
    Some(Room {
        bytes: lim.rlim_cur.saturating_sub(used),
        source: Source::AddressSpace,
    })
}

/// Whether the file behind `fd` is in memory (tmpfs, ramfs), and its file
/// system's free space (None: unknown, or a file system without a size,
/// as a tmpfs mounted without one and the one memfds live on).
fn file_system(fd: RawFd) -> (bool, Option<u64>) {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // SAFETY: zeroed is a valid `statfs` (plain integers); fstatfs fills it.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall on a descriptor the caller holds; `fs` is a
    // valid out-pointer.
    let in_memory = unsafe { libc::fstatfs(fd, &mut fs) } == 0 && matches!(fs.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC);
    // SAFETY: as above, for `statvfs`.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let free = (unsafe { libc::fstatvfs(fd, &mut vfs) } == 0)
        .then(|| free_space(vfs.f_blocks, vfs.f_bavail, vfs.f_frsize))
        .flatten();
    (in_memory, free)
}

// ---------------------------------------------------------------- parsing

/// Which cgroup hierarchy holds the memory controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The memory cgroup of a `/proc/PID/cgroup` text: a v1 line whose
/// controllers include `memory`, else the v2 line (`0::PATH`).
fn memory_cgroup(text: &str) -> Option<(Version, String)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        if controllers.split(',').any(|c| c == "memory") {
            return Some((Version::V1, path.to_string()));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((Version::V2, path.to_string()));
        }
    }
    v2
}

/// A cgroup path and each of its ancestors, the root last, as suffixes of
/// the mount point ("" for the root). Paths with `..` give nothing.
fn ancestors(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.contains(&"..") {
        return Vec::new();
    }
    (0..=parts.len())
        .rev()
        .map(|n| parts[..n].iter().map(|p| format!("/{p}")).collect())
        .collect()
}

/// A limit or usage file's value: bytes, or `max` (no limit: u64::MAX).
fn parse_limit(s: &str) -> Option<u64> {
    match s.trim() {
        "max" => Some(u64::MAX),
        t => t.parse().ok(),
    }
}

/// The value of `key` in a `memory.stat` text (`key value` lines).
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Room under a cgroup's limit: what it may still charge, the reclaimable
/// cache counted as free.
fn cgroup_room(limit: u64, usage: u64, inactive_file: u64) -> u64 {
    limit.saturating_sub(usage.saturating_sub(inactive_file))
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn meminfo_available(text: &str) -> Option<u64> {
    status_kib(text, "MemAvailable")
}

/// A `Key:   N kB` line of `/proc/meminfo` or `/proc/self/status`, in bytes.
fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k != key {
            return None;
        }
        let n: u64 = v.trim().strip_suffix("kB")?.trim().parse().ok()?;
        n.checked_mul(1024)
    })
}

/// Free space for an unprivileged writer from `statvfs`; None for a file
/// system that reports no size (a tmpfs without `size=`).
fn free_space(blocks: u64, bavail: u64, frsize: u64) -> Option<u64> {
    (blocks != 0).then(|| bavail.saturating_mul(frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_cgroup_of_v1_v2_and_hybrid_hosts() {
        let v1 = "12:pids:/a\n4:memory:/process_api/91b7\n0::/\n";
        assert_eq!(memory_cgroup(v1), Some((Version::V1, "/process_api/91b7".into())));
        let shared = "5:cpu,memory,cpuacct:/x/y\n";
        assert_eq!(memory_cgroup(shared), Some((Version::V1, "/x/y".into())));
        assert_eq!(
            memory_cgroup("0::/user.slice/a.scope\n"),
            Some((Version::V2, "/user.slice/a.scope".into()))
        );
        assert_eq!(memory_cgroup("0::/\n"), Some((Version::V2, "/".into())));
        // A path with a colon in it stays whole.
        assert_eq!(memory_cgroup("0::/a:b\n"), Some((Version::V2, "/a:b".into())));
        // v1 without the memory controller, a named hierarchy: neither.
        assert_eq!(memory_cgroup("3:cpuset:/\n1:name=systemd:/\n"), None);
        assert_eq!(memory_cgroup("4:memoryx:/a\n"), None);
        for junk in ["", "garbage", "0:/", "0::relative", "4:memory:"] {
            assert_eq!(memory_cgroup(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn ancestors_walk_up_to_the_root() {
        assert_eq!(ancestors("/a/b/c"), ["/a/b/c", "/a/b", "/a", ""]);
        assert_eq!(ancestors("/"), [""]);
        assert_eq!(ancestors(""), [""]);
        assert_eq!(ancestors("//a//b/"), ["/a/b", "/a", ""]);
        assert!(ancestors("/a/../b").is_empty());
    }

    #[test]
    fn limits_and_usages() {
        assert_eq!(parse_limit("max\n"), Some(u64::MAX));
        assert_eq!(parse_limit("536870912\n"), Some(512 << 20));
        assert_eq!(parse_limit("9223372036854771712"), Some(9_223_372_036_854_771_712));
        assert_eq!(parse_limit("0"), Some(0));
        for junk in ["", "-1", "12k", "max2", "18446744073709551616"] {
            assert_eq!(parse_limit(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn memory_stat_values() {
        let v1 = "cache 100\ninactive_file 5\ntotal_inactive_file 4096\n";
        assert_eq!(stat_value(v1, "total_inactive_file"), Some(4096));
        assert_eq!(stat_value(v1, "inactive_file"), Some(5));
        assert_eq!(stat_value(v1, "active_file"), None);
        assert_eq!(stat_value("inactive_file x\n", "inactive_file"), None);
        assert_eq!(stat_value("", "inactive_file"), None);
    }

    #[test]
    fn cgroup_room_counts_the_file_cache_as_free() {
        assert_eq!(cgroup_room(512 << 20, 100 << 20, 0), 412 << 20);
        assert_eq!(cgroup_room(512 << 20, 100 << 20, 60 << 20), 472 << 20);
        assert_eq!(cgroup_room(100, 200, 0), 0, "over its limit: no room");
        assert_eq!(cgroup_room(100, 10, 50), 100, "cache past usage: all of it");
        assert_eq!(cgroup_room(u64::MAX, 5, 0), u64::MAX - 5);
    }

    #[test]
    fn meminfo_and_status_lines() {
        let mi = "MemTotal:       24683784 kB\nMemFree: 1 kB\nMemAvailable:   23691048 kB\n";
        assert_eq!(meminfo_available(mi), Some(23_691_048 * 1024));
        assert_eq!(meminfo_available("MemFree: 1 kB\n"), None, "kernels before 3.14");
        assert_eq!(meminfo_available("MemAvailable: x kB\n"), None);
        assert_eq!(meminfo_available("MemAvailable: 5\n"), None, "no unit");
        assert_eq!(meminfo_available("MemAvailable: 18446744073709551615 kB\n"), None);
        let st = "Name:\tperl\nVmPeak:\t  30000 kB\nVmSize:\t   26112 kB\n";
        assert_eq!(status_kib(st, "VmSize"), Some(26112 * 1024));
        assert_eq!(status_kib(st, "VmRSS"), None);
        assert_eq!(status_kib(st, "Vm"), None, "a prefix is not the key");
    }

    #[test]
    fn free_space_of_sized_and_unsized_file_systems() {
        assert_eq!(free_space(1000, 10, 4096), Some(40960));
        assert_eq!(free_space(1000, 0, 4096), Some(0));
        assert_eq!(free_space(0, 0, 4096), None, "a tmpfs without a size");
        assert_eq!(free_space(1, u64::MAX, 4096), Some(u64::MAX));
    }

    #[test]
    fn the_tightest_source_wins() {
        let r = |bytes, source| Some(Room { bytes, source });
        assert_eq!(tightest([None, None]), None);
        assert_eq!(
            tightest([
                r(5, Source::AddressSpace),
                None,
                r(3, Source::Cgroup),
                r(4, Source::MemAvailable)
            ]),
            r(3, Source::Cgroup)
        );
        assert_eq!(
            tightest([r(3, Source::FreeSpace), r(3, Source::Cgroup)]),
            r(3, Source::FreeSpace),
            "the first of equals"
        );
    }

    #[test]
    fn sizes_for_people() {
        assert_eq!(human(0), "0 bytes");
        assert_eq!(human(1023), "1023 bytes");
        assert_eq!(human(1024), "1 KiB");
        assert_eq!(human(512 << 20), "512 MiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(16 << 30), "16 GiB");
        assert_eq!(human(u64::MAX), "16 EiB");
    }

    #[test]
    fn refusals_name_the_need_the_room_and_the_limit() {
        let m = |source| {
            no_room_message(
                16 << 30,
                Room {
                    bytes: 512 << 20,
                    source,
                },
                "the filter",
                "nothing was created",
            )
        };
        let c = m(Source::Cgroup);
        assert!(
            c.starts_with("the filter needs 17179869184 bytes (16 GiB), but "),
            "{c}"
        );
        assert!(
            c.contains("the memory cgroup allows 512 MiB more (536870912 bytes)"),
            "{c}"
        );
        assert!(c.ends_with("; nothing was created"), "{c}");
        assert!(m(Source::MemAvailable).contains("MemAvailable, 536870912 bytes"));
        let f = m(Source::FreeSpace);
        assert!(f.contains("the file system has 512 MiB free (free space on the file system, 536870912 bytes; ENOSPC: No space left on device)"), "{f}");
        assert!(m(Source::AddressSpace).contains("RLIMIT_AS"));
    }

    /// The sources of this host, read for real: each known figure is a
    /// number, and a memory store's room is no more than MemAvailable.
    #[test]
    fn this_host_gives_figures_or_none() {
        let mem = room(Store::Memory);
        if let (Some(r), Some(a)) = (mem, mem_available()) {
            assert!(r.bytes <= a.bytes);
        }
        assert!(check_room(0, Store::Memory, "x", "y").is_ok(), "nothing always fits");
        let e = check_room(u64::MAX, Store::Memory, "x", "y");
        assert_eq!(e.is_err(), mem.is_some_and(|r| r.bytes < u64::MAX));
    }
}
