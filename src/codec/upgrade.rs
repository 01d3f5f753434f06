//! Converting a filter file of the original C module (0.04 and earlier) into
//! a filter of ours, in place: the same geometry and the same bits (so the
//! same items present and the same count), under the same path, mode and
//! owner.
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
use crate::shm::legacy::{self, LegacyHeader};
use crate::shm::region;
use crate::sys::file::{self, Flock};

/// What a conversion did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Upgraded {
    /// The original's format version (1 or 2).
    pub from_version: u32,
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
    let (maj, min) = (libc::major(dev) as u64, libc::minor(dev) as u64);
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
    if !legacy::has_magic(&head[..n]) && head[..n].starts_with(&crate::shm::format::MAGIC) {
        return Err(Error::arg(format!(
            "{shown}: already a filter of this version (nothing to upgrade)"
        )));
    }
    let lh = legacy::parse(&head[..n], st.st_size as u64).map_err(|e| Error::format(format!("{shown}: {e}")))?;

    // An old process holding a lock, or mapping the file, is using it.
    // SAFETY: plain flock on a descriptor we own.
    if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(in_use(shown, "another process holds a lock on it"));
        }
        return Err(Error::io("flock", e));
    }
    let _lock = Flock::adopt(&fd);
    if let Some(pid) = mapped_by(st.st_dev, st.st_ino) {
        return Err(in_use(shown, &format!("process {pid} has it mapped")));
    }

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
        if (made.st_uid, made.st_gid) != (st.st_uid, st.st_gid)
            // SAFETY: ctmp is NUL-terminated.
            && unsafe { libc::lchown(ctmp.as_ptr(), st.st_uid, st.st_gid) } != 0
        {
            return Err(Error::last_os(format!("chown {shown}")));
        }
        // SAFETY: as above; chown may have cleared set-id bits.
        if unsafe { libc::chmod(ctmp.as_ptr(), mode) } != 0 {
            return Err(Error::last_os(format!("chmod {shown}")));
        }
        // The path must still name the file we read and checked.
        if file::lstat(&path).map(|now| file::ident(&now)) != Some(file::ident(&st)) {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{shown}: replaced by another file during the upgrade (nothing changed)"),
            ));
        }
        // SAFETY: both paths are NUL-terminated.
        if unsafe { libc::rename(ctmp.as_ptr(), path.as_ptr()) } != 0 {
            return Err(Error::last_os(format!("rename {shown}")));
        }
        Ok(f.bits_set())
    };
    let bits_set = finish()?;
    temp.keep();
    Ok(Upgraded {
        from_version: lh.version,
        header: lh,
        bits_set,
    })
}
