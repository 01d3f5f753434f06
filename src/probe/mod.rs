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

use std::sync::atomic::AtomicU64;

use crate::math::geometry::Geometry;
use crate::math::hashing::{hash_item, ItemHash};
use crate::math::scheme::Scheme;

mod blocked;
mod datasketches;
mod stage;
mod standard;

pub use blocked::{blocked_bits, cas128_available, Block128, Word64};
pub use datasketches::DataSketches;
pub use stage::StandardStage;
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
mod grown;

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
