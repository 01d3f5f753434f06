//! The one explorer of the interleaving models (`tests/model.rs`,
//! `tests/window_model.rs`, `tests/growth_model.rs`): every state a model
//! can reach from its initial state, one step of one process at a time,
//! depth first with the states seen kept (a state reached again is not
//! explored again), under sequential consistency.
//!
//! A model says what one step of a process does (`Model::step`), whether
//! a `SIGKILL` of that process may come instead of it (`Model::kill`: most
//! models allow one kill per run, enough to reach every "dies holding X"
//! state), what must hold in every state (`Model::check`) and what must
//! hold where no process can step any more (`Model::at_end`: nobody is
//! stuck, the answers are linearizable). A check fails by panicking; the
//! `model_catches_*` tests expect exactly that of a broken protocol.
//!
//! Included by each model's file (`#[path = "common/explore.rs"] mod
//! explore;`): a file in a folder of `tests/` is no test of its own.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A multiply-rotate hasher (as rustc's FxHash): the states are small and
/// many (tens of millions in the window model), each hashed once; SipHash,
/// the standard one, resists chosen keys no model has.
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.write_u64(b as u64);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxSet<T> = HashSet<T, BuildHasherDefault<Fx>>;

/// One protocol's processes and what is checked of them.
pub trait Model {
    type State: Clone;
    /// What the set of states seen keeps of a state: the state itself, or
    /// a smaller encoding of all of it (never less: two states of one key
    /// would be explored as one).
    type Key: Hash + Eq;

    /// The processes (or anything that moves on its own), numbered
    /// `0..procs()`.
    fn procs(&self) -> usize;

    fn key(&self, s: &Self::State) -> Self::Key;

    /// The state after one step of `p`; None when `p` is done, dead or
    /// waiting.
    fn step(&self, s: &Self::State, p: usize) -> Option<Self::State>;

    /// The state after a `SIGKILL` of `p` instead of its next step, when
    /// the model allows one here; `stepped` says whether `p` could step.
    fn kill(&self, _s: &Self::State, _p: usize, _stepped: bool) -> Option<Self::State> {
        None
    }

    /// What must hold in every reachable state (panics otherwise).
    fn check(&self, _s: &Self::State) {}

    /// What must hold where no process can step (panics otherwise).
    fn at_end(&mut self, _s: &Self::State) {}
}

/// What an exploration went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Explored {
    /// Distinct states reached.
    pub states: usize,
    /// Of them, those where no process can step (each judged by `at_end`).
    pub finals: usize,
}

/// Explore every state `m` reaches from `initial`: `check` each, `at_end`
/// where no process can step. A state is marked seen when it is first
/// reached, so it is put on the stack once.
pub fn explore<M: Model>(m: &mut M, initial: M::State) -> Explored {
    let mut seen: FxSet<M::Key> = FxSet::default();
    seen.insert(m.key(&initial));
    let mut stack = vec![initial];
    let mut finals = 0;
    while let Some(s) = stack.pop() {
        m.check(&s);
        let mut moved = false;
        for p in 0..m.procs() {
            let next = m.step(&s, p);
            let stepped = next.is_some();
            moved |= stepped;
            for n in next.into_iter().chain(m.kill(&s, p, stepped)) {
                if seen.insert(m.key(&n)) {
                    stack.push(n);
                }
            }
        }
        if !moved {
            m.at_end(&s);
            finals += 1;
        }
    }
    Explored {
        states: seen.len(),
        finals,
    }
}
