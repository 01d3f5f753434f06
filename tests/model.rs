//! An exhaustive interleaving check of the lock protocol in `src/sync/` (with `src/shm/slots.rs`).
//!
//! The protocol is modelled step by step (one step = one atomic access of the
//! real code) for two processes adding the same item (k = 2 bits), with and
//! without the lock-free fast path, and one process clearing the filter. Any
//! one process may be killed at any step (its locks stay held, as after a
//! `SIGKILL`); waiters then take the lock over, exactly where the real code
//! calls `owner_dead`. Every interleaving is explored (depth-first, states
//! memoised) under sequential consistency — the real code uses `SeqCst` for
//! the store→load pairs whose order matters (stripe/excl), and its other
//! accesses are release/acquire pairs that only order a process's own steps.
//!
//! Checked in every reachable state: adders never set bits while the clearer
//! zeroes them; some live process can always move (no deadlock, no waiting
//! on a dead owner). Checked at the end of every run: the responses are
//! linearizable (some order of the operations consistent with real time
//! explains them, the killed one in or out), and no completed add is lost
//! except to a clear ordered after it.
//!
//! A second model (`liveness`) covers how a token's owner is judged dead:
//! the slot's robust futex word taken and given back by the process's
//! keeper (its robust list in private memory), its generation, and the
//! kernel marking a killed holder's word.
//!
//! A third (`lockfree`) covers the blocked layout's adds: no stripe, one
//! atomic update of the item's word, fenced off from exclusive operations by
//! a mark on the adder's own slot (`begin_lockfree_add`), against a `clear`
//! or a `freeze`, with a kill at every step.
//!
//! A fourth (`journal`) covers merges and intersects through the journal:
//! its word, the copy, the exclusive application under a cursor, and its
//! recovery and freeing by others, with a kill at every step.
//!
//! A fifth (`lease`) covers the overflow slot's lease: a claimant's calls
//! between `Lease::enter` and `Lease::leave`, its keeper giving the word
//! back to a waiter between two calls, and the claimant's give-back.

#[path = "common/explore.rs"]
mod explore;

use std::fmt::Debug;

use explore::Explored;
use std::hash::Hash;

const ADDERS: usize = 2;
const CLEARER: usize = ADDERS;
const PROCS: usize = ADDERS + 1;
/// Owner ids are process index + 1; 0 is "free".
type Owner = u8;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct State {
    stripe: Owner,
    lock: Excl,
    bits: [bool; 2],
    pc: [u8; PROCS],
    /// Adder: saw a zero bit under its stripe. Fast path: the epoch it read.
    new: [bool; PROCS],
    /// Adder: which bits its loads found 0 (fast path: any of them).
    zero: [[bool; 2]; PROCS],
    seen_epoch: [u8; PROCS],
    /// Responses: new or not (the clearer: false).
    procs: Procs<bool>,
    /// The item was present before any operation (a constant of the run).
    init_present: bool,
}

fn me(p: usize) -> Owner {
    p as Owner + 1
}

/// The exclusive lock, as both models' processes see it.
#[derive(Clone, Default, PartialEq, Eq, Hash, Debug)]
struct Excl {
    owner: Owner,
    /// The seqlock epoch: odd while an exclusive operation runs.
    epoch: u8,
    /// A clear has started zeroing; whoever takes over a dead owner finishes it.
    pending: bool,
}

impl Excl {
    /// enter_exclusive: the epoch made odd (a dead owner may have left it so).
    fn enter(&mut self) {
        if self.epoch % 2 == 0 {
            self.epoch += 1;
        }
    }

    /// steal_exclusive + enter_exclusive, in one step, by the owner `id`.
    fn steal(&mut self, id: Owner) {
        self.owner = id;
        self.enter();
    }

    /// Dropping the exclusive guard: no pending clear, an even epoch, no owner.
    fn release(&mut self) {
        self.pending = false;
        self.epoch += self.epoch % 2;
        self.owner = 0;
    }
}

/// The stages of an adder that finds the exclusive lock taken
/// (`wait_exclusive`), in both models: it waits while a live owner holds
/// the lock; from a dead one it takes the lock over (`steal_exclusive`),
/// drains, finishes the dead owner's pending clear (`resume`) and releases;
/// then it starts its add over. A model numbers them from its `WAIT_EXCL`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Recovery {
    Wait,
    Drain,
    Resume,
    Release,
}

impl Recovery {
    const ALL: [Recovery; 4] = [Recovery::Wait, Recovery::Drain, Recovery::Resume, Recovery::Release];
}

/// What the recovery needs of a model's state.
trait Recovers: Model {
    fn excl(&self) -> &Excl;
    fn excl_mut(&mut self) -> &mut Excl;
    /// What taking the lock over does besides (the lock-free model's
    /// recoverer runs a membarrier).
    fn stolen(&mut self) {}
    /// One step of the drain by `p` from `self` into `n`: Some(true) when
    /// nothing is held any more, Some(false) when a dead holder's mark or
    /// stripe was cleared, None when blocked on a live holder.
    fn drain_once(&self, n: &mut Self, p: usize) -> Option<bool>;
    /// The dead owner's clear, finished.
    fn clear_bits(&mut self);
}

/// One step of recovery stage `at` of `p` (owner `id`) from `s` into `n`:
/// the next stage, `Ok(None)` when the add starts over, `Err(())` when
/// blocked.
fn recovery_step<M: Recovers>(s: &M, n: &mut M, p: usize, id: Owner, at: Recovery) -> Result<Option<Recovery>, ()> {
    match at {
        Recovery::Wait => {
            let owner = s.excl().owner;
            if owner == 0 {
                Ok(None)
            } else if s.procs().owner_dead(owner) {
                // steal_exclusive + enter_exclusive
                n.excl_mut().steal(id);
                n.stolen();
                Ok(Some(Recovery::Drain))
            } else {
                Err(())
            }
        }
        Recovery::Drain => match s.drain_once(n, p) {
            Some(true) => Ok(Some(Recovery::Resume)),
            Some(false) => Ok(Some(Recovery::Drain)),
            None => Err(()),
        },
        // resume: a dead clear's pending work is finished.
        Recovery::Resume => {
            if s.excl().pending {
                n.clear_bits();
            }
            Ok(Some(Recovery::Release))
        }
        Recovery::Release => {
            n.excl_mut().release();
            Ok(None)
        }
    }
}

/// What every model keeps of its processes besides their programs: who was
/// killed, who has started, who answered what, and in which real-time order.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Procs<R> {
    /// Killed (an adder recovers a dead exclusive owner).
    dead: [bool; PROCS],
    invoked: [bool; PROCS],
    done: [Option<R>; PROCS],
    /// before[p][q]: p responded before q was invoked (real-time order).
    before: [[bool; PROCS]; PROCS],
    /// Someone was killed (at most one per run).
    crashed: bool,
}

impl<R: Copy> Procs<R> {
    fn new() -> Self {
        Procs {
            dead: [false; PROCS],
            invoked: [false; PROCS],
            done: [None; PROCS],
            before: [[false; PROCS]; PROCS],
            crashed: false,
        }
    }

    fn owner_dead(&self, o: Owner) -> bool {
        o != 0 && self.dead[o as usize - 1]
    }

    /// The lock word `o` is free, or its owner is dead.
    fn free_or_dead(&self, o: Owner) -> bool {
        o == 0 || self.owner_dead(o)
    }

    fn live(&self, p: usize) -> bool {
        !self.dead[p] && self.done[p].is_none()
    }

    fn respond(&mut self, p: usize, r: R) {
        self.done[p] = Some(r);
    }

    fn invoke(&mut self, p: usize) {
        if !self.invoked[p] {
            self.invoked[p] = true;
            for q in 0..PROCS {
                if self.done[q].is_some() {
                    self.before[q][p] = true;
                }
            }
        }
    }

    /// `order` respects real time: nobody in it comes after an operation
    /// that was invoked only after it had finished.
    fn in_real_time(&self, order: &[usize]) -> bool {
        for (i, &p) in order.iter().enumerate() {
            for &q in &order[i + 1..] {
                if self.before[q][p] {
                    return false; // q finished before p started, yet p is first
                }
            }
        }
        true
    }

    /// Some order of the completed operations, consistent with real time,
    /// that `explains` the outcome; the killed operation may or may not have
    /// taken effect.
    fn linearizable(&self, explains: impl Fn(&[usize]) -> bool) -> bool {
        let completed: Vec<usize> = (0..PROCS).filter(|&p| self.done[p].is_some()).collect();
        let killed: Vec<usize> = (0..PROCS).filter(|&p| self.dead[p] && self.invoked[p]).collect();
        [false, true].iter().any(|&include| {
            let mut ops = completed.clone();
            if include {
                ops.extend(&killed);
            }
            permutations(&ops).iter().any(|order| explains(order))
        })
    }
}

/// A model's state, whose processes are kept in a `Procs`.
trait Model: Clone + Eq + Hash + Debug {
    type Response: Copy;
    fn procs(&self) -> &Procs<Self::Response>;
    fn procs_mut(&mut self) -> &mut Procs<Self::Response>;
}

/// A model of this file as the explorer runs it: `steppers` take steps
/// (the processes, then whatever else moves on its own: a store buffer),
/// a SIGKILL of a process may come instead of a step it could take (at most
/// one per run: enough to reach every "dies holding X" state, and it keeps
/// the space small), `tidy` follows every step and kill (what happens at
/// once, as a dead adder's store buffer draining).
struct Run<'a, M> {
    steppers: usize,
    check: &'a dyn Fn(&M),
    step: &'a dyn Fn(&M, usize) -> Option<M>,
    tidy: &'a dyn Fn(&mut M),
    explains: &'a dyn Fn(&M, &[usize]) -> bool,
}

impl<M: Model> explore::Model for Run<'_, M> {
    type State = M;
    type Key = M;

    fn procs(&self) -> usize {
        self.steppers
    }

    fn key(&self, s: &M) -> M {
        s.clone()
    }

    fn step(&self, s: &M, p: usize) -> Option<M> {
        let mut n = (self.step)(s, p)?;
        (self.tidy)(&mut n);
        Some(n)
    }

    fn kill(&self, s: &M, p: usize, stepped: bool) -> Option<M> {
        if p >= PROCS || !stepped || s.procs().crashed {
            return None;
        }
        let mut k = s.clone();
        let kp = k.procs_mut();
        kp.invoke(p);
        kp.dead[p] = true;
        kp.crashed = true;
        (self.tidy)(&mut k);
        Some(k)
    }

    fn check(&self, s: &M) {
        (self.check)(s);
    }

    /// No deadlock (no live process left) and a linearizable run
    /// (`explains` judges one order).
    fn at_end(&mut self, s: &M) {
        let stuck: Vec<usize> = (0..PROCS).filter(|&p| s.procs().live(p)).collect();
        assert!(stuck.is_empty(), "deadlock: {stuck:?} cannot move: {s:?}");
        assert!(
            s.procs().linearizable(|order| (self.explains)(s, order)),
            "not linearizable: {s:?}"
        );
    }
}

/// Every state reachable from `initial` (`explore::explore`, as `Run`
/// says): how many, and how many final states, where nobody can move.
fn explore_model<M: Model>(
    initial: M,
    steppers: usize,
    check: impl Fn(&M),
    step: impl Fn(&M, usize) -> Option<M>,
    tidy: impl Fn(&mut M),
    explains: impl Fn(&M, &[usize]) -> bool,
) -> Explored {
    let mut run = Run {
        steppers,
        check: &check,
        step: &step,
        tidy: &tidy,
        explains: &explains,
    };
    explore::explore(&mut run, initial)
}

impl State {
    fn new() -> State {
        State {
            stripe: 0,
            lock: Excl::default(),
            bits: [false; 2],
            pc: [0; PROCS],
            new: [false; PROCS],
            zero: [[false; 2]; PROCS],
            seen_epoch: [0; PROCS],
            procs: Procs::new(),
            init_present: false,
        }
    }

    /// One step of `drain` for process `p`, whose next state is `n`: go on
    /// at `next` when the stripe is free, clear it when its owner is dead;
    /// false when blocked on a live owner.
    fn drain_step(&self, n: &mut State, p: usize, next: u8) -> bool {
        match self.drain_once(n, p) {
            Some(true) => n.pc[p] = next,
            Some(false) => {}
            None => return false,
        }
        true
    }
}

impl Recovers for State {
    fn excl(&self) -> &Excl {
        &self.lock
    }
    fn excl_mut(&mut self) -> &mut Excl {
        &mut self.lock
    }
    fn drain_once(&self, n: &mut State, _: usize) -> Option<bool> {
        if self.stripe == 0 {
            Some(true)
        } else if self.procs.owner_dead(self.stripe) {
            n.stripe = 0;
            Some(false)
        } else {
            None
        }
    }
    fn clear_bits(&mut self) {
        self.bits = [false; 2];
    }
}

impl Model for State {
    type Response = bool;
    fn procs(&self) -> &Procs<bool> {
        &self.procs
    }
    fn procs_mut(&mut self) -> &mut Procs<bool> {
        &mut self.procs
    }
}

/// Adder program counters. The fast path (`F*`) is used by adder 1 only,
/// so runs with and without it are both covered.
const A_FAST_EPOCH: u8 = 0; // §8 A1: epoch, bits, epoch again
const A_FAST_B0: u8 = 1;
const A_FAST_B1: u8 = 2;
const A_FAST_RECHECK: u8 = 3;
const A_TAKE_STRIPE: u8 = 4; // §8 A2; a dead holder's stripe taken over (S7)
const A_LOAD_EXCL: u8 = 5; // §8 A3
const A_SET_B0: u8 = 6; // §8 A4
const A_SET_B1: u8 = 7;
const A_RELEASE: u8 = 8; // §8 A5
const A_BACKOFF: u8 = 9;
const A_WAIT_EXCL: u8 = 10;
// Taking over a dead exclusive owner (enter_exclusive + drop, §8 X2, X5,
// X8): the adder has released its stripe, so the drain sees every stripe free but the dead's.
const A_RECOVER_DRAIN: u8 = 11;
const A_RECOVER_CLEAR: u8 = 12;
const A_RECOVER_RELEASE: u8 = 13;
// The recovery's stages (`Recovery`), numbered from A_WAIT_EXCL.
const _: () = assert!(
    A_RECOVER_DRAIN == A_WAIT_EXCL + Recovery::Drain as u8
        && A_RECOVER_CLEAR == A_WAIT_EXCL + Recovery::Resume as u8
        && A_RECOVER_RELEASE == A_WAIT_EXCL + Recovery::Release as u8
);
// Under the stripe: load both bits (no early exit), then OR only the zeros.
const A_GATHER_B0: u8 = 14;
const A_GATHER_B1: u8 = 15;

/// Clearer program counters (lock_exclusive, drain, clear, drop).
const C_TAKE: u8 = 0; // §8 X1
const C_EPOCH_ODD: u8 = 1; // §8 X2
const C_DRAIN: u8 = 2; // §8 X4
const C_PENDING: u8 = 3;
const C_ZERO_B0: u8 = 4; // §8 X7
const C_ZERO_B1: u8 = 5;
const C_RELEASE: u8 = 6; // §8 X8

/// The state after one step of process `p` (None: blocked or done).
fn step(s: &State, p: usize) -> Option<State> {
    if !s.procs.live(p) {
        return None;
    }
    let mut n = s.clone();
    n.procs.invoke(p);
    let id = me(p);
    if p < ADDERS {
        match s.pc[p] {
            A_FAST_EPOCH => {
                if p == 1 {
                    n.seen_epoch[p] = s.lock.epoch;
                    n.pc[p] = if s.lock.epoch % 2 == 0 {
                        A_FAST_B0
                    } else {
                        A_TAKE_STRIPE
                    };
                } else {
                    n.pc[p] = A_TAKE_STRIPE;
                }
            }
            // Both bits are loaded whatever the first one was (Standard::contains).
            A_FAST_B0 => {
                n.zero[p][0] = !s.bits[0];
                n.pc[p] = A_FAST_B1;
            }
            A_FAST_B1 => {
                n.pc[p] = if s.zero[p][0] || !s.bits[1] {
                    A_TAKE_STRIPE
                } else {
                    A_FAST_RECHECK
                };
            }
            A_FAST_RECHECK => {
                if s.lock.epoch == s.seen_epoch[p] {
                    n.procs.respond(p, false);
                } else {
                    n.pc[p] = A_TAKE_STRIPE;
                }
            }
            A_TAKE_STRIPE => {
                if s.stripe == 0 {
                    n.stripe = id;
                    n.pc[p] = A_LOAD_EXCL;
                } else if s.procs.owner_dead(s.stripe) {
                    n.stripe = 0; // wait_word clears a dead owner's stripe
                } else {
                    return None; // blocked
                }
            }
            A_LOAD_EXCL => n.pc[p] = if s.lock.owner == 0 { A_GATHER_B0 } else { A_BACKOFF },
            A_GATHER_B0 | A_GATHER_B1 => {
                let b = (s.pc[p] - A_GATHER_B0) as usize;
                n.zero[p][b] = !s.bits[b];
                n.new[p] |= !s.bits[b];
                n.pc[p] = if b == 0 { A_GATHER_B1 } else { A_SET_B0 };
            }
            A_SET_B0 | A_SET_B1 => {
                let b = (s.pc[p] - A_SET_B0) as usize;
                if s.zero[p][b] {
                    n.bits[b] = true;
                }
                n.pc[p] += 1;
            }
            A_RELEASE => {
                n.stripe = 0;
                n.procs.respond(p, s.new[p]);
            }
            A_BACKOFF => {
                n.stripe = 0;
                n.pc[p] = A_WAIT_EXCL;
            }
            A_WAIT_EXCL..=A_RECOVER_RELEASE => {
                let at = Recovery::ALL[(s.pc[p] - A_WAIT_EXCL) as usize];
                match recovery_step(s, &mut n, p, id, at) {
                    Ok(Some(r)) => n.pc[p] = A_WAIT_EXCL + r as u8,
                    Ok(None) => n.pc[p] = A_TAKE_STRIPE,
                    Err(()) => return None,
                }
            }
            _ => unreachable!(),
        }
    } else {
        match s.pc[p] {
            C_TAKE => {
                // Free, or held by a dead owner (steal_exclusive).
                if s.procs.free_or_dead(s.lock.owner) {
                    n.lock.owner = id;
                    n.pc[p] = C_EPOCH_ODD;
                } else {
                    return None;
                }
            }
            C_EPOCH_ODD => {
                n.lock.enter();
                n.pc[p] = C_DRAIN;
            }
            C_DRAIN => {
                if !s.drain_step(&mut n, p, C_PENDING) {
                    return None;
                }
            }
            C_PENDING => {
                n.lock.pending = true;
                n.pc[p] = C_ZERO_B0;
            }
            C_ZERO_B0 | C_ZERO_B1 => {
                n.bits[(s.pc[p] - C_ZERO_B0) as usize] = false;
                n.pc[p] += 1;
            }
            C_RELEASE => {
                n.lock.release();
                n.procs.respond(p, false);
            }
            _ => unreachable!(),
        }
    }
    Some(n)
}

/// Invariants of every reachable state.
fn check_state(s: &State) {
    let clearer_zeroing = s.procs.live(CLEARER) && matches!(s.pc[CLEARER], C_ZERO_B0 | C_ZERO_B1);
    for a in 0..ADDERS {
        let setting = s.procs.live(a) && matches!(s.pc[a], A_SET_B0 | A_SET_B1);
        assert!(
            !(clearer_zeroing && setting),
            "adder {a} sets bits during a clear: {s:?}"
        );
        let recovering = s.procs.live(a) && s.pc[a] == A_RECOVER_CLEAR;
        assert!(!(recovering && clearer_zeroing), "two clears at once: {s:?}");
    }
}

/// `order`, consistent with real time, explains the responses and the
/// final bits.
fn explains(s: &State, order: &[usize]) -> bool {
    if !s.procs.in_real_time(order) {
        return false;
    }
    let mut present = s.init_present;
    let mut last_clear = None;
    for (i, &p) in order.iter().enumerate() {
        let r = if p == CLEARER {
            present = false;
            last_clear = Some(i);
            false
        } else {
            let r = !present;
            present = true;
            r
        };
        if let Some(got) = s.procs.done[p] {
            if got != r {
                return false;
            }
        }
    }
    // No completed add after the last clear may be missing from the bits.
    for (i, &p) in order.iter().enumerate() {
        if p < ADDERS && s.procs.done[p].is_some() && last_clear.map_or(true, |c| i > c) && !(s.bits[0] && s.bits[1]) {
            return false;
        }
    }
    true
}

fn permutations(v: &[usize]) -> Vec<Vec<usize>> {
    if v.len() <= 1 {
        return vec![v.to_vec()];
    }
    let mut out = vec![];
    for i in 0..v.len() {
        let mut rest = v.to_vec();
        let x = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, x);
            out.push(p);
        }
    }
    out
}

fn explore(initial: State) -> Explored {
    explore_model(initial, PROCS, check_state, step, |_| {}, explains)
}

#[test]
fn adders_and_a_clear_every_interleaving_every_kill() {
    let e = explore(State::new());
    assert!(e.finals > 100, "explored only {} runs", e.finals);
    // The states explored when this count was taken; a change of the model
    // changes it (count again), a change of the explorer must not.
    assert_eq!(e.states, 9083);
}

#[test]
fn item_already_present_every_interleaving_every_kill() {
    let mut s = State::new();
    s.bits = [true, true];
    s.init_present = true;
    assert_eq!(explore(s).states, 8726);
}

#[test]
fn half_present_item() {
    let mut s = State::new();
    s.bits = [true, false];
    assert_eq!(explore(s).states, 9453);
}

/// The model must catch a broken protocol, or it proves nothing: an adder
/// that skips its stripe lets both adders report "new".
#[test]
fn model_catches_an_adder_without_a_stripe() {
    let r = std::panic::catch_unwind(|| {
        // Start both adders "inside" their stripe without holding it, by
        // starting them at A_LOAD_EXCL with the stripe free.
        let mut s = State::new();
        s.pc = [A_LOAD_EXCL, A_LOAD_EXCL, C_TAKE];
        explore(s);
    });
    assert!(r.is_err(), "a protocol without stripes passed the model");
}

/// Likewise, a clear that does not drain adders must be caught.
#[test]
fn model_catches_a_clear_without_drain() {
    let r = std::panic::catch_unwind(|| {
        let mut s = State::new();
        s.pc[CLEARER] = C_PENDING; // skip taking excl and draining
        explore(s);
    });
    assert!(r.is_err(), "a clear without drain passed the model");
}

// ------------------------------------------------------------ liveness

/// Liveness of a token (`Shared::owner_dead`, `claim_slot`, `release_slot`),
/// step by step, against the slot's robust futex word as the keeper and the
/// kernel keep it (`sys::keeper`): a word is taken by announcing its entry
/// in the keeper's `list_op_pending`, changing the word, linking the entry
/// and clearing the announcement; given back by announcing, unlinking,
/// freeing the word and clearing. When a process dies, the kernel marks
/// "owner died" in every word holding its TID that its list reaches (linked
/// or announced). Process O owns the slot (generation 1) and may give it
/// back or be killed at any step; checker X asks whether O's token is dead
/// (a held word is taken as alive without a round trip to the keeper);
/// claimer Y claims the slot. Any one of them may be killed at any step.
/// Checked: X never judges O dead while O still owns the slot (that would
/// let two adders of an item both be told new); nobody changes a live
/// owner's generation (which would make its tokens dead); no two live
/// processes own the slot; every live process finishes (§8 S3, S4).
mod liveness {
    const O: usize = 0;
    const X: usize = 1;
    const Y: usize = 2;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Broken {
        No,
        /// O frees the word before it retires its generation (the order
        /// `release_slot` must not have).
        ReleaseOrder,
        /// The keeper changes a word without announcing it first.
        NoAnnounce,
    }

    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    enum Word {
        Free,
        Held(usize),
        /// The kernel marked it: its holder died.
        Died,
    }

    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct S {
        word: Word,
        gen: u8,
        pc: [u8; 3],
        dead: [bool; 3],
        /// Each keeper's `list_op_pending` names this word.
        pending: [bool; 3],
        /// The word's entry is on the keeper's list.
        linked: [bool; 3],
        /// Y's claim generation, once it owns the slot.
        y_gen: Option<u8>,
        /// The verdict "dead" was reached while O still owned the slot.
        wrong: bool,
    }

    const TOKEN: u8 = 1;
    const DONE: u8 = 99;

    fn owns(s: &S, p: usize) -> bool {
        !s.dead[p]
            && match p {
                O => s.pc[O] < 10,
                Y => s.y_gen.is_some(),
                _ => false,
            }
    }

    fn announce(n: &mut S, p: usize, b: Broken) {
        n.pending[p] = b != Broken::NoAnnounce;
    }

    /// One step of `p`.
    fn step(s: &S, p: usize, b: Broken) -> Option<S> {
        if s.dead[p] || s.pc[p] == DONE {
            return None;
        }
        let mut n = s.clone();
        let pc = &mut n.pc[p];
        match (p, s.pc[p]) {
            // O gives the slot back: a new generation, then the word.
            (O, 0) if b == Broken::ReleaseOrder => *pc = 11,
            (O, 0) => {
                n.gen += 1;
                *pc = 11;
            }
            (O, 11) => {
                announce(&mut n, O, b);
                n.linked[O] = false;
                n.pc[O] = 12;
            }
            (O, 12) => {
                n.word = Word::Free;
                *pc = 13;
            }
            (O, 13) => {
                n.pending[O] = false;
                n.pc[O] = if b == Broken::ReleaseOrder { 14 } else { DONE };
            }
            (O, 14) => {
                n.gen += 1;
                *pc = DONE;
            }
            // X: owner_dead(TOKEN).
            (X, 0) => *pc = if s.gen != TOKEN { 40 } else { 1 },
            (X, 1) => *pc = if matches!(s.word, Word::Held(_)) { DONE } else { 2 },
            // Its keeper's try_lock.
            (X, 2) => {
                announce(&mut n, X, b);
                n.pc[X] = 3;
            }
            (X, 3) => {
                if let Word::Held(_) = s.word {
                    n.pending[X] = false;
                    n.pc[X] = DONE; // held: alive
                } else {
                    n.word = Word::Held(X);
                    n.pc[X] = 4;
                }
            }
            (X, 4) => {
                n.linked[X] = true;
                *pc = 5;
            }
            (X, 5) => {
                n.pending[X] = false;
                n.pc[X] = 6;
            }
            (X, 6) => {
                if s.gen == TOKEN {
                    n.gen += 1;
                }
                n.pc[X] = 7;
            }
            // Its keeper's unlock.
            (X, 7) => {
                announce(&mut n, X, b);
                n.linked[X] = false;
                n.pc[X] = 8;
            }
            (X, 8) => {
                n.word = Word::Free;
                *pc = 9;
            }
            (X, 9) => {
                n.pending[X] = false;
                n.pc[X] = 40;
            }
            (X, 40) => {
                n.wrong = owns(s, O);
                n.pc[X] = DONE;
            }
            // Y: claim_slot of this one slot, waiting while it is held.
            (Y, 0) => {
                if let Word::Held(_) = s.word {
                    return None;
                }
                announce(&mut n, Y, b);
                n.pc[Y] = 1;
            }
            (Y, 1) => {
                if let Word::Held(_) = s.word {
                    n.pending[Y] = false;
                    n.pc[Y] = 0;
                } else {
                    n.word = Word::Held(Y);
                    n.pc[Y] = 2;
                }
            }
            (Y, 2) => {
                n.linked[Y] = true;
                *pc = 3;
            }
            (Y, 3) => {
                n.pending[Y] = false;
                n.pc[Y] = 4;
            }
            (Y, 4) => {
                n.gen += 1;
                n.y_gen = Some(n.gen);
                n.pc[Y] = DONE;
            }
            _ => unreachable!("{p} at {}", s.pc[p]),
        }
        Some(n)
    }

    fn kill(s: &S, p: usize) -> Option<S> {
        if s.dead.iter().any(|&d| d) {
            return None; // one death per run
        }
        let mut n = s.clone();
        n.dead[p] = true;
        // The kernel walks p's keeper's list and its announcement.
        if n.word == Word::Held(p) && (n.linked[p] || n.pending[p]) {
            n.word = Word::Died;
        }
        Some(n)
    }

    pub fn explore(b: Broken) -> crate::Explored {
        let init = S {
            word: Word::Held(O),
            gen: TOKEN,
            pc: [0; 3],
            dead: [false; 3],
            pending: [false; 3],
            linked: [true, false, false],
            y_gen: None,
            wrong: false,
        };
        crate::explore::explore(&mut Liveness(b), init)
    }

    struct Liveness(Broken);

    impl crate::explore::Model for Liveness {
        type State = S;
        type Key = S;

        fn procs(&self) -> usize {
            3
        }

        fn key(&self, s: &S) -> S {
            s.clone()
        }

        fn step(&self, s: &S, p: usize) -> Option<S> {
            step(s, p, self.0)
        }

        fn kill(&self, s: &S, p: usize, _: bool) -> Option<S> {
            kill(s, p)
        }

        fn check(&self, s: &S) {
            assert!(!s.wrong, "a live owner was judged dead: {s:?}");
            if owns(s, Y) {
                assert_eq!(s.y_gen, Some(s.gen), "a live owner's generation changed: {s:?}");
            }
            let owners = (0..3).filter(|&p| owns(s, p)).count();
            assert!(owners <= 1, "two owners of one slot: {s:?}");
        }

        fn at_end(&mut self, s: &S) {
            for p in 0..3 {
                assert!(s.dead[p] || s.pc[p] == DONE, "process {p} stuck: {s:?}");
            }
        }
    }
}

#[test]
fn liveness_every_interleaving_every_kill() {
    assert_eq!(liveness::explore(liveness::Broken::No).states, 724);
}

#[test]
fn model_catches_a_release_that_unlocks_before_retiring_its_generation() {
    assert!(std::panic::catch_unwind(|| liveness::explore(liveness::Broken::ReleaseOrder)).is_err());
}

#[test]
fn model_catches_a_keeper_that_changes_a_word_unannounced() {
    assert!(std::panic::catch_unwind(|| liveness::explore(liveness::Broken::NoAnnounce)).is_err());
}

// ------------------------------------------------------------ the overflow slot's lease

/// The overflow slot's lease (§8 S5: `keeper::Lease`, `Shared::claim_overflow`,
/// `Held`'s drop, a `claims` entry's drop), step by step: claimant A holds
/// the slot's word through its keeper K between its calls, each call
/// between `Lease::enter` (`users` up, then `revoked` loaded) and
/// `Lease::leave`; K, seeing another waiter's bit on the word, gives it
/// back between two calls (`revoke_waited`: `revoked` stored, `users`
/// loaded, the word freed or `revoked` cleared again); B waits for the
/// word, takes it, starts a new generation, runs one call and gives it
/// back. A's last act is its table entry's drop: entered, the claim is
/// released (its generation retired if still its own, then the word given
/// back); not entered, only forgotten.
///
/// Checked in every state: A and B never run a call under the slot at the
/// same time, and nothing but B changes the generation while B owns the
/// slot. At the end of every run: everyone finished (no one waits forever).
mod lease {
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Broken {
        No,
        /// The keeper gives the word back without looking at `users`.
        NoUsersCheck,
        /// `Lease::enter` does not look at `revoked`.
        EnterIgnoresRevoked,
        /// The entry's drop releases the claim without entering the lease.
        ReleaseUnentered,
    }

    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    enum Word {
        Free,
        /// Held by A's keeper.
        A,
        B,
    }

    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct S {
        word: Word,
        /// The word's waiter bit.
        waiters: bool,
        revoked: bool,
        users: u8,
        /// K keeps the word leased (its `leases` holds it).
        leased: bool,
        gen: u8,
        a_pc: u8,
        /// Calls A makes after its first.
        a_calls: u8,
        a_in: bool,
        k_pc: u8,
        b_pc: u8,
        b_gen: Option<u8>,
        b_in: bool,
    }

    const DONE: u8 = 99;
    /// A's claim's generation.
    const A_GEN: u8 = 1;

    fn initial() -> S {
        // `claim_overflow` returns with the lease entered for the first call.
        S {
            word: Word::A,
            waiters: false,
            revoked: false,
            users: 1,
            leased: true,
            gen: A_GEN,
            a_pc: 0,
            a_calls: 2,
            a_in: true,
            k_pc: 0,
            b_pc: 0,
            b_gen: None,
            b_in: false,
        }
    }

    /// The keeper's give-back of A's word under A's key: only a word it
    /// still holds (`List::unlock`), and the lease goes with it.
    fn keeper_unlock(n: &mut S) {
        if n.word == Word::A {
            n.word = Word::Free;
            n.waiters = false;
        }
        n.leased = false;
    }

    /// A step of A (0), K (1) or B (2); None when it waits or is done.
    fn step(s: &S, p: usize, broken: Broken) -> Option<S> {
        // A, the claimant's thread.
        if p == 0 && s.a_pc != DONE {
            let mut n = s.clone();
            let mut ok = true;
            match s.a_pc {
                // A call under the slot; then Lease::leave.
                0 => {
                    n.a_in = false;
                    n.users -= 1;
                    n.a_pc = 1;
                }
                // The next call's Lease::enter, or the entry's drop.
                1 if s.a_calls > 0 => {
                    n.users += 1;
                    n.a_pc = 2;
                }
                1 if broken == Broken::ReleaseUnentered => n.a_pc = 8,
                1 => {
                    n.users += 1;
                    n.a_pc = 6;
                }
                // enter's load of `revoked`.
                2 if s.revoked && broken != Broken::EnterIgnoresRevoked => n.a_pc = 3,
                2 => {
                    n.a_calls -= 1;
                    n.a_in = true;
                    n.a_pc = 0;
                }
                // Revoked: undo the use; the claim is dropped (claims::drop_claim):
                // its entry's drop enters again (and fails: the flag stays).
                3 => {
                    n.users -= 1;
                    n.a_pc = 4;
                }
                // Only forgotten: K's unlock under the old key (a word
                // not K's is left alone).
                4 | 7 if s.k_pc != 0 => ok = false,
                4 | 7 => {
                    keeper_unlock(&mut n);
                    n.a_pc = DONE;
                }
                // The entry's drop: enter's load of `revoked`.
                6 if s.revoked => {
                    n.users -= 1;
                    n.a_pc = 7;
                }
                6 => n.a_pc = 8,
                // Slot::release: the generation compared...
                8 if s.gen == A_GEN => n.a_pc = 9,
                8 => n.a_pc = 10,
                // ... and a new one started (load, then store: A holds the word).
                9 => {
                    n.gen = s.gen.wrapping_add(1);
                    n.a_pc = 10;
                }
                // Then the word given back (a request K serves between
                // two of its own turns).
                10 if s.k_pc != 0 => ok = false,
                10 => {
                    keeper_unlock(&mut n);
                    n.a_pc = DONE;
                }
                _ => unreachable!("A at {}", s.a_pc),
            }
            return ok.then_some(n);
        }
        // K, A's keeper: revoke_waited.
        if p == 1 && s.leased {
            let mut n = s.clone();
            let mut ok = true;
            match s.k_pc {
                0 if s.waiters => {
                    n.revoked = true;
                    n.k_pc = if broken == Broken::NoUsersCheck { 3 } else { 1 };
                }
                0 => ok = false,
                1 => n.k_pc = if s.users != 0 { 2 } else { 3 },
                2 => {
                    n.revoked = false;
                    n.k_pc = 0;
                }
                3 => {
                    keeper_unlock(&mut n);
                    n.k_pc = 0;
                }
                _ => unreachable!(),
            }
            return ok.then_some(n);
        }
        // B, the waiter: announce, take the free word, a new generation,
        // one call, give it back (generation retired, word freed).
        if p == 2 && s.b_pc != DONE {
            let mut n = s.clone();
            let mut ok = true;
            match s.b_pc {
                0 if s.word != Word::Free => {
                    n.waiters = true;
                    n.b_pc = 1;
                }
                0 | 1 if s.word == Word::Free => {
                    n.word = Word::B;
                    n.waiters = false;
                    n.gen = s.gen.wrapping_add(1);
                    n.b_gen = Some(n.gen);
                    n.b_pc = 2;
                }
                1 => ok = false,
                2 => {
                    n.b_in = true;
                    n.b_pc = 3;
                }
                3 => {
                    n.b_in = false;
                    n.b_pc = 4;
                }
                4 => {
                    n.gen = s.gen.wrapping_add(1);
                    n.b_gen = None;
                    n.word = Word::Free;
                    n.b_pc = DONE;
                }
                _ => unreachable!(),
            }
            return ok.then_some(n);
        }
        None
    }

    fn check(s: &S) {
        assert!(
            !(s.a_in && s.b_in),
            "A and B both run a call under the overflow slot: {s:?}"
        );
        if let Some(g) = s.b_gen {
            assert_eq!(s.gen, g, "the generation moved under B's claim: {s:?}");
        }
    }

    pub fn explore(broken: Broken) -> usize {
        crate::explore::explore(&mut Lease(broken), initial()).states
    }

    struct Lease(Broken);

    impl crate::explore::Model for Lease {
        type State = S;
        type Key = S;

        fn procs(&self) -> usize {
            3
        }

        fn key(&self, s: &S) -> S {
            s.clone()
        }

        fn step(&self, s: &S, p: usize) -> Option<S> {
            step(s, p, self.0)
        }

        fn check(&self, s: &S) {
            check(s);
        }

        fn at_end(&mut self, s: &S) {
            assert!(
                s.a_pc == DONE && s.b_pc == DONE,
                "no one can move, not everyone finished: {s:?}"
            );
        }
    }
}

#[test]
fn overflow_lease_every_interleaving() {
    let states = lease::explore(lease::Broken::No);
    assert!(states > 50, "only {states} states explored");
    assert_eq!(states, 165);
}

#[test]
fn model_catches_a_keeper_that_revokes_a_lease_in_use() {
    assert!(std::panic::catch_unwind(|| lease::explore(lease::Broken::NoUsersCheck)).is_err());
}

#[test]
fn model_catches_a_lease_entered_after_its_revocation() {
    assert!(std::panic::catch_unwind(|| lease::explore(lease::Broken::EnterIgnoresRevoked)).is_err());
}

#[test]
fn model_catches_a_release_outside_the_lease() {
    assert!(std::panic::catch_unwind(|| lease::explore(lease::Broken::ReleaseUnentered)).is_err());
}

// ------------------------------------------------------------ lock-free adds

/// The blocked layout's add (`Filter::add_at` without a stripe:
/// `begin_lockfree_add`, the word's load and `fetch_or`,
/// `end_lockfree_add`; adder 1 first tries the seqlock fast path) against
/// one exclusive operation (`lock_exclusive`, `drain` of the slot marks,
/// then a clear or a freeze), step by step. Any one process may be killed
/// at any step; a waiter finds a dead exclusive owner and finishes its work,
/// a drain finds a dead adder's mark and clears it. The item's bits live in
/// one word and a `fetch_or` sets them all at once, so the word is modelled
/// as "has the item's bits".
///
/// Checked in every state: no adder updates the word while the exclusive
/// operation runs, and once `freeze` has returned the word never changes.
/// At the end of every run: some live process could always move, and the
/// responses (new, not new, frozen) and the final word are linearizable.
///
/// With light marks (`Fence::Light`: a slot whose `fence` is `LIGHT`) the
/// adder's mark is a plain store, which this model lets wait in the
/// adder's store buffer (x86-TSO) while the adder goes on to load `excl`:
/// others see it only after a flush, which happens at any step, at the
/// adder's locked update (which drains the buffer first), when the adder
/// dies, and at the exclusive side's `membarrier` (a full fence on every
/// CPU, taken between its `excl` store and its drain; a recoverer's comes
/// with its steal). The adder's later stores of 0 are made visible at once:
/// a late one only makes a drain wait longer.
mod lockfree {
    use super::{explore_model, me as id, recovery_step, Excl, Model, Procs, Recovers, Recovery, PROCS};

    const ADDERS: usize = 2;
    const EXCL: usize = 2;

    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub enum Op {
        Clear,
        Freeze,
    }

    /// Ways to break the protocol, which the model must catch.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Broken {
        No,
        /// Adders skip their slot mark.
        NoMark,
        /// The exclusive side skips the drain of the marks.
        NoDrain,
        /// The exclusive side skips the `membarrier` before its drain.
        NoMembarrier,
    }

    /// How adders order their mark before their load of `excl`.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Fence {
        /// A `SeqCst` store: visible before the load.
        Heavy,
        /// A plain store, fenced by the exclusive side's `membarrier`.
        Light,
    }

    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct S {
        word: bool,
        mark: [u8; ADDERS],
        /// A light mark stored but not yet visible to other processes.
        buf: [Option<u8>; ADDERS],
        lock: Excl,
        frozen: bool,
        /// The word when `freeze` returned.
        frozen_word: Option<bool>,
        pc: [u8; PROCS],
        seen_epoch: [u8; PROCS],
        /// Adder: the answer its update gave.
        new: [bool; PROCS],
        /// Responses: 0 not new, 1 new, 2 refused (frozen); the exclusive op: 0.
        procs: Procs<u8>,
        init: bool,
    }

    const A_F_EPOCH: u8 = 0; // §8 A7
    const A_F_LOAD: u8 = 1;
    const A_F_RECHECK: u8 = 2;
    const A_MARK: u8 = 3; // §8 A8
    const A_LOAD_EXCL: u8 = 4;
    const A_LOAD_FROZEN: u8 = 5;
    const A_LOAD_WORD: u8 = 6;
    const A_FETCH_OR: u8 = 7; // §8 A9
    const A_UNMARK: u8 = 8; // §8 A10
    const A_BACKOFF: u8 = 9;
    const A_WAIT_EXCL: u8 = 10;
    const A_REC_DRAIN: u8 = 11;
    const A_REC_OP: u8 = 12;
    const A_REC_RELEASE: u8 = 13;
    // The recovery's stages (`Recovery`), numbered from A_WAIT_EXCL.
    const _: () = assert!(
        A_REC_DRAIN == A_WAIT_EXCL + Recovery::Drain as u8
            && A_REC_OP == A_WAIT_EXCL + Recovery::Resume as u8
            && A_REC_RELEASE == A_WAIT_EXCL + Recovery::Release as u8
    );
    const A_UNMARK_FROZEN: u8 = 14;
    /// `Filter::writable`: the frozen flag, before anything else.
    const A_WRITABLE: u8 = 15;

    const E_TAKE: u8 = 0;
    const E_EPOCH: u8 = 1;
    const E_DRAIN0: u8 = 2;
    const E_DRAIN1: u8 = 3;
    const E_PENDING: u8 = 4;
    const E_OP: u8 = 5;
    const E_RELEASE: u8 = 6;
    const E_FENCE: u8 = 7; // §8 X3

    impl Model for S {
        type Response = u8;
        fn procs(&self) -> &Procs<u8> {
            &self.procs
        }
        fn procs_mut(&mut self) -> &mut Procs<u8> {
            &mut self.procs
        }
    }

    impl Recovers for S {
        fn excl(&self) -> &Excl {
            &self.lock
        }
        fn excl_mut(&mut self) -> &mut Excl {
            &mut self.lock
        }
        /// The recoverer's membarrier (after its steal).
        fn stolen(&mut self) {
            self.fence_all();
        }
        /// The other adder's mark: it may be held, never this adder's own.
        fn drain_once(&self, n: &mut S, p: usize) -> Option<bool> {
            let other = 1 - p;
            if self.drain(n, other) {
                Some(true)
            } else if n.mark[other] == self.mark[other] {
                None
            } else {
                Some(false)
            }
        }
        fn clear_bits(&mut self) {
            self.word = false;
        }
    }

    impl S {
        /// Make every buffered mark visible (a `membarrier`).
        fn fence_all(&mut self) {
            for a in 0..ADDERS {
                self.flush(a);
            }
        }

        /// Make adder `a`'s buffered mark visible.
        fn flush(&mut self, a: usize) {
            if let Some(m) = self.buf[a].take() {
                self.mark[a] = m;
            }
        }

        /// Adder `a` stores `m` in its mark: buffered when light (and not
        /// 0: see the module's docs).
        fn store_mark(&mut self, a: usize, m: u8, fence: Fence) {
            if fence == Fence::Light && m != 0 {
                self.buf[a] = Some(m);
            } else {
                self.buf[a] = None;
                self.mark[a] = m;
            }
        }

        /// One step of a drain of mark `i` (not the drainer's own).
        fn drain(&self, n: &mut S, i: usize) -> bool {
            let m = self.mark[i];
            if m == 0 {
                true
            } else if self.procs.owner_dead(m) {
                n.mark[i] = 0;
                false // cleared; the next step finds it free
            } else {
                false
            }
        }
    }

    /// A step of process `p < PROCS`, or of adder `p - PROCS`'s store
    /// buffer, which drains on its own at any time (when its adder lives).
    fn step_or_flush(s: &S, p: usize, op: Op, broken: Broken, fence: Fence) -> Option<S> {
        if p < PROCS {
            return step(s, p, op, broken, fence);
        }
        let a = p - PROCS;
        if s.buf[a].is_none() || !s.procs.live(a) {
            return None;
        }
        let mut n = s.clone();
        n.flush(a);
        Some(n)
    }

    /// A dead adder's store buffer drains when it dies.
    fn flush_the_dead(n: &mut S) {
        for a in 0..ADDERS {
            if n.procs.dead[a] {
                n.flush(a);
            }
        }
    }

    fn step(s: &S, p: usize, op: Op, broken: Broken, fence: Fence) -> Option<S> {
        if !s.procs.live(p) {
            return None;
        }
        let mut n = s.clone();
        n.procs.invoke(p);
        if p < ADDERS {
            match s.pc[p] {
                A_WRITABLE => {
                    if s.frozen {
                        n.procs.respond(p, 2);
                    } else {
                        n.pc[p] = A_F_EPOCH;
                    }
                }
                A_F_EPOCH => {
                    n.seen_epoch[p] = s.lock.epoch;
                    n.pc[p] = if p == 1 && s.lock.epoch % 2 == 0 {
                        A_F_LOAD
                    } else {
                        A_MARK
                    };
                }
                A_F_LOAD => n.pc[p] = if s.word { A_F_RECHECK } else { A_MARK },
                A_F_RECHECK => {
                    if s.lock.epoch == s.seen_epoch[p] {
                        n.procs.respond(p, 0);
                    } else {
                        n.pc[p] = A_MARK;
                    }
                }
                A_MARK => {
                    if broken != Broken::NoMark {
                        n.store_mark(p, id(p), fence);
                    }
                    n.pc[p] = A_LOAD_EXCL;
                }
                A_LOAD_EXCL => n.pc[p] = if s.lock.owner == 0 { A_LOAD_FROZEN } else { A_BACKOFF },
                A_LOAD_FROZEN => n.pc[p] = if s.frozen { A_UNMARK_FROZEN } else { A_LOAD_WORD },
                // Word64::set loads first: all bits there means not new.
                A_LOAD_WORD => {
                    if s.word {
                        n.new[p] = false;
                        n.pc[p] = A_UNMARK;
                    } else {
                        n.pc[p] = A_FETCH_OR;
                    }
                }
                A_FETCH_OR => {
                    // A locked instruction: the store buffer drains first.
                    n.flush(p);
                    n.new[p] = !s.word;
                    n.word = true;
                    n.pc[p] = A_UNMARK;
                }
                A_UNMARK => {
                    n.store_mark(p, 0, fence);
                    n.procs.respond(p, s.new[p] as u8);
                }
                A_UNMARK_FROZEN => {
                    n.store_mark(p, 0, fence);
                    n.procs.respond(p, 2);
                }
                A_BACKOFF => {
                    n.store_mark(p, 0, fence);
                    n.pc[p] = A_WAIT_EXCL;
                }
                A_WAIT_EXCL..=A_REC_RELEASE => {
                    let at = Recovery::ALL[(s.pc[p] - A_WAIT_EXCL) as usize];
                    match recovery_step(s, &mut n, p, id(p), at) {
                        Ok(Some(r)) => n.pc[p] = A_WAIT_EXCL + r as u8,
                        Ok(None) => n.pc[p] = A_MARK,
                        Err(()) => return None,
                    }
                }
                _ => unreachable!(),
            }
        } else {
            match s.pc[p] {
                E_TAKE => {
                    if s.procs.free_or_dead(s.lock.owner) {
                        n.lock.owner = id(p);
                        n.pc[p] = E_EPOCH;
                    } else {
                        return None;
                    }
                }
                E_EPOCH => {
                    n.lock.enter();
                    n.pc[p] = if broken == Broken::NoDrain { E_PENDING } else { E_FENCE };
                }
                // fence_light_adders: membarrier.
                E_FENCE => {
                    if broken != Broken::NoMembarrier {
                        n.fence_all();
                    }
                    n.pc[p] = E_DRAIN0;
                }
                E_DRAIN0 | E_DRAIN1 => {
                    let i = (s.pc[p] - E_DRAIN0) as usize;
                    if s.drain(&mut n, i) {
                        n.pc[p] += 1;
                    } else if n.mark[i] == s.mark[i] {
                        return None;
                    }
                }
                E_PENDING => {
                    n.lock.pending = op == Op::Clear;
                    n.pc[p] = E_OP;
                }
                E_OP => {
                    match op {
                        Op::Clear => n.word = false,
                        Op::Freeze => n.frozen = true,
                    }
                    n.pc[p] = E_RELEASE;
                }
                E_RELEASE => {
                    n.lock.release();
                    n.procs.respond(p, 0);
                    if op == Op::Freeze {
                        n.frozen_word = Some(s.word);
                    }
                }
                _ => unreachable!(),
            }
        }
        Some(n)
    }

    fn check_state(s: &S) {
        let running = s.procs.live(EXCL) && (E_PENDING..=E_RELEASE).contains(&s.pc[EXCL]);
        for a in 0..ADDERS {
            let updating = s.procs.live(a) && s.pc[a] == A_FETCH_OR;
            assert!(
                !(running && updating),
                "adder {a} updates during the exclusive op: {s:?}"
            );
        }
        if let Some(w) = s.frozen_word {
            assert_eq!(s.word, w, "the word changed after freeze returned: {s:?}");
        }
    }

    fn explains(s: &S, order: &[usize], op: Op) -> bool {
        if !s.procs.in_real_time(order) {
            return false;
        }
        let (mut present, mut frozen) = (s.init, false);
        for &p in order {
            let r = if p == EXCL {
                match op {
                    Op::Clear => present = false,
                    Op::Freeze => frozen = true,
                }
                0
            } else if frozen {
                2
            } else {
                let r = !present as u8;
                present = true;
                r
            };
            if s.procs.done[p].is_some_and(|got| got != r) {
                return false;
            }
        }
        present == s.word
    }

    pub fn explore(op: Op, init: bool, broken: Broken, fence: Fence) -> super::Explored {
        let s0 = S {
            word: init,
            mark: [0; ADDERS],
            buf: [None; ADDERS],
            lock: Excl::default(),
            frozen: false,
            frozen_word: None,
            pc: [A_WRITABLE, A_WRITABLE, E_TAKE],
            seen_epoch: [0; PROCS],
            new: [false; PROCS],
            procs: Procs::new(),
            init,
        };
        explore_model(
            s0,
            PROCS + ADDERS,
            check_state,
            |s, p| step_or_flush(s, p, op, broken, fence),
            flush_the_dead,
            |s, order| explains(s, order, op),
        )
    }
}

#[test]
fn lockfree_adds_and_a_clear_or_freeze_every_interleaving_every_kill() {
    let mut states = vec![];
    for fence in [lockfree::Fence::Heavy, lockfree::Fence::Light] {
        for op in [lockfree::Op::Clear, lockfree::Op::Freeze] {
            for init in [false, true] {
                let e = lockfree::explore(op, init, lockfree::Broken::No, fence);
                assert!(e.finals > 100, "{fence:?} {op:?}: explored only {} runs", e.finals);
                states.push(e.states);
            }
        }
    }
    assert_eq!(states, [18438, 15769, 15281, 12215, 31392, 26665, 25841, 20219]);
}

/// Whether the lock-free model, broken as `broken` says, fails (panics)
/// for `op` on an absent item.
fn lockfree_model_fails(op: lockfree::Op, broken: lockfree::Broken, fence: lockfree::Fence) -> bool {
    std::panic::catch_unwind(|| lockfree::explore(op, false, broken, fence)).is_err()
}

/// Light marks need the exclusive side's membarrier: without it, a mark
/// still in its adder's store buffer escapes the drain.
#[test]
fn model_catches_light_marks_without_a_membarrier() {
    for op in [lockfree::Op::Clear, lockfree::Op::Freeze] {
        assert!(
            lockfree_model_fails(op, lockfree::Broken::NoMembarrier, lockfree::Fence::Light),
            "{op:?}: light marks without a membarrier passed the model"
        );
        // Heavy marks never needed it.
        lockfree::explore(op, false, lockfree::Broken::NoMembarrier, lockfree::Fence::Heavy);
    }
}

/// The lock-free model must catch an adder that skips its slot mark (a
/// frozen filter would change after freeze returned) ...
#[test]
fn model_catches_a_lockfree_adder_without_a_mark() {
    assert!(
        lockfree_model_fails(lockfree::Op::Freeze, lockfree::Broken::NoMark, lockfree::Fence::Heavy),
        "adders without marks passed the model"
    );
}

/// ... and an exclusive operation that does not drain the marks.
#[test]
fn model_catches_an_exclusive_op_that_ignores_adders_marks() {
    for op in [lockfree::Op::Clear, lockfree::Op::Freeze] {
        assert!(
            lockfree_model_fails(op, lockfree::Broken::NoDrain, lockfree::Fence::Heavy),
            "{op:?} without drain passed the model"
        );
    }
}

/// A fourth model (`journal`) covers crash-atomic merges and intersects:
/// two processes each copy their own operand into the one journal, taking
/// turns through the journal word, then apply it exclusively under
/// `pending` and a cursor, chunk by chunk (two chunks of one word each);
/// a third takes the exclusive lock (as any writer that finds a dead owner
/// does), finishing what a dead owner left and freeing a dead user's
/// journal. Any one process may be killed at any step.
///
/// Checked at every step: nobody writes the journal while an operation
/// waits to be finished from it, nothing reads the journal but the user it
/// holds the operand of, and the journal's space is never freed under a
/// pending operation. At the end of every run: some live process could
/// always move, and the bits, once the filter is touched again (a killed
/// operation finished from its cursor), are the initial bits with the
/// completed operations applied in some real-time order, the killed one
/// in or out.
mod journal {
    use super::{explore_model, me as id, Model, Owner, Procs, PROCS};

    /// Processes 0 and 1 merge (1 may intersect instead); 2 only takes the
    /// exclusive lock.
    const MERGERS: usize = 2;
    const INIT: [u8; 2] = [0b0011, 0b0101];
    const OPERAND: [[u8; 2]; MERGERS] = [[0b1000, 0b0010], [0b0110, 0b0111]];

    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub enum Op {
        Merge,
        Intersect,
    }

    /// Ways to break the protocol, which the model must catch.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Broken {
        No,
        /// A new journal user writes the journal without finishing what a
        /// dead one left pending.
        NoPendingCheck,
        /// Reclaiming frees a journal whose user is alive.
        ReclaimLive,
    }

    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct S {
        bits: [u8; 2],
        journal: [u8; 2],
        /// The journal's storage exists (grown, not yet freed).
        space: bool,
        jword: Owner,
        excl: Owner,
        /// The operation to finish, and the journal user it belongs to.
        pending: Option<(Op, usize)>,
        cursor: u8,
        pc: [u8; PROCS],
        /// Where a process goes once it holds the exclusive lock and has
        /// recovered what a dead owner left.
        ret: [u8; PROCS],
        procs: Procs<u8>,
    }

    impl Model for S {
        type Response = u8;
        fn procs(&self) -> &Procs<u8> {
            &self.procs
        }
        fn procs_mut(&mut self) -> &mut Procs<u8> {
            &mut self.procs
        }
    }

    fn apply(op: Op, w: u8, j: u8) -> u8 {
        match op {
            Op::Merge => w | j,
            Op::Intersect => w & j,
        }
    }

    // The merger's program.
    const J_TAKE: u8 = 0; // §8 M1
    const J_PENDING: u8 = 1;
    const J_FIN_RELEASE: u8 = 2;
    const J_RESERVE: u8 = 3; // §8 M2
    const J_COPY0: u8 = 4; // §8 M3
    const J_COPY1: u8 = 5;
    const J_BEGIN: u8 = 6; // §8 M4
    const J_APPLY0: u8 = 7;
    const J_CURSOR0: u8 = 8;
    const J_APPLY1: u8 = 9;
    const J_CURSOR1: u8 = 10;
    const J_REL_PENDING: u8 = 11;
    const J_REL_EXCL: u8 = 12;
    const J_FREE: u8 = 13; // §8 M5
    const J_REL_JOURNAL: u8 = 14;
    // lock_exclusive: take (or steal), resume, reclaim; then `ret`.
    const X_TAKE: u8 = 20;
    const X_RESUME: u8 = 21; // §8 X5
    const X_RESUME_CURSOR: u8 = 22;
    const X_RECLAIM: u8 = 23; // §8 X6
    const X_RECLAIM_FREE: u8 = 24;
    const X_RECLAIM_RELEASE: u8 = 25;
    // The toucher, after its exclusive entry.
    const T_RELEASE: u8 = 30;

    fn journaled_op(p: usize, op1: Op) -> Op {
        if p == 0 {
            Op::Merge
        } else {
            op1
        }
    }

    fn step(s: &S, p: usize, op1: Op, broken: Broken) -> Option<S> {
        if !s.procs.live(p) {
            return None;
        }
        let mut n = s.clone();
        n.procs.invoke(p);
        match s.pc[p] {
            J_TAKE => {
                if s.jword == 0 || s.procs.owner_dead(s.jword) {
                    n.jword = id(p);
                    n.pc[p] = if broken == Broken::NoPendingCheck {
                        J_RESERVE
                    } else {
                        J_PENDING
                    };
                } else {
                    return None;
                }
            }
            J_PENDING => {
                if s.pending.is_some() {
                    n.pc[p] = X_TAKE;
                    n.ret[p] = J_FIN_RELEASE;
                } else {
                    n.pc[p] = J_RESERVE;
                }
            }
            J_FIN_RELEASE => {
                // Exclusive's drop: pending cleared, then the lock.
                n.pending = None;
                n.excl = 0;
                n.pc[p] = J_RESERVE;
            }
            J_RESERVE => {
                n.space = true;
                n.pc[p] = J_COPY0;
            }
            J_COPY0 | J_COPY1 => {
                assert!(
                    s.pending.is_none(),
                    "{p} writes the journal while {:?} is to be finished from it: {s:?}",
                    s.pending
                );
                let i = (s.pc[p] - J_COPY0) as usize;
                n.journal[i] = OPERAND[p][i];
                n.pc[p] += 1;
                if s.pc[p] == J_COPY1 {
                    n.pc[p] = X_TAKE;
                    n.ret[p] = J_BEGIN;
                }
            }
            J_BEGIN => {
                n.cursor = 0;
                n.pending = Some((journaled_op(p, op1), p));
                n.pc[p] = J_APPLY0;
            }
            J_APPLY0 | J_APPLY1 => {
                let i = (s.pc[p] - J_APPLY0) as usize / 2;
                assert!(s.space, "{p} reads a freed journal: {s:?}");
                assert_eq!(s.journal, OPERAND[p], "{p} applies another's journal: {s:?}");
                n.bits[i] = apply(journaled_op(p, op1), s.bits[i], s.journal[i]);
                n.pc[p] += 1;
            }
            J_CURSOR0 | J_CURSOR1 => {
                n.cursor = (s.pc[p] - J_CURSOR0) / 2 + 1;
                n.pc[p] = if s.pc[p] == J_CURSOR1 { J_REL_PENDING } else { J_APPLY1 };
            }
            J_REL_PENDING => {
                n.pending = None;
                n.pc[p] = J_REL_EXCL;
            }
            J_REL_EXCL => {
                n.excl = 0;
                n.pc[p] = J_FREE;
            }
            J_FREE => {
                n.space = false;
                n.pc[p] = J_REL_JOURNAL;
            }
            J_REL_JOURNAL => {
                n.jword = 0;
                n.procs.respond(p, 0);
            }
            X_TAKE => {
                if s.excl == 0 || s.procs.owner_dead(s.excl) {
                    n.excl = id(p);
                    n.pc[p] = X_RESUME;
                } else {
                    return None;
                }
            }
            X_RESUME => match s.pending {
                Some((op, owner)) if s.cursor < 2 => {
                    if s.space {
                        assert_eq!(s.journal, OPERAND[owner], "resume reads a journal not {owner}'s: {s:?}");
                        let i = s.cursor as usize;
                        n.bits[i] = apply(op, s.bits[i], s.journal[i]);
                        n.pc[p] = X_RESUME_CURSOR;
                    } else {
                        n.pending = None; // unreachable journal: dropped
                        n.pc[p] = X_RECLAIM;
                    }
                }
                Some(_) => {
                    n.pending = None;
                    n.pc[p] = X_RECLAIM;
                }
                None => n.pc[p] = X_RECLAIM,
            },
            X_RESUME_CURSOR => {
                n.cursor = s.cursor + 1;
                n.pc[p] = X_RESUME;
            }
            X_RECLAIM => {
                let take =
                    s.jword != 0 && s.jword != id(p) && (s.procs.owner_dead(s.jword) || broken == Broken::ReclaimLive);
                if take {
                    n.jword = id(p);
                    n.pc[p] = X_RECLAIM_FREE;
                } else {
                    n.pc[p] = s.ret[p];
                }
            }
            X_RECLAIM_FREE => {
                n.space = false;
                n.pc[p] = X_RECLAIM_RELEASE;
            }
            X_RECLAIM_RELEASE => {
                n.jword = 0;
                n.pc[p] = s.ret[p];
            }
            T_RELEASE => {
                n.pending = None;
                n.excl = 0;
                n.procs.respond(p, 0);
            }
            _ => unreachable!(),
        }
        Some(n)
    }

    fn check_state(s: &S) {
        if s.pending.is_some() {
            assert!(s.space, "the journal was freed under a pending operation: {s:?}");
        }
    }

    /// The bits once anyone touches the filter: a dead owner's operation
    /// finished from its cursor.
    fn settled(s: &S) -> [u8; 2] {
        let mut bits = s.bits;
        if let Some((op, _)) = s.pending {
            if s.space {
                for (b, j) in bits.iter_mut().zip(s.journal).skip(s.cursor as usize) {
                    *b = apply(op, *b, j);
                }
            }
        }
        bits
    }

    fn explains(s: &S, order: &[usize], op1: Op) -> bool {
        if !s.procs.in_real_time(order) {
            return false;
        }
        let mut bits = INIT;
        for &p in order {
            if p < MERGERS {
                for (b, o) in bits.iter_mut().zip(OPERAND[p]) {
                    *b = apply(journaled_op(p, op1), *b, o);
                }
            }
        }
        bits == settled(s)
    }

    pub fn explore(op1: Op, broken: Broken) -> super::Explored {
        let s0 = S {
            bits: INIT,
            journal: [0; 2],
            space: false,
            jword: 0,
            excl: 0,
            pending: None,
            cursor: 0,
            pc: [J_TAKE, J_TAKE, X_TAKE],
            ret: [0, 0, T_RELEASE],
            procs: Procs::new(),
        };
        explore_model(
            s0,
            PROCS,
            check_state,
            |s, p| step(s, p, op1, broken),
            |_| {},
            |s, order| explains(s, order, op1),
        )
    }
}

#[test]
fn journaled_merges_and_intersects_every_interleaving_every_kill() {
    for op in [journal::Op::Merge, journal::Op::Intersect] {
        let e = journal::explore(op, journal::Broken::No);
        assert!(e.finals > 100, "{op:?}: explored only {} runs", e.finals);
        assert_eq!(e.states, 5647, "{op:?}");
    }
}

/// The journal model must catch a journal user that overwrites the journal
/// a dead user's operation is still to be finished from ...
#[test]
fn model_catches_a_journal_user_that_ignores_a_pending_operation() {
    let r = std::panic::catch_unwind(|| journal::explore(journal::Op::Merge, journal::Broken::NoPendingCheck));
    assert!(r.is_err(), "a journal user ignoring pending passed the model");
}

/// ... and a reclaim that frees a live user's journal.
#[test]
fn model_catches_a_reclaim_of_a_live_users_journal() {
    let r = std::panic::catch_unwind(|| journal::explore(journal::Op::Intersect, journal::Broken::ReclaimLive));
    assert!(r.is_err(), "reclaiming a live user's journal passed the model");
}
