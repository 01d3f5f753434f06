//! Creating, opening and mapping the shared region: anonymous, file, memfd,
//! inherited descriptor, read-only.
//!
//! # Safety
//!
//! The region is a `MAP_SHARED` mapping that other processes write. We never
//! form Rust references to plain data inside it: the control structures and
//! the bit words are atomics, and the immutable header is copied out once and
//! validated (`format::decode`) before anything is derived from it. A
//! process with write access to the file may *truncate* it while we have it
//! mapped (memfds are sealed against shrinking): touching the lost pages
//! raises `SIGBUS`, which `sys::sigbus` turns into the handle's error
//! (`lost`), every mapping being registered there (doc/DESIGN.md, §5). No
//! process of ours ever shrinks the file or punches a hole in it.
//!
//! Past the filter's own bytes, a file or memfd may hold a *journal* (see
//! `format::journal` and `sync::lock_journal`): storage grown on demand
//! while a merge or an intersect runs. The filter's mapping never covers
//! it (every mapping is sized from the validated header, never from the
//! file's size), and the journal's own mapping is made only after checking
//! that the file is long enough.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::shm::format::{self, Header, Layout, FLAG_FROZEN, IMMUTABLE_LEN, OFF_FLAGS};
use crate::shm::journal::{self, map_range, JournalMap, JournalStore};
use crate::sys::file;
use crate::sys::file::{
    add_seals, create_excl, cstr, dup_cloexec, errno_name, fallocate, fchgrp, fchmod, fstat, geteuid, ident, link,
    lstat, memfd_create, open_nofollow, open_tmpfile, opened_read_only, over_fsize_limit, pread_full, random_u64,
    rename, require_regular, seals, shown, WriteLock,
};
use crate::sys::keeper::ShadowMap;
use crate::sys::memory::{check_room, Store};
use crate::sys::sigbus::Lost;

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
    /// Shared with the thread-local claims table while a slot word in it
    /// is held (see `claims`): the mapping, and its shadow, outlive every
    /// robust-list entry that points into it (doc/DESIGN.md, C8).
    map: Arc<ShadowMap>,
    pub header: Header,
    pub backing: Backing,
    pub readonly: bool,
    /// Device and inode of what is mapped (for an anonymous region, of the
    /// memfd behind it): "the same filter" is the same mapped object, never
    /// an id stored in the bytes, which a copy of the file carries along.
    /// The mapping keeps the inode alive, so no other object can take the
    /// number while this region exists.
    id: (u64, u64),
    /// The descriptor of a file or anonymous region, kept so that the
    /// journal can be grown, mapped and freed (a memfd's or a handed-in
    /// descriptor is in `backing`). A file's is shared by all of this
    /// process's handles of it (`shared_fd`). None for read-only regions.
    store: Option<Arc<OwnedFd>>,
}

/// One descriptor per filter file per process, whatever the number of its
/// handles: a process may hold more handles of one file than it may open
/// descriptors. Only offset-free calls (fstat, fallocate, ftruncate, mmap)
/// use it, so sharing it is harmless. While a handle holds it, the inode is
/// open, so no other file can take its (device, inode) key.
fn shared_fd(id: (u64, u64), fd: OwnedFd) -> Arc<OwnedFd> {
    type Table = Vec<((u64, u64), std::sync::Weak<OwnedFd>)>;
    static FDS: std::sync::Mutex<Table> = std::sync::Mutex::new(Vec::new());
    // A panic elsewhere while holding the lock leaves the table usable.
    let mut t = FDS.lock().unwrap_or_else(|e| e.into_inner());
    t.retain(|(_, w)| w.strong_count() > 0);
    if let Some(a) = t.iter().find(|(i, _)| *i == id).and_then(|(_, w)| w.upgrade()) {
        return a; // `fd` closes: the same file is open already
    }
    let a = Arc::new(fd);
    t.push((id, Arc::downgrade(&a)));
    a
}

impl Region {
    /// Base address of the mapping.
    pub fn base(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    #[allow(dead_code)] // len's companion (clippy::len_without_is_empty)
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Whether both regions map the same object: the same file (by device
    /// and inode, whichever path or descriptor reached it), the same memfd,
    /// or the same anonymous region.
    pub fn same_object(&self, other: &Region) -> bool {
        self.id == other.id
    }

    /// Device and inode of the mapped object.
    pub fn id(&self) -> (u64, u64) {
        self.id
    }

    /// The handle's mark for lost pages, shared by all its mappings.
    pub fn lost(&self) -> &Arc<Lost> {
        self.map.lost()
    }

    /// The mapping itself, to keep it alive.
    pub fn mapping(&self) -> Arc<ShadowMap> {
        Arc::clone(&self.map)
    }

    pub fn layout(&self) -> Layout {
        self.header.layout()
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

    /// The descriptor the journal is reached through.
    pub(crate) fn store_fd(&self) -> Option<RawFd> {
        match (&self.backing, &self.store) {
            (Backing::Memfd(fd) | Backing::Fd(fd), _) => Some(fd.as_raw_fd()),
            (_, Some(fd)) => Some(fd.as_raw_fd()),
            _ => None,
        }
    }

    /// Where the journal is with `stages` published stages: for a grown
    /// filter past the last of them (`format::journal_for`), else past
    /// the filter.
    fn journal_range(&self, stages: u32) -> Option<(u64, u64)> {
        match self.header.growth {
            Some(_) => format::journal_for(&self.header, stages),
            None => format::journal(&self.header),
        }
    }

    /// Give the journal all of its storage and map it, for a merge or an
    /// intersect that holds the journal word. `Ok(None)`: this
    /// filter's storage can never hold a journal (a memfd sealed against
    /// growing, as memfds made by earlier versions are): the caller runs
    /// without one. A file system without room, a quota or the file size
    /// limit give an error naming it, and leave the filter as it was
    /// (whatever was reserved stays, as a journal's space does).
    pub fn prepare_journal(&self, stages: u32) -> Result<Option<JournalMap>> {
        let (Some(fd), Some((off, len))) = (self.store_fd(), self.journal_range(stages)) else {
            return Ok(None);
        };
        let end = off + len;
        let size = fstat(fd, "journal")?.st_size as u64;
        if size < end && seals(fd).is_some_and(|s| s & libc::F_SEAL_GROW != 0) {
            return Ok(None);
        }
        // Growing a file past RLIMIT_FSIZE sends SIGXFSZ, which kills the
        // process: ask first.
        if let Some(lim) = over_fsize_limit(end) {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "the journal needs the file to grow to {end} bytes, more than the file size \
                     limit (RLIMIT_FSIZE, {lim} bytes); nothing was changed"
                ),
            ));
        }
        journal::check_room(fd, len)?;
        if let Err(e) = fallocate(fd, off, len) {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "cannot reserve {len} bytes for the journal (a copy of the other \
                     filter): {}: {e}; nothing was changed",
                    errno_name(&e)
                ),
            ));
        }
        map_range(fd, off, len, self.lost())
            .map(Some)
            .map_err(|e| Error::io("mmap of the journal", e))
    }
}

impl JournalStore for Region {
    fn map_journal(&self, stages: u32) -> Option<JournalMap> {
        let fd = self.store_fd()?;
        let (off, len) = self.journal_range(stages)?;
        // Never map past the end of the file: touching such a page would
        // raise SIGBUS. (A file shrunk under us afterwards: see the
        // module's Safety.)
        if (fstat(fd, "journal").ok()?.st_size as u64) < off + len || self.readonly {
            return None;
        }
        map_range(fd, off, len, self.lost()).ok()
    }
}

/// A header for a new filter.
pub fn new_header(geometry: crate::math::geometry::Geometry, seed: u64) -> Header {
    Header {
        geometry,
        seed,
        instance: random_u64(),
        window: None,
        growth: None,
    }
}

fn map(fd: &OwnedFd, len: u64, readonly: bool) -> Result<ShadowMap> {
    if len > isize::MAX as u64 / 2 {
        return Err(Error::format("file too large to map"));
    }
    ShadowMap::map(Some(fd.as_raw_fd()), len as usize, readonly).map_err(|e| Error::io("mmap", e))
}

/// The message for a file of format 2 (slots with glibc mutexes); `path`
/// names it in the command to run.
pub(crate) fn version2_message(path: Option<&str>) -> String {
    format!(
        "format version 2 of an earlier release (its slot table holds addresses): \
         convert it with `bloomfilter-shared upgrade {}`",
        path.unwrap_or("PATH")
    )
}

/// The message for a file of the original C module; `path` names it in the
/// command to run.
pub(crate) fn legacy_message(path: Option<&str>) -> String {
    format!(
        "written by Data::BloomFilter::Shared 0.04: convert it with `bloomfilter-shared upgrade {}`",
        path.unwrap_or("PATH")
    )
}

fn read_header(fd: &OwnedFd, size: u64, path: Option<&str>) -> Result<Header> {
    let n = size.min(format::HEADER_READ_LEN as u64) as usize;
    let mut b = [0u8; format::HEADER_READ_LEN];
    let got = pread_full(fd.as_raw_fd(), &mut b[..n], 0).map_err(|e| Error::io("read header", e))?;
    if crate::shm::legacy::has_magic(&b[..got]) {
        return Err(Error::format(legacy_message(path)));
    }
    if got < IMMUTABLE_LEN {
        return Err(Error::format(format::FormatError::TooSmall(size).to_string()));
    }
    // Only our own copy is validated (doc/DESIGN.md, C6).
    let h = format::decode(&b[..got], size).map_err(|e| match e {
        format::FormatError::Version(format::FORMAT_VERSION_MUTEX) => Error::format(version2_message(path)),
        e => Error::format(e.to_string()),
    })?;
    Ok(h)
}

/// Write a new header into a fresh (all-zero) mapping.
fn write_header(map: &ShadowMap, h: &Header) {
    let b = format::encode(h);
    debug_assert!(map.len() >= b.len());
    // SAFETY: the mapping is fresh (only we know of it yet) and larger than
    // the header.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), map.as_ptr(), b.len()) };
    // The slot table stays as the kernel gave it, zeroed: every word free.
    if h.growth.is_some() {
        // SAFETY: as above; OFF_STAGES (stage 0 published, §6 grown
        // filters) is in the control line, 4-aligned.
        unsafe { (map.as_ptr().add(format::OFF_STAGES as usize) as *mut u32).write(1) };
    }
    if let Some(w) = h.window {
        // The first step's spare is clean (the window module's initial
        // state: view 0 in slot 0, every `last` 0).
        let v = w.initial_view();
        let off = format::OFF_CLEAN as usize + 8 * w.spare(v) as usize;
        // SAFETY: as above; OFF_CLEAN + 8 * ring is inside the header page
        // (format's static asserts), 8-aligned; nobody else sees it yet.
        unsafe { (map.as_ptr().add(off) as *mut u64).write(v.clean_mark()) };
    }
}

/// Give `fd` all of its `len` bytes of storage now. A file system (or a
/// tmpfs such as `/dev/shm`) without room for them then fails here with
/// ENOSPC, where an unbacked page would otherwise kill whoever touches it
/// later with `SIGBUS`. The file size limit is checked first: growing a file
/// past `RLIMIT_FSIZE` sends `SIGXFSZ`, which kills the process.
fn reserve(fd: &OwnedFd, len: u64, what: &str) -> Result<()> {
    check_fsize(len, what)?;
    allocate(fd, 0, len, len, what)
}

/// Fail, naming `what`, when `len` bytes exceed the file size limit.
fn check_fsize(len: u64, what: &str) -> Result<()> {
    if let Some(lim) = over_fsize_limit(len) {
        return Err(Error::new(
            ErrorKind::Io,
            format!(
                "{what}: the filter needs {len} bytes, more than the file size limit \
                 (RLIMIT_FSIZE, {lim} bytes)"
            ),
        ));
    }
    Ok(())
}

/// `posix_fallocate` of `len` bytes at `off`; an error names `what` and the
/// `total` bytes the filter needs.
fn allocate(fd: &OwnedFd, off: u64, len: u64, total: u64, what: &str) -> Result<()> {
    fallocate(fd.as_raw_fd(), off, len).map_err(|e| no_room(total, what, e))
}

fn no_room(total: u64, what: &str, e: std::io::Error) -> Error {
    Error::io(format!("{what}: cannot reserve {total} bytes"), e)
}

/// Whether the kernel gives shared memory (memfds, shared anonymous
/// memory) transparent huge pages when a mapping asks for them: its
/// `shmem_enabled` setting is `advise`, `within_size`, `always` or `force`,
/// not `never` or `deny` (or absent). Read once per process.
fn shmem_huge_on_request() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
            .is_ok_and(|s| huge_setting_gives(&s))
    })
}

/// Whether a `shmem_enabled` setting (the choices, the current one in
/// brackets) gives huge pages to a mapping that asks for them.
fn huge_setting_gives(setting: &str) -> bool {
    let current = setting
        .split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map(|(c, _)| c);
    matches!(current, Some("advise" | "within_size" | "always" | "force"))
}

/// `reserve` for a new memfd (sized, and mapped as `map`), asking for huge
/// pages for a bit array that starts on one (4 MiB of bits or more). Its
/// control area is allocated as `reserve` does; the bit array is asked for
/// huge pages (`MADV_HUGEPAGE`) and then given its memory through the
/// mapping (`MADV_POPULATE_WRITE`), so that a kernel set to give huge pages
/// on request backs it with them: a `fallocate` first would have allocated
/// small pages before the request could be made. Where huge pages are not
/// given on request, or `MADV_POPULATE_WRITE` is unknown (Linux before
/// 5.14), `fallocate` as `reserve`. Either way a memory shortage fails
/// here, not as a `SIGBUS` later.
fn reserve_mapped(fd: &OwnedFd, map: &ShadowMap, l: &Layout, what: &str) -> Result<()> {
    if l.bits_off != format::HUGE_PAGE || !shmem_huge_on_request() {
        return allocate(fd, 0, l.total, l.total, what);
    }
    allocate(fd, 0, l.bits_off, l.total, what)?;
    let (off, len) = (l.bits_off as usize, (l.total - l.bits_off) as usize);
    // Best effort: the filter works on small pages too.
    let _ = map.advise_range(libc::MADV_HUGEPAGE, off, len);
    match map.advise_range(libc::MADV_POPULATE_WRITE, off, len) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            allocate(fd, l.bits_off, l.total - l.bits_off, l.total, what)
        }
        // EFAULT: a page could not be had where a write would have raised
        // SIGBUS (no room for it); say so as `fallocate` would.
        Err(e) if e.raw_os_error() == Some(libc::EFAULT) => {
            Err(no_room(l.total, what, std::io::Error::from_raw_os_error(libc::ENOSPC)))
        }
        Err(e) => Err(no_room(l.total, what, e)),
    }
}

/// The longest memfd name the kernel takes (`memfd_create(2)`: 249 bytes
/// before the NUL); longer labels are cut to it.
const MEMFD_NAME_MAX: usize = 249;
/// The name of a memfd given none (or an empty one).
pub const DEFAULT_MEMFD_NAME: &str = "bloomfilter-shared";

/// A new memfd for a filter of layout `l`: sized, mapped and given all its
/// storage (`reserve_mapped`), sealed against shrinking.
fn memfd(name: &[u8], l: &Layout) -> Result<(OwnedFd, (u64, u64), ShadowMap)> {
    let name = if name.is_empty() {
        DEFAULT_MEMFD_NAME.as_bytes()
    } else {
        name
    };
    let cname = cstr(&name[..name.len().min(MEMFD_NAME_MAX)])?;
    check_room(l.total, Store::Memory, "the filter", "nothing was created")?;
    let fd = memfd_create(&cname).map_err(|e| Error::io("memfd_create", e))?;
    check_fsize(l.total, "memfd")?;
    // SAFETY: plain syscall on our descriptor; a size, no storage yet.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), l.total as libc::off_t) } != 0 {
        return Err(no_room(l.total, "memfd", std::io::Error::last_os_error()));
    }
    let map = map(&fd, l.total, false)?;
    reserve_mapped(&fd, &map, l, "memfd")?;
    // Sealed against shrinking: a receiver of the descriptor can then never
    // shrink it under another process's mapping (SIGBUS). Not against
    // growing, which harms no mapping: the journal of a merge or an
    // intersect grows it (its pages are freed after, the size stays).
    let _ = add_seals(fd.as_raw_fd(), libc::F_SEAL_SHRINK);
    let id = ident(&fstat(fd.as_raw_fd(), "memfd")?);
    Ok((fd, id, map))
}

/// A new filter in shared anonymous memory (inherited across `fork`).
pub fn create_anonymous(h: &Header) -> Result<Region> {
    let l = h.layout();
    let (fd, id, map) = memfd(DEFAULT_MEMFD_NAME.as_bytes(), &l)?;
    write_header(&map, h);
    // The descriptor is kept (close-on-exec; inherited by forked children,
    // which reach the journal through it): the mapping keeps the memory
    // (and so the inode number in `id`) alive.
    Ok(Region {
        map: Arc::new(map),
        header: *h,
        backing: Backing::Anonymous,
        readonly: false,
        id,
        store: Some(Arc::new(fd)),
    })
}

/// A new filter in a memfd whose descriptor can be passed to other processes.
/// `name` is only a label: any bytes but NUL (empty: the default name).
pub fn create_memfd(name: &[u8], h: &Header) -> Result<Region> {
    let l = h.layout();
    let (fd, id, map) = memfd(name, &l)?;
    write_header(&map, h);
    Ok(Region {
        map: Arc::new(map),
        header: *h,
        backing: Backing::Memfd(fd),
        readonly: false,
        id,
        store: None,
    })
}

/// How a file built by `create_file` takes its final name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Publish {
    /// `link`ed to a path that must not exist: `EEXIST` means another
    /// process created it first.
    Link,
    /// `rename`d over the path (an empty file being adopted).
    Replace,
}

/// Permission bits and, for an adopted file, the group to keep.
#[derive(Clone, Copy)]
struct Perm {
    mode: u32,
    gid: Option<libc::gid_t>,
}

/// Whether an `O_TMPFILE` file can be given a name in this process. Cleared
/// the first time one could not (neither `AT_EMPTY_PATH`, which needs
/// `CAP_DAC_READ_SEARCH`, nor `/proc/self/fd`, which needs `/proc`): later
/// creations go straight to a temporary name.
static TMPFILE_NAMEABLE: AtomicBool = AtomicBool::new(true);

/// A temporary name beside the final one, removed when dropped unless
/// `keep` was called (after it was renamed away).
pub(crate) struct TempName(pub(crate) Option<CString>);
impl TempName {
    fn beside(raw: &[u8]) -> Result<CString> {
        let mut tmp = raw.to_vec();
        tmp.extend_from_slice(format!(".tmp.{}.{:x}", std::process::id(), random_u64()).as_bytes());
        cstr(tmp)
    }
    pub(crate) fn keep(&mut self) {
        self.0 = None;
    }
}
impl Drop for TempName {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            let _ = file::unlink(t);
        }
    }
}

/// Give the `O_TMPFILE` file `fd` the name `target`. `AT_EMPTY_PATH` first:
/// it needs no `/proc` (but `CAP_DAC_READ_SEARCH`, which root has); else the
/// descriptor's `/proc/self/fd` link.
fn link_tmpfile(fd: &OwnedFd, target: &CStr) -> std::io::Result<()> {
    let empty = b"\0";
    // SAFETY: both paths are NUL-terminated.
    let r = unsafe {
        libc::linkat(
            fd.as_raw_fd(),
            empty.as_ptr() as *const libc::c_char,
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EPERM)) {
        return Err(e);
    }
    let proc_path = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL");
    // SAFETY: both paths are NUL-terminated.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `link_tmpfile` failed because this process cannot name an
/// `O_TMPFILE` file at all (rather than because of the target).
fn unnameable(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EPERM))
}

/// Writes a new file's contents before anyone sees it: given its mapping's
/// base and its descriptor (a grown filter's later stages are reserved
/// and written through it).
pub type Fill<'a> = &'a dyn Fn(*mut u8, RawFd) -> Result<()>;

/// Build a complete filter file where nobody sees it (an `O_TMPFILE` file,
/// or a temporary name beside `path`), with all of its space reserved, then
/// give it the name `path` as `how` says. Nothing is left behind when this
/// fails, and `path` never names a half-built file. `Ok(None)`: `path`
/// appeared meanwhile (`Publish::Link` only).
fn create_file(
    path: &CStr,
    shown: &str,
    h: &Header,
    perm: Perm,
    fill: Option<Fill<'_>>,
    how: Publish,
) -> Result<Option<Region>> {
    let l = h.layout();
    let raw = path.to_bytes();
    let dir: &[u8] = match raw.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &raw[..i],
        None => b".",
    };
    let cdir = cstr(dir)?;
    // Relaxed: a hint only; a stale `true` costs one failed attempt.
    let tmpfd = if TMPFILE_NAMEABLE.load(Ordering::Relaxed) {
        open_tmpfile(&cdir, perm.mode)
    } else {
        None
    };
    let (fd, mut temp) = if let Some(fd) = tmpfd {
        (fd, TempName(None))
    } else {
        // No O_TMPFILE on this filesystem: a private temporary name instead.
        let tmp = TempName::beside(raw)?;
        let fd = create_excl(&tmp, perm.mode).map_err(|e| Error::io(format!("create {shown}"), e))?;
        (fd, TempName(Some(tmp)))
    };
    // The mode exactly as asked, whatever the umask.
    fchmod(fd.as_raw_fd(), perm.mode).map_err(|e| Error::io(format!("chmod {shown}"), e))?;
    let st = fstat(fd.as_raw_fd(), shown)?;
    if let Some(gid) = perm.gid.filter(|&g| g != st.st_gid) {
        fchgrp(fd.as_raw_fd(), gid).map_err(|e| Error::io(format!("chown {shown}"), e))?;
    }
    check_room(
        l.total,
        Store::File(fd.as_raw_fd()),
        &format!("{shown}: the filter"),
        "nothing was created",
    )?;
    reserve(&fd, l.total, shown)?;
    let m = map(&fd, l.total, false)?;
    write_header(&m, h);
    if let Some(f) = fill {
        f(m.as_ptr(), fd.as_raw_fd())?;
    }
    if temp.0.is_none() {
        let target = match how {
            Publish::Link => path.to_owned(),
            Publish::Replace => TempName::beside(raw)?,
        };
        match link_tmpfile(&fd, &target) {
            Ok(()) if how == Publish::Link => return Ok(Some(file_region(m, h, path, &st, fd))),
            Ok(()) => temp = TempName(Some(target)),
            Err(e) if how == Publish::Link && e.raw_os_error() == Some(libc::EEXIST) => return Ok(None),
            Err(e) if unnameable(&e) => {
                // Relaxed: see the load above.
                TMPFILE_NAMEABLE.store(false, Ordering::Relaxed);
                drop((m, fd));
                return create_file(path, shown, h, perm, fill, how);
            }
            Err(e) => return Err(Error::io(format!("link {shown}"), e)),
        }
    }
    let t = temp.0.as_ref().expect("a temporary name");
    match how {
        Publish::Link => {
            if let Err(e) = link(t, path) {
                if e.raw_os_error() == Some(libc::EEXIST) {
                    return Ok(None); // lost the race: open the winner's file
                }
                return Err(Error::io(format!("link {shown}"), e));
            }
            // `temp` drops: the temporary name goes, `path` stays.
        }
        Publish::Replace => {
            rename(t, path).map_err(|e| Error::io(format!("rename {shown}"), e))?;
            temp.keep();
        }
    }
    Ok(Some(file_region(m, h, path, &st, fd)))
}

fn file_region(map: ShadowMap, h: &Header, path: &CStr, st: &libc::stat, fd: OwnedFd) -> Region {
    Region {
        map: Arc::new(map),
        header: *h,
        backing: Backing::File(path.to_owned()),
        readonly: false,
        id: ident(st),
        store: Some(shared_fd(ident(st), fd)),
    }
}

/// Map an existing filter file read-write (adopting an empty one).
/// `Ok(None)`: there is no file at `path` (any more), try again.
///
/// A file that is not empty is complete (created and renamed whole, §5),
/// so it is validated and mapped under no lock: nothing another process
/// holds can make this wait. Only an empty file is adopted under the
/// creation lock (`WriteLock::creation`), which a process without write
/// access cannot hold and which is waited for a bounded time.
fn open_existing(path: &CStr, shown: &str, h: &Header) -> Result<Option<Region>> {
    let Some(fd) = open_nofollow(path, libc::O_RDWR, shown)? else {
        return Ok(None);
    };
    let mut st = fstat(fd.as_raw_fd(), shown)?;
    require_regular(&st, shown)?;
    if st.st_size == 0 {
        let _lock = WriteLock::creation(&fd, shown)?;
        st = fstat(fd.as_raw_fd(), shown)?;
        if st.st_size == 0 {
            return adopt(path, shown, h, &st);
        }
        // Written in place by something else while we waited: validated
        // below as any file.
    }
    let header = read_header(&fd, st.st_size as u64, Some(shown))
        .map_err(|e| Error::new(e.kind, format!("{shown}: {}", e.msg)))?;
    let m = map(&fd, header.layout().total, false)?;
    let r = Region {
        map: Arc::new(m),
        header,
        backing: Backing::File(path.to_owned()),
        readonly: false,
        id: ident(&st),
        store: Some(shared_fd(ident(&st), fd)),
    };
    if r.frozen() {
        return Err(Error::new(
            ErrorKind::Frozen,
            format!("{shown}: filter is frozen; open it with new_readonly"),
        ));
    }
    Ok(Some(r))
}

/// Turn the empty file `st` at `path` (under the caller's creation lock)
/// into a filter: only a file of our own effective uid, and by renaming a
/// complete filter over it, keeping its mode and group.
fn adopt(path: &CStr, shown: &str, h: &Header, st: &libc::stat) -> Result<Option<Region>> {
    // Another adopter may have renamed its filter over the path while we
    // waited for the lock: then ours is a stale, unlinked inode.
    match lstat(path) {
        Some(now) if ident(&now) == ident(st) => {}
        _ => return Ok(None),
    }
    let euid = geteuid();
    if st.st_uid != euid {
        return Err(Error::arg(format!(
            "{shown}: is an empty file of uid {}, not of this process's uid {euid}: \
             not adopted (remove it, or let its owner create the filter)",
            st.st_uid
        )));
    }
    let perm = Perm {
        mode: st.st_mode & 0o7777,
        gid: Some(st.st_gid),
    };
    create_file(path, shown, h, perm, None, Publish::Replace)
}

/// Open `path` as a filter, creating it with `h` and `mode` if absent.
pub fn open_or_create_file(raw: &[u8], h: &Header, mode: u32) -> Result<Region> {
    if raw.is_empty() {
        return Err(Error::arg("path is empty"));
    }
    let path = cstr(raw)?;
    let shown = &shown(raw);
    let perm = Perm { mode, gid: None };
    // A few rounds: a creation race lost to a file that is then removed.
    for _ in 0..8 {
        if let Some(r) = open_existing(&path, shown, h)? {
            return Ok(r);
        }
        if let Some(r) = create_file(&path, shown, h, perm, None, Publish::Link)? {
            return Ok(r);
        }
    }
    Err(Error::new(
        ErrorKind::Io,
        format!("{shown}: file keeps disappearing while being opened"),
    ))
}

/// Create a new file at `path` holding `h` and bits written by `fill` (given
/// the mapping's base); refuses an existing path.
pub fn create_new_file(raw: &[u8], h: &Header, mode: u32, fill: Fill<'_>) -> Result<Region> {
    if raw.is_empty() {
        return Err(Error::arg("path is empty"));
    }
    let path = cstr(raw)?;
    let shown = &shown(raw);
    create_file(&path, shown, h, Perm { mode, gid: None }, Some(fill), Publish::Link)?
        .ok_or_else(|| Error::arg(format!("{shown}: file exists")))
}

/// Attach to a filter through a descriptor (duplicated, close-on-exec). A
/// descriptor opened read-only gives a query-only handle (`PROT_READ`, no
/// slot, no lock), whether or not the filter is frozen; so does a frozen
/// filter through any descriptor.
pub fn open_fd(fd: RawFd) -> Result<Region> {
    let own = dup_cloexec(fd).map_err(|e| Error::io(format!("dup fd {fd}"), e))?;
    let st = fstat(own.as_raw_fd(), "descriptor")?;
    require_regular(&st, &format!("fd {fd}"))?;
    let readonly = opened_read_only(own.as_raw_fd());
    let header = read_header(&own, st.st_size as u64, None)?;
    let m = map(&own, header.layout().total, readonly)?;
    let mut r = Region {
        map: Arc::new(m),
        header,
        backing: Backing::Fd(own),
        readonly,
        id: ident(&st),
        store: None,
    };
    if r.frozen() && !readonly {
        // A frozen filter is only ever queried: map it read-only.
        let Backing::Fd(own) = std::mem::replace(&mut r.backing, Backing::Anonymous) else {
            unreachable!()
        };
        let header = read_header(&own, fstat(own.as_raw_fd(), "descriptor")?.st_size as u64, None)?;
        let m = map(&own, header.layout().total, true)?;
        return Ok(Region {
            map: Arc::new(m),
            header,
            backing: Backing::Fd(own),
            readonly: true,
            id: ident(&st),
            store: None,
        });
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
    let header = read_header(&fd, st.st_size as u64, Some(shown))
        .map_err(|e| Error::new(e.kind, format!("{shown}: {}", e.msg)))?;
    let m = map(&fd, header.layout().total, true)?;
    let store = header.growth.map(|_| Arc::new(fd)); // to map later stages
    let r = Region {
        map: Arc::new(m),
        header,
        backing: Backing::File(path),
        readonly: true,
        id: ident(&st),
        store,
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
    if let Err(e) = file::unlink(&path) {
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(false);
        }
        return Err(Error::io(format!("unlink {shown}"), e));
    }
    Ok(true)
}

/// A fresh directory of a test's own, under the system's temporary one.
#[cfg(test)]
pub(crate) fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("bfs-{name}-{}-{:x}", std::process::id(), random_u64()));
    std::fs::create_dir(&d).unwrap();
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::geometry::Geometry;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn scratch(name: &str) -> std::path::PathBuf {
        scratch_dir(&format!("region-{name}"))
    }

    fn header() -> Header {
        new_header(Geometry::for_capacity(1000, 0.01).unwrap(), 0)
    }

    fn bytes(p: &std::path::Path) -> &[u8] {
        std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())
    }

    /// Every `shmem_enabled` choice the kernel documents, current in
    /// brackets: only those that give a mapping huge pages on request do.
    #[test]
    fn huge_pages_on_request_by_setting() {
        let choices = ["always", "within_size", "advise", "never", "deny", "force"];
        for current in choices {
            let line = choices
                .iter()
                .map(|c| if *c == current { format!("[{c}]") } else { c.to_string() })
                .collect::<Vec<_>>()
                .join(" ");
            let gives = !matches!(current, "never" | "deny");
            assert_eq!(huge_setting_gives(&format!("{line}\n")), gives, "{line}");
        }
        for odd in ["", "advise", "[]", "always [madvise] never", "[advise"] {
            assert!(!huge_setting_gives(odd), "{odd:?}");
        }
    }

    fn open_path(p: &std::path::Path) -> Region {
        open_or_create_file(bytes(p), &header(), 0o600).unwrap()
    }

    fn fd_of(p: &std::path::Path, write: bool) -> std::fs::File {
        std::fs::OpenOptions::new().read(true).write(write).open(p).unwrap()
    }

    #[test]
    fn same_object_is_the_mapped_file_not_the_stored_id() {
        let d = scratch("same");
        let a = d.join("a.bf");
        let r1 = open_path(&a);
        let r2 = open_path(&a);
        assert!(r1.same_object(&r2), "two opens of one path");
        let f = fd_of(&a, true);
        assert!(
            r1.same_object(&open_fd(f.as_raw_fd()).unwrap()),
            "the file through a descriptor"
        );
        let ro = fd_of(&a, false);
        assert!(
            r1.same_object(&open_fd(ro.as_raw_fd()).unwrap()),
            "... a read-only one too"
        );
        std::fs::copy(&a, d.join("b.bf")).unwrap();
        let b = open_path(&d.join("b.bf"));
        assert_eq!(b.header.instance, r1.header.instance, "a copy carries the stored id");
        assert!(!r1.same_object(&b), "but is another filter");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn same_object_of_memfds_and_anonymous_regions() {
        let h = header();
        let m = create_memfd(b"same", &h).unwrap();
        assert!(
            m.same_object(&open_fd(m.memfd()).unwrap()),
            "a memfd through its descriptor"
        );
        assert!(!m.same_object(&create_memfd(b"same", &h).unwrap()), "another memfd");
        let a = create_anonymous(&h).unwrap();
        assert!(a.same_object(&a));
        assert!(
            !a.same_object(&create_anonymous(&h).unwrap()),
            "another anonymous region"
        );
        assert!(!a.same_object(&m));
    }

    #[test]
    fn created_files_have_their_space_allocated() {
        let d = scratch("space");
        let p = d.join("f.bf");
        let r = open_path(&p);
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(md.len(), r.len() as u64);
        // A sparse file (ftruncate only) would have almost no blocks.
        assert!(
            md.blocks() * 512 >= md.len(),
            "{} blocks for {} bytes",
            md.blocks(),
            md.len()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_empty_file_of_ours_is_replaced_by_a_complete_filter() {
        let d = scratch("adopt");
        let p = d.join("e.bf");
        std::fs::File::create(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let ino = std::fs::metadata(&p).unwrap().ino();
        let r = open_path(&p);
        let md = std::fs::metadata(&p).unwrap();
        assert_ne!(md.ino(), ino, "renamed over, not grown in place");
        assert_eq!(md.mode() & 0o7777, 0o640, "mode kept");
        assert_eq!(md.len(), r.len() as u64);
        assert!(r.same_object(&open_path(&p)));
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary name left");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The route taken where an `O_TMPFILE` file cannot be named (a file
    /// system without it, or neither `AT_EMPTY_PATH` nor `/proc`): a
    /// temporary name beside the path, linked or renamed, then removed.
    /// Other tests running meanwhile take this route too, and work as well.
    #[test]
    fn without_tmpfile_a_temporary_name_is_used_and_removed() {
        TMPFILE_NAMEABLE.store(false, Ordering::Relaxed);
        let d = scratch("tmpname");
        let p = d.join("n.bf");
        let r = open_path(&p);
        assert!(r.same_object(&open_path(&p)));
        let e = d.join("e.bf");
        std::fs::File::create(&e).unwrap();
        let ino = std::fs::metadata(&e).unwrap().ino();
        let a = open_path(&e);
        assert_ne!(std::fs::metadata(&e).unwrap().ino(), ino);
        assert_eq!(std::fs::metadata(&e).unwrap().len(), a.len() as u64);
        let h = header();
        let n = create_new_file(bytes(&d.join("b.bf")), &h, 0o600, &|_, _| Ok(())).unwrap();
        assert!(create_new_file(bytes(&d.join("b.bf")), &h, 0o600, &|_, _| Ok(())).is_err());
        assert_eq!(n.len() as u64, format::layout(h.geometry.m).total);
        let mut names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["b.bf", "e.bf", "n.bf"], "no temporary name left");
        TMPFILE_NAMEABLE.store(true, Ordering::Relaxed);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_empty_file_of_another_uid_is_not_adopted() {
        if geteuid() != 0 {
            return; // only root can make a file of another uid
        }
        let d = scratch("foreign");
        let p = d.join("planted.bf");
        std::fs::File::create(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        let e = open_or_create_file(bytes(&p), &header(), 0o600).err().expect("refused");
        assert_eq!(e.kind, ErrorKind::Arg);
        assert!(e.msg.contains("is an empty file of uid 65534"), "{}", e.msg);
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!((md.len(), md.uid()), (0, 65534), "left as it was");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_read_only_descriptor_of_a_live_filter_gives_a_read_only_region() {
        let d = scratch("ro");
        let p = d.join("live.bf");
        let w = open_path(&p);
        assert!(!w.frozen());
        let f = fd_of(&p, false);
        let r = open_fd(f.as_raw_fd()).unwrap();
        assert!(r.readonly && !r.frozen());
        let e = open_readonly(bytes(&p))
            .err()
            .expect("new_readonly wants a frozen file");
        assert!(e.msg.contains("not frozen"), "{}", e.msg);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn non_regular_files_are_refused_before_use() {
        let e = open_or_create_file(b"/dev/null", &header(), 0o600)
            .err()
            .expect("refused");
        assert!(e.msg.contains("is a character device"), "{}", e.msg);
        let d = scratch("fifo");
        let p = d.join("fifo");
        let cp = cstr(bytes(&p)).unwrap();
        file::mkfifo(&cp).unwrap();
        let e = open_or_create_file(bytes(&p), &header(), 0o600).err().expect("refused");
        assert!(e.msg.contains("is a FIFO"), "{}", e.msg);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
