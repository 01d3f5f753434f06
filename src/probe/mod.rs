//! Layouts: where an item's bits are and how they are tested and set, one
//! file per layout (`standard`, `blocked`) behind the `Probe` trait. Their
//! sizing math is in `math` (`scheme`, `blocked`, `geometry`).
//!
//! A layout is a probing strategy (`Probe`). The rest of the crate does not
//! know which one it runs: `Filter` holds a `Probing` (one of the strategies)
//! and its operations are generic functions that `with_probe!` instantiates
//! once per strategy, so the hot loops are monomorphic.
//!
//! * `Standard` — `bloom.h`'s: k probes spread over the whole table
//!   (`hashing`), an add serialized per item on a stripe (see `sync`).
//! * `StandardStage` — a grown filter's standard stages: the same, but
//!   probes 2 and on mixed on their own and `h1` salted per stage
//!   (`stage`), so that small stages keep low rates (`Probing::for_stage`).
//! * `Word64` — all k bits of an item in one aligned 64-bit word: an add is
//!   one `fetch_or`, and the item was new exactly when the old word lacked
//!   one of its bits. No lock: among concurrent adders of one item only the
//!   first read-modify-write of the word can see a bit missing.
//! * `Block128` — the same in an aligned 128-bit block, set with one 16-byte
//!   compare-and-swap (retried only when another adder changed the block),
//!   for low rates where one word per item costs too many bits.
//! * `DataSketches` — Apache DataSketches' Bloom filter, bit for bit: its
//!   own hashing (two XXH64, `Probe::hash`), k probes over the whole table,
//!   an add serialized on a stripe as the standard layout's.
//!
//! A blocked item's word (or block) is `(h1 * n) >> 64` of `n` words — a
//! multiply-shift range reduction, so `n` need not be a power of two — and
//! bit `i` of its k is the top 6 (or 7) bits of `h2 * M[i]` for fixed odd
//! multipliers `M`: both halves of the one XXH3-128 hash, independent.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::math::geometry::Geometry;
use crate::math::hashing::{hash_item, ItemHash};
use crate::math::scheme::Scheme;

mod blocked;
mod datasketches;
mod stage;
mod standard;

pub use blocked::{blocked_bits, cas128_available, Block128, Word64};
pub use datasketches::DataSketches;
pub use stage::{stage_probe, StandardStage};
pub use standard::Standard;

// ---------------------------------------------------------------- strategies

/// Ask for the cache line at `p`; no architectural effect.
#[inline(always)]
pub fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no architectural effect, whatever
    // the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Word `i` of the bit array.
///
/// # Safety
/// `i < bits.len()`.
#[inline(always)]
unsafe fn word(bits: &[AtomicU64], i: usize) -> &AtomicU64 {
    debug_assert!(i < bits.len());
    // SAFETY: the caller's promise.
    unsafe { bits.get_unchecked(i) }
}

/// A probing strategy: where an item's bits are, how they are tested and
/// set. `bits` is always the filter's whole bit array (`Geometry::words`
/// words); every method stays inside it for any hash.
pub trait Probe: Copy {
    /// Where one item's bits are.
    type Loc: Copy;

    /// The item's hash: XXH3-128 (`hashing::hash_item`) for every layout
    /// but DataSketches', which has its own.
    #[inline(always)]
    fn hash(&self, seed: u64, item: &[u8]) -> ItemHash {
        hash_item(seed, item)
    }

    /// Whether adders of an item serialize on a stripe (`stripe` is Some
    /// for every item); otherwise `set` alone is linearizable.
    const STRIPED: bool;

    fn locate(&self, h: &ItemHash) -> Self::Loc;

    /// The strategy `probing` holds, if it is this one: a run of arrays of
    /// one layout (a grown filter's stages) walked by one instance.
    fn of(probing: &Probing) -> Option<&Self>;

    /// What an item's places in every array of this layout share, worked
    /// out once for an item looked for in several (a grown filter's
    /// stages): a blocked item's bits within its word or block for every
    /// `k` up to the largest (the patterns of every `k` are prefixes of one
    /// sequence of multipliers); nothing for the other layouts.
    type Patterns: Copy + Default;

    /// The number of probes (bits) an item has in an array.
    fn k(&self) -> u32;

    /// Work out the item's patterns for every `k` up to this probe's, over
    /// those `pats` holds (an earlier item's, or `Default`).
    fn patterns(&self, h: &ItemHash, pats: &mut Self::Patterns);

    /// `locate`, from `pats` made by a probe whose `k` is at least this
    /// one's (else the place lacks some of the item's bits).
    fn locate_in(&self, h: &ItemHash, pats: &Self::Patterns) -> Self::Loc;

    /// Whether `contains_gated` is one test of one word or block, with no
    /// branch (blocked): a look over several arrays then asks them all
    /// rather than stopping at the first that holds the item.
    const FLAT: bool = false;

    /// Whether every bit of the item is set. Loads only.
    fn contains(&self, bits: &[AtomicU64], loc: &Self::Loc) -> bool;

    /// `contains`, stopping at the first word with a 0 bit (batches on
    /// large filters, where later words may not be fetched yet).
    fn contains_early(&self, bits: &[AtomicU64], loc: &Self::Loc) -> bool {
        self.contains(bits, loc)
    }

    /// What `contains_gated` works out from an item's place before it
    /// loads a word: the same in every array of the geometry, so worked
    /// out once for an item looked for in several (`gate`).
    type Gate: Copy;

    fn gate(&self, loc: &Self::Loc) -> Self::Gate;

    /// `contains` for one of several arrays looked at in turn (the
    /// generations of a windowed filter): cheap to answer "absent" for.
    #[inline(always)]
    fn contains_gated(&self, bits: &[AtomicU64], loc: &Self::Loc) -> bool {
        self.contains_gated_by(bits, loc, &self.gate(loc))
    }

    /// `contains_gated` with the item's `gate` given.
    fn contains_gated_by(&self, bits: &[AtomicU64], loc: &Self::Loc, _gate: &Self::Gate) -> bool {
        self.contains_early(bits, loc)
    }

    /// Prefetch the first word the item touches.
    fn prefetch_first(&self, bits: &[AtomicU64], loc: &Self::Loc);

    /// Prefetch the words `contains_gated` reads before its first branch.
    fn prefetch_gated(&self, bits: &[AtomicU64], loc: &Self::Loc) {
        self.prefetch_first(bits, loc);
    }

    /// Prefetch the item's other words, if it has any.
    fn prefetch_rest(&self, _bits: &[AtomicU64], _loc: &Self::Loc) {}

    /// Whether the item's bits in its first word are all set (if not, an
    /// absent item needs none of the rest).
    fn first_set(&self, bits: &[AtomicU64], loc: &Self::Loc) -> bool;

    /// The add stripe adders of this item must hold while they `set` it,
    /// or None when `set` alone is linearizable (one atomic update).
    fn stripe(&self, loc: &Self::Loc) -> Option<usize>;

    /// Set the item's bits; true when one of them was 0 before. With a
    /// stripe, the caller holds it.
    fn set(&self, bits: &[AtomicU64], loc: &Self::Loc) -> bool;
}

/// `Probe`'s `Patterns`, `k`, `patterns` and `locate_in` for a layout
/// whose places share nothing between arrays: an item is located afresh
/// in each.
macro_rules! no_patterns {
    () => {
        type Patterns = ();

        #[inline(always)]
        fn k(&self) -> u32 {
            self.k
        }

        #[inline(always)]
        fn patterns(&self, _: &ItemHash, _: &mut ()) {}

        #[inline(always)]
        fn locate_in(&self, h: &ItemHash, _: &()) -> Self::Loc {
            self.locate(h)
        }
    };
}
use no_patterns;

/// Bit `idx` of the array, 0 or 1. `idx` is below the array's bits: the
/// callers pass positions their type keeps below `m` (`spread_probes!`).
#[inline(always)]
fn spread_bit(bits: &[AtomicU64], idx: u64) -> u64 {
    // SAFETY: idx < m (the callers' positions), so idx / 64 < m / 64.
    let w = unsafe { word(bits, (idx >> 6) as usize) };
    // Relaxed: a query is a snapshot of independent bits; ordering against
    // exclusive operations is the epoch's job.
    (w.load(Ordering::Relaxed) >> (idx & 63)) & 1
}

/// An item's first two probes in a layout of spread probes: their words and
/// bit shifts (the same probe twice for k = 1).
#[derive(Clone, Copy, Debug)]
pub struct SpreadGate {
    w0: usize,
    s0: u32,
    w1: usize,
    s1: u32,
}

/// The `Probe` methods of a layout of `k` probes spread over the whole
/// table (`Standard`, `StandardStage`), tested and set bit by bit, an add
/// serialized on a stripe: written once in terms of the type's `k`,
/// `stripes` and `at(h, i)`, probe `i`'s position, always below `m`.
macro_rules! spread_probes {
    () => {
        /// No early exit: the k loads are independent and go out together,
        /// and no branch depends on a bit (in a half-full filter each such
        /// branch is a coin toss, and a mispredicted one costs more than
        /// the loads it would save).
        #[inline(always)]
        fn contains(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) -> bool {
            let mut all = 1u64;
            for i in 0..self.k {
                all &= $crate::probe::spread_bit(bits, self.at(h, i));
            }
            all != 0
        }

        #[inline(always)]
        fn contains_early(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) -> bool {
            (0..self.k).all(|i| $crate::probe::spread_bit(bits, self.at(h, i)) != 0)
        }

        /// The words and bits of the first two probes.
        #[inline(always)]
        fn gate(&self, h: &$crate::math::hashing::ItemHash) -> $crate::probe::SpreadGate {
            let at = |i: u32| {
                let idx = self.at(h, i);
                ((idx >> 6) as usize, (idx & 63) as u32)
            };
            let ((w0, s0), (w1, s1)) = (at(0), at((self.k > 1) as u32));
            $crate::probe::SpreadGate { w0, s0, w1, s1 }
        }

        /// The first two bits with no branch between them, then the rest:
        /// an absent item mostly ends at one well-predicted branch (both
        /// bits set in a filter at fill f: f squared of the time), where
        /// stopping at each bit is a coin toss per array.
        #[inline(always)]
        fn contains_gated_by(
            &self,
            bits: &[std::sync::atomic::AtomicU64],
            h: &$crate::math::hashing::ItemHash,
            g: &$crate::probe::SpreadGate,
        ) -> bool {
            // SAFETY: the gate's words are probes' (`gate`), below m / 64.
            let (a, b) = unsafe { ($crate::probe::word(bits, g.w0), $crate::probe::word(bits, g.w1)) };
            // Relaxed: as `spread_bit`. One AND of the two bits, one branch.
            let two = (a.load(std::sync::atomic::Ordering::Relaxed) >> g.s0)
                & (b.load(std::sync::atomic::Ordering::Relaxed) >> g.s1)
                & 1;
            two != 0 && (2..self.k).all(|i| $crate::probe::spread_bit(bits, self.at(h, i)) != 0)
        }

        #[inline(always)]
        fn prefetch_first(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) {
            self.prefetch_probes(bits, h, 0..1);
        }

        #[inline(always)]
        fn prefetch_gated(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) {
            self.prefetch_probes(bits, h, 0..self.k.min(2));
        }

        #[inline(always)]
        fn prefetch_rest(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) {
            self.prefetch_probes(bits, h, 1..self.k);
        }

        #[inline(always)]
        fn first_set(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) -> bool {
            $crate::probe::spread_bit(bits, self.at(h, 0)) != 0
        }

        /// The stripe from `h2`'s top bits: the same for an item in every
        /// array of these layouts (a grown filter's stages leave `h2` as
        /// it is), so adders of one item take the same stripe whatever the
        /// number of stages they saw.
        #[inline(always)]
        fn stripe(&self, h: &$crate::math::hashing::ItemHash) -> Option<usize> {
            Some((h.h2 >> 52) as usize & (self.stripes as usize - 1))
        }

        /// Under the stripe no other adder of this item runs, and the
        /// stripe's Acquire made an earlier one's bits visible: the item is
        /// new exactly when one of its bits is 0 now. Only those bits get
        /// an atomic OR (a set bit needs no read-modify-write and no
        /// cache-line ownership).
        #[inline(always)]
        fn set(&self, bits: &[std::sync::atomic::AtomicU64], h: &$crate::math::hashing::ItemHash) -> bool {
            let mut zeros = [0u64; crate::math::geometry::MAX_K as usize];
            let mut n = 0;
            for i in 0..self.k.min(crate::math::geometry::MAX_K) {
                let idx = self.at(h, i);
                zeros[n] = idx;
                n += ($crate::probe::spread_bit(bits, idx) ^ 1) as usize;
            }
            for &i in &zeros[..n] {
                // SAFETY: a probe's position, below m, as in `spread_bit`.
                let w = unsafe { $crate::probe::word(bits, (i >> 6) as usize) };
                // Relaxed: the stripe's Release store publishes the bits to
                // the next taker; queries need no ordering among
                // independent bits.
                w.fetch_or(1 << (i & 63), std::sync::atomic::Ordering::Relaxed);
            }
            n != 0
        }
    };
}
use spread_probes;

/// `prefetch_probes` of a layout of spread probes: prefetch the words of
/// probes `probes` (`at`).
macro_rules! spread_prefetch {
    () => {
        /// Prefetch the words of probes `probes`.
        #[inline(always)]
        fn prefetch_probes(
            &self,
            bits: &[std::sync::atomic::AtomicU64],
            h: &$crate::math::hashing::ItemHash,
            probes: std::ops::Range<u32>,
        ) {
            for i in probes {
                $crate::probe::prefetch_line(bits.as_ptr().wrapping_add((self.at(h, i) >> 6) as usize));
            }
        }
    };
}
use spread_prefetch;

/// One of the strategies, as a filter holds it.
#[derive(Clone, Copy, Debug)]
pub enum Probing {
    Standard(Standard),
    StandardStage(StandardStage),
    Word64(Word64),
    Block128(Block128),
    DataSketches(DataSketches),
}

impl Probing {
    pub fn new(g: &Geometry, stripes: u32) -> Probing {
        match g.scheme {
            Scheme::Standard => Probing::Standard(Standard {
                k: g.k,
                mask: g.m - 1,
                stripes,
            }),
            Scheme::Word64 => Probing::Word64(Word64 { k: g.k, n: g.m / 64 }),
            Scheme::Block128 => Probing::Block128(Block128 { k: g.k, n: g.m / 128 }),
            Scheme::DataSketches => Probing::DataSketches(DataSketches {
                k: g.k,
                m: g.m,
                stripes,
            }),
        }
    }

    /// Stage `stage` of a grown filter of geometry `g` (doc/DESIGN.md, §3
    /// growth): a standard stage probes as `StandardStage` (not `bloom.h`'s
    /// double hashing, whose floor of about `n/(m^2/2)` small stages at low
    /// rates passed); the blocked layouts as their plain filters.
    pub fn for_stage(g: &Geometry, stripes: u32, stage: u32) -> Probing {
        match g.scheme {
            Scheme::Standard => Probing::StandardStage(StandardStage::new(g.k, g.m, stage, stripes)),
            _ => Probing::new(g, stripes),
        }
    }
}

/// Run `$body` with `$p` bound to the concrete strategy of `$probing` (a
/// `Probing`): the one place a layout is chosen at run time.
macro_rules! with_probe {
    ($probing:expr, $p:ident => $body:expr) => {
        match $probing {
            $crate::probe::Probing::Standard($p) => $body,
            $crate::probe::Probing::StandardStage($p) => $body,
            $crate::probe::Probing::Word64($p) => $body,
            $crate::probe::Probing::Block128($p) => $body,
            $crate::probe::Probing::DataSketches($p) => $body,
        }
    };
}
pub(crate) use with_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rng::xorshift;
    use std::sync::atomic::Ordering;

    /// Every way of asking agrees: `contains`, `contains_early` and
    /// `contains_gated`, for k = 1 to 12, on arrays from empty to full.
    #[test]
    fn the_ways_of_asking_agree() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for k in 1..=12u32 {
            let p = Standard {
                k,
                mask: (1 << 12) - 1,
                stripes: 64,
            };
            let bits: Vec<AtomicU64> = (0..64).map(|_| AtomicU64::new(0)).collect();
            for round in 0..200 {
                // Fill grows with the rounds: from sparse to nearly full.
                if round % 2 == 0 {
                    for _ in 0..20 {
                        let i = next() & 4095;
                        bits[(i >> 6) as usize].fetch_or(1 << (i & 63), Ordering::Relaxed);
                    }
                }
                let h = hash_item(0, &next().to_le_bytes());
                let all = p.contains(&bits, &h);
                assert_eq!(p.contains_early(&bits, &h), all, "k {k} round {round}");
                assert_eq!(p.contains_gated(&bits, &h), all, "k {k} round {round}");
                p.set(&bits, &h);
                assert!(p.contains(&bits, &h) && p.contains_early(&bits, &h) && p.contains_gated(&bits, &h));
            }
        }
    }
}
