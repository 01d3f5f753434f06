//! The process-shared locking protocol and dead-process recovery.
//!
//! Everything that several processes write, other than the bit words, is
//! laid out in `shm::slots` and written by this module (`claims`: which slot
//! a thread writes under). The rules (doc/DESIGN.md, §4):
//!
//! * Queries take nothing and write nothing.
//! * An adder takes only the *stripe* of its item (one of 64 to 4096 words,
//!   chosen by the item's hash, each on its own cache line). Adders of the same
//!   item meet on the same stripe, so among them at most one sees a zero bit
//!   and is told "new"; adders of different items almost never meet.
//! * A merge or an intersect copies the other filter into the *journal*
//!   (storage past the filter's bytes, see `lock_journal`), taking turns with
//!   other journal users through the `journal` word, then applies it as an
//!   exclusive operation that whoever finds its owner dead finishes. (Where
//!   no journal can exist, a memfd sealed against growing, a merger marks its
//!   own process slot `busy` instead and ORs in place.)
//! * An adder of a blocked filter (`begin_lockfree_add`) marks its slot
//!   `busy` too: its one atomic update of the item's word decides "new"
//!   without any stripe: no adder ever waits for another, and only exclusive
//!   operations wait for the mark. In a process registered for
//!   `membarrier(2)` (`light_fences`) the mark is a plain store, and the
//!   exclusive side supplies the fence (`fence_light_adders`).
//! * An exclusive operation (`clear`, `intersect`, `invert`, `freeze`, a
//!   merge's second half) takes the `excl` word, makes `epoch` odd, then
//!   *drains*: waits until no stripe and no busy mark is held. Adders and
//!   mergers check `excl` after taking their stripe or mark; both sides use
//!   `SeqCst` for that store→load pair (Dekker), so at least one of them
//!   sees the other and backs off.
//!
//! Every lock word holds an owner *token*: the owner's slot index and that
//! slot's claim generation. Liveness comes from the kernel, never from
//! looking at other processes: each slot carries a robust futex word
//! (`sys::keeper`, doc/DESIGN.md, C8) that the owning process's keeper
//! holds for as long as a thread of it owns the slot. When the process
//! dies holding it (killed, exited, in whatever PID namespace, whether or
//! not `/proc` shows it) the kernel walks the keeper's robust list, which
//! lives in the process's private memory, and marks the word "owner died".
//! A thread that ends gives its slots back (`claims`). A token is dead
//! when its slot's generation moved on (released or taken over), or when
//! the slot's word is not held and taking it succeeds or reports the owner
//! dead. A stopped owner (SIGSTOP, a debugger, a frozen cgroup) still
//! holds its word: it is alive, and whoever needs what it holds waits.
//! No value read from a word is ever followed: a TID is only compared.
//!
//! Waiters for the exclusive word sleep on the non-private futex (the words
//! live in a `MAP_SHARED` mapping used by several processes); stripe
//! waiters, whose owners hold a stripe for about a hundred nanoseconds, spin
//! and then poll. Both re-check the owner's liveness every `WAIT_SLICE`,
//! which bounds the stall a `SIGKILL`ed owner causes. No wait lasts longer
//! than `wait_limit` for one holder: a live holder that keeps a word that
//! long is stopped, or the word was forged (a process that can write the
//! file can name a thread that exists), and the waiter fails naming the
//! word and its holder (`Shared::stuck`), holding nothing. Two forgeries
//! are seen at once and taken over as a dead owner's words: a slot word
//! naming a TID no thread can have (`keeper::state`), and the waiter's own
//! token on a word it waits for (`Shared::gone`).
//!
//! The last slot is the *overflow* slot: a process that finds every other
//! slot taken claims it and keeps it leased (`claim_overflow`): its keeper
//! gives it back between two calls once another claimant waits, so any
//! number of processes can write; those past the table serialize with one
//! another, and a claimant pays the keeper's round trip once per claim, not
//! per call.

use std::sync::atomic::{compiler_fence, fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub mod claims;
mod journal;
mod waits;

pub use waits::wait_limit;
use waits::{stuck, Waited};

pub use journal::StageSet;

use crate::error::Error;
use crate::shm::format::SLOTS;
use crate::shm::journal::JournalStore;
pub use crate::shm::slots::{Control, Slot, Stripe};
use crate::sys::futex::{futex_wait, futex_wake};
use crate::sys::keeper::{self, State, Try};
use crate::sys::membarrier;

/// The bit a waiter sets in a lock word so the releaser knows to wake it.
pub const WAITERS: u32 = 1 << 31;
const IDX_BITS: u32 = 11;
const IDX_MASK: u32 = (1 << IDX_BITS) - 1;
const GEN_MASK: u32 = (1 << (31 - IDX_BITS)) - 1;

/// How long a waiter sleeps before it re-checks whether the lock owner lives.
/// A dead owner is detected after at most about this long (plus a
/// `trylock`), far inside the 1 s the crash contract allows.
const WAIT_SLICE: Duration = Duration::from_millis(20);
/// How often a stripe waiter re-reads the stripe once it stops spinning.
const POLL: Duration = Duration::from_micros(50);

/// `Slot::fence` of an owner whose lock-free adds use light marks.
const LIGHT: u32 = 1;

const _: () = assert!(SLOTS <= IDX_MASK);

/// Pending exclusive operation codes (the `pending` word): the operations
/// that map each word's value before to its value after, so that whoever
/// finds one interrupted can finish it.
pub const PENDING_NONE: u32 = 0;
pub const PENDING_CLEAR: u32 = 1;
pub const PENDING_INVERT: u32 = 2;
/// OR, then AND, of the journal's words (a copy of the operand, see
/// `lock_journal`) into the bits. Applying either twice changes nothing, so
/// these need no scratch: a recoverer redoes the chunk under way.
pub const PENDING_MERGE: u32 = 3;
pub const PENDING_INTERSECT: u32 = 4;

/// Whether `op` reads the journal.
fn journaled(op: u32) -> bool {
    op == PENDING_MERGE || op == PENDING_INTERSECT
}

/// Words per chunk of a resumable operation: the size of the scratch area.
pub const CHUNK: usize = crate::shm::format::SCRATCH_WORDS;

/// A word after operation `op`.
#[inline(always)]
fn apply(op: u32, w: u64) -> u64 {
    match op {
        PENDING_INVERT => !w,
        _ => 0,
    }
}

/// A word after journaled operation `op`, `j` the journal's word.
#[inline(always)]
fn apply_journal(op: u32, w: u64, j: u64) -> u64 {
    if op == PENDING_MERGE {
        w | j
    } else {
        w & j
    }
}

#[cfg(feature = "test-hooks")]
static RESUMED_CHUNKS: AtomicU64 = AtomicU64::new(0);

/// Chunks this process has redone while finishing operations whose owners
/// died (`resume`). For the crash tests: recovery does only what was left.
#[cfg(feature = "test-hooks")]
pub fn resumed_chunks() -> u64 {
    // Relaxed: a statistic read by the process that did the work.
    RESUMED_CHUNKS.load(Ordering::Relaxed)
}

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

/// The slot that processes finding the table full share, one call at a time.
pub(crate) const OVERFLOW: u32 = SLOTS - 1;

// ---------------------------------------------------------------- slot words

impl Slot {
    /// Whether the slot holds only what this library writes in a slot: its
    /// reserved words zero and its fence word 0 or `LIGHT` (checked when a
    /// file is attached: a slot table of junk is refused, not waited on).
    pub fn well_formed(&self) -> bool {
        // Relaxed: a plausibility check of values, not of their order.
        self.fence.load(Ordering::Relaxed) <= LIGHT && self.reserved.iter().all(|w| w.load(Ordering::Relaxed) == 0)
    }

    /// Try to take the slot's word without waiting, under `key`
    /// (`keeper::new_key`), which gives it back.
    pub fn try_own(&self, key: u64) -> Try {
        // SAFETY: every `Slot` of a filter lies in a `ShadowMap`'s slot
        // table, below SHADOW (shm::slots); the mapping outlives the claim
        // (`claims` keeps it while the slot is held; `owner_dead` gives
        // the word back before it returns).
        unsafe { keeper::try_lock(&self.owner, key) }
    }

    /// Take the slot's word, waiting for its holder (the overflow slot),
    /// at most `wait_limit` for one holder (`Held` then).
    pub fn own_blocking(&self, key: u64) -> Try {
        // SAFETY: as in try_own; this thread does not hold it (a thread
        // holds at most one claim of a filter, `claims`).
        unsafe { keeper::lock(&self.owner, key, wait_limit()) }
    }

    /// Start a new claim of a slot whose word we hold: every older token
    /// is dead from here on. Returns the new generation.
    fn new_generation(&self) -> u32 {
        let gen = self.gen.load(Ordering::Relaxed).wrapping_add(1) & GEN_MASK;
        // A dead owner may have died with a merge mark set, and a light
        // fence; the claimant sets its own (claim_slot).
        self.busy.store(0, Ordering::Relaxed);
        self.fence.store(0, Ordering::Relaxed);
        // Release: pairs with the Acquire in owner_dead; with the word's
        // own release on unlock, a later holder sees our ops writes too.
        self.gen.store(gen, Ordering::Release);
        gen
    }

    /// Give back the word taken under `key` (a word this process does not
    /// hold under that key is left as it is).
    fn disown(&self, key: u64) {
        // SAFETY: as in try_own.
        unsafe { keeper::unlock(&self.owner, key) };
    }

    /// Forget taken slot `t`, whose word its keeper gave to a waiter (a
    /// revoked lease): the generation is no longer ours to change, since
    /// the word may be another claimant's by now; only the keeper's entry
    /// goes, if it is still there under the take's key.
    pub fn forget(&self, t: Taken) {
        self.disown(t.key);
    }

    /// Give the slot back after taking it as `t` (the claimant holds
    /// nothing): every token of the claim is dead from here on. Its ops
    /// count stays. Only the thread that claimed it may call this.
    pub fn release(&self, t: Taken) {
        if untoken(t.token).map(|(_, g)| g) == Some(self.gen.load(Ordering::Relaxed)) {
            self.new_generation();
        }
        // Always: a claim whose word was rewritten and taken over since (a
        // moved generation) still has its entry on the keeper's list, which
        // must come off before the mapping goes.
        self.disown(t.key);
    }
}

/// Mark a lock word (holding `cur`) as waited on, so its releaser wakes
/// us, and sleep at most WAIT_SLICE. Returns at once if the word changed
/// meanwhile; every caller re-reads it.
fn sleep_on(word: &AtomicU32, cur: u32) {
    let want = cur | WAITERS;
    // Relaxed: only announces a sleeper; the caller's re-read (Acquire or
    // a CAS) is what orders anything.
    if cur & WAITERS == 0
        && word
            .compare_exchange(cur, want, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    futex_wait(word, want, WAIT_SLICE);
}

// ---------------------------------------------------------------- the protocol

/// Why a lock-protocol call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncError {
    /// Every slot is held by a live process.
    SlotsFull,
    /// A live process adds with light marks and this one cannot fence them.
    NoFence,
    /// This process takes no more words: it holds `keeper`'s limit, or the
    /// kernel refused it a robust list.
    Refused,
    /// A wait reached `wait_limit` (the error says for what); nothing held.
    Stuck(Error),
}

/// The shared control structures of one mapping. Cheap to copy; valid while
/// the mapping is.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub ctl: &'a Control,
    pub slots: &'a [Slot],
    pub stripes: &'a [Stripe],
    pub bits: &'a [AtomicU64],
    /// Where a resumable operation keeps the chunk it is changing.
    pub scratch: &'a [AtomicU64],
    /// Where a merge or an intersect keeps its copy of the operand (None:
    /// this mapping has none; a pending one is then dropped, see `resume`).
    pub journal: Option<&'a dyn JournalStore>,
    /// A grown filter's fill words, one per stage (empty for every other
    /// filter): a clear that finishes zeroes them and leaves stage 0 alone
    /// published (`run_from`).
    pub fills: &'a [AtomicU64],
    /// A grown filter's stages, which a merge or an intersect changes
    /// together (`journal`); None for every other filter.
    pub stages: Option<&'a dyn StageSet>,
}

/// A slot this handle owns in this process: what every call under it
/// needs, in one register. The key its word was taken under is in
/// `Taken`, which the thread's table keeps (`claims`): it is read only
/// when the slot is given back, not copied by every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub idx: u32,
    pub token: u32,
}

/// A slot as taken: the claim, and the key its word was taken under
/// (`keeper::new_key`), which gives it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    pub idx: u32,
    pub token: u32,
    pub key: u64,
}

impl Taken {
    /// What calls under the slot need.
    #[inline(always)]
    pub fn claim(&self) -> Claim {
        Claim {
            idx: self.idx,
            token: self.token,
        }
    }
}

/// A slot this thread owns, with the control line: all that a lock-free
/// add touches besides the item's word (`Filter::try_add_lockfree` takes
/// it without the rest of `Shared`).
pub struct Owned<'a> {
    pub ctl: &'a Control,
    pub slot: &'a Slot,
    pub token: u32,
}

impl Owned<'_> {
    /// Whether the owner marks the slot with plain stores (`Slot::fence`).
    #[inline(always)]
    pub fn light(&self) -> bool {
        // Relaxed: our own slot's word, which only we set while we own it.
        self.slot.fence.load(Ordering::Relaxed) == LIGHT
    }

    /// The light side of `begin_lockfree_add`'s handshake: store the mark,
    /// then look at `excl`. True when no exclusive operation is under way
    /// (and none will run until `unmark`); the mark is set either way.
    #[inline(always)]
    fn mark_light(&self) -> bool {
        // Relaxed, with only a compiler fence between the store and the
        // load: the other half of the asymmetric pair is the exclusive
        // side's membarrier (fence_light_adders), which orders them on this
        // CPU if they race its `excl` store. Acquire on the load: the
        // word's update that follows stays after it.
        self.slot.busy.store(self.token, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        self.ctl.excl.load(Ordering::Acquire) == 0
    }

    /// Mark the slot for a lock-free add, light or not (as
    /// `begin_lockfree_add`), without waiting: true when no exclusive
    /// operation runs and the filter is not frozen. The mark is set either
    /// way; `unmark` clears it.
    #[inline(always)]
    pub fn mark(&self) -> bool {
        let clear = if self.light() {
            self.mark_light()
        } else {
            // SeqCst: the Dekker pair with lock_exclusive / drain (as
            // begin_merge) and with a step's drain_marks.
            self.slot.busy.store(self.token, Ordering::SeqCst);
            self.ctl.excl.load(Ordering::SeqCst) == 0
        };
        clear && !self.ctl.frozen()
    }

    /// Clear the mark: our updates happen-before a drain that reads it 0.
    #[inline(always)]
    pub fn unmark(&self) {
        // Release: pairs with the drain's Acquire load of the mark.
        self.slot.busy.store(0, Ordering::Release);
        wake_drainer(self.ctl);
    }

    /// A lock-free add of a light slot's owner when nothing stands in its
    /// way: mark, count the operation, `set`, unmark, with
    /// `begin_lockfree_add`'s handshake.
    /// None (nothing held, nothing set) when an exclusive operation is
    /// under way or the filter is frozen: `begin_lockfree_add` waits or
    /// answers for those.
    #[inline(always)]
    pub fn lockfree_add_light(&self, set: impl FnOnce() -> bool) -> Option<bool> {
        debug_assert!(self.light());
        if !self.mark_light() || self.ctl.frozen() {
            self.unmark();
            return None;
        }
        // Counted before the update: after its locked instruction every
        // load waits for it.
        self.count_ops(1);
        let new = set();
        self.unmark();
        Some(new)
    }

    /// Add `n` to the slot's operation count (only its owner writes it).
    #[inline(always)]
    pub fn count_ops(&self, n: u64) {
        let ops = &self.slot.ops;
        // Relaxed load+store, not an RMW: the owner is the only writer, and
        // readers (stats) may see a slightly stale sum.
        ops.store(ops.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

impl Control {
    /// Whether the filter is frozen.
    #[inline(always)]
    pub fn frozen(&self) -> bool {
        // Acquire: pairs with freeze's Release; a frozen flag seen means the
        // final bits are seen too.
        self.flags.load(Ordering::Acquire) & crate::shm::format::FLAG_FROZEN != 0
    }
}

/// Wake an exclusive operation's drain if one may sleep: a drainer
/// waiting on a busy mark sleeps on the excl word (busy marks are per-slot
/// words nobody else sets WAITERS on).
#[inline(always)]
fn wake_drainer(ctl: &Control) {
    if ctl.excl.load(Ordering::Relaxed) != 0 {
        futex_wake(&ctl.excl);
    }
}

impl<'a> Shared<'a> {
    /// Whether the owner named by `tok` can never release what it holds.
    pub fn owner_dead(&self, tok: u32) -> bool {
        let Some((idx, gen)) = untoken(tok) else {
            return true; // not a token we write: corruption, never released
        };
        let slot = &self.slots[idx as usize];
        // Acquire: pairs with the Release store of a new generation.
        if slot.gen.load(Ordering::Acquire) != gen {
            return true; // given back or taken over since the token was made
        }
        // Held: its holder is alive (the kernel marks a dead holder's word)
        // or is this process; either way no round trip to the keeper. A
        // value is only classified, never followed.
        // Relaxed: the word is only compared; the generation above ordered.
        if let State::Held(_) = keeper::state(slot.owner.load(Ordering::Relaxed)) {
            return false;
        }
        let key = keeper::new_key();
        match slot.try_own(key) {
            Try::Held => false,
            // This process takes no words: the word said free or died.
            Try::Refused => true,
            Try::Free | Try::OwnerDied => {
                // We hold the word, so nobody owns the slot: a token of the
                // current generation has a dead owner (an owner that gives
                // the slot back changes the generation first). Retire the
                // generation for everyone, then let the slot go.
                if slot.gen.load(Ordering::Relaxed) == gen {
                    slot.new_generation();
                }
                slot.disown(key);
                true
            }
        }
    }

    /// Claim a free slot, or one whose owner died, for this thread; the
    /// overflow slot is not among them. `hint` spreads processes over the
    /// table. `light`: this claim's lock-free adds use light marks (only
    /// where `light_fences()` is true).
    pub fn claim_slot(&self, hint: u32, light: bool) -> Result<Taken, SyncError> {
        let n = OVERFLOW;
        let key = keeper::new_key();
        for i in 0..n {
            let idx = (hint.wrapping_add(i)) % n;
            let slot = &self.slots[idx as usize];
            // A held word is skipped without a round trip to the keeper.
            // Relaxed: only a hint; try_own decides.
            if let State::Held(_) = keeper::state(slot.owner.load(Ordering::Relaxed)) {
                continue;
            }
            match slot.try_own(key) {
                Try::Held => continue,
                Try::Refused => return Err(SyncError::Refused),
                Try::Free | Try::OwnerDied => {
                    let gen = slot.new_generation();
                    if light {
                        // SeqCst store and fence: the Dekker pair with
                        // fence_light_adders. Before our first light mark,
                        // either an exclusive operation that cannot fence
                        // sees LIGHT here (and refuses to run), or our adds
                        // see its `excl` (and wait).
                        slot.fence.store(LIGHT, Ordering::SeqCst);
                        fence(Ordering::SeqCst);
                    }
                    return Ok(Taken {
                        idx,
                        token: token(idx, gen),
                        key,
                    });
                }
            }
        }
        Err(SyncError::SlotsFull)
    }

    /// Claim the overflow slot, waiting while another process (or thread)
    /// has it, and lease it (`keeper::Lease`): its keeper gives it back
    /// between two calls of the claimant once another waits for it, so a
    /// claimant takes the word once, not once per call, and an idle one
    /// shuts nobody out. Every call under the claim runs between
    /// `Lease::enter` and `Lease::leave`; a claim whose lease was revoked
    /// is given back (`release_slot`) and claimed anew.
    pub fn claim_overflow(&self) -> Result<(Taken, std::sync::Arc<keeper::Lease>), SyncError> {
        let slot = &self.slots[OVERFLOW as usize];
        let key = keeper::new_key();
        match slot.own_blocking(key) {
            // Shared by many processes: never light.
            Try::Free | Try::OwnerDied => {
                let c = Taken {
                    idx: OVERFLOW,
                    token: token(OVERFLOW, slot.new_generation()),
                    key,
                };
                // SAFETY: as in Slot::try_own; the claim is given back
                // under `key` (release_slot) before the mapping goes.
                Ok((c, unsafe { keeper::lease(&slot.owner, key) }))
            }
            Try::Refused => Err(SyncError::Refused),
            // Held past wait_limit by one holder.
            Try::Held => Err(SyncError::Stuck(stuck(format!(
                "a slot: every one is held, the last, shared one by {}",
                self.holder(OVERFLOW)
            )))),
        }
    }

    /// Give a slot back (the owner holds nothing). Its ops count stays.
    /// Only the thread that claimed it may call this.
    pub fn release_slot(&self, t: Taken) {
        self.slots[t.idx as usize].release(t);
    }

    /// Add `n` to this slot's operation count (only its owner writes it).
    #[inline]
    pub fn count_ops(&self, c: Claim, n: u64) {
        self.owned(c).count_ops(n);
    }

    /// Slot `c` with the control line.
    #[inline(always)]
    fn owned(&self, c: Claim) -> Owned<'_> {
        Owned {
            ctl: self.ctl,
            slot: &self.slots[c.idx as usize],
            token: c.token,
        }
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
        self.ctl.frozen()
    }

    // ------------------------------------------------------------ adders

    /// Take stripe `s` for an add, having made sure no exclusive operation
    /// runs. Returns false (holding nothing) if the filter is frozen; an
    /// error (holding nothing) when a wait reached `wait_limit`.
    #[inline]
    pub fn begin_add(&self, s: usize, c: Claim) -> Result<bool, Error> {
        let stripe = &self.stripes[s].word;
        // SeqCst, both: the Dekker pair with lock_exclusive, as below.
        if stripe
            .compare_exchange(0, c.token, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            if self.ctl.excl.load(Ordering::SeqCst) == 0 && !self.frozen() {
                return Ok(true);
            }
            self.end_add(s);
        }
        self.begin_add_contended(s, c)
    }

    /// `begin_add` when the stripe is held, an exclusive operation runs
    /// or the filter is frozen: the waits, out of the adds' common path.
    #[cold]
    #[inline(never)]
    fn begin_add_contended(&self, s: usize, c: Claim) -> Result<bool, Error> {
        let stripe = &self.stripes[s].word;
        loop {
            // SeqCst: the Dekker pair with lock_exclusive (our stripe store
            // before its drain load; its excl store before our excl load).
            match stripe.compare_exchange(0, c.token, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => {}
                Err(held) => {
                    self.wait_word(stripe, held, c, s)?;
                    continue;
                }
            }
            if let Some(go) = self.admitted(c, || self.end_add(s))? {
                return Ok(go);
            }
        }
    }

    /// The end of `begin_add` and `begin_merge`, once the caller has taken
    /// its stripe or mark (a SeqCst store): `Some(true)` to go on,
    /// `Some(false)` when the filter is frozen and `None` when an exclusive
    /// operation runs (waited for: take it again), both after `release`
    /// gave the stripe or mark back; an error (after `release`) when the
    /// wait reached `wait_limit`.
    #[inline(always)]
    fn admitted(&self, c: Claim, release: impl Fn()) -> Result<Option<bool>, Error> {
        // SeqCst: the second half of the Dekker pair with lock_exclusive
        // (our stripe or mark store before this load; its excl store
        // before its drain's load).
        let x = self.ctl.excl.load(Ordering::SeqCst);
        if x == 0 {
            if self.frozen() {
                release();
                return Ok(Some(false));
            }
            return Ok(Some(true));
        }
        release();
        self.wait_exclusive(x, c)?;
        Ok(None)
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

    /// Mark this slot busy for a merge (all words, no stripe). False if
    /// frozen; an error (unmarked) when a wait reached `wait_limit`.
    pub fn begin_merge(&self, c: Claim) -> Result<bool, Error> {
        let busy = &self.slots[c.idx as usize].busy;
        loop {
            // SeqCst: the same Dekker pair as begin_add.
            busy.store(c.token, Ordering::SeqCst);
            if let Some(go) = self.admitted(c, || self.end_merge(c))? {
                return Ok(go);
            }
        }
    }

    /// Mark this slot for a lock-free add (a blocked layout's one atomic
    /// update), having made sure no exclusive operation runs. The mark is
    /// the merge's `busy` mark and the handshake a Dekker pair: we store
    /// the mark, then load `excl`; `lock_exclusive` stores `excl`, then
    /// `drain` loads every mark. Either the exclusive side sees our mark
    /// and waits for it, or we see its `excl` and step back. So an
    /// exclusive operation never runs while an add's update is in flight,
    /// and no add waits for any other add. False (nothing held) if frozen.
    ///
    /// The store→load order each side needs is a full fence. The owner of
    /// a light slot (`Slot::fence`, set at claim) leaves its side's fence
    /// to the exclusive operation, which runs one on every CPU with
    /// `membarrier(2)` between its `excl` store and its drain
    /// (`fence_light_adders`): the mark is a plain store, and the add's
    /// only locked instruction is its update of the item's word. Adds are
    /// millions a second, exclusive operations rare. An error (unmarked)
    /// when a wait reached `wait_limit`.
    #[inline]
    pub fn begin_lockfree_add(&self, c: Claim) -> Result<bool, Error> {
        if self.owned(c).mark() {
            return Ok(true);
        }
        self.lockfree_add_contended(c)
    }

    #[cold]
    #[inline(never)]
    fn lockfree_add_contended(&self, c: Claim) -> Result<bool, Error> {
        self.end_merge(c);
        self.begin_merge(c)
    }

    /// End a lock-free add: our update happens-before a drain that reads the
    /// cleared mark.
    #[inline(always)]
    pub fn end_lockfree_add(&self, c: Claim) {
        self.end_merge(c);
    }

    /// Begin an add of one item: under its stripe (`begin_add`), or, for
    /// a layout without stripes (None), lock-free (`begin_lockfree_add`).
    #[inline(always)]
    pub fn begin_item_add(&self, stripe: Option<usize>, c: Claim) -> Result<bool, Error> {
        match stripe {
            Some(s) => self.begin_add(s, c),
            None => self.begin_lockfree_add(c),
        }
    }

    /// End what `begin_item_add` began.
    #[inline(always)]
    pub fn end_item_add(&self, stripe: Option<usize>, c: Claim) {
        match stripe {
            Some(s) => self.end_add(s),
            None => self.end_lockfree_add(c),
        }
    }

    #[inline(always)]
    pub fn end_merge(&self, c: Claim) {
        self.owned(c).unmark();
    }

    /// Wait until every stripe held when we look has been released once
    /// (or its owner found dead): a windowed filter's cleaner, after it read
    /// the view (`window` module docs, the drain). The caller holds no
    /// stripe. False when a live owner (a stopped process) still holds one
    /// after `limit`: the clear is then left to a later writer, so that no
    /// adder waits for a stopped one.
    pub fn drain_stripes(&self, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        self.stripes.iter().all(|s| {
            // SeqCst: the Dekker pair with begin_add's stripe CAS (an adder
            // takes its stripe, then reads the view; the cleaner reads the
            // view, then the stripes).
            let held = s.word.load(Ordering::SeqCst);
            held == 0 || self.wait_changed(&s.word, held, start, limit)
        })
    }

    /// Wait until every lock-free add in flight when we look has ended (or
    /// its owner is dead): a windowed filter's step, after it closed the
    /// filter to lock-free adds (`window` module docs). The caller holds
    /// no mark. The marks are `begin_lockfree_add`'s: light ones are
    /// fenced first (`fence_light_adders`). False when that cannot be done
    /// (another live process adds with light marks and this one cannot
    /// fence them) or a live owner (a stopped process) still holds a mark
    /// after `limit`: the step is then left to a later writer.
    pub fn drain_marks(&self, me: Claim, limit: Duration) -> bool {
        if !self.fence_light_adders(me) {
            return false;
        }
        let start = std::time::Instant::now();
        self.slots.iter().enumerate().all(|(i, slot)| {
            // SeqCst: the Dekker pair with an adder's mark, then its load of
            // the `open` word (for a light mark, with the membarrier above).
            let held = slot.busy.load(Ordering::SeqCst);
            i as u32 == me.idx || held == 0 || self.wait_changed(&slot.busy, held, start, limit)
        })
    }

    // ------------------------------------------------------------ exclusive

    /// Take the exclusive lock and drain every adder and merger.
    /// `SyncError::NoFence` (the lock given back, after finishing what a
    /// dead owner left) when a live process adds with light marks and this
    /// one cannot fence them (`fence_light_adders`); `SyncError::Stuck`
    /// (nothing held) when a wait reached `wait_limit`.
    pub fn lock_exclusive(&self, me: Claim) -> Result<Exclusive<'a>, SyncError> {
        let g = self.take_exclusive(me).map_err(SyncError::Stuck)?;
        if g.fenced {
            Ok(g)
        } else {
            Err(SyncError::NoFence)
        }
    }

    /// Take the exclusive lock, finish what a dead owner left and drain;
    /// the result says whether light marks were fenced too. An error,
    /// nothing held, when a wait reached `wait_limit`.
    fn take_exclusive(&self, me: Claim) -> Result<Exclusive<'a>, Error> {
        let excl = &self.ctl.excl;
        let mut waited: Option<Waited> = None;
        loop {
            // SeqCst: the Dekker pair with begin_add / begin_merge, and with
            // claim_slot's store of a light fence.
            match excl.compare_exchange(0, me.token, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return self.enter_exclusive(me, 0),
                Err(cur) => {
                    if self.gone(cur, me) {
                        if let Some(g) = self.steal_exclusive(cur, me)? {
                            return Ok(g);
                        }
                        continue;
                    }
                    let seen = self.progress(cur);
                    if waited.get_or_insert_with(|| Waited::new(seen)).over(seen) {
                        return Err(self.stuck("the exclusive word", cur));
                    }
                    sleep_on(&self.ctl.excl, cur);
                }
            }
        }
    }

    /// Replace a dead owner's exclusive lock with ours; None when another
    /// process replaced it first.
    fn steal_exclusive(&self, dead: u32, me: Claim) -> Result<Option<Exclusive<'a>>, Error> {
        // SeqCst: we become the exclusive owner; same pairing as the CAS in
        // lock_exclusive.
        if self
            .ctl
            .excl
            .compare_exchange(dead, me.token, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            return Ok(None);
        }
        self.enter_exclusive(me, dead).map(Some)
    }

    /// Enter the exclusive operation whose word we just took from `was` (0,
    /// or a dead owner's token). A drain that reached `wait_limit` leaves
    /// the epoch and the word as we found them (a dead owner's work is
    /// then left to whoever takes the word next) and fails.
    fn enter_exclusive(&self, me: Claim, was: u32) -> Result<Exclusive<'a>, Error> {
        // A dead predecessor may have left the epoch odd: keep it odd then.
        let e = self.ctl.epoch.load(Ordering::Relaxed);
        if e & 1 == 0 {
            self.ctl.epoch.store(e.wrapping_add(1), Ordering::Relaxed);
        }
        // Release fence: the odd epoch is visible before any bit we change
        // (seqlock writer; pairs with the Acquire fence in the add fast path).
        fence(Ordering::Release);
        let fenced = self.fence_light_adders(me);
        if let Err(err) = self.drain(me) {
            if e & 1 == 0 {
                // Release: even again, and moved on, so that an add's fast
                // path that read the odd epoch looks again (no bit changed).
                self.ctl.epoch.store(e.wrapping_add(2), Ordering::Release);
            }
            // Our own token, forged, is nobody's work to finish: free.
            let back = if was & !WAITERS == me.token { 0 } else { was & !WAITERS };
            // Release: pairs with the Acquire loads of excl, as Exclusive's drop.
            if self.ctl.excl.swap(back, Ordering::Release) & WAITERS != 0 {
                futex_wake(&self.ctl.excl);
            }
            return Err(err);
        }
        // An operation whose owner died part-way: finish it, so that the
        // filter is as after it, never a mix. This is safe even when light
        // marks could not be fenced: the owner set `pending` only after its
        // own drain, and every add since has found `excl` taken.
        self.resume();
        // A journal whose user died (before or after its operation ran):
        // give its space back.
        self.reclaim_journal(me);
        Ok(Exclusive { sh: *self, fenced })
    }

    /// Run resumable operation `op` over the words from chunk `from` on.
    /// Before a chunk changes, its words go to the scratch and the cursor
    /// says so; after, the cursor moves past it. A process killed anywhere
    /// in here leaves what `resume` needs to finish the job.
    fn run_from(&self, op: u32, from: usize) {
        let ctl = self.ctl;
        for (c, words) in self.bits.chunks(CHUNK).enumerate().skip(from) {
            for (s, w) in self.scratch.iter().zip(words) {
                s.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            // Release: the scratch is written before the cursor claims it
            // (pairs with the Acquire in resume).
            ctl.cursor.store(2 * c as u64 + 1, Ordering::Release);
            // The chunk's stores must not move above the cursor's: a process
            // killed between them would leave an invert applied twice.
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            for w in words {
                // Relaxed: we are exclusive; the epoch/excl release publishes.
                w.store(apply(op, w.load(Ordering::Relaxed)), Ordering::Relaxed);
            }
            // Release: the chunk's new words before the cursor passes it.
            ctl.cursor.store(2 * c as u64 + 2, Ordering::Release);
        }
    }

    /// What a finished `op` does besides its words: a grown filter's clear
    /// ends by zeroing every fill word and publishing stage 0 alone (its
    /// later stages are zeroed by whoever adds them again, §8 N4). Run by
    /// the clear, or a resumer, once every chunk is done; again harmlessly.
    /// Relaxed: we are exclusive; the epoch/excl release publishes (adders
    /// and growers load `stages` after seeing `excl` free).
    fn finish(&self, op: u32) {
        if op == PENDING_CLEAR && !self.fills.is_empty() {
            for f in self.fills {
                f.store(0, Ordering::Relaxed);
            }
            self.ctl.stages.store(1, Ordering::Relaxed);
        }
    }

    /// Finish a resumable operation a dead owner left, doing only what it
    /// did not: put back the chunk it was changing, then go on from there.
    fn resume(&self) {
        // Acquire: pairs with the Release stores of begin and run_from.
        let op = self.ctl.pending.load(Ordering::Acquire);
        if op != PENDING_CLEAR && op != PENDING_INVERT && !journaled(op) {
            return; // none, or not one we write (a damaged file): touch nothing
        }
        let cur = self.ctl.cursor.load(Ordering::Acquire);
        if journaled(op) {
            self.resume_journal(op, cur);
            return;
        }
        let chunks = (self.bits.len() + CHUNK - 1) / CHUNK;
        // The cursor comes from shared memory: one out of range (a damaged
        // file) finishes nothing rather than indexing outside the bits.
        let c = usize::try_from(cur / 2).map_or(chunks, |c| c.min(chunks));
        // Relaxed: a statistic (resumed_chunks).
        #[cfg(feature = "test-hooks")]
        RESUMED_CHUNKS.fetch_add((chunks - c) as u64, Ordering::Relaxed);
        if cur & 1 == 1 && c < chunks {
            let start = c * CHUNK;
            let end = (start + CHUNK).min(self.bits.len());
            for (w, s) in self.bits[start..end].iter().zip(self.scratch) {
                w.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        self.run_from(op, c);
        self.finish(op);
    }

    /// Make every light mark stored before our `excl` store visible to
    /// `drain`: `membarrier(2)` runs a full fence on every CPU that runs a
    /// process registered for it, which is every process that claimed a
    /// light slot (`light_fences`). Where this process cannot (a seccomp
    /// filter, a kernel before 4.16), false if a live process other than us
    /// holds a light slot; true if none does, since a process claiming one
    /// later sees our `excl` before its first light mark (the Dekker pair
    /// in claim_slot).
    pub fn fence_light_adders(&self, me: Claim) -> bool {
        if membarrier::global_barrier() {
            return true;
        }
        !self.slots.iter().enumerate().any(|(i, slot)| {
            // SeqCst: the Dekker pair with claim_slot (after our excl CAS).
            i as u32 != me.idx
                && slot.fence.load(Ordering::SeqCst) == LIGHT
                && !self.owner_dead(token(i as u32, slot.gen.load(Ordering::Acquire)))
        })
    }

    /// Wait until no stripe and no other slot's mark is held (X4), taking
    /// over dead owners' words; an error after `wait_limit` for one holder.
    fn drain(&self, me: Claim) -> Result<(), Error> {
        for (i, s) in self.stripes.iter().enumerate() {
            // SeqCst: the Dekker pair (see begin_add).
            let mut v = s.word.load(Ordering::SeqCst);
            while v != 0 {
                self.wait_word(&s.word, v, me, i)?;
                v = s.word.load(Ordering::SeqCst);
            }
        }
        for (i, slot) in self.slots.iter().enumerate() {
            if i as u32 == me.idx {
                continue;
            }
            let mut waited: Option<Waited> = None;
            loop {
                let v = slot.busy.load(Ordering::SeqCst);
                if v == 0 {
                    break;
                }
                if self.gone(v, me) {
                    let _ = slot.busy.compare_exchange(v, 0, Ordering::AcqRel, Ordering::Relaxed);
                    break;
                }
                if waited.get_or_insert_with(|| Waited::new((v, 0))).over((v, 0)) {
                    return Err(self.stuck(&format!("the mark of slot {i}"), v));
                }
                // Mergers wake the excl word when they finish.
                futex_wait(&self.ctl.excl, self.ctl.excl.load(Ordering::Relaxed), WAIT_SLICE);
            }
        }
        Ok(())
    }
}

/// Held while an exclusive operation runs; releases on drop (so an early
/// return never leaves the lock held).
pub struct Exclusive<'a> {
    sh: Shared<'a>,
    /// Light marks were fenced (`fence_light_adders`): the operation may
    /// change the bits.
    fenced: bool,
}

impl Exclusive<'_> {
    /// Run resumable operation `op` (`PENDING_CLEAR`, `PENDING_INVERT`) over
    /// every word; whoever finds this lock's owner dead finishes it.
    pub fn transform(&self, op: u32) {
        self.begin(op);
        self.sh.run_from(op, 0);
        self.sh.finish(op);
    }

    /// Record that `op` starts at the first chunk.
    pub fn begin(&self, op: u32) {
        self.sh.ctl.cursor.store(0, Ordering::Relaxed);
        // Release: the reset cursor is seen with the op (resume's Acquire).
        self.sh.ctl.pending.store(op, Ordering::Release);
    }

    /// Run `op` over the first `chunks` chunks, then change half of the
    /// next one, and stop there: an operation killed in the middle of a
    /// chunk. For the crash tests.
    #[cfg(feature = "test-hooks")]
    pub fn transform_partly(&self, op: u32, chunks: usize) {
        self.begin(op);
        let part = &self.sh.bits[..(chunks * CHUNK).min(self.sh.bits.len())];
        Shared { bits: part, ..self.sh }.run_from(op, 0);
        let next = &self.sh.bits[part.len()..];
        let next = &next[..next.len().min(CHUNK)];
        for (s, w) in self.sh.scratch.iter().zip(next) {
            s.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.sh.ctl.cursor.store(2 * chunks as u64 + 1, Ordering::Release);
        for w in &next[..next.len() / 2] {
            w.store(apply(op, w.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
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
mod tests;
