//! Creating, opening and mapping the shared region: anonymous, file, memfd,
//! inherited descriptor, read-only.
//!
//! # Safety
//!
//! The region is a `MAP_SHARED` mapping that other processes write. We never
//! form Rust references to plain data inside it: the control structures and
//! the bit words are atomics, and the immutable header is copied out once and
//! validated (`format::decode`) before anything is derived from it. The one
//! danger no check can remove is a process with write access to the file
//! *truncating* it while we have it mapped: touching the lost pages raises
//! `SIGBUS`. Memfds are sealed against shrinking; for files, write access is
//! trust (DESIGN §5).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, ErrorKind, Result};
use crate::format::{self, Header, Layout, FLAG_FROZEN, IMMUTABLE_LEN, OFF_FLAGS};

/// What backs a region.
#[derive(Debug)]
pub enum Backing {
    /// Shared anonymous memory: reachable through `fork` only.
    Anonymous,
    /// A named file.
    File(CString),
    /// A memfd we created; its descriptor is kept so it can be passed on.
    Memfd(OwnedFd),
    /// A descriptor handed to us (our own duplicate).
    Fd(OwnedFd),
}

/// A mapped, validated filter region.
pub struct Region {
    map: MmapRaw,
    pub header: Header,
    pub backing: Backing,
    pub readonly: bool,
}

impl Region {
    /// Base address of the mapping.
    pub fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    pub fn layout(&self) -> Layout {
        format::layout(self.header.geometry.m)
    }

    /// The handle's own descriptor (a memfd it created, or its duplicate of
    /// a descriptor handed to it), or -1.
    pub fn memfd(&self) -> RawFd {
        match &self.backing {
            Backing::Memfd(fd) | Backing::Fd(fd) => fd.as_raw_fd(),
            _ => -1,
        }
    }

    pub fn path(&self) -> Option<&CStr> {
        match &self.backing {
            Backing::File(p) => Some(p),
            _ => None,
        }
    }

    /// Flush to the backing store (no-op for shared memory).
    pub fn sync(&self) -> Result<()> {
        match self.backing {
            Backing::File(_) | Backing::Fd(_) => self.map.flush().map_err(|e| Error::io("msync", e)),
            _ => Ok(()),
        }
    }

    /// Flush just the header page (after freeze).
    pub fn sync_header(&self) -> Result<()> {
        match self.backing {
            Backing::File(_) | Backing::Fd(_) => self
                .map
                .flush_range(0, format::PAGE as usize)
                .map_err(|e| Error::io("msync", e)),
            _ => Ok(()),
        }
    }

    /// The frozen flag as stored in the mapping now.
    fn stored_flags(&self) -> u32 {
        // SAFETY: the mapping is at least CONTROL_END bytes (decode checked),
        // OFF_FLAGS is 4-aligned; an atomic load tolerates concurrent writers.
        unsafe {
            (*(self.base().add(OFF_FLAGS as usize) as *const std::sync::atomic::AtomicU32))
                .load(std::sync::atomic::Ordering::Acquire)
        }
    }

    pub fn frozen(&self) -> bool {
        self.stored_flags() & FLAG_FROZEN != 0
    }
}

pub(crate) fn cstr(path: impl AsRef<[u8]>) -> Result<CString> {
    CString::new(path.as_ref()).map_err(|_| Error::arg("path contains a NUL byte"))
}

/// Paths are bytes on Linux; messages show them lossily.
pub(crate) fn shown(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

pub(crate) fn random_u64() -> u64 {
    let mut v = 0u64;
    // SAFETY: writes at most 8 bytes into `v`. A short or failed read leaves
    // a weaker instance id, which only affects self-merge detection speed.
    unsafe {
        libc::getrandom(&mut v as *mut u64 as *mut libc::c_void, 8, 0);
    }
    if v == 0 {
        v = std::process::id() as u64 ^ (&v as *const u64 as u64);
    }
    v
}

/// A header for a new filter.
pub fn new_header(geometry: crate::geometry::Geometry, seed: u64) -> Header {
    Header {
        geometry,
        seed,
        instance: random_u64(),
    }
}

pub(crate) fn fstat(fd: RawFd, what: &str) -> Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error::last_os(format!("fstat {what}")));
    }
    Ok(st)
}

pub(crate) fn require_regular(st: &libc::stat, what: &str) -> Result<()> {
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

fn map(fd: &OwnedFd, len: u64, readonly: bool) -> Result<MmapRaw> {
    if len > isize::MAX as u64 {
        return Err(Error::format("file too large to map"));
    }
    let mut opts = MmapOptions::new();
    opts.len(len as usize);
    let r = if readonly {
        opts.map_raw_read_only(fd.as_raw_fd())
    } else {
        opts.map_raw(fd.as_raw_fd())
    };
    r.map_err(|e| Error::io("mmap", e))
}

/// The message for a file of the original C module; `path` names it in the
/// command to run.
pub(crate) fn legacy_message(path: Option<&str>) -> String {
    format!(
        "written by Data::BloomFilter::Shared 0.04: convert it with `bloomfilter-shared upgrade {}`",
        path.unwrap_or("PATH")
    )
}

/// Copy the immutable header out of a mapping and validate it. `path` is
/// only for the message about a file of the original module.
fn read_header(map: &MmapRaw, path: Option<&str>) -> Result<Header> {
    if map.len() >= crate::legacy::MAGIC.len() {
        let mut magic = [0u8; 4];
        // SAFETY: the mapping is at least 4 bytes; a copy of them.
        unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), magic.as_mut_ptr(), 4) };
        if crate::legacy::has_magic(&magic) {
            return Err(Error::format(legacy_message(path)));
        }
    }
    if map.len() < IMMUTABLE_LEN {
        return Err(Error::format(
            format::FormatError::TooSmall(map.len() as u64).to_string(),
        ));
    }
    let mut b = [0u8; IMMUTABLE_LEN];
    // SAFETY: the mapping is at least IMMUTABLE_LEN bytes; we copy them once
    // into our own buffer and validate only the copy (DESIGN C6).
    unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), b.as_mut_ptr(), IMMUTABLE_LEN) };
    format::decode(&b, map.len() as u64).map_err(|e| Error::format(e.to_string()))
}

/// Write a new header into a fresh (all-zero) mapping.
fn write_header(map: &MmapRaw, h: &Header) {
    let b = format::encode(h);
    debug_assert!(map.len() >= b.len());
    // SAFETY: the mapping is fresh (only we know of it yet) and larger than
    // the header.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), map.as_mut_ptr(), b.len()) };
}

fn advise_huge(map: &MmapRaw, l: &Layout) {
    if l.bits_off == format::HUGE_PAGE {
        // Best effort: the kernel may have transparent huge pages for shared
        // memory disabled; the filter works either way.
        let _ = map.advise_range(
            memmap2::Advice::HugePage,
            l.bits_off as usize,
            (l.total - l.bits_off) as usize,
        );
    }
}

/// The longest memfd name the kernel takes (`memfd_create(2)`: 249 bytes
/// before the NUL); longer labels are cut to it.
const MEMFD_NAME_MAX: usize = 249;
/// The name of a memfd given none (or an empty one).
pub const DEFAULT_MEMFD_NAME: &str = "bloomfilter-shared";

fn memfd(name: &[u8], size: u64, seal: bool) -> Result<OwnedFd> {
    let name = if name.is_empty() {
        DEFAULT_MEMFD_NAME.as_bytes()
    } else {
        name
    };
    let cname = cstr(&name[..name.len().min(MEMFD_NAME_MAX)])?;
    // SAFETY: cname is NUL-terminated.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(Error::last_os("memfd_create"));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain syscall on our descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return Err(Error::last_os("ftruncate"));
    }
    if seal {
        // Sealed against resizing: a receiver of the descriptor can then
        // never shrink it under another process's mapping (SIGBUS).
        // SAFETY: plain fcntl on our descriptor.
        unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
            )
        };
    }
    Ok(fd)
}

/// A new filter in shared anonymous memory (inherited across `fork`).
pub fn create_anonymous(h: &Header) -> Result<Region> {
    let l = format::layout(h.geometry.m);
    let fd = memfd(DEFAULT_MEMFD_NAME.as_bytes(), l.total, true)?;
    let map = map(&fd, l.total, false)?;
    write_header(&map, h);
    advise_huge(&map, &l);
    // The descriptor is closed here: the mapping keeps the memory alive.
    Ok(Region {
        map,
        header: *h,
        backing: Backing::Anonymous,
        readonly: false,
    })
}

/// A new filter in a memfd whose descriptor can be passed to other processes.
/// `name` is only a label: any bytes but NUL (empty: the default name).
pub fn create_memfd(name: &[u8], h: &Header) -> Result<Region> {
    let l = format::layout(h.geometry.m);
    let fd = memfd(name, l.total, true)?;
    let map = map(&fd, l.total, false)?;
    write_header(&map, h);
    advise_huge(&map, &l);
    Ok(Region {
        map,
        header: *h,
        backing: Backing::Memfd(fd),
        readonly: false,
    })
}

/// Open without following a final symlink. `Ok(None)` when the file does
/// not exist.
pub(crate) fn open_nofollow(path: &CStr, flags: libc::c_int, shown: &str) -> Result<Option<OwnedFd>> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; we refuse it
    // right after, on fstat.
    // SAFETY: path is NUL-terminated.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
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

pub(crate) struct Flock<'a>(&'a OwnedFd);
impl<'a> Flock<'a> {
    /// A lock already taken on `fd` (released on drop).
    pub(crate) fn adopt(fd: &'a OwnedFd) -> Flock<'a> {
        Flock(fd)
    }
    pub(crate) fn take(fd: &'a OwnedFd, op: libc::c_int) -> Result<Flock<'a>> {
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

/// Create a fully initialised file under a name nobody sees yet, then link
/// it to `path`. Returns Ok(false) if `path` appeared meanwhile.
fn create_file(path: &CStr, shown: &str, h: &Header, mode: u32, fill: Option<&dyn Fn(*mut u8)>) -> Result<bool> {
    let l = format::layout(h.geometry.m);
    let raw = path.to_bytes();
    let dir: &[u8] = match raw.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &raw[..i],
        None => b".",
    };
    let cdir = cstr(dir)?;
    // SAFETY: cdir is NUL-terminated.
    let tmpfd = unsafe {
        libc::open(
            cdir.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    let (fd, tmpname) = if tmpfd >= 0 {
        // SAFETY: fresh descriptor we own.
        (unsafe { OwnedFd::from_raw_fd(tmpfd) }, None)
    } else {
        // No O_TMPFILE on this filesystem: a private temporary name instead.
        let mut tmp = raw.to_vec();
        tmp.extend_from_slice(format!(".tmp.{}.{:x}", std::process::id(), random_u64()).as_bytes());
        let tmp = cstr(tmp)?;
        // SAFETY: tmp is NUL-terminated.
        let fd = unsafe {
            libc::open(
                tmp.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(Error::last_os(format!("create {shown}")));
        }
        // SAFETY: fresh descriptor we own.
        (unsafe { OwnedFd::from_raw_fd(fd) }, Some(tmp))
    };
    let cleanup = |tmp: &Option<CString>| {
        if let Some(t) = tmp {
            // SAFETY: t is NUL-terminated.
            unsafe { libc::unlink(t.as_ptr()) };
        }
    };
    let init = || -> Result<()> {
        // The mode exactly as asked, whatever the umask.
        // SAFETY: plain syscalls on our descriptor.
        if unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) } != 0 {
            return Err(Error::last_os(format!("chmod {shown}")));
        }
        // SAFETY: as above.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), l.total as libc::off_t) } != 0 {
            return Err(Error::last_os(format!("ftruncate {shown}")));
        }
        let m = map(&fd, l.total, false)?;
        write_header(&m, h);
        if let Some(f) = fill {
            f(m.as_mut_ptr());
        }
        Ok(())
    };
    if let Err(e) = init() {
        cleanup(&tmpname);
        return Err(e);
    }
    let linked = match &tmpname {
        None => {
            let proc_path = cstr(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
            // SAFETY: both paths are NUL-terminated.
            unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    proc_path.as_ptr(),
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            }
        }
        // SAFETY: both paths are NUL-terminated.
        Some(t) => unsafe { libc::link(t.as_ptr(), path.as_ptr()) },
    };
    let err = std::io::Error::last_os_error();
    cleanup(&tmpname);
    if linked == 0 {
        return Ok(true);
    }
    if err.raw_os_error() == Some(libc::EEXIST) {
        return Ok(false); // lost the race: open the winner's file
    }
    Err(Error::io(format!("link {shown}"), err))
}

/// Map an existing filter file read-write (adopting an empty one).
fn open_existing(path: &CStr, shown: &str, h: &Header) -> Result<Option<Region>> {
    let Some(fd) = open_nofollow(path, libc::O_RDWR, shown)? else {
        return Ok(None);
    };
    let st = fstat(fd.as_raw_fd(), shown)?;
    require_regular(&st, shown)?;
    // Shared lock while validating: an adopter of an empty file holds the
    // exclusive lock until its header is complete.
    let mut lock = Flock::take(&fd, libc::LOCK_SH)?;
    let mut st = fstat(fd.as_raw_fd(), shown)?;
    if st.st_size == 0 {
        drop(lock);
        lock = Flock::take(&fd, libc::LOCK_EX)?;
        st = fstat(fd.as_raw_fd(), shown)?;
        if st.st_size == 0 {
            // An empty file (touch, mktemp) is adopted as a new filter.
            let l = format::layout(h.geometry.m);
            // SAFETY: plain syscall on our descriptor.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), l.total as libc::off_t) } != 0 {
                return Err(Error::last_os(format!("ftruncate {shown}")));
            }
            let m = map(&fd, l.total, false)?;
            write_header(&m, h);
            drop(lock);
            return Ok(Some(Region {
                map: m,
                header: *h,
                backing: Backing::File(path.to_owned()),
                readonly: false,
            }));
        }
    }
    let m = map(&fd, st.st_size as u64, false)?;
    let header = read_header(&m, Some(shown)).map_err(|e| Error::new(e.kind, format!("{shown}: {}", e.msg)))?;
    drop(lock);
    let r = Region {
        map: m,
        header,
        backing: Backing::File(path.to_owned()),
        readonly: false,
    };
    if r.frozen() {
        return Err(Error::new(
            ErrorKind::Frozen,
            format!("{shown}: filter is frozen; open it with new_readonly"),
        ));
    }
    Ok(Some(r))
}

/// Open `path` as a filter, creating it with `h` and `mode` if absent.
pub fn open_or_create_file(raw: &[u8], h: &Header, mode: u32) -> Result<Region> {
    if raw.is_empty() {
        return Err(Error::arg("path is empty"));
    }
    let path = cstr(raw)?;
    let shown = &shown(raw);
    // A few rounds: a creation race lost to a file that is then removed.
    for _ in 0..8 {
        if let Some(r) = open_existing(&path, shown, h)? {
            return Ok(r);
        }
        if create_file(&path, shown, h, mode, None)? {
            if let Some(r) = open_existing(&path, shown, h)? {
                return Ok(r);
            }
        }
    }
    Err(Error::new(
        ErrorKind::Io,
        format!("{shown}: file keeps disappearing while being opened"),
    ))
}

/// Create a new file at `path` holding `h` and bits written by `fill` (given
/// the mapping's base); refuses an existing path.
pub fn create_new_file(raw: &[u8], h: &Header, mode: u32, fill: &dyn Fn(*mut u8)) -> Result<Region> {
    if raw.is_empty() {
        return Err(Error::arg("path is empty"));
    }
    let path = cstr(raw)?;
    let shown = &shown(raw);
    if !create_file(&path, shown, h, mode, Some(fill))? {
        return Err(Error::arg(format!("{shown}: file exists")));
    }
    open_existing(&path, shown, h)?
        .ok_or_else(|| Error::new(ErrorKind::Io, format!("{shown}: removed while being created")))
}

/// Attach to a filter through a descriptor (duplicated, close-on-exec).
pub fn open_fd(fd: RawFd) -> Result<Region> {
    // SAFETY: F_DUPFD_CLOEXEC on a caller-supplied number: an invalid one
    // fails with EBADF.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(Error::last_os(format!("dup fd {fd}")));
    }
    // SAFETY: fresh descriptor we own.
    let own = unsafe { OwnedFd::from_raw_fd(dup) };
    let st = fstat(dup, "descriptor")?;
    require_regular(&st, &format!("fd {fd}"))?;
    // SAFETY: plain fcntl on our descriptor.
    let acc = unsafe { libc::fcntl(dup, libc::F_GETFL) } & libc::O_ACCMODE;
    let readonly = acc == libc::O_RDONLY;
    let m = map(&own, st.st_size as u64, readonly)?;
    let header = read_header(&m, None)?;
    let mut r = Region {
        map: m,
        header,
        backing: Backing::Fd(own),
        readonly,
    };
    if r.frozen() && !readonly {
        // A frozen filter is only ever queried: map it read-only.
        let Backing::Fd(own) = std::mem::replace(&mut r.backing, Backing::Anonymous) else {
            unreachable!()
        };
        let m = map(&own, st.st_size as u64, true)?;
        let header = read_header(&m, None)?;
        return Ok(Region {
            map: m,
            header,
            backing: Backing::Fd(own),
            readonly: true,
        });
    }
    if readonly && !r.frozen() {
        return Err(Error::new(
            ErrorKind::ReadOnly,
            "descriptor is read-only and the filter is not frozen",
        ));
    }
    Ok(r)
}

/// Map a frozen filter file `PROT_READ`.
pub fn open_readonly(raw: &[u8]) -> Result<Region> {
    let path = cstr(raw)?;
    let shown = &shown(raw);
    let fd = open_nofollow(&path, libc::O_RDONLY, shown)?
        .ok_or_else(|| Error::new(ErrorKind::Io, format!("open {shown}: No such file or directory")))?;
    let st = fstat(fd.as_raw_fd(), shown)?;
    require_regular(&st, shown)?;
    let m = map(&fd, st.st_size as u64, true)?;
    let header = read_header(&m, Some(shown)).map_err(|e| Error::new(e.kind, format!("{shown}: {}", e.msg)))?;
    let r = Region {
        map: m,
        header,
        backing: Backing::File(path),
        readonly: true,
    };
    if !r.frozen() {
        return Err(Error::new(
            ErrorKind::Arg,
            format!("{shown}: filter is not frozen (freeze it before opening read-only)"),
        ));
    }
    Ok(r)
}

/// Remove a filter file by name: true when it removed one, false when there
/// was none (so a second call, or a race with another remover, is not an
/// error).
pub fn unlink(raw: &[u8]) -> Result<bool> {
    let path = cstr(raw)?;
    let shown = &shown(raw);
    // SAFETY: path is NUL-terminated.
    if unsafe { libc::unlink(path.as_ptr()) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(false);
        }
        return Err(Error::io(format!("unlink {shown}"), e));
    }
    Ok(true)
}
