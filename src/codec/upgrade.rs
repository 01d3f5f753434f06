//! Converting a filter file of the original C module (0.04 and earlier) into
//! a filter of ours, in place: the same geometry and the same bits (so the
//! same items present and the same count), under the same path, mode and
//! owner. A filter of this module's format 2 (slots holding glibc mutexes)
//! is converted in place too: only its slot table and version change
//! (`upgrade_format2`).
//!
//! The new filter is built complete under a temporary name in the same
//! directory and renamed over the old file, so at every moment the path
//! names either the old file or the new one. A file that is in use is
//! refused when that can be told: another process holds a `flock` on it, or
//! maps it (its `/proc/PID/maps` lists the file). Processes this one cannot
//! see in `/proc` (other PID namespaces, `hidepid`) are not detected, hence
//! "stop the old processes first".

use std::cell::RefCell;
use std::os::fd::AsRawFd;

use crate::error::{Error, ErrorKind, Result};
use crate::filter::Filter;
use crate::shm::format;
use crate::shm::legacy::{self, LegacyHeader};
use crate::shm::region;
use crate::sys::file::{self, Flock};
use crate::sys::keeper::{OWNER_DIED, TID_MASK};

/// What a conversion did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Upgraded {
    /// The original's format version (1 or 2), or this module's (2).
    pub from_version: u32,
    /// Whether the file was the original C module's.
    pub from_original: bool,
    pub header: LegacyHeader,
    /// Bits set in the converted filter (the same as in the old file).
    pub bits_set: u64,
}

/// `pread` all of `buf` at `off`.
fn pread_exact(fd: i32, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    if file::pread_full(fd, buf, off)? < buf.len() {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
    }
    Ok(())
}

/// A process (other than this one) that maps the file `dev`/`ino`, as far
/// as `/proc` shows: Some(pid), or None.
fn mapped_by(dev: u64, ino: u64) -> Option<u32> {
    let me = std::process::id();
    let (maj, min) = file::major_minor(dev);
    let dir = std::fs::read_dir("/proc").ok()?;
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Unreadable (gone, or another user's under hidepid): not seen.
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for line in maps.lines() {
            let mut f = line.split_ascii_whitespace().skip(3);
            let (Some(d), Some(i)) = (f.next(), f.next()) else {
                continue;
            };
            let Some((a, b)) = d.split_once(':') else {
                continue;
            };
            let same = u64::from_str_radix(a, 16) == Ok(maj)
                && u64::from_str_radix(b, 16) == Ok(min)
                && i.parse::<u64>() == Ok(ino);
            if same {
                return Some(pid);
            }
        }
    }
    None
}

fn in_use(shown: &str, who: &str) -> Error {
    Error::new(
        ErrorKind::Busy,
        format!("{shown}: in use ({who}); stop the processes of the old version first"),
    )
}

/// Refuse a file another process uses, as far as that can be told: it holds
/// a `flock` on it, or maps it. Returns the lock, held until dropped.
fn exclusive<'a>(fd: &'a std::os::fd::OwnedFd, st: &libc::stat, shown: &str) -> Result<Flock<'a>> {
    let Some(lock) = file::try_flock(fd).map_err(|e| Error::io("flock", e))? else {
        return Err(in_use(shown, "another process holds a lock on it"));
    };
    if let Some(pid) = mapped_by(st.st_dev, st.st_ino) {
        return Err(in_use(shown, &format!("process {pid} has it mapped")));
    }
    Ok(lock)
}

/// Format 2's slot: a glibc `pthread_mutex_t` (its lock word, the holder's
/// TID and the kernel's bits, first), then the generation at 40 and the
/// operation count at 48.
const V2_GEN: usize = 40;
const V2_OPS: usize = 48;

/// The slot table of format 3 for format 2's `old` (`SLOTS` slots of 64
/// bytes, native order): each slot's generation and count carried over,
/// its word free, everything else zero. Err(i): slot `i` is held by a
/// process that has not died (its lock word names a TID without the
/// kernel's "owner died" bit).
fn slots_from_format2(old: &[u8]) -> std::result::Result<Vec<u8>, usize> {
    let line = format::CACHE_LINE as usize;
    let mut new = vec![0u8; old.len()];
    for (i, (o, n)) in old.chunks_exact(line).zip(new.chunks_exact_mut(line)).enumerate() {
        let u32_at = |off: usize| u32::from_ne_bytes(o[off..off + 4].try_into().expect("4 bytes"));
        let lock = u32_at(0);
        if lock & TID_MASK != 0 && lock & OWNER_DIED == 0 {
            return Err(i);
        }
        // Slot of format 3: owner 0, gen 4, busy 8, fence 12, ops 16.
        n[4..8].copy_from_slice(&u32_at(V2_GEN).to_ne_bytes());
        n[16..24].copy_from_slice(&o[V2_OPS..V2_OPS + 8]);
    }
    Ok(new)
}

/// Convert a filter of format 2 at `path` in place: the slot table as
/// `slots_from_format2` makes it, then the version (and the header's
/// checksum). Refused while a slot is held or the file is in use; killed
/// between the two writes, the file is refused by every release until
/// the conversion is run again (which then loses only operation counts).
fn upgrade_format2(path: &std::ffi::CStr, shown: &str) -> Result<Upgraded> {
    let fd = file::open_nofollow(path, libc::O_RDWR | libc::O_NOCTTY, shown)?
        .ok_or_else(|| Error::new(ErrorKind::Io, format!("open {shown}: No such file or directory")))?;
    let st = file::fstat(fd.as_raw_fd(), shown)?;
    file::require_regular(&st, shown)?;
    let _lock = exclusive(&fd, &st, shown)?;
    let mut head = [0u8; format::HEADER_READ_LEN];
    pread_exact(fd.as_raw_fd(), &mut head, 0).map_err(|e| Error::io(format!("read {shown}"), e))?;
    if u32::from_ne_bytes(head[8..12].try_into().expect("4 bytes")) != format::FORMAT_VERSION_MUTEX {
        return Err(Error::new(
            ErrorKind::Io,
            format!("{shown}: changed during the upgrade (nothing changed)"),
        ));
    }
    head[8..12].copy_from_slice(&format::FORMAT_VERSION.to_ne_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&head[..format::CHECKED_LEN]);
    head[format::CHECKED_LEN..format::IMMUTABLE_LEN].copy_from_slice(&sum.to_ne_bytes());
    // Everything but the version is checked as for any filter we open.
    let h = format::decode(&head, st.st_size as u64).map_err(|e| Error::format(format!("{shown}: {e}")))?;
    let mut old = vec![0u8; (format::STRIPES_OFF - format::SLOTS_OFF) as usize];
    pread_exact(fd.as_raw_fd(), &mut old, format::SLOTS_OFF).map_err(|e| Error::io(format!("read {shown}"), e))?;
    let new = slots_from_format2(&old).map_err(|i| {
        in_use(
            shown,
            &format!("process slot {i} is held by a process that has not ended"),
        )
    })?;
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::from(fd.try_clone().map_err(|e| Error::io("dup", e))?);
    f.write_all_at(&new, format::SLOTS_OFF)
        .and_then(|()| f.sync_data())
        .and_then(|()| f.write_all_at(&head[..format::IMMUTABLE_LEN], 0))
        .and_then(|()| f.sync_data())
        .map_err(|e| Error::io(format!("write {shown}"), e))?;
    // Bits set, counted from the file (its words are native u64s).
    let mut bits_set = 0u64;
    let l = h.layout();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = l.bits_off;
    while off < l.total {
        let n = ((l.total - off) as usize).min(buf.len());
        pread_exact(f.as_raw_fd(), &mut buf[..n], off).map_err(|e| Error::io(format!("read {shown}"), e))?;
        bits_set += buf[..n]
            .chunks_exact(8)
            .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")).count_ones() as u64)
            .sum::<u64>();
        off += n as u64;
    }
    Ok(Upgraded {
        from_version: format::FORMAT_VERSION_MUTEX,
        from_original: false,
        header: LegacyHeader {
            version: format::FORMAT_VERSION_MUTEX,
            geometry: h.geometry,
            total_size: st.st_size as u64,
            bits_off: l.bits_off,
            ops: 0,
        },
        bits_set,
    })
}

/// Convert the original's file at `raw` in place. Refuses anything that is
/// not a valid file of the original, and a file in use (see the module
/// documentation for what can be told).
pub fn upgrade(raw: &[u8]) -> Result<Upgraded> {
    if raw.is_empty() {
        return Err(Error::arg("path is empty"));
    }
    let path = file::cstr(raw)?;
    let shown = &file::shown(raw);
    let fd = file::open_nofollow(&path, libc::O_RDONLY | libc::O_NOCTTY, shown)?
        .ok_or_else(|| Error::new(ErrorKind::Io, format!("open {shown}: No such file or directory")))?;
    let st = file::fstat(fd.as_raw_fd(), shown)?;
    file::require_regular(&st, shown)?;

    let mut head = [0u8; legacy::HEADER_LEN];
    let n = (st.st_size as u64).min(legacy::HEADER_LEN as u64) as usize;
    pread_exact(fd.as_raw_fd(), &mut head[..n], 0).map_err(|e| Error::io(format!("read {shown}"), e))?;
    if !legacy::has_magic(&head[..n]) && head[..n].starts_with(&format::MAGIC) {
        if n >= 12 && u32::from_ne_bytes(head[8..12].try_into().expect("4 bytes")) == format::FORMAT_VERSION_MUTEX {
            drop(fd);
            return upgrade_format2(&path, shown);
        }
        return Err(Error::arg(format!(
            "{shown}: already a filter of this version (nothing to upgrade)"
        )));
    }
    let lh = legacy::parse(&head[..n], st.st_size as u64).map_err(|e| Error::format(format!("{shown}: {e}")))?;

    // An old process holding a lock, or mapping the file, is using it.
    let _lock = exclusive(&fd, &st, shown)?;

    // The new filter, complete, under a name nobody else uses.
    let slash = raw.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1);
    let mut tmp = raw[..slash].to_vec();
    tmp.push(b'.');
    tmp.extend_from_slice(&raw[slash..]);
    tmp.extend_from_slice(format!(".upgrade.{}.{:x}", std::process::id(), file::random_u64()).as_bytes());
    let tmp_path = std::path::PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&tmp));
    let ctmp = file::cstr(&tmp)?;
    // Removed on every failure (even one after it was linked).
    let mut temp = region::TempName(Some(ctmp.clone()));

    let failed: RefCell<Option<Error>> = RefCell::new(None);
    let words = lh.geometry.words();
    let h = region::new_header(lh.geometry, 0);
    let mode = st.st_mode & 0o7777;
    let made = Filter::with_bits(h, Some(&tmp_path), mode, &|put| {
        // The bit array in chunks: memory stays small however large the filter.
        const CHUNK_WORDS: usize = 1 << 17;
        let mut buf = vec![0u8; CHUNK_WORDS.min(words) * 8];
        let mut i = 0;
        while i < words {
            let n = CHUNK_WORDS.min(words - i);
            let bytes = &mut buf[..n * 8];
            if let Err(e) = pread_exact(fd.as_raw_fd(), bytes, lh.bits_off + i as u64 * 8) {
                *failed.borrow_mut() = Some(Error::io(format!("read {shown}"), e));
                return;
            }
            for (j, w) in bytes.chunks_exact(8).enumerate() {
                put(i + j, u64::from_le_bytes(w.try_into().expect("8 bytes")));
            }
            i += n;
        }
    });
    let f = made?;
    let finish = || -> Result<u64> {
        if let Some(e) = failed.borrow_mut().take() {
            return Err(e);
        }
        f.sync()?;
        // The old file's owner and group carry over (we are root, or its
        // owner: nobody else can replace it).
        let made = file::lstat(&ctmp).ok_or_else(|| Error::last_os(format!("stat {shown}")))?;
        if (made.st_uid, made.st_gid) != (st.st_uid, st.st_gid) {
            file::lchown(&ctmp, st.st_uid, st.st_gid).map_err(|e| Error::io(format!("chown {shown}"), e))?;
        }
        // chown may have cleared set-id bits.
        file::chmod(&ctmp, mode).map_err(|e| Error::io(format!("chmod {shown}"), e))?;
        // The path must still name the file we read and checked.
        if file::lstat(&path).map(|now| file::ident(&now)) != Some(file::ident(&st)) {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{shown}: replaced by another file during the upgrade (nothing changed)"),
            ));
        }
        file::rename(&ctmp, &path).map_err(|e| Error::io(format!("rename {shown}"), e))?;
        Ok(f.bits_set())
    };
    let bits_set = finish()?;
    temp.keep();
    Ok(Upgraded {
        from_version: lh.version,
        from_original: true,
        header: lh,
        bits_set,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format2_slots_keep_generation_and_count_and_free_the_word() {
        let line = format::CACHE_LINE as usize;
        let mut old = vec![0xA5u8; 3 * line];
        for (i, s) in old.chunks_exact_mut(line).enumerate() {
            s[0..4].copy_from_slice(&[0u32, 0x4000_1234, 0][i].to_ne_bytes());
            s[V2_GEN..V2_GEN + 4].copy_from_slice(&(7 + i as u32).to_ne_bytes());
            s[V2_OPS..V2_OPS + 8].copy_from_slice(&(1000 + i as u64).to_ne_bytes());
        }
        let new = slots_from_format2(&old).unwrap();
        for (i, n) in new.chunks_exact(line).enumerate() {
            assert_eq!(&n[0..4], &[0; 4], "slot {i}: word free");
            assert_eq!(n[4..8], (7 + i as u32).to_ne_bytes(), "slot {i}: generation");
            assert_eq!(n[16..24], (1000 + i as u64).to_ne_bytes(), "slot {i}: count");
            assert!(
                n[8..16].iter().chain(&n[24..]).all(|&b| b == 0),
                "slot {i}: the rest zero"
            );
        }
        // A slot held by a live TID is refused, naming it.
        old[line..line + 4].copy_from_slice(&1234u32.to_ne_bytes());
        assert_eq!(slots_from_format2(&old), Err(1));
    }

    /// Rewrite this module's filter file at `p` as format 2 would have it:
    /// the version (and checksum), each slot's generation and count at
    /// format 2's offsets, its lock word `lock(i)` and a mutex kind word.
    fn to_format2(p: &std::path::Path, lock: impl Fn(usize) -> u32) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap();
        let mut head = [0u8; format::IMMUTABLE_LEN];
        f.read_exact_at(&mut head, 0).unwrap();
        head[8..12].copy_from_slice(&format::FORMAT_VERSION_MUTEX.to_ne_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&head[..format::CHECKED_LEN]);
        head[format::CHECKED_LEN..].copy_from_slice(&sum.to_ne_bytes());
        f.write_all_at(&head, 0).unwrap();
        let line = format::CACHE_LINE as usize;
        let mut t = vec![0u8; (format::STRIPES_OFF - format::SLOTS_OFF) as usize];
        f.read_exact_at(&mut t, format::SLOTS_OFF).unwrap();
        for (i, s) in t.chunks_exact_mut(line).enumerate() {
            let (gen, ops) = (s[4..8].to_vec(), s[16..24].to_vec());
            s.fill(0);
            s[0..4].copy_from_slice(&lock(i).to_ne_bytes());
            s[16..20].copy_from_slice(&144u32.to_ne_bytes()); // robust | pshared
            s[V2_GEN..V2_GEN + 4].copy_from_slice(&gen);
            s[V2_OPS..V2_OPS + 8].copy_from_slice(&ops);
        }
        f.write_all_at(&t, format::SLOTS_OFF).unwrap();
    }

    #[test]
    fn a_format2_file_is_refused_with_the_command_then_converted() {
        let dir = region::scratch_dir("format2");
        let p = dir.join("f.bf");
        let raw = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::as_bytes(p.as_os_str()).to_vec();
        let (bits_set, ops) = {
            let f = Filter::open_file(&p, 1000, 0.01, Default::default()).unwrap();
            for i in 0..100u32 {
                f.add(&i.to_le_bytes()).unwrap();
            }
            (f.bits_set(), f.ops())
        };
        to_format2(&p, |i| if i == 5 { 0x4000_1234 } else { 0 });
        // A slot held by a process that has not died: refused, nothing changed.
        let lock5 = |v: u32| {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.write_all_at(&v.to_ne_bytes(), format::SLOTS_OFF + 5 * format::CACHE_LINE)
                .unwrap();
        };
        lock5(1234);
        let before = std::fs::read(&p).unwrap();
        let e = upgrade(&raw).unwrap_err();
        assert!(e.msg.contains("process slot 5 is held"), "{}", e.msg);
        assert_eq!(std::fs::read(&p).unwrap(), before, "the refused file is unchanged");
        // Slots free, or marked "owner died" by the kernel: opened, refused
        // with the command that converts it; converted; the same filter.
        lock5(0x4000_1234);
        let e = Filter::open_file(&p, 1000, 0.01, Default::default())
            .err()
            .expect("format 2 refused");
        assert!(
            e.msg.contains("format version 2") && e.msg.contains("bloomfilter-shared upgrade"),
            "{}",
            e.msg
        );
        let u = upgrade(&raw).unwrap();
        assert_eq!((u.from_version, u.from_original, u.bits_set), (2, false, bits_set));
        let f = Filter::open_file(&p, 1000, 0.01, Default::default()).unwrap();
        assert_eq!((f.bits_set(), f.ops()), (bits_set, ops));
        assert!((0..100u32).all(|i| f.contains(&i.to_le_bytes())));
        assert!(f.add(b"after").unwrap());
        drop(f);
        let e = upgrade(&raw).unwrap_err();
        assert!(e.msg.contains("already a filter of this version"), "{}", e.msg);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
