//! A grown filter's published stages as a look walks them (`Lanes`):
//! each stage's probe and index, newest first, all of one layout; and the
//! lanes a handle keeps for its single calls (`KeptLanes`). A lane holds
//! no bits: a look is given the stages' bits by index (the handle's, or a
//! test's arrays), so kept lanes own all they hold and live as long as
//! whatever keeps them.

use std::sync::atomic::AtomicU64;

use crate::math::growth::MAX_STAGES;
use crate::math::hashing::ItemHash;
use crate::probe::{Block128, Probe, StandardStage, Word64};

/// A stage of at least this many bytes has an item's words prefetched
/// `DISTANCE` items ahead of its look. A grown filter's stages together
/// soon outgrow a core's second-level cache (512 KiB here) even when each
/// is small, so the stages past the smallest are prefetched in: measured,
/// a batch of misses with grow 4 went from 3.0x a plain filter's time to
/// 1.9x (bench/RESULTS.md). A plain batch prefetches from
/// `PIPELINE_MIN_BYTES`: its one array stays in the caches up to there.
pub(in crate::filter) const LANE_PREFETCH_BYTES: u64 = 64 << 10;

/// One published stage as a look reads it: its probe and its index (the
/// look's `bits(stage)` are its bits).
#[derive(Clone, Copy)]
struct Lane<P> {
    p: P,
    stage: usize,
}

/// The published stages of a grown filter, newest first, all of layout `P`.
pub(in crate::filter) struct Lanes<P> {
    lanes: [Lane<P>; MAX_STAGES as usize],
    len: usize,
    /// The probe with the most bits an item (the tightest stage, the
    /// newest mostly), whose `patterns` serve every stage.
    widest: P,
    /// `lanes[..beyond]` lie beyond a core's second-level cache
    /// (`LANE_PREFETCH_BYTES`): the newest, since stages only get larger.
    beyond: usize,
}

impl<P: Probe> Lanes<P> {
    /// The lanes of `stages` (probe, index and words, newest first; at
    /// most `MAX_STAGES`), those without bits left out; None if none has
    /// bits.
    pub(in crate::filter) fn new(stages: impl Iterator<Item = (P, usize, usize)>) -> Option<Lanes<P>> {
        let mut it = stages.filter(|&(_, _, words)| words != 0);
        let (p, stage, words) = it.next()?;
        let mut l = Lanes {
            lanes: [Lane { p, stage }; MAX_STAGES as usize],
            len: 1,
            widest: p,
            beyond: 0,
        };
        let mut sizes = [0usize; MAX_STAGES as usize];
        sizes[0] = words;
        for (p, stage, words) in it.take(MAX_STAGES as usize - 1) {
            l.lanes[l.len] = Lane { p, stage };
            sizes[l.len] = words;
            l.len += 1;
        }
        for lane in &l.lanes[..l.len] {
            if lane.p.k() > l.widest.k() {
                l.widest = lane.p;
            }
        }
        l.beyond = sizes[..l.len]
            .iter()
            .take_while(|&&words| words as u64 * 8 >= LANE_PREFETCH_BYTES)
            .count();
        Some(l)
    }

    /// How many stages the lanes hold.
    #[inline(always)]
    pub(in crate::filter) fn len(&self) -> usize {
        self.len
    }

    /// How many of them (the newest) lie beyond the caches.
    #[inline(always)]
    pub(in crate::filter) fn beyond(&self) -> usize {
        self.beyond
    }

    /// Whether a stage holds the item, and its place in the newest stage
    /// (where an add puts it); `bits(i)`, stage `i`'s bits. A blocked
    /// layout (`Probe::FLAT`) asks every stage with no branch on an
    /// answer: which stage holds a present item varies from item to item,
    /// and a branch on it was mispredicted about once an item, which cost
    /// more than the tests it saved (an absent item is asked of every
    /// stage anyway). The others stop at the first stage that holds the
    /// item: their test in a stage branches already.
    #[inline(always)]
    pub(in crate::filter) fn look<'b>(
        &self,
        bits: impl Fn(usize) -> &'b [AtomicU64],
        h: &ItemHash,
        pats: &mut P::Patterns,
    ) -> (bool, P::Loc) {
        self.widest.patterns(h, pats);
        let pats = &*pats;
        let first = &self.lanes[0];
        let at = first.p.locate_in(h, pats);
        let older = self.lanes[1..self.len].iter();
        let in_older = |l: &Lane<P>| l.p.contains_gated(bits(l.stage), &l.p.locate_in(h, pats));
        let held = if P::FLAT {
            older.fold(first.p.contains_gated(bits(first.stage), &at), |held, l| {
                held | in_older(l)
            })
        } else {
            first.p.contains_gated(bits(first.stage), &at) || { older }.any(in_older)
        };
        (held, at)
    }

    /// Prefetch the words the item's first test reads in the stages beyond
    /// the caches.
    #[inline(always)]
    pub(in crate::filter) fn prefetch<'b>(&self, bits: impl Fn(usize) -> &'b [AtomicU64], h: &ItemHash) {
        for l in &self.lanes[..self.beyond] {
            l.p.prefetch_gated(bits(l.stage), &l.p.locate(h));
        }
    }
}

/// The lanes of a handle's first `n` stages, in the layout they have,
/// made once per `n` and kept while the handle lives (`Filter::with_lanes`),
/// so that a single call walks the stages as a batch does without making
/// them again: made per call, they cost more than the walk they saved.
// Each is kept boxed (`Stages::kept`): the sizes of the variants matter
// nowhere.
#[allow(clippy::large_enum_variant)]
pub(in crate::filter) enum KeptLanes {
    Standard(Lanes<StandardStage>),
    Word64(Lanes<Word64>),
    Block128(Lanes<Block128>),
}

/// `$body` with `$l` the lanes a `KeptLanes` holds, of their layout.
macro_rules! with_kept {
    ($kept:expr, $l:ident => $body:expr) => {
        match $kept {
            KeptLanes::Standard($l) => $body,
            KeptLanes::Word64($l) => $body,
            KeptLanes::Block128($l) => $body,
        }
    };
}
pub(in crate::filter) use with_kept;
