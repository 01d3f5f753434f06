//! The process-shared locking protocol and dead-process recovery.
//!
//! Everything that several processes write, other than the bit words, lives
//! in this file. The rules (DESIGN §4):
//!
//! * Queries take nothing and write nothing.
//! * An adder takes only the *stripe* of its item (one of `STRIPES` words,
//!   chosen by the item's hash, each on its own cache line). Adders of the same
//!   item meet on the same stripe, so among them at most one sees a zero bit
//!   and is told "new"; adders of different items almost never meet.
//! * A merger marks its own process slot `busy` instead (it touches every word).
//! * An exclusive operation (`clear`, `intersect`, `invert`, `freeze`) takes
//!   the `excl` word, makes `epoch` odd, then *drains*: waits until no stripe
//!   and no busy mark is held. Adders and mergers check `excl` after taking
//!   their stripe or mark; both sides use `SeqCst` for that store→load pair
//!   (Dekker), so at least one of them sees the other and backs off.
//!
//! Every lock word holds an owner *token*: the owner's slot index and that
//! slot's claim generation. A token whose slot has since been released or
//! re-claimed, or whose process is gone, a zombie, or a different process with
//! a recycled PID (the slot records the process start time), belongs to a dead
//! owner, and any waiter may clear it. Waiters for the exclusive word sleep on
//! the non-private futex (the words live in a `MAP_SHARED` mapping used by
//! several processes); stripe waiters, whose owners hold a stripe for about a
//! hundred nanoseconds, spin and then poll. Both re-check the owner's
//! liveness every `WAIT_SLICE`, which bounds the stall a `SIGKILL`ed owner
//! causes.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::format::SLOTS;

/// The bit a waiter sets in a lock word so the releaser knows to wake it.
pub const WAITERS: u32 = 1 << 31;
const IDX_BITS: u32 = 11;
const IDX_MASK: u32 = (1 << IDX_BITS) - 1;
const GEN_MASK: u32 = (1 << (31 - IDX_BITS)) - 1;

/// Set in a slot's claim word while its owner is still filling the slot in.
const CLAIM_PENDING: u64 = 1 << 63;

/// How long a waiter sleeps before it re-checks whether the lock owner lives.
/// A dead owner is detected after at most about this long (plus a `/proc`
/// read), far inside the 1 s the crash contract allows.
const WAIT_SLICE: Duration = Duration::from_millis(20);
/// How often a stripe waiter re-reads the stripe once it stops spinning.
const POLL: Duration = Duration::from_micros(50);

/// The header's control line: written only by exclusive operations and by
/// waiters announcing themselves.
#[repr(C, align(64))]
pub struct Control {
    pub flags: AtomicU32,
    pub epoch: AtomicU32,
    pub excl: AtomicU32,
    pub pending: AtomicU32,
}

/// One process slot: its own cache line, written only by its owner (and by a
/// process taking it over from a dead owner).
#[repr(C, align(64))]
pub struct Slot {
    /// `gen << 32 | pid`; pid 0 means free (the generation is kept).
    pub claim: AtomicU64,
    /// Start time of the owning process (clock ticks after boot, from
    /// `/proc/<pid>/stat`), to tell a recycled PID from the owner.
    pub start: AtomicU64,
    /// Operations performed through this slot, over all its owners.
    pub ops: AtomicU64,
    /// Owner token while a merge is in flight, else 0.
    pub busy: AtomicU32,
}

/// One add stripe, alone on its cache line (DESIGN C5).
#[repr(C, align(64))]
pub struct Stripe {
    pub word: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Control>() == 64);
const _: () = assert!(std::mem::size_of::<Slot>() == 64);
const _: () = assert!(std::mem::size_of::<Stripe>() == 64);
const _: () = assert!(SLOTS <= IDX_MASK);

/// Pending exclusive operation codes (the `pending` word).
pub const PENDING_NONE: u32 = 0;
pub const PENDING_CLEAR: u32 = 1;

// ---------------------------------------------------------------- tokens

/// The owner token for slot `idx` claimed at generation `gen`. Never 0.
pub fn token(idx: u32, gen: u32) -> u32 {
    debug_assert!(idx < SLOTS);
    (idx + 1) | ((gen & GEN_MASK) << IDX_BITS)
}

/// `(slot index, generation bits)` of a token, or None for a malformed one.
pub fn untoken(tok: u32) -> Option<(u32, u32)> {
    let tok = tok & !WAITERS;
    let idx = tok & IDX_MASK;
    if idx == 0 || idx > SLOTS {
        return None;
    }
    Some((idx - 1, tok >> IDX_BITS))
}

fn claim_gen(claim: u64) -> u32 {
    ((claim & !CLAIM_PENDING) >> 32) as u32
}
fn claim_pid(claim: u64) -> u32 {
    claim as u32
}

// ---------------------------------------------------------------- processes

/// What `/proc/<pid>/stat` says of a process: its state letter and start time.
pub fn parse_stat(stat: &str) -> Option<(char, u64)> {
    // The command name is in parentheses and may itself contain ") ", so
    // the fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state, starttime is the 19th field (field 22 overall).
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

fn read_stat(pid: u32) -> std::io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
}

/// This process's start time, or 0 when `/proc` cannot tell.
pub fn own_start_time() -> u64 {
    read_stat(std::process::id())
        .ok()
        .and_then(|s| parse_stat(&s))
        .map_or(0, |(_, t)| t)
}

/// Whether `pid` is a live process started at `start` (0: unknown, any start).
/// A zombie or dying process counts as dead: it will never release anything.
pub fn process_alive(pid: u32, start: u64) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    match read_stat(pid) {
        Ok(s) => match parse_stat(&s) {
            Some((state, t)) => !matches!(state, 'Z' | 'X' | 'x') && (start == 0 || t == start),
            None => true,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => {
            // No /proc: kill(pid, 0) tells existence (not zombies, not reuse).
            // SAFETY: signal 0 performs only the existence and permission check.
            let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
            !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
        }
    }
}

// ---------------------------------------------------------------- fork

static FORK_GEN: AtomicU32 = AtomicU32::new(1);
static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn on_fork_child() {
    // Relaxed: the child is single-threaded right after fork; handles read it
    // on their next operation in this same thread.
    FORK_GEN.fetch_add(1, Ordering::Relaxed);
}

/// The current fork generation; it changes in a child after every fork, so a
/// handle notices it was inherited without a `getpid` on the hot path.
#[inline]
pub fn fork_generation() -> u32 {
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe {
            libc::pthread_atfork(None, None, Some(on_fork_child));
        }
    });
    FORK_GEN.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------- futex

/// Sleep while `*word == val`, at most `timeout`. Spurious returns are fine:
/// every caller re-checks its condition.
pub fn futex_wait(word: &AtomicU32, val: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 in a shared mapping. No
    // FUTEX_PRIVATE_FLAG: waiters and wakers are different processes. The
    // errors (EAGAIN value changed, ETIMEDOUT, EINTR) all mean "re-check".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            val,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wake every process sleeping on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: as in futex_wait; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

// ---------------------------------------------------------------- the protocol

/// Why a lock-protocol call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncError {
    /// Every slot is held by a live process.
    SlotsFull,
}

/// The shared control structures of one mapping. Cheap to copy; valid while
/// the mapping is.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub ctl: &'a Control,
    pub slots: &'a [Slot],
    pub stripes: &'a [Stripe],
    pub bits: &'a [AtomicU64],
}

/// A slot this handle owns in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub idx: u32,
    pub token: u32,
}

impl<'a> Shared<'a> {
    /// Whether the owner named by `tok` can never release what it holds.
    pub fn owner_dead(&self, tok: u32) -> bool {
        let Some((idx, gen)) = untoken(tok) else {
            return true; // not a token we write: corruption, never released
        };
        let slot = &self.slots[idx as usize];
        // Acquire: pairs with the Release store that completed the claim, so
        // `start` below is the claimant's.
        let claim = slot.claim.load(Ordering::Acquire);
        if claim_pid(claim) == 0 || claim_gen(claim) & GEN_MASK != gen {
            return true; // released or taken over since the token was made
        }
        let start = if claim & CLAIM_PENDING != 0 {
            0
        } else {
            slot.start.load(Ordering::Relaxed)
        };
        !process_alive(claim_pid(claim), start)
    }

    /// Claim a free slot, or one whose owner is dead, for process `pid`.
    pub fn claim_slot(&self, pid: u32, start: u64) -> Result<Claim, SyncError> {
        let n = self.slots.len() as u32;
        let first = pid % n;
        // Two passes: free slots first (cheap), then dead owners (a /proc read
        // each), so a busy table does not cost every newcomer 1024 reads.
        for pass in 0..2 {
            for i in 0..n {
                let idx = (first + i) % n;
                let slot = &self.slots[idx as usize];
                let cur = slot.claim.load(Ordering::Acquire);
                let free = claim_pid(cur) == 0;
                if !free {
                    if pass == 0 {
                        continue;
                    }
                    let st = if cur & CLAIM_PENDING != 0 {
                        0
                    } else {
                        slot.start.load(Ordering::Relaxed)
                    };
                    if process_alive(claim_pid(cur), st) {
                        continue;
                    }
                }
                let gen = claim_gen(cur).wrapping_add(1) & GEN_MASK;
                let pending = CLAIM_PENDING | (gen as u64) << 32 | pid as u64;
                // AcqRel: Acquire pairs with the previous owner's Release
                // (its last ops store is visible before we add to it);
                // Release publishes the pending mark.
                if slot
                    .claim
                    .compare_exchange(cur, pending, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                slot.start.store(start, Ordering::Relaxed);
                // A dead owner may have died with a merge mark set.
                slot.busy.store(0, Ordering::Relaxed);
                // Release: pairs with the Acquire in owner_dead / claim_slot;
                // the start time is visible before the pending bit clears.
                slot.claim.store(pending & !CLAIM_PENDING, Ordering::Release);
                return Ok(Claim {
                    idx,
                    token: token(idx, gen),
                });
            }
        }
        Err(SyncError::SlotsFull)
    }

    /// Give a slot back (the owner holds nothing). Its ops count stays.
    pub fn release_slot(&self, c: Claim) {
        let slot = &self.slots[c.idx as usize];
        let cur = slot.claim.load(Ordering::Relaxed);
        if untoken(c.token).map(|(_, g)| g) == Some(claim_gen(cur) & GEN_MASK) {
            // Release: our last ops store happens-before the next claimant's
            // AcqRel claim.
            let _ = slot
                .claim
                .compare_exchange(cur, cur & 0xffff_ffff_0000_0000, Ordering::Release, Ordering::Relaxed);
        }
    }

    /// Add `n` to this slot's operation count (only its owner writes it).
    #[inline]
    pub fn count_ops(&self, c: Claim, n: u64) {
        let ops = &self.slots[c.idx as usize].ops;
        // Relaxed load+store, not an RMW: the owner is the only writer, and
        // readers (stats) may see a slightly stale sum.
        ops.store(ops.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Operations over all slots, past and present owners.
    pub fn total_ops(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |a, s| a.wrapping_add(s.ops.load(Ordering::Relaxed)))
    }

    /// Whether the filter is frozen.
    #[inline]
    pub fn frozen(&self) -> bool {
        // Acquire: pairs with freeze's Release; a frozen flag seen means the
        // final bits are seen too.
        self.ctl.flags.load(Ordering::Acquire) & crate::format::FLAG_FROZEN != 0
    }

    // ------------------------------------------------------------ adders

    /// Take stripe `s` for an add, having made sure no exclusive operation
    /// runs. Returns false (holding nothing) if the filter is frozen.
    #[inline]
    pub fn begin_add(&self, s: usize, c: Claim) -> bool {
        let stripe = &self.stripes[s].word;
        loop {
            // SeqCst: the Dekker pair with lock_exclusive (our stripe store
            // before its drain load; its excl store before our excl load).
            match stripe.compare_exchange(0, c.token, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => {}
                Err(held) => {
                    self.wait_word(stripe, held);
                    continue;
                }
            }
            let x = self.ctl.excl.load(Ordering::SeqCst);
            if x == 0 {
                if self.frozen() {
                    self.end_add(s);
                    return false;
                }
                return true;
            }
            self.end_add(s);
            self.wait_exclusive(x, c);
        }
    }

    /// Release stripe `s`: a plain store, no read-modify-write. Stripe
    /// waiters poll (`wait_word`) rather than sleep on the futex, since a
    /// stripe is held for about a hundred nanoseconds.
    #[inline]
    pub fn end_add(&self, s: usize) {
        // Release: our bit writes happen-before the next taker's Acquire
        // (the next adder of the same item, or an exclusive drain).
        self.stripes[s].word.store(0, Ordering::Release);
    }

    /// Mark this slot busy for a merge (all words, no stripe). False if frozen.
    pub fn begin_merge(&self, c: Claim) -> bool {
        let busy = &self.slots[c.idx as usize].busy;
        loop {
            // SeqCst: the same Dekker pair as begin_add.
            busy.store(c.token, Ordering::SeqCst);
            let x = self.ctl.excl.load(Ordering::SeqCst);
            if x == 0 {
                if self.frozen() {
                    self.end_merge(c);
                    return false;
                }
                return true;
            }
            busy.store(0, Ordering::Release);
            self.wake_drainer();
            self.wait_exclusive(x, c);
        }
    }

    pub fn end_merge(&self, c: Claim) {
        // Release: our ORs happen-before a drain that reads 0 here.
        self.slots[c.idx as usize].busy.store(0, Ordering::Release);
        self.wake_drainer();
    }

    fn wake_drainer(&self) {
        // A drainer waiting on a busy mark sleeps on the excl word (busy
        // marks are per-slot words nobody else sets WAITERS on).
        if self.ctl.excl.load(Ordering::Relaxed) != 0 {
            futex_wake(&self.ctl.excl);
        }
    }

    /// Wait until a stripe no longer holds `held`; clear it if its owner
    /// died. Polls: releasers store 0 without looking for waiters.
    #[cold]
    #[inline(never)]
    fn wait_word(&self, word: &AtomicU32, held: u32) {
        // A stripe is held for a few hundred nanoseconds: spin first, then
        // yield (the owner may be preempted), then poll with short sleeps,
        // checking the owner's liveness every WAIT_SLICE.
        for i in 0..200u32 {
            if i < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            if word.load(Ordering::Relaxed) != held {
                return;
            }
        }
        loop {
            if self.owner_dead(held) {
                // AcqRel: Acquire pairs with whatever the dead owner managed
                // to publish; Release hands the cleared word to the next taker.
                let _ = word.compare_exchange(held, 0, Ordering::AcqRel, Ordering::Relaxed);
                return;
            }
            let polls = (WAIT_SLICE.as_micros() / POLL.as_micros()) as u32;
            for _ in 0..polls {
                std::thread::sleep(POLL);
                if word.load(Ordering::Relaxed) != held {
                    return;
                }
            }
        }
    }

    /// Wait for the exclusive operation of `tok` to end; recover it if its
    /// owner died.
    #[cold]
    #[inline(never)]
    fn wait_exclusive(&self, tok: u32, me: Claim) {
        let excl = &self.ctl.excl;
        let mut cur = tok;
        loop {
            if cur == 0 {
                return;
            }
            if self.owner_dead(cur) {
                // Take the dead owner's lock and finish its work, so that
                // the epoch and any pending clear are left consistent.
                if let Some(g) = self.steal_exclusive(cur, me) {
                    drop(g);
                }
                return;
            }
            self.sleep_on_excl(cur);
            cur = excl.load(Ordering::Acquire);
        }
    }

    /// Mark the exclusive word (holding `cur`) as waited on, so its releaser
    /// wakes us, and sleep at most WAIT_SLICE. Returns at once if the word
    /// changed meanwhile; every caller re-reads it.
    fn sleep_on_excl(&self, cur: u32) {
        let excl = &self.ctl.excl;
        let want = cur | WAITERS;
        if cur & WAITERS == 0
            && excl
                .compare_exchange(cur, want, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        futex_wait(excl, want, WAIT_SLICE);
    }

    // ------------------------------------------------------------ exclusive

    /// Take the exclusive lock and drain every adder and merger.
    pub fn lock_exclusive(&self, me: Claim) -> Exclusive<'a> {
        let excl = &self.ctl.excl;
        loop {
            // SeqCst: the Dekker pair with begin_add / begin_merge.
            match excl.compare_exchange(0, me.token, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return self.enter_exclusive(me),
                Err(cur) => {
                    if self.owner_dead(cur) {
                        if let Some(g) = self.steal_exclusive(cur, me) {
                            return g;
                        }
                        continue;
                    }
                    self.sleep_on_excl(cur);
                }
            }
        }
    }

    /// Replace a dead owner's exclusive lock with ours.
    fn steal_exclusive(&self, dead: u32, me: Claim) -> Option<Exclusive<'a>> {
        // SeqCst: we become the exclusive owner; same pairing as the CAS in
        // lock_exclusive.
        self.ctl
            .excl
            .compare_exchange(dead, me.token, Ordering::SeqCst, Ordering::Relaxed)
            .ok()
            .map(|_| self.enter_exclusive(me))
    }

    fn enter_exclusive(&self, me: Claim) -> Exclusive<'a> {
        // A dead predecessor may have left the epoch odd: keep it odd then.
        let e = self.ctl.epoch.load(Ordering::Relaxed);
        if e & 1 == 0 {
            self.ctl.epoch.store(e.wrapping_add(1), Ordering::Relaxed);
        }
        // Release fence: the odd epoch is visible before any bit we change
        // (seqlock writer; pairs with the Acquire fence in the add fast path).
        fence(Ordering::Release);
        self.drain(me);
        if self.ctl.pending.load(Ordering::Relaxed) == PENDING_CLEAR {
            // A clear whose owner died part-way: finish it (idempotent), so
            // the filter is in a state some linear history explains.
            for w in self.bits {
                w.store(0, Ordering::Relaxed);
            }
        }
        Exclusive { sh: *self }
    }

    fn drain(&self, me: Claim) {
        for s in self.stripes {
            // SeqCst: the Dekker pair (see begin_add).
            let mut v = s.word.load(Ordering::SeqCst);
            while v != 0 {
                self.wait_word(&s.word, v);
                v = s.word.load(Ordering::SeqCst);
            }
        }
        for (i, slot) in self.slots.iter().enumerate() {
            if i as u32 == me.idx {
                continue;
            }
            loop {
                let v = slot.busy.load(Ordering::SeqCst);
                if v == 0 {
                    break;
                }
                if self.owner_dead(v) {
                    let _ = slot.busy.compare_exchange(v, 0, Ordering::AcqRel, Ordering::Relaxed);
                    break;
                }
                // Mergers wake the excl word when they finish.
                futex_wait(&self.ctl.excl, self.ctl.excl.load(Ordering::Relaxed), WAIT_SLICE);
            }
        }
    }
}

/// Held while an exclusive operation runs; releases on drop (so an early
/// return never leaves the lock held).
pub struct Exclusive<'a> {
    sh: Shared<'a>,
}

impl Exclusive<'_> {
    /// Record that a clear is under way: a process that finds this lock's
    /// owner dead finishes it.
    pub fn set_pending(&self, op: u32) {
        self.sh.ctl.pending.store(op, Ordering::Relaxed);
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let ctl = self.sh.ctl;
        ctl.pending.store(PENDING_NONE, Ordering::Relaxed);
        let e = ctl.epoch.load(Ordering::Relaxed);
        // Release: every bit we changed is visible before the even epoch
        // (seqlock writer; pairs with the add fast path's Acquire load).
        ctl.epoch.store(e.wrapping_add(e & 1), Ordering::Release);
        // Release: pairs with the SeqCst/Acquire loads of excl by adders.
        if ctl.excl.swap(0, Ordering::Release) & WAITERS != 0 {
            futex_wake(&ctl.excl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_are_never_zero() {
        for idx in [0, 1, 511, SLOTS - 1] {
            for gen in [0, 1, 12345, GEN_MASK, GEN_MASK + 1, u32::MAX] {
                let t = token(idx, gen);
                assert_ne!(t, 0);
                assert_eq!(t & WAITERS, 0);
                assert_eq!(untoken(t), Some((idx, gen & GEN_MASK)));
                assert_eq!(untoken(t | WAITERS), Some((idx, gen & GEN_MASK)));
            }
        }
        assert_eq!(untoken(0), None);
        assert_eq!(untoken(SLOTS + 1), None);
        assert_eq!(untoken(IDX_MASK), None);
    }

    #[test]
    fn parses_proc_stat() {
        let s = "1234 (perl) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 1 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parse_stat(s), Some(('S', 987654)));
        let s = "77 (a) b) c) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0";
        assert_eq!(parse_stat(s), Some(('Z', 42)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) R 1 2"), None);
        let own = read_stat(std::process::id()).unwrap();
        let (state, start) = parse_stat(&own).unwrap();
        assert!(matches!(state, 'R' | 'S'), "{state}");
        assert_eq!(start, own_start_time());
    }

    #[test]
    fn liveness() {
        let me = std::process::id();
        assert!(process_alive(me, 0));
        assert!(process_alive(me, own_start_time()));
        assert!(
            !process_alive(me, own_start_time() + 1),
            "a recycled PID is not the owner"
        );
        assert!(!process_alive(0, 0));
        assert!(!process_alive(u32::MAX, 0));
        // A reaped child is gone; an unreaped (zombie) one is dead too.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!process_alive(pid, 0), "zombie counts as dead");
        child.wait().unwrap();
        assert!(!process_alive(pid, 0));
    }
}
