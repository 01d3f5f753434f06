//! File syscalls behind small functions: open without following links,
//! stat, read whole ranges, flock and open file description locks, rlimits
//! and seals, random bytes; and the names of their errors for messages.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

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
fn fsize_limit() -> Option<u64> {
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

/// A `flock` taken by `try_flock`, released on drop (the conversion of an
/// original module's file refuses a file another process has locked).
pub struct Flock<'a>(&'a OwnedFd);
impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: plain flock on a descriptor we own.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// An open file description lock (`F_OFD_SETLK`) for writing on the whole
/// of a file, released on drop. Only a descriptor open for writing can
/// take one (`EBADF` otherwise), so a process that may only read the file
/// can never hold it; a reader's read lock (or any lock of another
/// process) makes `within` wait, and only for its bound. `flock`
/// locks do not conflict with it (Linux keeps the two apart).
pub struct WriteLock<'a>(&'a OwnedFd);

/// The whole file, from offset 0 to whatever it grows to.
fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value (OFD locks need l_pid 0).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l
}

impl<'a> WriteLock<'a> {
    /// Take the lock without waiting: `Ok(None)` while another open file
    /// description holds a lock on the file.
    pub fn try_take(fd: &'a OwnedFd) -> std::io::Result<Option<WriteLock<'a>>> {
        let l = whole_file(libc::F_WRLCK);
        loop {
            // SAFETY: `l` is a valid flock; plain fcntl on a descriptor we hold.
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &l) } == 0 {
                return Ok(Some(WriteLock(fd)));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN | libc::EACCES) => return Ok(None),
                _ => return Err(e),
            }
        }
    }

    /// Take the lock, trying again after 1, 2, 4 ... 64 ms until `bound`
    /// has passed (a blocking `F_OFD_SETLKW` would wait as long as the
    /// holder likes): `Ok(None)` when it was still held then. A zero
    /// bound tries once.
    pub fn within(fd: &'a OwnedFd, bound: Duration) -> std::io::Result<Option<WriteLock<'a>>> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(l) = Self::try_take(fd)? {
                return Ok(Some(l));
            }
            let spent = start.elapsed();
            if spent >= bound {
                return Ok(None);
            }
            std::thread::sleep(pause.min(bound - spent));
            pause = (pause * 2).min(Duration::from_millis(64));
        }
    }

    /// The creation lock of the empty file `fd` (named `shown` in
    /// messages), waited for at most `creation_wait()`; an error of kind
    /// `Busy` naming the file and the bound when it is still held then.
    pub fn creation(fd: &'a OwnedFd, shown: &str) -> Result<WriteLock<'a>> {
        Self::bounded(fd, shown, creation_wait())
    }

    fn bounded(fd: &'a OwnedFd, shown: &str, bound: Duration) -> Result<WriteLock<'a>> {
        Self::within(fd, bound)
            .map_err(|e| Error::io(format!("lock {shown}"), e))?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Busy,
                    format!(
                        "{shown}: the empty file's creation lock is still held after {} s (another process \
                         holds a lock on the file; BLOOMFILTER_SHARED_LOCK_WAIT sets the wait)",
                        (bound.as_secs_f64() * 1000.0).round() / 1000.0
                    ),
                )
            })
    }
}

/// The creation lock's default wait: an adopter holds it while it builds
/// and renames a filter, which reserves the filter's space and writes
/// only its header (the largest filters: a few seconds).
const CREATION_WAIT_DEFAULT: Duration = Duration::from_secs(30);
/// The longest wait `BLOOMFILTER_SHARED_LOCK_WAIT` may ask for (a day);
/// a larger, negative or malformed value is ignored.
const CREATION_WAIT_MAX: f64 = 86_400.0;

/// How long an opener of an empty file waits for its creation lock:
/// `BLOOMFILTER_SHARED_LOCK_WAIT` seconds (a decimal number; 0 tries
/// once), else `CREATION_WAIT_DEFAULT`. Read at each wait.
fn creation_wait() -> Duration {
    std::env::var("BLOOMFILTER_SHARED_LOCK_WAIT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && (0.0..=CREATION_WAIT_MAX).contains(s))
        .map_or(CREATION_WAIT_DEFAULT, Duration::from_secs_f64)
}

impl Drop for WriteLock<'_> {
    fn drop(&mut self) {
        let l = whole_file(libc::F_UNLCK);
        // SAFETY: `l` is a valid flock; plain fcntl on a descriptor we hold.
        // Closing the last descriptor of the description would release it too.
        unsafe { libc::fcntl(self.0.as_raw_fd(), libc::F_OFD_SETLK, &l) };
    }
}

/// The last errno as an `io::Error` when `r` is not 0.
fn zero_or_errno(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Fail with the limit when a file of `len` bytes would pass the file size
/// limit: growing a file past `RLIMIT_FSIZE` sends `SIGXFSZ`, which kills
/// the process, so every reservation asks first.
pub fn over_fsize_limit(len: u64) -> Option<u64> {
    fsize_limit().filter(|&l| len > l)
}

/// Give `fd` the storage of `len` bytes at `off` (`posix_fallocate`,
/// retrying EINTR); its error as an `io::Error`.
pub fn fallocate(fd: RawFd, off: u64, len: u64) -> std::io::Result<()> {
    loop {
        // SAFETY: plain syscall on a descriptor the caller holds.
        match unsafe { libc::posix_fallocate(fd, off as libc::off_t, len as libc::off_t) } {
            0 => return Ok(()),
            libc::EINTR => continue,
            e => return Err(std::io::Error::from_raw_os_error(e)),
        }
    }
}

/// A new memfd named `name`, close-on-exec, that can be sealed.
pub fn memfd_create(name: &CStr) -> std::io::Result<OwnedFd> {
    // SAFETY: name is NUL-terminated.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Add `seals` to a memfd's (`F_ADD_SEALS`).
pub fn add_seals(fd: RawFd, seals: libc::c_int) -> std::io::Result<()> {
    // SAFETY: plain fcntl on a descriptor the caller holds.
    zero_or_errno(unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) })
}

/// A duplicate of the caller's descriptor number `fd`, close-on-exec: an
/// invalid number fails with EBADF.
pub fn dup_cloexec(fd: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on any number: an invalid one fails.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// Whether `fd` was opened for reading only.
pub fn opened_read_only(fd: RawFd) -> bool {
    // SAFETY: plain fcntl on a descriptor the caller holds.
    let acc = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_ACCMODE;
    acc == libc::O_RDONLY
}

/// An unnamed file (`O_TMPFILE`) in the directory `dir`, of mode `mode`;
/// None where the file system (or the directory) has none.
pub fn open_tmpfile(dir: &CStr, mode: u32) -> Option<OwnedFd> {
    // SAFETY: dir is NUL-terminated.
    let fd = unsafe {
        libc::open(
            dir.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    // SAFETY: fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Create the file `path`, which must not exist (and is not followed if
/// a symbolic link), for reading and writing, of mode `mode`.
pub fn create_excl(path: &CStr, mode: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Set the mode of the file `fd` exactly (whatever the umask).
pub fn fchmod(fd: RawFd, mode: u32) -> std::io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller holds.
    zero_or_errno(unsafe { libc::fchmod(fd, mode as libc::mode_t) })
}

/// Give the file `fd` the group `gid`, its owner left alone (uid -1).
pub fn fchgrp(fd: RawFd, gid: libc::gid_t) -> std::io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller holds.
    zero_or_errno(unsafe { libc::fchown(fd, libc::uid_t::MAX, gid) })
}

/// Set the owner and group of `path` (not followed if a symbolic link).
pub fn lchown(path: &CStr, uid: libc::uid_t, gid: libc::gid_t) -> std::io::Result<()> {
    // SAFETY: path is NUL-terminated.
    zero_or_errno(unsafe { libc::lchown(path.as_ptr(), uid, gid) })
}

/// Set the mode of `path`.
pub fn chmod(path: &CStr, mode: libc::mode_t) -> std::io::Result<()> {
    // SAFETY: path is NUL-terminated.
    zero_or_errno(unsafe { libc::chmod(path.as_ptr(), mode) })
}

/// Give `from`'s file the name `to` too (EEXIST when `to` exists).
pub fn link(from: &CStr, to: &CStr) -> std::io::Result<()> {
    // SAFETY: both paths are NUL-terminated.
    zero_or_errno(unsafe { libc::link(from.as_ptr(), to.as_ptr()) })
}

/// Rename `from` to `to`, replacing whatever `to` named.
pub fn rename(from: &CStr, to: &CStr) -> std::io::Result<()> {
    // SAFETY: both paths are NUL-terminated.
    zero_or_errno(unsafe { libc::rename(from.as_ptr(), to.as_ptr()) })
}

/// Remove the name `path`.
pub fn unlink(path: &CStr) -> std::io::Result<()> {
    // SAFETY: path is NUL-terminated.
    zero_or_errno(unsafe { libc::unlink(path.as_ptr()) })
}

/// Take a `flock` for writing on `fd` without waiting: `Ok(None)` while
/// another open file description holds one.
pub fn try_flock(fd: &OwnedFd) -> std::io::Result<Option<Flock<'_>>> {
    // SAFETY: plain flock on a descriptor the caller holds.
    if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(Flock(fd)));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(None);
    }
    Err(e)
}

/// The major and minor numbers of a device number, as `/proc/PID/maps`
/// shows them.
pub fn major_minor(dev: u64) -> (u64, u64) {
    (libc::major(dev) as u64, libc::minor(dev) as u64)
}

/// This process's effective uid.
pub fn geteuid() -> libc::uid_t {
    // SAFETY: geteuid always succeeds.
    unsafe { libc::geteuid() }
}

/// A FIFO at `path` (a test's hostile file).
#[cfg(test)]
pub fn mkfifo(path: &CStr) -> std::io::Result<()> {
    // SAFETY: path is NUL-terminated.
    zero_or_errno(unsafe { libc::mkfifo(path.as_ptr(), 0o600) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_file(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("bfs-{name}-{}-{:x}", std::process::id(), random_u64()));
        std::fs::write(&p, b"").unwrap();
        p
    }

    fn open(p: &std::path::Path, write: bool) -> OwnedFd {
        OwnedFd::from(std::fs::OpenOptions::new().read(true).write(write).open(p).unwrap())
    }

    #[test]
    fn a_write_lock_is_waited_for_its_bound_only() {
        let p = scratch_file("ofd");
        let (a, b) = (open(&p, true), open(&p, true));
        let held = WriteLock::try_take(&a).unwrap().expect("a free file");
        // Another open file description of the same process conflicts.
        let t = Instant::now();
        assert!(WriteLock::within(&b, Duration::from_millis(50)).unwrap().is_none());
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(
            WriteLock::within(&b, Duration::ZERO).unwrap().is_none(),
            "a zero bound tries once"
        );
        drop(held);
        assert!(
            WriteLock::within(&b, Duration::from_secs(60)).unwrap().is_some(),
            "let go: taken"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn the_creation_wait_is_30_s_unless_set() {
        if std::env::var_os("BLOOMFILTER_SHARED_LOCK_WAIT").is_none() {
            assert_eq!(creation_wait(), Duration::from_secs(30));
        }
    }

    #[test]
    fn a_read_only_descriptor_cannot_hold_it_and_a_read_lock_delays_it() {
        let p = scratch_file("ofd-ro");
        let ro = open(&p, false);
        let e = WriteLock::try_take(&ro).err().expect("EBADF");
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        let l = whole_file(libc::F_RDLCK);
        // SAFETY: `l` is a valid flock; plain fcntl on our descriptor.
        assert_eq!(unsafe { libc::fcntl(ro.as_raw_fd(), libc::F_OFD_SETLK, &l) }, 0);
        let rw = open(&p, true);
        assert!(WriteLock::within(&rw, Duration::from_millis(20)).unwrap().is_none());
        let err = WriteLock::bounded(&rw, "x.bf", Duration::from_millis(250))
            .err()
            .expect("held");
        assert_eq!(err.kind, ErrorKind::Busy);
        assert!(err
            .msg
            .starts_with("x.bf: the empty file's creation lock is still held after 0.25 s"));
        drop(ro);
        assert!(WriteLock::try_take(&rw).unwrap().is_some());
        std::fs::remove_file(&p).unwrap();
    }
}
