//! Lost pages of the filter's mappings (doc/DESIGN.md, §5, C11): a process-wide
//! `SIGBUS` handler that turns a fault in one of the library's mappings
//! into an error of the handle that owns it, instead of the end of the
//! process.
//!
//! A page of a `MAP_SHARED` mapping is lost when another process truncates
//! the file under it, or when the page must be allocated (a write into a
//! hole) on a full file system: the kernel then sends `SIGBUS` to the
//! thread that touched it, which by default ends the process. Every
//! mapping of a filter (its region, its later stages, a journal) is
//! registered here (`watch`) with the `Lost` flag of the handle that owns
//! it. The handler looks the faulting address up among them, maps a page
//! of private zeros over the faulting page (`mmap` with `MAP_FIXED`, a
//! plain system call), sets the flag and returns: the instruction runs
//! again against zeros (an atomic update of a private page works as on a
//! shared one), the call runs to its end over a copy nobody else sees,
//! and the handle answers it, and every later call, with an error
//! (`Lost::is_set`, read once per call). The mapping's other pages stay
//! shared. Any other `SIGBUS` goes to the handler that was installed
//! before ours, or ends the process as it would have without us.
//!
//! The handler is installed when the first mapping is registered, and
//! again at any later registration that finds another one in its place (a
//! program that set `$SIG{BUS}` meanwhile): ours then passes the faults
//! that are not ours on to it. It uses a few hundred bytes of stack, so it
//! needs no alternate stack (`SA_ONSTACK` uses one where a thread has it).
//!
//! The table of mappings is lock-free for the handler: chunks of entries,
//! each entry a seqlock over (start, length, protection, flag); chunks are
//! added when all are taken and never freed, so the handler can walk them
//! at any moment. A registration is removed (`Watch`'s drop) before its
//! mapping is unmapped, and the flag outlives both.

use std::ptr;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A handle's mark: set by the handler when a page of one of the handle's
/// mappings was lost.
#[derive(Debug, Default)]
pub struct Lost(AtomicBool);

impl Lost {
    pub fn new() -> Arc<Lost> {
        Arc::new(Lost(AtomicBool::new(false)))
    }

    /// Whether a page of the handle's mappings was lost. The caller reads
    /// it after the accesses it answers for: the compiler fence keeps the
    /// load after them (the handler ran, if at all, inside one of them, on
    /// this thread, or on the keeper thread, whose reply this thread has
    /// already received through a lock).
    #[inline(always)]
    pub fn is_set(&self) -> bool {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        // Relaxed: set on this thread by the handler (program order), or
        // on the keeper's, ordered before by the reply's lock.
        self.0.load(Ordering::Relaxed)
    }
}

/// Entries per chunk of the table.
const CHUNK: usize = 64;

struct Entry {
    /// Claimed by a registration (false: free).
    used: AtomicBool,
    /// Seqlock: odd while the fields below change.
    seq: AtomicU64,
    start: AtomicUsize,
    len: AtomicUsize,
    /// `PROT_READ`, or `PROT_READ | PROT_WRITE`.
    prot: AtomicU32,
    flag: AtomicPtr<Lost>,
}

#[allow(clippy::declare_interior_mutable_const)] // only as an array's initialiser
const FREE: Entry = Entry {
    used: AtomicBool::new(false),
    seq: AtomicU64::new(0),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    prot: AtomicU32::new(0),
    flag: AtomicPtr::new(ptr::null_mut()),
};

struct Chunk {
    entries: [Entry; CHUNK],
    next: AtomicPtr<Chunk>,
}

static TABLE: Chunk = Chunk {
    entries: [FREE; CHUNK],
    next: AtomicPtr::new(ptr::null_mut()),
};

/// The page size, read when the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The handler that was in place before ours, as installed last; never
/// freed (a handler may be reading an older one).
static PREV: AtomicPtr<libc::sigaction> = AtomicPtr::new(ptr::null_mut());
/// The keeper thread's TID (`sys::keeper`), 0 before it runs.
static KEEPER: AtomicU32 = AtomicU32::new(0);
/// Serialises installations.
static INSTALL: Mutex<()> = Mutex::new(());

/// A mapping's registration; removed on drop, which must come before the
/// mapping is unmapped.
pub struct Watch {
    entry: &'static Entry,
    /// Keeps the flag alive as long as the entry points at it.
    _flag: Arc<Lost>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let e = self.entry;
        // Seqlock writer: odd, fields, even (the Release fence keeps the
        // field stores after the odd value; the even one is Release: both
        // pair with the handler's Acquire loads of `seq`).
        e.seq.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        e.len.store(0, Ordering::Relaxed);
        e.start.store(0, Ordering::Relaxed);
        e.flag.store(ptr::null_mut(), Ordering::Relaxed);
        e.seq.fetch_add(1, Ordering::Release);
        // Release: the next claimer (Acquire CAS) sees the entry cleared.
        e.used.store(false, Ordering::Release);
    }
}

/// A free entry of the table, claimed; a chunk is added when all are taken.
fn claim_entry() -> &'static Entry {
    let mut chunk: &'static Chunk = &TABLE;
    loop {
        for e in &chunk.entries {
            // Acquire: pairs with Watch::drop's Release store.
            if e.used
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return e;
            }
        }
        // Acquire: pairs with the Release CAS that linked the next chunk.
        let next = chunk.next.load(Ordering::Acquire);
        if !next.is_null() {
            // SAFETY: chunks are leaked, never freed.
            chunk = unsafe { &*next };
            continue;
        }
        let new: &'static mut Chunk = Box::leak(Box::new(Chunk {
            entries: [FREE; CHUNK],
            next: AtomicPtr::new(ptr::null_mut()),
        }));
        // Release: the handler walking the chain sees the chunk whole.
        match chunk
            .next
            .compare_exchange(ptr::null_mut(), new, Ordering::Release, Ordering::Acquire)
        {
            // SAFETY: leaked above, never freed.
            Ok(_) => chunk = unsafe { &*(new as *const Chunk) },
            Err(other) => {
                // Another thread linked one first: ours stays unlinked and
                // unused (a few KiB, once per race).
                // SAFETY: chunks are leaked, never freed.
                chunk = unsafe { &*other };
            }
        }
    }
}

/// Register `len` bytes at `start`, a mapping of a handle whose flag is
/// `lost`: a lost page in it sets the flag instead of ending the process.
/// None when the handler cannot be installed (then a lost page ends the
/// process, as without this module).
pub fn watch(start: *const u8, len: usize, readonly: bool, lost: &Arc<Lost>) -> Option<Watch> {
    if len == 0 || !install() {
        return None;
    }
    let e = claim_entry();
    // Seqlock writer, as in Watch::drop.
    e.seq.fetch_add(1, Ordering::Relaxed);
    fence(Ordering::Release);
    e.start.store(start as usize, Ordering::Relaxed);
    e.len.store(len, Ordering::Relaxed);
    let prot = if readonly {
        libc::PROT_READ
    } else {
        libc::PROT_READ | libc::PROT_WRITE
    };
    e.prot.store(prot as u32, Ordering::Relaxed);
    e.flag.store(Arc::as_ptr(lost) as *mut Lost, Ordering::Relaxed);
    e.seq.fetch_add(1, Ordering::Release);
    Some(Watch {
        entry: e,
        _flag: Arc::clone(lost),
    })
}

/// Note the keeper thread (`sys::keeper`): it takes `SIGBUS` so that a
/// word it touches in a lost page is handled as any other access.
pub fn set_keeper(tid: u32) {
    // Relaxed: read by the handler on the keeper thread itself.
    KEEPER.store(tid, Ordering::Relaxed);
}

/// Install the handler if ours is not the one in place; true when it is.
fn install() -> bool {
    let _g = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: sigaction is plain data; the calls only read `new` and write
    // `cur`.
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, ptr::null(), &mut cur) != 0 {
            return false;
        }
        if cur.sa_sigaction == on_sigbus as *const () as usize {
            return true;
        }
        let page = libc::sysconf(libc::_SC_PAGESIZE);
        if page > 0 {
            // Relaxed: read by the handler, installed below (sigaction is a
            // system call: a full barrier).
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        // The previous handler first, then ours: the handler always finds
        // one to pass on to. Leaked: a handler may still read an older one.
        let prev = Box::into_raw(Box::new(cur));
        // Release: the handler's Acquire load sees the whole sigaction.
        PREV.store(prev, Ordering::Release);
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = on_sigbus as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        libc::sigaction(libc::SIGBUS, &new, ptr::null_mut()) == 0
    }
}

/// The registered mapping holding `addr`: (start, len, prot, flag).
fn find(addr: usize) -> Option<(usize, usize, i32, *const Lost)> {
    let mut chunk: *const Chunk = &TABLE;
    while !chunk.is_null() {
        // SAFETY: chunks are static or leaked, never freed.
        let c = unsafe { &*chunk };
        for e in &c.entries {
            // Acquire: pairs with the writer's Release increment.
            let s1 = e.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                continue;
            }
            let start = e.start.load(Ordering::Relaxed);
            let len = e.len.load(Ordering::Relaxed);
            let prot = e.prot.load(Ordering::Relaxed) as i32;
            let flag = e.flag.load(Ordering::Relaxed) as *const Lost;
            // Acquire: the loads above come before the check below.
            fence(Ordering::Acquire);
            if e.seq.load(Ordering::Relaxed) != s1 || flag.is_null() {
                continue;
            }
            if addr >= start && addr - start < len {
                return Some((start, len, prot, flag));
            }
        }
        // Acquire: pairs with the Release CAS that linked it.
        chunk = c.next.load(Ordering::Acquire);
    }
    None
}

/// Zeros over the page at `addr` of the mapping `start..start + len`, or
/// over the whole mapping when the page alone cannot be had (the kernel's
/// limit on mappings: every page replaced apart splits the mapping).
///
/// # Safety
/// `start..start + len` is a live mapping of ours holding `addr`.
unsafe fn zero_over(addr: usize, start: usize, len: usize, prot: i32) -> bool {
    // Relaxed: written before the handler was installed.
    let page = PAGE.load(Ordering::Relaxed);
    let at = addr & !(page - 1);
    let flags = libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: replaces one page of our own mapping (the caller's promise),
    // never another mapping.
    let p = unsafe { libc::mmap(at as *mut libc::c_void, page, prot, flags, -1, 0) };
    if p != libc::MAP_FAILED {
        return true;
    }
    // SAFETY: as above, the whole mapping.
    let p = unsafe { libc::mmap(start as *mut libc::c_void, len, prot, flags, -1, 0) };
    p != libc::MAP_FAILED
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is this thread's; saved and put back around the calls.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // A fault the kernel reports (BUS_ADRERR for a page past the end of
    // the file, BUS_OBJERR, a memory error); not a SIGBUS sent by kill.
    if code > 0 {
        if let Some((start, len, prot, flag)) = find(addr) {
            // SAFETY: the faulting thread is inside an access to this
            // mapping, so its owner cannot unmap it meanwhile.
            if unsafe { zero_over(addr, start, len, prot) } {
                // SAFETY: the flag outlives the registration (Watch).
                // Relaxed: see Lost::is_set.
                unsafe { (*flag).0.store(true, Ordering::Relaxed) };
                // SAFETY: as above.
                unsafe { *libc::__errno_location() = errno };
                return;
            }
        }
    }
    // SAFETY: the calls below are system calls or the previous handler,
    // given what the kernel gave us.
    unsafe {
        pass_on(sig, info, ctx, code);
        *libc::__errno_location() = errno;
    }
}

/// A `SIGBUS` that is not ours: to the previous handler, or as the
/// default would have it.
///
/// # Safety
/// Called from the handler with the kernel's arguments.
unsafe fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void, code: libc::c_int) {
    // SAFETY: a plain system call.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    // Relaxed: set before the keeper serves anything.
    if code <= 0 && tid == KEEPER.load(Ordering::Relaxed) {
        // Sent by kill and landed on the keeper (every other thread blocks
        // SIGBUS): the keeper leaves it to the others from now on, and
        // sends it to the process again.
        // SAFETY: ctx is the kernel's ucontext; the mask in it is the one
        // restored when the handler returns.
        unsafe {
            let uc = ctx as *mut libc::ucontext_t;
            libc::sigaddset(&mut (*uc).uc_sigmask, libc::SIGBUS);
            libc::kill(libc::getpid(), libc::SIGBUS);
        }
        return;
    }
    // Acquire: pairs with install's Release store.
    let prev = PREV.load(Ordering::Acquire);
    // SAFETY: leaked, never freed; null only before the first install.
    let prev = unsafe { prev.as_ref() };
    let h = prev.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if h == libc::SIG_IGN && code <= 0 {
        return; // an ignored signal sent by kill
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // As the kernel does for a fault it cannot deliver: the default
        // action, ending the process (with a core, where enabled).
        // SAFETY: plain system calls.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &dfl, ptr::null_mut());
            libc::raise(libc::SIGBUS);
        }
        return;
    }
    if prev.is_some_and(|p| p.sa_flags & libc::SA_SIGINFO != 0) {
        // SAFETY: a handler installed with SA_SIGINFO takes these three.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain handler takes the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file truncated under a registered mapping: the access reads zeros,
    /// the flag is set, the process goes on; an unregistered address is
    /// not ours.
    #[test]
    fn a_lost_page_reads_zeros_and_sets_the_flag() {
        let d = std::env::temp_dir().join(format!("bfs-sigbus-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&d)
            .unwrap();
        f.set_len(3 * 4096).unwrap();
        let map = memmap2::MmapOptions::new().len(3 * 4096).map_raw(&f).unwrap();
        let p = map.as_mut_ptr();
        let lost = Lost::new();
        let w = watch(p, 3 * 4096, false, &lost).expect("installed");
        let word = |i: usize| {
            // SAFETY: in the mapping, 8-aligned.
            unsafe { &*(p.add(i * 4096) as *const AtomicU64) }
        };
        word(1).store(7, Ordering::Relaxed);
        assert!(!lost.is_set());
        f.set_len(4096).unwrap();
        assert_eq!(word(0).load(Ordering::Relaxed), 0, "page 0 is still the file's");
        assert_eq!(word(1).load(Ordering::Relaxed), 0, "page 1 lost: zeros");
        assert!(lost.is_set());
        assert_eq!(word(1).fetch_or(5, Ordering::Relaxed), 0, "an update works on the copy");
        assert_eq!(word(1).load(Ordering::Relaxed), 5);
        assert_eq!(find(p as usize + 2 * 4096).map(|x| x.0), Some(p as usize));
        drop(w);
        assert!(find(p as usize).is_none(), "unregistered");
        drop(map);
        std::fs::remove_file(&d).unwrap();
    }

    /// More registrations than one chunk holds: all found, all removed.
    #[test]
    fn the_table_grows_by_chunks() {
        let lost = Lost::new();
        let base = 0x7000_0000_0000usize;
        let ws: Vec<_> = (0..3 * CHUNK)
            .map(|i| watch((base + i * 8192) as *const u8, 4096, true, &lost).unwrap())
            .collect();
        for i in 0..3 * CHUNK {
            assert_eq!(find(base + i * 8192 + 100).map(|x| x.0), Some(base + i * 8192));
            assert!(find(base + i * 8192 + 4096).is_none());
        }
        drop(ws);
        assert!(find(base).is_none());
    }
}
