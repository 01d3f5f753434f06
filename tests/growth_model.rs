//! An exhaustive interleaving check of adding a stage to a filter that
//! grows (doc/DESIGN.md, §8 N), as designed: two processes add the same
//! item while a third adds the filter's second stage; any one of them may
//! be killed at any step (what it holds stays held, as after a `SIGKILL`),
//! and whoever waits on a dead holder takes its word over.
//!
//! One step is one atomic access of the protocol; every interleaving is
//! explored (depth-first, states memoised) under sequential consistency,
//! as `tests/model.rs` does for the other protocols. The item is one word
//! per stage: an add's update of the newest stage alone decides "new" (the
//! blocked layout's atomic update, C9, or an update under the item's stripe,
//! A4); that word is where the two adders can disagree.
//!
//! Checked in every reachable state: a published stage has its storage (the
//! filter is never seen half-grown, N4 before N6); an adder writes only a
//! published stage. Checked where nobody can move: no live process is
//! stuck, the adders' answers are linearizable (at most one told new), and
//! an acknowledged add is in some published stage.
//!
//! Broken variants that must fail: a grower that does not drain (N2) with
//! lock-free adders, and a grower that publishes before its storage (N4,
//! N6). With striped adders a grower that does not drain is still correct
//! (the stripe orders the two adders), which `striped_adds_need_no_drain`
//! shows.

#[path = "common/explore.rs"]
mod explore;

const ADDERS: usize = 2;
const GROWER: usize = ADDERS;
const PROCS: usize = ADDERS + 1;
/// Owner ids are process index + 1; 0 is free.
type Owner = u8;

fn me(p: usize) -> Owner {
    p as Owner + 1
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Adds {
    /// Adders of one item take its stripe (standard layout, A2).
    Striped,
    /// Adders mark their own slot (blocked layout, A8).
    LockFree,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Broken {
    None,
    /// The grower skips the drain (N2).
    NoDrain,
    /// The grower publishes the stage, then reserves its storage.
    PublishFirst,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct State {
    /// The exclusive word.
    excl: Owner,
    /// The item's stripe (striped adds).
    stripe: Owner,
    /// Each adder's slot mark (lock-free adds).
    mark: [Owner; ADDERS],
    /// Published stages, 1 or 2.
    stages: u8,
    /// Stage 1 has its storage (stage 0 always has).
    storage: bool,
    /// The item's word in each stage.
    word: [bool; 2],
    pc: [u8; PROCS],
    /// What each adder loaded: the stage count, whether an older stage
    /// held the item, whether its update found the word clear.
    seen: [u8; ADDERS],
    found: [bool; ADDERS],
    new: [bool; ADDERS],
    dead: [bool; PROCS],
    crashed: bool,
    invoked: [bool; PROCS],
    /// An adder's answer: Some(new).
    done: [Option<bool>; PROCS],
    /// before[p][q]: p answered before q was invoked.
    before: [[bool; PROCS]; PROCS],
}

// Adder steps.
const HOLD: u8 = 0; // take the stripe (CAS) or mark our slot (N7 after A2 / A8)
const LOAD_EXCL: u8 = 1; // A3 / A8: SeqCst, the Dekker pair with the grower's drain
const LOAD_STAGES: u8 = 2; // N7: Acquire
const CHECK_OLD: u8 = 3; // N7: the older stage
const UPDATE: u8 = 4; // A4 / A9 on the newest stage
const LET_GO: u8 = 5; // A5 / A10
const BACKOFF: u8 = 6; // excl set: let go, then wait
const WAIT: u8 = 7; // wait_exclusive; a dead owner's word is taken over
const R_DRAIN: u8 = 8; // the take-over drains (X4) ...
const R_RELEASE: u8 = 9; // ... and leaves (X8); nothing is pending after a grower
const ADDER_DONE: u8 = 10;

// Grower steps.
const G_TAKE: u8 = 0; // N2: X1
const G_DRAIN: u8 = 1; // N2: X4
const G_STORAGE: u8 = 2; // N4
const G_PUBLISH: u8 = 3; // N6: stages = 2 (Release)
const G_RELEASE: u8 = 4; // N6: X8
const G_DONE: u8 = 5;

struct Model {
    adds: Adds,
    broken: Broken,
}

impl State {
    fn new() -> State {
        State {
            excl: 0,
            stripe: 0,
            mark: [0; ADDERS],
            stages: 1,
            storage: false,
            word: [false; 2],
            pc: [0; PROCS],
            seen: [0; ADDERS],
            found: [false; ADDERS],
            new: [false; ADDERS],
            dead: [false; PROCS],
            crashed: false,
            invoked: [false; PROCS],
            done: [None; PROCS],
            before: [[false; PROCS]; PROCS],
        }
    }

    fn owner_dead(&self, o: Owner) -> bool {
        o != 0 && self.dead[o as usize - 1]
    }

    fn live(&self, p: usize) -> bool {
        let end = if p == GROWER { G_DONE } else { ADDER_DONE };
        !self.dead[p] && self.pc[p] != end
    }

    fn invoke(&mut self, p: usize) {
        if !self.invoked[p] {
            self.invoked[p] = true;
            for q in 0..PROCS {
                if self.done[q].is_some() || (q == GROWER && self.pc[q] == G_DONE) {
                    self.before[q][p] = true;
                }
            }
        }
    }

    /// One step of a drain by `p`: Some(true) when nothing is held, Some(false)
    /// when a dead holder's stripe or mark was cleared, None when blocked.
    fn drain_once(&self, n: &mut State, p: usize, adds: Adds) -> Option<bool> {
        match adds {
            Adds::Striped => {
                if self.stripe == 0 {
                    Some(true)
                } else if self.owner_dead(self.stripe) {
                    n.stripe = 0;
                    Some(false)
                } else {
                    None
                }
            }
            Adds::LockFree => {
                for q in 0..ADDERS {
                    let o = self.mark[q];
                    if q == p || o == 0 {
                        continue;
                    }
                    if self.owner_dead(o) {
                        n.mark[q] = 0;
                        return Some(false);
                    }
                    return None;
                }
                Some(true)
            }
        }
    }
}

impl Model {
    /// The state one step of `p` leads to; None when `p` is done, dead or
    /// blocked.
    fn step_of(&self, s: &State, p: usize) -> Option<State> {
        if !s.live(p) {
            return None;
        }
        let mut n = s.clone();
        n.invoke(p);
        let moved = if p == GROWER {
            self.grower_step(s, &mut n)
        } else {
            self.adder_step(s, &mut n, p)
        };
        moved.then_some(n)
    }

    fn grower_step(&self, s: &State, n: &mut State) -> bool {
        let id = me(GROWER);
        match s.pc[GROWER] {
            G_TAKE => {
                if s.excl != 0 && !s.owner_dead(s.excl) {
                    return false;
                }
                n.excl = id;
                n.pc[GROWER] = if self.broken == Broken::NoDrain {
                    G_STORAGE
                } else {
                    G_DRAIN
                };
            }
            G_DRAIN => match s.drain_once(n, GROWER, self.adds) {
                Some(true) => n.pc[GROWER] = G_STORAGE,
                Some(false) => {}
                None => return false,
            },
            G_STORAGE => {
                if self.broken == Broken::PublishFirst {
                    n.stages = 2;
                } else {
                    n.storage = true;
                }
                n.pc[GROWER] = G_PUBLISH;
            }
            G_PUBLISH => {
                if self.broken == Broken::PublishFirst {
                    n.storage = true;
                } else {
                    n.stages = 2;
                }
                n.pc[GROWER] = G_RELEASE;
            }
            G_RELEASE => {
                n.excl = 0;
                n.pc[GROWER] = G_DONE;
            }
            _ => unreachable!(),
        }
        true
    }

    fn let_go(&self, n: &mut State, p: usize) {
        match self.adds {
            Adds::Striped => n.stripe = 0,
            Adds::LockFree => n.mark[p] = 0,
        }
    }

    fn adder_step(&self, s: &State, n: &mut State, p: usize) -> bool {
        let id = me(p);
        match s.pc[p] {
            HOLD => {
                match self.adds {
                    Adds::Striped => {
                        if s.stripe != 0 && !s.owner_dead(s.stripe) {
                            return false;
                        }
                        n.stripe = id; // a dead holder's word is taken over (A2)
                    }
                    Adds::LockFree => n.mark[p] = id,
                }
                n.pc[p] = LOAD_EXCL;
            }
            LOAD_EXCL => n.pc[p] = if s.excl != 0 { BACKOFF } else { LOAD_STAGES },
            BACKOFF => {
                self.let_go(n, p);
                n.pc[p] = WAIT;
            }
            WAIT => {
                if s.excl == 0 {
                    n.pc[p] = HOLD;
                } else if s.owner_dead(s.excl) {
                    n.excl = id;
                    n.pc[p] = R_DRAIN;
                } else {
                    return false;
                }
            }
            R_DRAIN => match s.drain_once(n, p, self.adds) {
                Some(true) => n.pc[p] = R_RELEASE,
                Some(false) => {}
                None => return false,
            },
            R_RELEASE => {
                n.excl = 0;
                n.pc[p] = HOLD;
            }
            LOAD_STAGES => {
                n.seen[p] = s.stages;
                n.pc[p] = CHECK_OLD;
            }
            CHECK_OLD => {
                n.found[p] = s.seen[p] == 2 && s.word[0];
                n.pc[p] = UPDATE;
            }
            UPDATE => {
                if !s.found[p] {
                    let stage = s.seen[p] as usize - 1;
                    n.new[p] = !s.word[stage];
                    n.word[stage] = true;
                }
                n.pc[p] = LET_GO;
            }
            LET_GO => {
                self.let_go(n, p);
                n.done[p] = Some(!s.found[p] && s.new[p]);
                n.pc[p] = ADDER_DONE;
            }
            _ => unreachable!(),
        }
        true
    }

    /// What must hold in every state.
    fn check(&self, s: &State) {
        assert!(
            s.stages == 1 || s.storage,
            "stage 1 published without its storage: {s:?}"
        );
        assert!(
            !s.word[1] || s.stages == 2,
            "stage 1 written before it was published: {s:?}"
        );
    }

    /// Some order of the adds, consistent with real time, explains the
    /// answers (the killed add in or out), the item absent at first.
    fn linearizable(&self, s: &State) -> bool {
        let completed: Vec<usize> = (0..ADDERS).filter(|&p| s.done[p].is_some()).collect();
        let killed: Vec<usize> = (0..ADDERS).filter(|&p| s.dead[p] && s.invoked[p]).collect();
        [false, true].iter().any(|&include| {
            let mut ops = completed.clone();
            if include {
                ops.extend(&killed);
            }
            let orders = if ops.len() == 2 {
                vec![vec![ops[0], ops[1]], vec![ops[1], ops[0]]]
            } else {
                vec![ops]
            };
            orders.iter().any(|order| {
                let in_time = order.len() < 2 || !s.before[order[1]][order[0]];
                let mut present = false;
                let answers = order.iter().all(|&p| {
                    let ok = s.done[p] != Some(present);
                    present = true;
                    ok
                });
                in_time && answers
            })
        })
    }

    /// Explores every run; returns (final states, finals in which the
    /// grower finished and both adders answered, finals in which an adder
    /// answered from stage 1).
    fn explore(&self) -> (usize, usize, usize) {
        let mut run = Run {
            model: self,
            whole: 0,
            late: 0,
        };
        let e = explore::explore(&mut run, State::new());
        if let Some(want) = self.expected_states() {
            assert_eq!(e.states, want, "{:?} {:?}: states explored", self.adds, self.broken);
        }
        (e.finals, run.whole, run.late)
    }

    /// The states the correct variants reach: the exploration covers as
    /// much as it did when they were counted (a change of the model changes
    /// them: count again).
    fn expected_states(&self) -> Option<usize> {
        match (self.adds, self.broken) {
            (Adds::LockFree, Broken::None) => Some(LOCKFREE_STATES),
            (Adds::Striped, Broken::None) => Some(STRIPED_STATES),
            (Adds::Striped, Broken::NoDrain) => Some(STRIPED_NO_DRAIN_STATES),
            _ => None,
        }
    }
}

/// The states the correct variants reach (`Model::expected_states`).
const LOCKFREE_STATES: usize = 3326;
const STRIPED_STATES: usize = 2289;
const STRIPED_NO_DRAIN_STATES: usize = 2344;

/// One exploration of a `Model`, and what its final states showed.
struct Run<'a> {
    model: &'a Model,
    whole: usize,
    late: usize,
}

impl explore::Model for Run<'_> {
    type State = State;
    type Key = State;

    fn procs(&self) -> usize {
        PROCS
    }

    fn key(&self, s: &State) -> State {
        s.clone()
    }

    fn step(&self, s: &State, p: usize) -> Option<State> {
        self.model.step_of(s, p)
    }

    /// A kill of `p` instead of a step it could take (at most one per run).
    fn kill(&self, s: &State, p: usize, stepped: bool) -> Option<State> {
        if !stepped || s.crashed {
            return None;
        }
        let mut k = s.clone();
        k.invoke(p);
        k.dead[p] = true;
        k.crashed = true;
        Some(k)
    }

    fn check(&self, s: &State) {
        self.model.check(s);
    }

    fn at_end(&mut self, s: &State) {
        let stuck: Vec<usize> = (0..PROCS).filter(|&p| s.live(p)).collect();
        assert!(stuck.is_empty(), "deadlock: {stuck:?} cannot move: {s:?}");
        assert!(self.model.linearizable(s), "not linearizable: {s:?}");
        let acknowledged = (0..ADDERS).any(|p| s.done[p].is_some());
        assert!(
            !acknowledged || s.word[0] || (s.stages == 2 && s.word[1]),
            "an acknowledged add is in no published stage: {s:?}"
        );
        if s.pc[GROWER] == G_DONE && s.done[0].is_some() && s.done[1].is_some() {
            self.whole += 1;
        }
        if (0..ADDERS).any(|p| s.done[p].is_some() && s.seen[p] == 2) {
            self.late += 1;
        }
    }
}

/// The message the exploration of a broken model fails with, if it fails.
fn failure(m: Model) -> Option<String> {
    let e = std::panic::catch_unwind(move || {
        m.explore();
    })
    .err()?;
    Some(
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    )
}

#[test]
fn lockfree_adds_across_a_growth_every_interleaving_every_kill() {
    let (finals, whole, late) = Model {
        adds: Adds::LockFree,
        broken: Broken::None,
    }
    .explore();
    assert!(finals > 100, "{finals}");
    assert!(whole > 0 && late > 0, "the runs cover growth: {whole} {late}");
}

#[test]
fn striped_adds_across_a_growth_every_interleaving_every_kill() {
    let (finals, whole, late) = Model {
        adds: Adds::Striped,
        broken: Broken::None,
    }
    .explore();
    assert!(finals > 100, "{finals}");
    assert!(whole > 0 && late > 0, "the runs cover growth: {whole} {late}");
}

#[test]
fn striped_adds_need_no_drain() {
    Model {
        adds: Adds::Striped,
        broken: Broken::NoDrain,
    }
    .explore();
}

#[test]
fn model_catches_a_grower_without_drain() {
    let e = failure(Model {
        adds: Adds::LockFree,
        broken: Broken::NoDrain,
    });
    // Both adders told new: one updated stage 0, the other stage 1.
    assert!(e.as_deref().is_some_and(|e| e.starts_with("not linearizable")), "{e:?}");
}

#[test]
fn model_catches_a_stage_published_before_its_storage() {
    for adds in [Adds::LockFree, Adds::Striped] {
        let e = failure(Model {
            adds,
            broken: Broken::PublishFirst,
        });
        assert!(
            e.as_deref()
                .is_some_and(|e| e.starts_with("stage 1 published without its storage")),
            "{adds:?}: {e:?}"
        );
    }
}
