//! File syscalls behind small functions: open without following links,
//! stat, read whole ranges, flock, rlimits and seals, random bytes; and the
//! names of their errors for messages.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};

/// The name of the errnos a journal's storage can fail with, for messages
/// that must say which it was.
pub fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => "ENOSPC".into(),
        Some(libc::EDQUOT) => "EDQUOT".into(),
        Some(libc::EFBIG) => "EFBIG".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::EIO) => "EIO".into(),
        Some(libc::ENOMEM) => "ENOMEM".into(),
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP".into(),
        Some(n) => format!("errno {n}"),
        None => "error".into(),
    }
}

/// The file size limit, when there is one.
pub fn fsize_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
        Some(lim.rlim_cur)
    } else {
        None
    }
}

/// The seals of a memfd (or of a tmpfs file, which can carry them too);
/// None for a descriptor that cannot carry seals.
pub fn seals(fd: RawFd) -> Option<libc::c_int> {
    // SAFETY: plain fcntl on a descriptor we hold.
    let s = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    (s >= 0).then_some(s)
}

pub fn cstr(path: impl AsRef<[u8]>) -> Result<CString> {
    CString::new(path.as_ref()).map_err(|_| Error::arg("path contains a NUL byte"))
}

/// Paths are bytes on Linux; messages show them lossily.
pub fn shown(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

pub fn random_u64() -> u64 {
    let mut v = 0u64;
    // SAFETY: writes at most 8 bytes into `v`. A short or failed read leaves
    // a guessable value: temporary names are created with O_EXCL and the
    // header's instance id decides nothing, so that costs nothing.
    unsafe {
        libc::getrandom(&mut v as *mut u64 as *mut libc::c_void, 8, 0);
    }
    if v == 0 {
        v = std::process::id() as u64 ^ (&v as *const u64 as u64);
    }
    v
}

pub fn fstat(fd: RawFd, what: &str) -> Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error::last_os(format!("fstat {what}")));
    }
    Ok(st)
}

pub fn require_regular(st: &libc::stat, what: &str) -> Result<()> {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => return Ok(()),
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        _ => "not a regular file",
    };
    Err(Error::arg(format!("{what}: is {kind}, not a regular file")))
}

/// Read the immutable header of the file `fd` (`size` bytes long) and
/// validate it against that size. `path` is only for the message about a
/// file of the original module. The caller then maps exactly the header's
/// `total`: a longer file holds a journal past it.
/// `pread` into `buf` from `off` until it is full or the file ends
/// (retrying EINTR): the bytes read.
pub fn pread_full(fd: RawFd, buf: &mut [u8], mut off: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the destination is the unread rest of `buf`.
        let n = unsafe {
            libc::pread(
                fd,
                buf[done..].as_mut_ptr() as *mut libc::c_void,
                buf.len() - done,
                off as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n as usize;
        off += n as u64;
    }
    Ok(done)
}

/// Device and inode of a descriptor's file: the region's identity.
pub fn ident(st: &libc::stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// Open without following a final symlink. `Ok(None)` when the file does
/// not exist.
pub fn open_nofollow(path: &CStr, flags: libc::c_int, shown: &str) -> Result<Option<OwnedFd>> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOCTTY: opening
    // a terminal must not make it our controlling terminal. Both are refused
    // right after, on fstat, before anything else touches them.
    // SAFETY: path is NUL-terminated.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            Some(libc::ELOOP) => Err(Error::arg(format!("{shown}: is a symbolic link (refused)"))),
            _ => Err(Error::io(format!("open {shown}"), e)),
        };
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

pub fn lstat(path: &CStr) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is a valid value; lstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated, `st` a valid out-pointer.
    (unsafe { libc::lstat(path.as_ptr(), &mut st) } == 0).then_some(st)
}

pub struct Flock<'a>(&'a OwnedFd);
impl<'a> Flock<'a> {
    /// A lock already taken on `fd` (released on drop).
    pub fn adopt(fd: &'a OwnedFd) -> Flock<'a> {
        Flock(fd)
    }
    pub fn take(fd: &'a OwnedFd, op: libc::c_int) -> Result<Flock<'a>> {
        loop {
            // SAFETY: plain flock on a descriptor we own.
            if unsafe { libc::flock(fd.as_raw_fd(), op) } == 0 {
                return Ok(Flock(fd));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(Error::io("flock", e));
            }
        }
    }
}
impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: plain flock on a descriptor we own.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
