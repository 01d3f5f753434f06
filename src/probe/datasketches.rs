//! Apache DataSketches' layout: its own hashing (two XXH64) and k probes
//! spread over the whole table, `((h0 + i*h1) >> 1) mod m` for i = 1..=k
//! (`math::datasketches`); an add serialized per item on a stripe, as the
//! standard layout's.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{no_patterns, prefetch_line, word, Probe, Probing};
use crate::math::datasketches::{bit_index, hash};
use crate::math::geometry::Geometry;
use crate::math::hashing::ItemHash;

/// DataSketches' layout over `m` bits (a multiple of 64).
#[derive(Clone, Copy, Debug)]
pub struct DataSketches {
    pub k: u32,
    pub m: u64,
    /// Stripes in the table (a power of two).
    pub stripes: u32,
}

impl DataSketches {
    #[inline(always)]
    fn bit(bits: &[AtomicU64], idx: u64) -> u64 {
        debug_assert!(((idx >> 6) as usize) < bits.len());
        // SAFETY: idx is reduced mod m, and the array has m / 64 words.
        let w = unsafe { word(bits, (idx >> 6) as usize) };
        // Relaxed: as the standard layout's, a query is a snapshot of
        // independent bits; ordering against exclusive operations is the
        // epoch's job.
        (w.load(Ordering::Relaxed) >> (idx & 63)) & 1
    }
}

impl Probe for DataSketches {
    type Loc = ItemHash;
    type Gate = ();
    const STRIPED: bool = true;

    #[inline(always)]
    fn hash(&self, seed: u64, item: &[u8]) -> ItemHash {
        hash(seed, item)
    }

    no_patterns!();

    #[inline(always)]
    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::DataSketches(p) => Some(p),
            _ => None,
        }
    }

    #[inline(always)]
    fn locate(&self, h: &ItemHash) -> ItemHash {
        *h
    }

    fn for_geometry(g: &Geometry, stripes: u32) -> DataSketches {
        DataSketches { k: g.k, m: g.m, stripes }
    }

    fn positions(&self, h: &ItemHash, out: &mut Vec<u64>) {
        out.extend((1..=self.k).map(|i| bit_index(h, i, self.m)));
    }

    #[inline(always)]
    fn contains(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        let mut all = 1u64;
        for i in 1..=self.k {
            all &= Self::bit(bits, bit_index(h, i, self.m));
        }
        all != 0
    }

    #[inline(always)]
    fn contains_early(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        (1..=self.k).all(|i| Self::bit(bits, bit_index(h, i, self.m)) != 0)
    }

    #[inline(always)]
    fn gate(&self, _h: &ItemHash) {}

    #[inline(always)]
    fn prefetch_first(&self, bits: &[AtomicU64], h: &ItemHash) {
        prefetch_line(bits.as_ptr().wrapping_add((bit_index(h, 1, self.m) >> 6) as usize));
    }

    #[inline(always)]
    fn prefetch_rest(&self, bits: &[AtomicU64], h: &ItemHash) {
        for i in 2..=self.k {
            prefetch_line(bits.as_ptr().wrapping_add((bit_index(h, i, self.m) >> 6) as usize));
        }
    }

    #[inline(always)]
    fn first_set(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        Self::bit(bits, bit_index(h, 1, self.m)) != 0
    }

    #[inline(always)]
    fn stripe(&self, h: &ItemHash) -> Option<usize> {
        Some((h.h2 >> 52) as usize & (self.stripes as usize - 1))
    }

    /// Under the stripe no other adder of this item runs, and the stripe's
    /// Acquire made an earlier one's bits visible: the item is new exactly
    /// when one of its bits is 0 now. Only those bits get an atomic OR; a
    /// bit met twice (k may exceed m) is set the first time.
    #[inline(always)]
    fn set(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        let mut new = false;
        for i in 1..=self.k {
            let idx = bit_index(h, i, self.m);
            if Self::bit(bits, idx) == 0 {
                // SAFETY: reduced mod m, as in `bit`.
                let w = unsafe { word(bits, (idx >> 6) as usize) };
                // Relaxed: the stripe's Release store publishes the bits to
                // the next taker; queries need no ordering among independent
                // bits.
                w.fetch_or(1 << (idx & 63), Ordering::Relaxed);
                new = true;
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rng::xorshift;

    /// Property: an item's bits are exactly those the formula names (set
    /// reports new once, contains agrees with a plain model), on tables
    /// that are not powers of two, k from 1 to 40.
    #[test]
    fn bits_are_the_formulas() {
        let mut next = xorshift(0x005e_edd5);
        for (words, k) in [(1usize, 1u32), (3, 7), (150, 7), (17, 40), (2, 33)] {
            let m = words as u64 * 64;
            let p = DataSketches { k, m, stripes: 64 };
            let bits: Vec<AtomicU64> = (0..words).map(|_| AtomicU64::new(0)).collect();
            let mut model = vec![0u64; words];
            for _ in 0..50 {
                let item = next().to_le_bytes();
                let seed = next() % 3 * 9001;
                let h = p.hash(seed, &item);
                let was = (1..=k).all(|i| {
                    let b = bit_index(&h, i, m);
                    model[(b >> 6) as usize] >> (b & 63) & 1 == 1
                });
                assert_eq!(p.contains(&bits, &h), was);
                assert_eq!(p.contains_early(&bits, &h), was);
                assert_eq!(p.contains_gated(&bits, &h), was);
                assert_eq!(p.set(&bits, &h), !was);
                for i in 1..=k {
                    let b = bit_index(&h, i, m);
                    model[(b >> 6) as usize] |= 1 << (b & 63);
                }
                let now: Vec<u64> = bits.iter().map(|w| w.load(Ordering::Relaxed)).collect();
                assert_eq!(now, model);
                assert!(p.contains(&bits, &h) && p.first_set(&bits, &h));
                assert!(!p.set(&bits, &h));
                assert!(p.stripe(&h).unwrap() < 64);
            }
        }
    }
}
