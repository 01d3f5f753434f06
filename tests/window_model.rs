//! An exhaustive interleaving check of the generation step protocol of
//! windowed filters (the design is in `src/math/window.rs`).
//!
//! One item, one bit per generation (k = 1 suffices: the exactly-once part
//! within a generation is the stripe's, checked in `tests/model.rs`), a
//! ring of `g + 1` slots for `g` = 2 and 3. The processes:
//!
//! * adder A0: add the item, then clear the spare if it is dirty;
//! * adder A1: take a due step first, then add the item;
//! * writer W: two steps (the clock is two periods ahead, or `rotate`
//!   twice, §8 W9), clearing the spare after each;
//! * reader Q: one query (newest generation first, then a re-read of the
//!   view: "absent" stands only if no step came meanwhile, "present" also
//!   after one; otherwise it looks again).
//!
//! In a second set of configurations (a blocked layout's) the adders try
//! the lock-free add first (mark, view: if closed, unmark and take the
//! striped path) and every step, or the opening of a filter found closed,
//! runs under the cleaner claim: close, drain the marks, drain the stripe,
//! CAS, drain the stripe again, open.
//!
//! The clock is not modelled here (grid numbers, `last` and visibility by
//! time are per-process arithmetic, tested in `src/math/window.rs`): every
//! generation at ring distance below `g` is visible, and the clock allows
//! two steps. Nor is `last`: an adder's answer for the generation it
//! writes is that one bit update alone, as here (`Filter::window_write`:
//! `last`'s old value takes no part, which `filter.rs`'s
//! `a_fresh_generation_tells_one_of_two_lockfree_adders_new` checks with
//! the real code).
//!
//! One step of the model is one atomic access of the protocol (a load, a
//! store, a CAS, an RMW on a bit). Every interleaving is explored, depth
//! first with states memoised, under sequential consistency (the protocol
//! uses `SeqCst` for the pairs whose order matters: an adder's stripe then
//! its `view` load against a step's CAS then the cleaner's stripe loads).
//! Any one process may be killed at any step; its stripe or cleaner claim
//! stays held by a dead owner, which waiters take over.
//!
//! Checked in every reachable state: a spare marked clean holds no bit; no
//! live generation is cleared; adders write only live generations, at
//! most one step happens while an adder holds its stripe, and none while
//! a lock-free adder is between its view load and its unmark; a reader
//! never waits; an add waits only for another adder's stripe (never for a
//! step or a clear; a blocked filter's stepper waits, in its drains, for
//! adds in flight). At the end of every run: nobody is stuck; the results
//! are linearizable with the steps (some order of the adds, the query and
//! the steps, consistent with real time, explains every answer — the
//! killed operation in or out — and the item's final presence), so among
//! concurrent adders of an item not in any live generation exactly one is
//! told new, across a step too; and whatever a killed process left, a
//! fresh process can take over the locks and clear the spare.
//!
//! Broken variants of the protocol must fail the model: adders that do not
//! re-read the view after their write; a clear without drain; a step that
//! publishes a spare not yet clean; a clear of the generation just
//! published; a reader that takes "absent" across a step, or does not
//! re-read the view; a step that does not close the filter, or does not
//! wait for the marks, or for the stripe before its CAS; an opening that
//! does not wait for the stripe.

#[path = "common/explore.rs"]
mod explore;

use std::collections::HashSet;

use explore::{Explored, FxSet};

const NP: usize = 4;
const A0: usize = 0;
const A1: usize = 1;
const W: usize = 2;
const Q: usize = 3;
/// Operations: the two adds, the query, the first and second step.
const NOPS: usize = 5;
const OP_STEP: usize = 3;
/// Generation numbers start here, so that the `g - 1` before are >= 1.
const START: u8 = 4;
/// The clock allows two steps.
const TARGET: u8 = START + 2;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Broken {
    None,
    /// Adders answer for the view they read before writing.
    NoRecheck,
    /// The cleaner zeroes the spare without waiting for stripe holders.
    NoDrain,
    /// A step publishes the spare whether or not it is clean.
    PublishDirty,
    /// The cleaner clears the slot the last step published.
    ClearCurrent,
    /// The reader takes "absent" across a step (as it may "present").
    QueryAbsentAcrossStep,
    /// The reader does not re-read the view after its looks.
    QueryNoRecheck,
    /// A step does not close the filter to lock-free adds.
    NoClose,
    /// A step does not wait for the lock-free adds in flight.
    NoMarkDrain,
    /// The filter is opened again without waiting for stripe holders.
    OpenNoDrain,
    /// A step waits for the lock-free adds in flight but not for the
    /// striped ones (which may have begun while the filter was open).
    NoStripeDrainBeforeStep,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Step,
    Add,
    /// An add that tries the lock-free path first (blocked layouts).
    LfAdd,
    Clean,
    Query,
}

fn program(c: &Cfg, p: usize) -> &'static [Phase] {
    use Phase::*;
    match (p, c.lockfree) {
        (A0, false) => &[Add, Clean],
        (A0, true) => &[LfAdd, Clean],
        // A due step before the add, its spare clean or cleared (§8 W5).
        (A1, false) => &[Step, Add],
        (A1, true) => &[Step, LfAdd],
        (W, _) => &[Step, Clean, Step, Clean],
        _ => &[Query],
    }
}

#[derive(Clone, Copy, Debug)]
struct Cfg {
    g: u8,
    broken: Broken,
    /// Generations (numbers) holding the item at the start.
    present: u16,
    /// The spare starts dirty, holding the item (an expired generation's).
    dirty_spare: bool,
    /// Adders try the lock-free path first, and steps close the filter to
    /// it, drain it, and open it again.
    lockfree: bool,
}

impl Cfg {
    fn ring(&self) -> u8 {
        self.g + 1
    }
    fn slot(&self, gen: u8) -> usize {
        (gen % self.ring()) as usize
    }
    fn live(&self, view: u8, gen: u8) -> bool {
        gen <= view && view - gen < self.g
    }
}

type Owner = u8;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct State {
    view: u8,
    bits: [bool; 4],
    /// `clean[s]`: the view + 1 from which a step may publish slot `s`.
    clean: [u8; 4],
    stripe: Owner,
    claim: Owner,
    /// The view word's flag: closed to lock-free adds.
    closed: bool,
    /// Each process's slot mark (a lock-free add in flight).
    mark: [bool; NP],
    steps: u8,
    phase: [u8; NP],
    pc: [u8; NP],
    // Locals: the views read, the writes' "new there", the running answer,
    // the next generation to look at.
    v: [u8; NP],
    v2: [u8; NP],
    n1: [bool; NP],
    present: [bool; NP],
    gi: [u8; NP],
    /// The closed flag as read with the view.
    o: [bool; NP],
    dead: [bool; NP],
    crashed: bool,
    invoked: [bool; NOPS],
    done: [Option<bool>; NOPS],
    /// before[a][b]: a responded before b was invoked.
    before: [[bool; NOPS]; NOPS],
}

fn me(p: usize) -> Owner {
    p as Owner + 1
}

impl State {
    fn new(c: &Cfg) -> State {
        let mut s = State {
            view: START,
            bits: [false; 4],
            clean: [0; 4],
            stripe: 0,
            claim: 0,
            closed: false,
            mark: [false; NP],
            steps: 0,
            phase: [0; NP],
            pc: [0; NP],
            v: [0; NP],
            v2: [0; NP],
            n1: [false; NP],
            present: [false; NP],
            gi: [0; NP],
            o: [false; NP],
            dead: [false; NP],
            crashed: false,
            invoked: [false; NOPS],
            done: [None; NOPS],
            before: [[false; NOPS]; NOPS],
        };
        for gen in START + 1 - c.g..=START {
            if c.present & 1 << gen != 0 {
                s.bits[c.slot(gen)] = true;
            }
        }
        let spare = c.slot(START + 1);
        if c.dirty_spare {
            s.bits[spare] = true;
        } else {
            s.clean[spare] = START + 1;
        }
        s
    }

    /// The whole state in 153 bits, for the set of states seen: a key of
    /// 24 bytes hashes and compares in three words, and tens of millions
    /// of them take a quarter of the memory the state's own bytes would.
    /// Every field is put whole (a value wider than its field fails the
    /// test), so two states have one key only if they are equal.
    fn key(&self) -> Key {
        // Four flags in four bits; four small numbers of `w` bits each.
        fn flags(a: [bool; 4]) -> u64 {
            a[0] as u64 | (a[1] as u64) << 1 | (a[2] as u64) << 2 | (a[3] as u64) << 3
        }
        fn nums(a: [u8; 4], w: u32, wide: &mut u64) -> u64 {
            *wide |= (a[0] | a[1] | a[2] | a[3]) as u64 >> w;
            a[0] as u64 | (a[1] as u64) << w | (a[2] as u64) << (2 * w) | (a[3] as u64) << (3 * w)
        }
        let mut wide = (self.view >> 3 | self.stripe >> 3 | self.claim >> 3 | self.steps >> 2) as u64;
        let mut done = 0;
        for (i, d) in self.done.iter().enumerate() {
            done |= (d.map_or(2, u64::from)) << (2 * i);
        }
        let mut invoked = 0;
        let mut before = 0;
        for a in 0..NOPS {
            invoked |= (self.invoked[a] as u64) << a;
            for b in 0..NOPS {
                before |= (self.before[a][b] as u64) << (NOPS * a + b);
            }
        }
        // 13 + 24 + 5 + 10 + 8 = 60 bits.
        let w0 = self.view as u64
            | (self.stripe as u64) << 3
            | (self.claim as u64) << 6
            | (self.closed as u64) << 9
            | (self.steps as u64) << 10
            | (self.crashed as u64) << 12
            | flags(self.bits) << 13
            | flags(self.mark) << 17
            | flags(self.n1) << 21
            | flags(self.present) << 25
            | flags(self.o) << 29
            | flags(self.dead) << 33
            | invoked << 37
            | done << 42
            | nums(self.gi, 2, &mut wide) << 52;
        // 12 + 12 + 20 + 12 = 56 bits.
        let w1 = nums(self.clean, 3, &mut wide)
            | nums(self.phase, 3, &mut wide) << 12
            | nums(self.pc, 5, &mut wide) << 24
            | nums(self.v, 3, &mut wide) << 44;
        // 12 + 25 = 37 bits.
        let w2 = nums(self.v2, 3, &mut wide) | before << 12;
        assert_eq!(wide, 0, "a field wider than its place in the key: {self:?}");
        Key([w0, w1, w2])
    }

    fn finished(&self, c: &Cfg, p: usize) -> bool {
        self.phase[p] as usize == program(c, p).len()
    }

    fn running(&self, c: &Cfg, p: usize) -> bool {
        !self.dead[p] && !self.finished(c, p)
    }

    fn owner_dead(&self, o: Owner) -> bool {
        o != 0 && self.dead[o as usize - 1]
    }

    fn invoke(&mut self, op: usize) {
        if !self.invoked[op] {
            self.invoked[op] = true;
            for q in 0..NOPS {
                if self.done[q].is_some() {
                    self.before[q][op] = true;
                }
            }
        }
    }

    fn respond(&mut self, op: usize, r: bool) {
        self.done[op] = Some(r);
    }

    fn next_phase(&mut self, p: usize) {
        self.phase[p] += 1;
        self.pc[p] = 0;
        self.forget_locals(p);
    }

    /// Locals do not outlive a phase (fewer distinct states to explore).
    fn forget_locals(&mut self, p: usize) {
        self.v[p] = 0;
        self.v2[p] = 0;
        self.n1[p] = false;
        self.present[p] = false;
        self.gi[p] = 0;
        self.o[p] = false;
    }
}

// Step phase (§8 W2).
const ST_VIEW: u8 = 0;
const ST_CLEAN: u8 = 1;
const ST_CAS: u8 = 2;
// ... of a blocked filter (lock-free adds, §8 W7): under the cleaner claim, close,
// drain the marks, then the stripes, step, drain the stripes again, open;
// or only the opening.
const SL_CLAIM: u8 = 3;
const SL_VIEW: u8 = 4;
const SL_CLOSE: u8 = 5;
const SL_DRAIN: u8 = 6;
const SL_CAS: u8 = 7;
const SL_STRIPES: u8 = 8;
const SL_OPEN: u8 = 9;
const SL_RELEASE: u8 = 10;
const SL_BEFORE: u8 = 11;
// Add phase (§8 W3).
const AD_TAKE: u8 = 0;
const AD_VIEW: u8 = 1;
const AD_W1: u8 = 2;
const AD_REREAD: u8 = 3;
const AD_W2: u8 = 4;
const AD_GATHER: u8 = 5;
const AD_RELEASE: u8 = 6;
// Lock-free add phase (§8 W6); its striped fallback runs the add phase's steps at
// FALLBACK + AD_*.
const LF_MARK: u8 = 0;
const LF_VIEW: u8 = 1;
const LF_BAIL: u8 = 2;
const LF_W: u8 = 3;
const LF_GATHER: u8 = 4;
const LF_DONE: u8 = 5;
const FALLBACK: u8 = 10;
// Clean phase (§8 W4).
const K_CLAIM: u8 = 0;
const K_VIEW: u8 = 1;
const K_CHECK: u8 = 2;
const K_DRAIN: u8 = 3;
const K_ZERO: u8 = 4;
const K_MARK: u8 = 5;
const K_RELEASE: u8 = 6;
// Query phase (§8 W8).
const Q_VIEW: u8 = 0;
const Q_READ: u8 = 1;

/// Set the item's bit in generation `gen`'s slot (one RMW); whether it was 0.
fn write(c: &Cfg, s: &State, n: &mut State, p: usize, gen: u8) -> bool {
    assert!(
        c.live(s.view, gen),
        "adder {p} writes generation {gen}, not live in view {}: {s:?}",
        s.view
    );
    let slot = c.slot(gen);
    n.bits[slot] = true;
    !s.bits[slot]
}

/// The slot a cleaner with view `kv` clears.
fn target(c: &Cfg, kv: u8) -> usize {
    if c.broken == Broken::ClearCurrent {
        c.slot(kv)
    } else {
        c.slot(kv + 1)
    }
}

/// The state after one step of `p`, or `None` when `p` is blocked or done.
fn step(c: &Cfg, s: &State, p: usize) -> Option<State> {
    if !s.running(c, p) {
        return None;
    }
    let mut n = s.clone();
    let id = me(p);
    let g = c.g;
    match program(c, p)[s.phase[p] as usize] {
        Phase::Step => match s.pc[p] {
            ST_VIEW => {
                n.v[p] = s.view;
                if c.lockfree {
                    // A step possible, or the filter closed: the rest under
                    // the claim.
                    if s.view < TARGET || s.closed {
                        n.pc[p] = SL_CLAIM;
                    } else {
                        n.next_phase(p);
                    }
                } else if s.view >= TARGET {
                    n.next_phase(p);
                } else {
                    n.pc[p] = ST_CLEAN;
                }
            }
            ST_CLEAN => {
                let v = s.v[p];
                if s.clean[c.slot(v + 1)] == v + 1 || c.broken == Broken::PublishDirty {
                    n.pc[p] = ST_CAS;
                } else {
                    n.next_phase(p); // deferred: nobody waits for a clear
                }
            }
            ST_CAS => {
                if s.view == s.v[p] {
                    n.view += 1;
                    let op = OP_STEP + s.steps as usize;
                    n.steps += 1;
                    n.invoke(op);
                    n.respond(op, false);
                }
                n.next_phase(p);
            }
            SL_CLAIM => {
                if s.claim == 0 || s.owner_dead(s.claim) {
                    n.claim = id;
                    n.pc[p] = SL_VIEW;
                } else {
                    n.next_phase(p); // someone is on it: do not wait
                }
            }
            SL_VIEW => {
                let v = s.view;
                n.v[p] = v;
                n.o[p] = s.closed;
                let due = v < TARGET && (s.clean[c.slot(v + 1)] == v + 1 || c.broken == Broken::PublishDirty);
                n.pc[p] = if due {
                    SL_CLOSE
                } else if s.closed {
                    SL_STRIPES
                } else {
                    SL_RELEASE
                };
            }
            SL_CLOSE => {
                // A CAS on the view word as read.
                if (s.view, s.closed) != (s.v[p], s.o[p]) {
                    n.pc[p] = SL_RELEASE;
                } else {
                    if c.broken != Broken::NoClose {
                        n.closed = true;
                        n.o[p] = true;
                    }
                    n.gi[p] = 0;
                    n.pc[p] = SL_DRAIN;
                }
            }
            SL_DRAIN => {
                // One adder's mark per model step (nobody else marks).
                let q = s.gi[p] as usize;
                if q > A1 {
                    n.pc[p] = SL_BEFORE;
                } else if q == p || !s.mark[q] || c.broken == Broken::NoMarkDrain {
                    n.gi[p] += 1;
                } else if s.dead[q] {
                    n.mark[q] = false;
                } else {
                    return None; // a lock-free add in flight: wait for it
                }
            }
            SL_BEFORE => {
                if c.broken == Broken::NoStripeDrainBeforeStep || s.stripe == 0 {
                    n.pc[p] = SL_CAS;
                } else if s.owner_dead(s.stripe) {
                    n.stripe = 0;
                } else {
                    return None; // a striped add that may have begun open
                }
            }
            SL_CAS => {
                if (s.view, s.closed) == (s.v[p], s.o[p]) {
                    n.view += 1;
                    n.v[p] = s.view + 1;
                    let op = OP_STEP + s.steps as usize;
                    n.steps += 1;
                    n.invoke(op);
                    n.respond(op, false);
                    n.pc[p] = if s.closed { SL_STRIPES } else { SL_RELEASE };
                } else {
                    n.pc[p] = SL_RELEASE;
                }
            }
            SL_STRIPES => {
                if c.broken == Broken::OpenNoDrain || s.stripe == 0 {
                    n.pc[p] = SL_OPEN;
                } else if s.owner_dead(s.stripe) {
                    n.stripe = 0;
                } else {
                    return None; // an add that may have read an older view
                }
            }
            SL_OPEN => {
                if (s.view, s.closed) == (s.v[p], true) {
                    n.closed = false;
                }
                n.pc[p] = SL_RELEASE;
            }
            SL_RELEASE => {
                if s.claim == id {
                    n.claim = 0;
                }
                n.next_phase(p);
            }
            _ => unreachable!(),
        },
        Phase::Add => striped_add(c, s, &mut n, p, 0)?,
        Phase::LfAdd if s.pc[p] >= FALLBACK => striped_add(c, s, &mut n, p, FALLBACK)?,
        Phase::LfAdd => {
            let op = p;
            match s.pc[p] {
                LF_MARK => {
                    n.invoke(op);
                    n.mark[p] = true;
                    n.pc[p] = LF_VIEW;
                }
                LF_VIEW => {
                    if s.closed {
                        n.pc[p] = LF_BAIL;
                    } else {
                        n.v[p] = s.view;
                        n.pc[p] = LF_W;
                    }
                }
                LF_BAIL => {
                    n.mark[p] = false;
                    n.forget_locals(p);
                    n.pc[p] = FALLBACK + AD_TAKE;
                }
                LF_W => {
                    n.present[p] = !write(c, s, &mut n, p, s.v[p]);
                    n.gi[p] = 1;
                    n.pc[p] = LF_GATHER;
                }
                LF_GATHER => {
                    let d = s.gi[p];
                    if d < g {
                        n.present[p] |= s.bits[c.slot(s.v[p] - d)];
                        n.gi[p] += 1;
                    } else {
                        n.pc[p] = LF_DONE;
                    }
                }
                LF_DONE => {
                    n.mark[p] = false;
                    n.respond(op, !s.present[p]);
                    n.next_phase(p);
                }
                _ => unreachable!(),
            }
        }
        Phase::Clean => match s.pc[p] {
            K_CLAIM => {
                if s.claim == 0 || s.owner_dead(s.claim) {
                    n.claim = id;
                    n.pc[p] = K_VIEW;
                } else {
                    n.next_phase(p); // someone is on it: do not wait
                }
            }
            K_VIEW => {
                n.v[p] = s.view;
                n.pc[p] = K_CHECK;
            }
            K_CHECK => {
                let kv = s.v[p];
                let done = s.clean[c.slot(kv + 1)] == kv + 1 && c.broken != Broken::ClearCurrent;
                n.pc[p] = if done { K_RELEASE } else { K_DRAIN };
            }
            K_DRAIN => {
                if c.broken == Broken::NoDrain || s.stripe == 0 {
                    n.pc[p] = K_ZERO;
                } else if s.owner_dead(s.stripe) {
                    n.stripe = 0;
                } else {
                    return None; // an add in flight: the cleaner waits for it
                }
            }
            K_ZERO => {
                let slot = target(c, s.v[p]);
                for d in 0..g {
                    assert!(
                        c.slot(s.view - d) != slot,
                        "cleaner {p} clears slot {slot}, live in view {}: {s:?}",
                        s.view
                    );
                }
                n.bits[slot] = false;
                n.pc[p] = K_MARK;
            }
            K_MARK => {
                let kv = s.v[p];
                n.clean[target(c, kv)] = kv + 1;
                n.pc[p] = K_RELEASE;
            }
            K_RELEASE => {
                if s.claim == id {
                    n.claim = 0;
                }
                n.next_phase(p);
            }
            _ => unreachable!(),
        },
        Phase::Query => match s.pc[p] {
            Q_VIEW => {
                n.invoke(2);
                n.v[p] = s.view;
                n.present[p] = false;
                n.gi[p] = 0;
                n.pc[p] = Q_READ;
            }
            Q_READ => {
                // Newest first: a recent item is found after one look.
                let i = s.gi[p];
                if i < g {
                    n.present[p] |= s.bits[c.slot(s.v[p] - i)];
                    n.gi[p] += 1;
                } else {
                    // "Absent" stands only if no step came while it looked
                    // (no generation was cleared meanwhile); "present"
                    // across one step too (a clear only takes bits away).
                    // Else look again (not a wait: nobody is waited for).
                    let steps = s.view - s.v[p];
                    let stands = steps == 0
                        || (steps == 1 && (s.present[p] || c.broken == Broken::QueryAbsentAcrossStep))
                        || c.broken == Broken::QueryNoRecheck;
                    if stands {
                        n.respond(2, s.present[p]);
                        n.next_phase(p);
                    } else {
                        n.v[p] = s.view;
                        n.present[p] = false;
                        n.gi[p] = 0;
                    }
                }
            }
            _ => unreachable!(),
        },
    }
    Some(n)
}

/// One step of a striped add (the `Add` phase, or a lock-free add's
/// fallback), its steps numbered from `base`. None when it waits.
fn striped_add(c: &Cfg, s: &State, n: &mut State, p: usize, base: u8) -> Option<()> {
    let op = p;
    let id = me(p);
    let g = c.g;
    match s.pc[p] - base {
        AD_TAKE => {
            n.invoke(op);
            if s.stripe == 0 {
                n.stripe = id;
                n.pc[p] = base + AD_VIEW;
            } else if s.owner_dead(s.stripe) {
                n.stripe = 0;
            } else {
                let o = s.stripe as usize - 1;
                assert!(
                    matches!(program(c, o)[s.phase[o] as usize], Phase::Add | Phase::LfAdd),
                    "adder {p} waits for a stripe held outside an add: {s:?}"
                );
                return None;
            }
        }
        AD_VIEW => {
            n.v[p] = s.view;
            n.pc[p] = base + AD_W1;
        }
        AD_W1 => {
            n.n1[p] = write(c, s, n, p, s.v[p]);
            n.pc[p] = base + AD_REREAD;
        }
        AD_REREAD => {
            let v = s.v[p];
            let v2 = if c.broken == Broken::NoRecheck { v } else { s.view };
            assert!(v2 - v <= 1, "two steps during adder {p}'s stripe hold: {s:?}");
            n.v2[p] = v2;
            if v2 == v {
                n.present[p] = !s.n1[p];
                n.gi[p] = 1;
                n.pc[p] = base + AD_GATHER;
            } else {
                n.pc[p] = base + AD_W2;
            }
        }
        AD_W2 => {
            let n2 = write(c, s, n, p, s.v2[p]);
            // The slot of the earlier write counts with what it held
            // before it; it is at distance 1, visible (g >= 2).
            n.present[p] = !n2 || !s.n1[p];
            n.gi[p] = 2;
            n.pc[p] = base + AD_GATHER;
        }
        AD_GATHER => {
            let d = s.gi[p];
            if d < g {
                let gen = s.v2[p] - d;
                n.present[p] |= s.bits[c.slot(gen)];
                n.gi[p] += 1;
            } else {
                n.pc[p] = base + AD_RELEASE;
            }
        }
        AD_RELEASE => {
            if s.stripe == id {
                n.stripe = 0;
            }
            n.respond(op, !s.present[p]);
            n.next_phase(p);
        }
        _ => unreachable!(),
    }
    Some(())
}

fn check_state(c: &Cfg, s: &State) {
    let spare = c.slot(s.view + 1);
    if s.clean[spare] == s.view + 1 {
        assert!(!s.bits[spare], "a spare marked clean holds a bit: {s:?}");
    }
    if s.running(c, Q) {
        assert!(step(c, s, Q).is_some(), "the reader waits: {s:?}");
    }
    for p in [A0, A1] {
        let lf = s.running(c, p) && program(c, p)[s.phase[p] as usize] == Phase::LfAdd;
        if lf && (LF_W..=LF_DONE).contains(&s.pc[p]) {
            assert_eq!(s.view, s.v[p], "a step during adder {p}'s lock-free add: {s:?}");
        }
    }
}

/// Some order of the operations, consistent with real time, that explains
/// the answers and the item's final presence.
///
/// The specification: an add answers "new" iff the item is in no live
/// generation at its linearization point, and puts it in the current
/// generation there; it may keep putting it in each generation made
/// current by a step before it answers (the protocol's second write: the
/// item's life counts from some instant of the add, not necessarily the
/// linearization point). A query answers whether the item is in a live
/// generation. The killed process's operation took effect or did not.
fn linearizable(c: &Cfg, s: &State) -> bool {
    let completed: u8 = (0..NOPS).filter(|&o| s.done[o].is_some()).fold(0, |m, o| m | 1 << o);
    let killed: u8 = (0..NOPS)
        .filter(|&o| s.invoked[o] && s.done[o].is_none())
        .fold(0, |m, o| m | 1 << o);
    let physical = (0..c.g).any(|d| s.bits[c.slot(s.view - d)]);
    [completed, completed | killed].iter().any(|&set| {
        let mut memo = HashSet::new();
        let start = Search {
            placed: 0,
            cur: START,
            present: c.present,
            open: 0,
        };
        search(c, s, physical, set, start, &mut memo)
    })
}

fn visible(c: &Cfg, present: u16, cur: u8) -> bool {
    (0..c.g).any(|d| present & 1 << (cur - d) != 0)
}

/// A partial linearization: the operations placed so far, the current
/// generation, where the item is, and the adds still renewing it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Search {
    placed: u8,
    cur: u8,
    present: u16,
    open: u8,
}

/// Place the operations of `set` one by one; true if some order explains
/// the run.
fn search(c: &Cfg, s: &State, physical: bool, set: u8, at: Search, memo: &mut HashSet<Search>) -> bool {
    if at.placed == set {
        return at.cur == s.view && visible(c, at.present, at.cur) == physical;
    }
    if !memo.insert(at) {
        return false;
    }
    let left = set & !at.placed;
    for op in (0..NOPS).filter(|&o| left & 1 << o != 0) {
        // Everything that answered before `op` was invoked goes first.
        if (0..NOPS).any(|q| left & 1 << q != 0 && s.before[q][op]) {
            continue;
        }
        let placed = at.placed | 1 << op;
        let found = match op {
            OP_STEP.. => {
                let cur = at.cur + 1;
                // An add that answered before this step cannot renew.
                let may = (0..2)
                    .filter(|&a| at.open & 1 << a != 0 && !s.before[a][op])
                    .fold(0u8, |m, a| m | 1 << a);
                (0..=may).filter(|sub| sub & !may == 0).any(|open| {
                    let present = if open != 0 { at.present | 1 << cur } else { at.present };
                    let next = Search {
                        placed,
                        cur,
                        present,
                        open,
                    };
                    search(c, s, physical, set, next, memo)
                })
            }
            2 => {
                s.done[2].map_or(true, |got| got == visible(c, at.present, at.cur))
                    && search(c, s, physical, set, Search { placed, ..at }, memo)
            }
            a => {
                let new = !visible(c, at.present, at.cur);
                let next = Search {
                    placed,
                    present: at.present | 1 << at.cur,
                    open: at.open | 1 << a,
                    ..at
                };
                s.done[a].map_or(true, |got| got == new) && search(c, s, physical, set, next, memo)
            }
        };
        if found {
            return true;
        }
    }
    false
}

/// Whatever the run left, a fresh process takes the locks over (free or
/// held by the dead) and clears the spare; a step is then possible.
fn next_process_finishes(c: &Cfg, s: &State) {
    assert!(s.claim == 0 || s.owner_dead(s.claim), "cleaner claim stuck: {s:?}");
    assert!(s.stripe == 0 || s.owner_dead(s.stripe), "stripe stuck: {s:?}");
    for p in 0..NP {
        assert!(!s.mark[p] || s.dead[p], "mark stuck: {s:?}");
    }
    let spare = c.slot(s.view + 1);
    for d in 0..c.g {
        assert_ne!(c.slot(s.view - d), spare);
    }
    let mut f = s.clone();
    f.bits[spare] = false;
    f.clean[spare] = s.view + 1;
    check_state(c, &f);
}

/// A state as the set of states seen keeps it (`State::key`).
#[derive(PartialEq, Eq)]
struct Key([u64; 3]);

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for w in self.0 {
            h.write_u64(w);
        }
    }
}

/// What the verdict on a final state depends on: the answers, their order
/// in real time, where the item is and the view.
type Verdict = ([Option<bool>; NOPS], [bool; NOPS], [[bool; NOPS]; NOPS], [bool; 4], u8);

/// The model of one configuration, as the explorer runs it.
struct Model {
    c: Cfg,
    /// The final states' facts that decide linearizability, judged once.
    judged: FxSet<Verdict>,
}

impl explore::Model for Model {
    type State = State;
    type Key = Key;

    fn procs(&self) -> usize {
        NP
    }

    fn key(&self, s: &State) -> Key {
        s.key()
    }

    fn step(&self, s: &State, p: usize) -> Option<State> {
        step(&self.c, s, p)
    }

    /// A SIGKILL instead of `p`'s next step, even one it waits to take
    /// (one per run).
    fn kill(&self, s: &State, p: usize, _: bool) -> Option<State> {
        if !s.running(&self.c, p) || s.crashed {
            return None;
        }
        let mut k = s.clone();
        k.dead[p] = true;
        k.crashed = true;
        k.pc[p] = 0;
        k.forget_locals(p);
        Some(k)
    }

    fn check(&self, s: &State) {
        check_state(&self.c, s);
    }

    fn at_end(&mut self, s: &State) {
        let c = &self.c;
        let stuck: Vec<usize> = (0..NP).filter(|&p| s.running(c, p)).collect();
        assert!(stuck.is_empty(), "deadlock: {stuck:?} cannot move: {s:?}");
        // The verdict depends on the answers, their order in real time and
        // where the item is: many runs share them.
        let key = (s.done, s.invoked, s.before, s.bits, s.view);
        if self.judged.insert(key) {
            assert!(linearizable(c, s), "not linearizable: {c:?} {s:?}");
        }
        next_process_finishes(c, s);
    }
}

/// Explore every run of `c`.
fn explore(c: Cfg) -> Explored {
    let mut m = Model {
        c,
        judged: FxSet::default(),
    };
    explore::explore(&mut m, State::new(&c))
}

fn configs(g: u8, broken: Broken, lockfree: &[bool]) -> Vec<Cfg> {
    let mut out = vec![];
    let oldest = START + 1 - g;
    let mut sets = vec![0, 1 << START, 1 << oldest, (1 << START) | (1 << oldest)];
    if START - 1 != oldest {
        sets.push(1 << (START - 1));
    }
    for present in sets {
        for dirty_spare in [false, true] {
            for &lockfree in lockfree {
                out.push(Cfg {
                    g,
                    broken,
                    present,
                    dirty_spare,
                    lockfree,
                });
            }
        }
    }
    out
}

/// Explore every configuration of `g` generations; the states explored,
/// over all of them.
fn explore_all(g: u8, lockfree: bool) -> usize {
    explore_some(g, lockfree, |_| true)
}

/// `explore_all` for the configurations `pick` takes (a long model is
/// split over tests, which run in parallel).
fn explore_some(g: u8, lockfree: bool, pick: impl Fn(&Cfg) -> bool) -> usize {
    let mut states = 0;
    for c in configs(g, Broken::None, &[lockfree]).into_iter().filter(pick) {
        let e = explore(c);
        assert!(e.finals > 1000, "{c:?}: only {} runs", e.finals);
        states += e.states;
    }
    states
}

// The states each test explores, as counted when the exploration was last
// changed: a change of the model changes them (count again), a change of
// the explorer must not.

#[test]
fn two_generations_every_interleaving_every_kill() {
    assert_eq!(explore_all(2, false), 8_144_504);
}

#[test]
fn three_generations_every_interleaving_every_kill() {
    assert_eq!(explore_all(3, false), 12_478_448);
}

#[test]
fn lockfree_adds_two_generations_every_interleaving_every_kill() {
    assert_eq!(explore_all(2, true), 42_396_273);
}

#[test]
fn lockfree_adds_three_generations_every_interleaving_every_kill() {
    assert_eq!(explore_some(3, true, |c| c.present & 1 << START == 0), 46_816_928);
}

#[test]
fn lockfree_adds_three_generations_item_current_every_interleaving_every_kill() {
    assert_eq!(explore_some(3, true, |c| c.present & 1 << START != 0), 19_692_252);
}

/// A step happens in some runs and not in others, adds answer both ways:
/// the model explores what it claims to.
#[test]
fn the_runs_cover_steps_and_both_answers() {
    let c = Cfg {
        g: 2,
        broken: Broken::None,
        present: 1 << (START - 1),
        dirty_spare: false,
        lockfree: false,
    };
    let mut m = Cover {
        c,
        steps: HashSet::new(),
        answers: HashSet::new(),
    };
    assert_eq!(explore::explore(&mut m, State::new(&c)).states, 617_137);
    let Cover { steps, answers, .. } = m;
    assert_eq!(steps, HashSet::from([1, 2]), "runs with one and with two steps");
    // The item was only in the oldest generation: an add before the first
    // step finds it, an add after does not.
    assert!(answers.contains(&(Some(false), Some(false))));
    assert!(answers.contains(&(Some(true), Some(false))));
    assert!(answers.contains(&(Some(false), Some(true))));
    assert!(!answers.contains(&(Some(true), Some(true))), "both told new");
}

/// The runs of a configuration without kills or checks, and what their
/// final states show: the steps taken and the adders' answers.
struct Cover {
    c: Cfg,
    steps: HashSet<u8>,
    answers: HashSet<(Option<bool>, Option<bool>)>,
}

impl explore::Model for Cover {
    type State = State;
    type Key = Key;

    fn procs(&self) -> usize {
        NP
    }

    fn key(&self, s: &State) -> Key {
        s.key()
    }

    fn step(&self, s: &State, p: usize) -> Option<State> {
        step(&self.c, s, p)
    }

    fn at_end(&mut self, s: &State) {
        self.steps.insert(s.steps);
        self.answers.insert((s.done[A0], s.done[A1]));
    }
}

fn must_fail(g: u8, broken: Broken) {
    let lockfree: &[bool] = match broken {
        Broken::NoClose | Broken::NoMarkDrain | Broken::OpenNoDrain | Broken::NoStripeDrainBeforeStep => &[true],
        _ => &[false, true],
    };
    let r = std::panic::catch_unwind(|| {
        for c in configs(g, broken, lockfree) {
            explore(c);
        }
    });
    assert!(r.is_err(), "{broken:?} passed the model");
}

#[test]
fn model_catches_adders_that_do_not_re_read_the_view() {
    must_fail(2, Broken::NoRecheck);
}

#[test]
fn model_catches_a_clear_without_drain() {
    must_fail(2, Broken::NoDrain);
}

#[test]
fn model_catches_a_step_that_publishes_a_dirty_spare() {
    must_fail(2, Broken::PublishDirty);
}

#[test]
fn model_catches_clearing_the_generation_just_published() {
    must_fail(2, Broken::ClearCurrent);
}

/// A reader whose view went two steps stale while it looked can miss an
/// item renewed past it.
#[test]
fn model_catches_a_reader_that_does_not_re_read_the_view() {
    must_fail(2, Broken::QueryNoRecheck);
}

/// A reader that looks at the newest generation first and takes "absent"
/// across a step can miss an item renewed into it after that look while
/// the older one is cleared.
#[test]
fn model_catches_a_reader_taking_absent_across_a_step() {
    must_fail(2, Broken::QueryAbsentAcrossStep);
}

#[test]
fn model_catches_a_step_that_does_not_close_lockfree_adds() {
    must_fail(2, Broken::NoClose);
}

#[test]
fn model_catches_a_step_that_does_not_drain_lockfree_adds() {
    must_fail(2, Broken::NoMarkDrain);
}

#[test]
fn model_catches_opening_without_waiting_for_stripe_holders() {
    must_fail(2, Broken::OpenNoDrain);
}

/// A striped add begun while the filter was open (it read the view closed
/// just before an opening) and a lock-free add in the same generation,
/// then a step: the striped adder answers for the later view, counting
/// its first generation with what it held before its write, but the
/// lock-free add that found its bit there had ended before the step.
#[test]
fn model_catches_a_step_that_does_not_wait_for_striped_adds() {
    must_fail(2, Broken::NoStripeDrainBeforeStep);
}
