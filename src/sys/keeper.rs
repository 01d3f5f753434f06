//! Robust futex words in a shared mapping, with the robust list the kernel
//! walks kept in this process's private memory.
//!
//! A *word* is a `u32` in a `MAP_SHARED` mapping holding 0 (free), or the
//! TID of the thread whose death the kernel reports on it, with the
//! kernel's `FUTEX_OWNER_DIED` and `FUTEX_WAITERS` bits. Nothing else: no
//! pointer and nothing derived from one lies in shared memory.
//!
//! Each process that takes words has one *keeper*: a thread of ours that
//! blocks every signal, registers a robust list of its own with
//! `set_robust_list(2)` (glibc's lists stay the application threads') and
//! takes and gives back words on the other threads' behalf, so the TID in a
//! held word is always the keeper's. The keeper lives as long as the
//! process; when the process dies (killed, exited, exec'd) the kernel walks
//! the keeper's list and sets `FUTEX_OWNER_DIED` in every word on it that
//! still holds the keeper's TID, waking a waiter: in any PID namespace,
//! with or without `/proc`. A stopped process (SIGSTOP, a debugger, a
//! frozen cgroup) keeps its words: it is alive.
//!
//! The kernel finds a word as *entry + futex_offset*, one offset per list.
//! Every mapping that holds words is a `ShadowMap`: a private, anonymous
//! *shadow* exactly `SHADOW` bytes below the shared bytes, so that the
//! entry of the word at shared offset `o` lies at shadow offset `o`, and the
//! offset is `SHADOW` for every mapping.
//!
//! Only the keeper changes a word's owner and links or unlinks entries,
//! each change announced in `list_op_pending` first, as glibc does for its
//! own threads: the kernel walks a thread's list once that thread stopped
//! running, so it always finds the list whole and every word it changed.
//! (Were another thread of ours to take the word, a SIGKILL could end the
//! keeper, its list walked, while that thread still ran: a word taken after
//! the walk would name a dead TID for ever.) A request costs the caller a
//! round trip to the keeper; words are taken once per claim, not per call.
//! A word that several processes take in turns (the overflow slot) is
//! *leased* (`Lease`): kept between its holder's uses, given back by the
//! keeper, between two uses, once a waiter announces itself.
//!
//! Every word is read as hostile: its value is only compared with the
//! keeper's TID and the two bits; whether an entry is on the list is
//! decided by the entry (private), never by the word.

use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sys::futex::futex_wait;
use crate::sys::sigbus::{self, Lost, Watch};

/// The kernel's bits in a robust futex word (linux/futex.h).
pub const OWNER_DIED: u32 = 0x4000_0000;
pub const WAITERS: u32 = 0x8000_0000;
pub const TID_MASK: u32 = 0x3fff_ffff;
/// The kernel's `PID_MAX_LIMIT` on 64-bit Linux: no thread of any PID
/// namespace has this TID or a greater one (`pid_max` cannot be set
/// higher), so a word naming one was written by no keeper.
pub const TID_LIMIT: u32 = 1 << 22;

/// The distance from a word's entry (in the shadow) up to the word: the
/// robust list's `futex_offset`. Page-aligned, and at least as long as the
/// part of any shared mapping whose words are taken.
pub const SHADOW: usize = 1 << 17;

/// How many entries the kernel walks at most (`ROBUST_LIST_LIMIT`): a
/// keeper never holds more, since the kernel would not mark the rest.
const LIST_LIMIT: usize = 2048;

/// How long `lock` sleeps between attempts: a wake can be lost to an
/// owner that died between our look and our sleep.
const SLICE: Duration = Duration::from_millis(20);

/// What an attempt to take a word found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Try {
    /// We hold it now; it was free.
    Free,
    /// We hold it now; its owner had died holding it (the kernel said so).
    OwnerDied,
    /// A live process holds it (running or stopped), or this one does.
    Held,
    /// Not taken, and never will be by this process: it holds
    /// `LIST_LIMIT` words already, or it cannot have a robust list.
    Refused,
}

/// What a word says about its holder, read without taking it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Free,
    /// Held by the thread with this TID (alive: the kernel would have
    /// marked the word otherwise).
    Held(u32),
    /// Its holder died holding it, or it names a TID no thread can have
    /// (`TID_LIMIT`): nobody will ever give it back, as after a death.
    Died,
}

/// Classify a word's value. Every `u32` is one of the three: a word another
/// user rewrote is at worst a wrong answer, never a fault, and never a wait
/// for a thread that cannot exist.
pub fn state(v: u32) -> State {
    if v & OWNER_DIED != 0 || v & TID_MASK >= TID_LIMIT {
        State::Died
    } else if v & TID_MASK == 0 {
        State::Free
    } else {
        State::Held(v & TID_MASK)
    }
}

/// One entry of the keeper's list, in the shadow of the word it stands for.
/// The kernel reads `next` (`struct robust_list`); the rest is ours.
#[repr(C)]
struct Link {
    next: *mut Link,
    prev: *mut Link,
    /// While the entry is on a list, that list's head address: the word is
    /// held by that keeper. A fork's child has a copy of its parent's
    /// entries, which name the parent's head, never the child's.
    on: usize,
    /// The key of the take that linked it (`new_key`): only a give-back
    /// with the same key unlinks it, so a holder that lost the word (given
    /// back for it, `Lease`, or taken over after someone rewrote it) never
    /// gives back a later holder's take of the same word in this process.
    key: u64,
}

/// `struct robust_list_head` (linux/futex.h). Its address is the list's
/// end: the last entry's `next` points back here.
#[repr(C)]
struct Head {
    next: *mut Link,
    futex_offset: isize,
    list_op_pending: *mut Link,
}

const HEAD_LEN: usize = std::mem::size_of::<Head>();
const _: () = assert!(HEAD_LEN == 3 * std::mem::size_of::<usize>());

/// A request to the keeper: a word's address and a take's key.
enum Op {
    TryLock(usize, u64),
    Unlock(usize, u64),
    /// Keep the word (held under this key) leased (`Lease`).
    Lease(usize, u64, Arc<Lease>),
}

/// A word this process keeps taken between uses, which the keeper gives
/// back on its own, between two uses, when another waiter announced itself
/// on it (`WAITERS`): a word taken once per claim, not per call, that does
/// not shut others out while its holder is idle.
pub struct Lease {
    /// Uses under way.
    users: AtomicU32,
    /// Set by the keeper when it gives the word back: the lease is over.
    revoked: AtomicBool,
}

impl Lease {
    /// Start a use of the word; false when the keeper gave it back (take it
    /// again, under a new key).
    #[inline]
    pub fn enter(&self) -> bool {
        // SeqCst both: the Dekker pair with `revoke_waited`'s store of
        // `revoked` and load of `users`: either the keeper sees our use and
        // keeps the word, or we see the revocation and do not use it.
        self.users.fetch_add(1, Ordering::SeqCst);
        if self.revoked.load(Ordering::SeqCst) {
            self.users.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// End a use started by a successful `enter`.
    #[inline]
    pub fn leave(&self) {
        // Release: the use's writes under the word come before the
        // keeper's give-back, which loads `users` with SeqCst (Acquire).
        self.users.fetch_sub(1, Ordering::Release);
    }

    /// Whether the keeper gave the word back.
    #[cfg(test)]
    pub fn revoked(&self) -> bool {
        // Acquire: pairs with the keeper's SeqCst store.
        self.revoked.load(Ordering::Acquire)
    }
}

/// A key for one take of a word, unique in the process.
pub fn new_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    // Relaxed: only uniqueness matters.
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[derive(Default)]
struct Chan {
    op: Option<Op>,
    reply: Option<Try>,
}

/// One process's keeper (per fork generation: a fork's child makes its own).
struct Keeper {
    /// The keeper thread's TID, the value of every word it holds; set
    /// before the keeper is published.
    tid: AtomicU32,
    /// Callers take turns: one request at a time.
    turn: Mutex<()>,
    chan: Mutex<Chan>,
    cv: Condvar,
}

/// The keeper's list, touched only by the keeper thread (and, after it
/// died, by the kernel).
struct List {
    head: UnsafeCell<Head>,
    len: usize,
}

// SAFETY: the list moves to the keeper thread once and is used there only.
unsafe impl Send for List {}

/// The keeper of this process; null until the first word is taken, and
/// again in a fork's child (`on_fork_child`).
static KEEPER: AtomicPtr<Keeper> = AtomicPtr::new(ptr::null_mut());
/// Held while a keeper is being started (0 free, 1 held); reset in a
/// fork's child, where the thread that held it does not exist.
static STARTING: AtomicU32 = AtomicU32::new(0);
static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn on_fork_child() {
    // Relaxed: the child is single-threaded here. The parent's keeper is
    // not the child's (its TID is not ours, its list not walked for us):
    // the child starts its own on its first request. The old one leaks.
    KEEPER.store(ptr::null_mut(), Ordering::Relaxed);
    STARTING.store(0, Ordering::Relaxed);
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Why this process has no keeper.
#[derive(Debug)]
pub enum NoKeeper {
    /// The kernel refused the keeper a robust list.
    NoRobustList,
    /// The keeper thread could not be made (`pthread_create`'s error).
    Thread(std::io::Error),
}

impl std::fmt::Display for NoKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoKeeper::NoRobustList => {
                f.write_str("this system has no robust futexes (the kernel's robust list is needed to write)")
            }
            NoKeeper::Thread(e) => {
                write!(f, "cannot start the filter's keeper thread: {e}")?;
                // EAGAIN is also the system's thread limits' and a cgroup's
                // pids.max; RLIMIT_NPROC is named when it binds this
                // process (not root, a finite limit).
                let mut r = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                // SAFETY: geteuid cannot fail; getrlimit writes `r` only.
                let bound = unsafe {
                    libc::geteuid() != 0
                        && libc::getrlimit(libc::RLIMIT_NPROC, &mut r) == 0
                        && r.rlim_cur != libc::RLIM_INFINITY
                };
                if e.raw_os_error() == Some(libc::EAGAIN) && bound {
                    let n = r.rlim_cur;
                    write!(f, " (RLIMIT_NPROC, {n} process{})", if n == 1 { "" } else { "es" })?;
                }
                Ok(())
            }
        }
    }
}

/// This process's keeper, started on first use; None where the kernel
/// refuses a robust list (ENOSYS) or no thread can be made.
fn keeper() -> Option<&'static Keeper> {
    // Acquire: pairs with the Release store below; the keeper's fields
    // are seen initialised.
    let k = KEEPER.load(Ordering::Acquire);
    if !k.is_null() {
        // SAFETY: keepers are leaked, never freed.
        return Some(unsafe { &*k });
    }
    start_keeper().ok()
}

#[cold]
#[inline(never)]
fn start_keeper() -> Result<&'static Keeper, NoKeeper> {
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe { libc::pthread_atfork(None, None, Some(on_fork_child)) };
    });
    // Acquire/Release: the starter's keeper store happens-before the next
    // starter's load of KEEPER (the spin lock's own pair).
    while STARTING
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    // Acquire: as in keeper().
    let k = KEEPER.load(Ordering::Acquire);
    let r = if k.is_null() {
        spawn_keeper().map(|new| {
            // Release: pairs with keeper()'s Acquire load.
            KEEPER.store(new as *const Keeper as *mut Keeper, Ordering::Release);
            new
        })
    } else {
        // SAFETY: a leaked keeper, never freed.
        Ok(unsafe { &*k })
    };
    // Release: pairs with the Acquire CAS above.
    STARTING.store(0, Ordering::Release);
    r
}

/// Start the keeper thread with every signal blocked but `SIGBUS` (it
/// inherits our mask, so no handler of the application ever runs on it;
/// `sys::sigbus` handles a lost page it touches), and wait until it has
/// registered its list.
fn spawn_keeper() -> Result<&'static Keeper, NoKeeper> {
    let k: &'static Keeper = Box::leak(Box::new(Keeper {
        tid: AtomicU32::new(0),
        turn: Mutex::new(()),
        chan: Mutex::new(Chan::default()),
        cv: Condvar::new(),
    }));
    let (tx, rx) = std::sync::mpsc::sync_channel::<bool>(1);
    // SAFETY: sigset_t is plain data, filled by sigfillset; pthread_sigmask
    // only reads the new mask and writes the old one.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        // But SIGBUS: a word it touches in a page another process removed
        // faults as any access does, and the handler for lost pages
        // (`sys::sigbus`) must run there rather than the kernel ending the
        // process for a blocked fault.
        libc::sigdelset(&mut all, libc::SIGBUS);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    let spawned = std::thread::Builder::new()
        .name("bfs-keeper".into())
        .stack_size(64 * 1024)
        .spawn(move || keeper_main(k, tx));
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut()) };
    spawned.map_err(NoKeeper::Thread)?;
    // false: the kernel refused the list; the thread has ended.
    match rx.recv() {
        Ok(true) => Ok(k),
        _ => Err(NoKeeper::NoRobustList),
    }
}

/// The keeper thread: register the list, then serve requests forever.
fn keeper_main(k: &'static Keeper, ready: std::sync::mpsc::SyncSender<bool>) {
    let list = Box::leak(Box::new(List {
        head: UnsafeCell::new(Head {
            next: ptr::null_mut(),
            futex_offset: SHADOW as isize,
            list_op_pending: ptr::null_mut(),
        }),
        len: 0,
    }));
    let h = list.head.get();
    // SAFETY: `h` is ours and leaked; an empty list points at its head.
    unsafe { (*h).next = h as *mut Link };
    // SAFETY: the head lives for ever (leaked) and is laid out as the
    // kernel's struct robust_list_head for its first HEAD_LEN bytes.
    let rc = unsafe { libc::syscall(libc::SYS_set_robust_list, h, HEAD_LEN) };
    if rc != 0 {
        let _ = ready.send(false);
        return;
    }
    // Relaxed: published to other threads by start_keeper's Release store
    // of KEEPER, which happens after our send.
    k.tid.store(gettid(), Ordering::Relaxed);
    crate::sys::sigbus::set_keeper(gettid());
    let _ = ready.send(true);
    let tid = k.tid.load(Ordering::Relaxed);
    let mut leases: Vec<(usize, u64, Arc<Lease>)> = Vec::new();
    let mut chan = k.chan.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(op) = chan.op.take() {
            // SAFETY: request() passes words of live ShadowMaps only (its
            // callers' promise), whose entries lie SHADOW below them.
            let r = unsafe {
                match op {
                    Op::TryLock(w, key) => list.try_lock(w, tid, key),
                    Op::Unlock(w, key) => {
                        leases.retain(|&(lw, lk, _)| (lw, lk) != (w, key));
                        list.unlock(w, tid, key);
                        Try::Free
                    }
                    Op::Lease(w, key, l) => {
                        if list.holds(w, key) {
                            leases.push((w, key, l));
                        } else {
                            l.revoked.store(true, Ordering::SeqCst);
                        }
                        Try::Free
                    }
                }
            };
            chan.reply = Some(r);
            k.cv.notify_all();
        }
        // SAFETY: a leased word's mapping lives until its Unlock request,
        // which takes it off `leases` first (`lease`'s promise).
        unsafe { list.revoke_waited(&mut leases, tid) };
        if chan.op.is_none() {
            chan = if leases.is_empty() {
                k.cv.wait(chan).unwrap_or_else(|e| e.into_inner())
            } else {
                // Leased words are looked at every SLICE for waiters.
                k.cv.wait_timeout(chan, SLICE).unwrap_or_else(|e| e.into_inner()).0
            };
        }
    }
}

impl List {
    fn head(&self) -> *mut Head {
        self.head.get()
    }

    /// The list's end as an entry pointer: only its `next` (the head's
    /// first field) is ever read or written through it.
    fn end(&self) -> *mut Link {
        self.head() as *mut Link
    }

    /// Whether entry `e` is on this list.
    ///
    /// # Safety
    /// `e` is a live shadow entry.
    unsafe fn ours(&self, e: *mut Link) -> bool {
        // SAFETY: the caller's promise; only the keeper writes entries.
        unsafe { (*e).on == self.head() as usize }
    }

    /// Whether the entry of the word at `w` is on this list under `key`.
    ///
    /// # Safety
    /// As `try_lock`.
    unsafe fn holds(&self, w: usize, key: u64) -> bool {
        let e = Self::entry(w);
        // SAFETY: the caller's promise.
        unsafe { self.ours(e) && (*e).key == key }
    }

    /// Give back every leased word that a waiter announced itself on and
    /// that no use holds (`Lease`).
    ///
    /// # Safety
    /// Every leased word lies in a live `ShadowMap`; keeper thread only.
    unsafe fn revoke_waited(&mut self, leases: &mut Vec<(usize, u64, Arc<Lease>)>, tid: u32) {
        leases.retain(|(w, key, l)| {
            // SAFETY: the caller's promise.
            let word = unsafe { &*(*w as *const AtomicU32) };
            // Relaxed: a hint; a waiter sets the bit again every slice.
            if word.load(Ordering::Relaxed) & WAITERS == 0 {
                return true;
            }
            // SeqCst both: the Dekker pair with Lease::enter.
            l.revoked.store(true, Ordering::SeqCst);
            if l.users.load(Ordering::SeqCst) != 0 {
                l.revoked.store(false, Ordering::SeqCst);
                return true;
            }
            // SAFETY: the caller's promise.
            unsafe { self.unlock(*w, tid, *key) };
            false
        });
    }

    /// The entry of the word at address `w`.
    fn entry(w: usize) -> *mut Link {
        (w - SHADOW) as *mut Link
    }

    /// Take the word at `w` for the keeper (TID `tid`), as glibc's robust
    /// trylock does: announce the entry in `list_op_pending`, change the
    /// word, link the entry, clear the announcement. Killed anywhere in
    /// between, the kernel finds the word through one or the other.
    ///
    /// # Safety
    /// `w` is the address of a word in a live `ShadowMap`; only the keeper
    /// thread calls this.
    unsafe fn try_lock(&mut self, w: usize, tid: u32, key: u64) -> Try {
        let e = Self::entry(w);
        // SAFETY: the entry is in the shadow, private and writable (the
        // caller's promise); only this thread writes it.
        if unsafe { self.ours(e) } {
            // Ours already (the word may say otherwise: someone rewrote
            // it). Never linked twice.
            return Try::Held;
        }
        if self.len >= LIST_LIMIT - 1 {
            return Try::Refused;
        }
        // SAFETY: a word of a live mapping, aligned (the caller's promise).
        let word = unsafe { &*(w as *const AtomicU32) };
        let h = self.head();
        // SAFETY: the head is ours; the kernel reads it only once this
        // thread stopped running.
        unsafe { ptr::write_volatile(ptr::addr_of_mut!((*h).list_op_pending), e) };
        // The announcement is stored before the word changes, and the link
        // after: the kernel, walking after this thread died at any point,
        // sees them in program order. Compiler fences suffice: only this
        // thread's own death reads them.
        compiler_fence(Ordering::SeqCst);
        let v = word.load(Ordering::Relaxed);
        let got = match state(v) {
            // Acquire: pairs with the Release swap of the last holder's
            // unlock (its writes under the word come before ours).
            State::Free => word
                .compare_exchange(v, tid | (v & WAITERS), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                .then_some(Try::Free),
            // Acquire: as above, from the kernel's store or the last
            // holder's writes before it died.
            State::Died => word
                .compare_exchange(v, tid | (v & WAITERS), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                .then_some(Try::OwnerDied),
            State::Held(_) => None,
        };
        compiler_fence(Ordering::SeqCst);
        if got.is_some() {
            // SAFETY: e, the head and head.next are ours (private, live).
            unsafe {
                let first = (*h).next;
                (*e).prev = self.end();
                (*e).on = h as usize;
                (*e).key = key;
                ptr::write_volatile(ptr::addr_of_mut!((*e).next), first);
                if first != self.end() {
                    (*first).prev = e;
                }
                compiler_fence(Ordering::SeqCst);
                ptr::write_volatile(ptr::addr_of_mut!((*h).next), e);
            }
            self.len += 1;
        }
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { ptr::write_volatile(ptr::addr_of_mut!((*h).list_op_pending), ptr::null_mut()) };
        got.unwrap_or(Try::Held)
    }

    /// Give back the word at `w` if the keeper holds it under `key` (its
    /// entry is linked with that key): announce, unlink, free the word if
    /// it still names this keeper and wake its waiters, clear the
    /// announcement. A word someone rewrote (and perhaps another process
    /// took over) is left as it is: its entry still comes off the list.
    ///
    /// # Safety
    /// As `try_lock`.
    unsafe fn unlock(&mut self, w: usize, tid: u32, key: u64) {
        let e = Self::entry(w);
        // SAFETY: as in try_lock.
        if unsafe { !self.holds(w, key) } {
            return; // not ours: never write a word we do not hold
        }
        // SAFETY: as in try_lock.
        let word = unsafe { &*(w as *const AtomicU32) };
        let h = self.head();
        // SAFETY: the head and the entries are ours; see try_lock for the
        // order the kernel needs.
        unsafe {
            ptr::write_volatile(ptr::addr_of_mut!((*h).list_op_pending), e);
            compiler_fence(Ordering::SeqCst);
            let (prev, next) = ((*e).prev, (*e).next);
            // `next` is the first field of an entry and of the head alike.
            ptr::write_volatile(prev as *mut *mut Link, next);
            if next != self.end() {
                (*next).prev = prev;
            }
            (*e).on = 0;
            compiler_fence(Ordering::SeqCst);
        }
        self.len -= 1;
        // Relaxed: only compared; the CAS below orders.
        let mut v = word.load(Ordering::Relaxed);
        while v & TID_MASK == tid {
            // Release: pairs with the Acquire CAS of the next taker.
            match word.compare_exchange_weak(v, 0, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    if v & WAITERS != 0 {
                        crate::sys::futex::futex_wake(word);
                    }
                    break;
                }
                Err(now) => v = now,
            }
        }
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { ptr::write_volatile(ptr::addr_of_mut!((*h).list_op_pending), ptr::null_mut()) };
    }
}

/// Have the keeper run `op`; Refused where there is no keeper.
fn request(op: Op) -> Try {
    let Some(k) = keeper() else { return Try::Refused };
    let _turn = k.turn.lock().unwrap_or_else(|e| e.into_inner());
    let mut chan = k.chan.lock().unwrap_or_else(|e| e.into_inner());
    chan.reply = None;
    chan.op = Some(op);
    k.cv.notify_all();
    loop {
        if let Some(r) = chan.reply.take() {
            return r;
        }
        chan = k.cv.wait(chan).unwrap_or_else(|e| e.into_inner());
    }
}

/// The TID every word this process holds carries (its keeper's), or None
/// where it has none.
#[cfg(test)]
pub fn holder_tid() -> Option<u32> {
    // Relaxed: published with the keeper (see keeper_main).
    keeper().map(|k| k.tid.load(Ordering::Relaxed))
}

/// Try to take `word` without waiting, under `key` (`new_key`).
///
/// # Safety
/// `word` lies in a `ShadowMap`'s shared bytes, below `SHADOW`, and that
/// mapping stays mapped until the word is given back under the same key
/// (`unlock`, whatever the take returned) or the process ends: the kernel
/// writes through the entry at process death.
pub unsafe fn try_lock(word: &AtomicU32, key: u64) -> Try {
    request(Op::TryLock(word.as_ptr() as usize, key))
}

/// Take `word`, waiting for a live holder (sleeping on the word; the
/// kernel wakes a waiter when a holder dies), another thread of this
/// process included, for at most `limit` while the word names one holder
/// (another holder starts the time again): `Held` after that.
///
/// # Safety
/// As `try_lock`; and this thread does not hold the word.
pub unsafe fn lock(word: &AtomicU32, key: u64, limit: Duration) -> Try {
    let mut since = std::time::Instant::now();
    // Relaxed: only compared, to see another holder come.
    let mut holder = word.load(Ordering::Relaxed) & TID_MASK;
    loop {
        // SAFETY: the caller's promise.
        match unsafe { try_lock(word, key) } {
            Try::Held => {}
            r => return r,
        }
        // Relaxed: as above.
        let now = word.load(Ordering::Relaxed) & TID_MASK;
        if now != holder {
            (holder, since) = (now, std::time::Instant::now());
        } else if since.elapsed() >= limit {
            return Try::Held;
        }
        let v = word.load(Ordering::Relaxed);
        if let State::Held(_) = state(v) {
            // Relaxed: only announces a sleeper; try_lock's CAS orders.
            let want = v | WAITERS;
            if v == want
                || word
                    .compare_exchange(v, want, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                futex_wait(word, want, SLICE);
            }
        }
    }
}

/// Give back `word`, taken by this process under `key`; a word it does not
/// hold under that key stays as it is.
///
/// # Safety
/// As `try_lock`.
pub unsafe fn unlock(word: &AtomicU32, key: u64) {
    request(Op::Unlock(word.as_ptr() as usize, key));
}

/// Keep `word`, which this process holds under `key`, leased: the keeper
/// gives it back between two uses (`Lease::enter`, `Lease::leave`) when a
/// waiter announces itself. The lease comes back entered (one use under
/// way, so that a waiter already there cannot take the word before it is
/// used once), and revoked when the word is not held under `key`.
///
/// # Safety
/// As `try_lock`; and `unlock` under `key` comes before the mapping goes,
/// even once the lease is revoked.
pub unsafe fn lease(word: &AtomicU32, key: u64) -> Arc<Lease> {
    let l = Arc::new(Lease {
        users: AtomicU32::new(1),
        revoked: AtomicBool::new(false),
    });
    if let Try::Refused = request(Op::Lease(word.as_ptr() as usize, key, Arc::clone(&l))) {
        l.revoked.store(true, Ordering::SeqCst); // no keeper
    }
    l
}

/// Shared bytes with a private shadow `SHADOW` bytes below them: an
/// address range reserved as one, so that nothing else is ever mapped in
/// the shadow while the shared bytes are. Every mapping of a filter is one
/// (doc/DESIGN.md, C8): a read-only one too, for one kind of mapping.
pub struct ShadowMap {
    base: *mut u8,
    len: usize,
    /// The shared bytes' registration for lost pages (`sys::sigbus`),
    /// removed before they are unmapped.
    watch: Option<Watch>,
    lost: Arc<Lost>,
}

// SAFETY: the mapping is plain memory; its users synchronise through atomics.
unsafe impl Send for ShadowMap {}
// SAFETY: as above.
unsafe impl Sync for ShadowMap {}

/// Shared bytes this long or longer start on a 2 MiB boundary, as a plain
/// `mmap` of shared memory would (the kernel aligns those for transparent
/// huge pages; a `MAP_FIXED` mapping gets only the address it is given).
const HUGE: usize = 2 << 20;

impl ShadowMap {
    /// Map `len` bytes of `fd` (None: anonymous shared memory) at offset 0,
    /// shared and read-write, with a shadow below them.
    #[cfg(test)]
    pub fn new(fd: Option<libc::c_int>, len: usize) -> std::io::Result<ShadowMap> {
        Self::map(fd, len, false)
    }

    /// Map `len` bytes of `fd` (None: anonymous shared memory) at offset 0,
    /// shared, `PROT_READ` when `readonly`, with a shadow below them.
    pub fn map(fd: Option<libc::c_int>, len: usize, readonly: bool) -> std::io::Result<ShadowMap> {
        let slop = if len >= HUGE { HUGE } else { 0 };
        let total = SHADOW
            .checked_add(len)
            .and_then(|t| t.checked_add(slop))
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: a fresh private reservation; nothing else refers to it.
        let res = unsafe {
            libc::mmap(
                ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if res == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let res = res as usize;
        let a = slop.max(1);
        let start = (res + SHADOW + a - 1) / a * a;
        let base = start - SHADOW;
        // SAFETY: the slop below and above our range, inside our own
        // reservation (empty ranges are skipped).
        unsafe {
            if base > res {
                libc::munmap(res as *mut libc::c_void, base - res);
            }
            if res + total > start + len {
                libc::munmap((start + len) as *mut libc::c_void, res + total - start - len);
            }
        }
        let mut m = ShadowMap {
            base: base as *mut u8,
            len,
            watch: None,
            lost: Lost::new(),
        };
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_FIXED, fd),
            None => (libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_FIXED, -1),
        };
        let prot = if readonly {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        // SAFETY: replaces the top of our own reservation (MAP_FIXED
        // inside a range we own), never another mapping.
        let shared = unsafe { libc::mmap(start as *mut libc::c_void, len, prot, flags, fd, 0) };
        if shared == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()); // Drop unmaps it all
        }
        m.watch = sigbus::watch(start as *const u8, len, readonly, &m.lost);
        Ok(m)
    }

    /// The shared bytes.
    pub fn as_ptr(&self) -> *mut u8 {
        // SAFETY: within the reservation.
        unsafe { self.base.add(SHADOW) }
    }

    /// The mark set when a page of the shared bytes is lost: the flag of
    /// the handle, which its other mappings share (`sys::sigbus`).
    pub fn lost(&self) -> &Arc<Lost> {
        &self.lost
    }

    /// The length of the shared bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    #[allow(dead_code)] // len's companion (clippy::len_without_is_empty)
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The word at shared offset `off` (4-aligned, below `SHADOW` and the
    /// length).
    #[cfg(test)]
    pub fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= self.len.min(SHADOW));
        // SAFETY: in bounds and aligned (checked); shared memory is only
        // ever used through atomics.
        unsafe { &*(self.as_ptr().add(off) as *const AtomicU32) }
    }

    /// The page-aligned range around shared bytes `off..off + len`, clipped
    /// to the mapping.
    fn pages(&self, off: usize, len: usize) -> (*mut libc::c_void, usize) {
        let end = off.saturating_add(len).min(self.len);
        let from = off.min(end) / 4096 * 4096;
        // SAFETY: within the shared bytes (clipped above).
        (unsafe { self.as_ptr().add(from) } as *mut libc::c_void, end - from)
    }

    /// `msync(MS_SYNC)` of the shared bytes `off..off + len`.
    pub fn flush_range(&self, off: usize, len: usize) -> std::io::Result<()> {
        let (p, n) = self.pages(off, len);
        // SAFETY: a page-aligned range of our own shared mapping.
        if unsafe { libc::msync(p, n, libc::MS_SYNC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// `msync(MS_SYNC)` of all the shared bytes.
    pub fn flush(&self) -> std::io::Result<()> {
        self.flush_range(0, self.len)
    }

    /// `madvise(advice)` over the shared bytes `off..off + len`.
    pub fn advise_range(&self, advice: libc::c_int, off: usize, len: usize) -> std::io::Result<()> {
        let (p, n) = self.pages(off, len);
        // SAFETY: a page-aligned range of our own shared mapping; the
        // advice is one that keeps its contents (HUGEPAGE, POPULATE_WRITE).
        if unsafe { libc::madvise(p, n, advice) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for ShadowMap {
    fn drop(&mut self) {
        self.watch = None; // unregistered before unmapped
                           // SAFETY: our own reservation, shadow and shared bytes together.
        unsafe { libc::munmap(self.base as *mut libc::c_void, SHADOW + self.len) };
    }
}

/// Whether `len` more bytes of address space can be had now (`RLIMIT_AS`
/// and the kernel's overcommit rules), asked with a mapping made and
/// removed at once. A process with a keeper is multi-threaded to glibc,
/// whose `malloc`, failing in one arena, reserves another (64 MiB of
/// address space) to try again and keeps it: a large block that cannot be
/// had is refused here first, so that its failure costs nothing.
pub fn address_space_has_room(len: usize) -> bool {
    // SAFETY: a fresh private mapping, removed before anyone can see it.
    unsafe {
        let p = libc::mmap(
            ptr::null_mut(),
            len.max(1),
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(p, len.max(1));
    }
    true
}

/// Whether this process can take words: it has, or can start, a keeper;
/// else why not.
pub fn available() -> Result<(), NoKeeper> {
    // Acquire: as in keeper().
    if !KEEPER.load(Ordering::Acquire).is_null() {
        return Ok(());
    }
    start_keeper().map(|_| ())
}

#[cfg(test)]
mod tests;
