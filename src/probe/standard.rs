//! `bloom.h`'s layout: k probes spread over the whole table, an add
//! serialized per item on a stripe.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{no_patterns, prefetch_line, word, Probe, Probing};
use crate::math::hashing::ItemHash;

/// `bloom.h`'s layout: probe `i` at `(h1 + i*h2) mod m`.
#[derive(Clone, Copy, Debug)]
pub struct Standard {
    pub k: u32,
    pub mask: u64,
    /// Stripes in the table (a power of two).
    pub stripes: u32,
}

impl Standard {
    #[inline(always)]
    fn bit(bits: &[AtomicU64], idx: u64) -> u64 {
        // SAFETY: idx is a probe masked with m - 1, so idx / 64 < m / 64.
        let w = unsafe { word(bits, (idx >> 6) as usize) };
        // Relaxed: a query is a snapshot of independent bits; ordering
        // against exclusive operations is the epoch's job.
        (w.load(Ordering::Relaxed) >> (idx & 63)) & 1
    }

    /// Prefetch the words of probes `probes`.
    #[inline(always)]
    fn prefetch_probes(&self, bits: &[AtomicU64], h: &ItemHash, probes: std::ops::Range<u32>) {
        for i in probes {
            prefetch_line(bits.as_ptr().wrapping_add((h.probe(i, self.mask) >> 6) as usize));
        }
    }
}

/// A `Standard` item's first two probes: their words and bit shifts (the same
/// probe twice for k = 1).
#[derive(Clone, Copy, Debug)]
pub struct StdGate {
    w0: usize,
    s0: u32,
    w1: usize,
    s1: u32,
}

impl Probe for Standard {
    type Loc = ItemHash;
    type Gate = StdGate;
    const STRIPED: bool = true;

    no_patterns!();

    #[inline(always)]
    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::Standard(p) => Some(p),
            _ => None,
        }
    }

    #[inline(always)]
    fn locate(&self, h: &ItemHash) -> ItemHash {
        *h
    }

    /// No early exit: the k loads are independent and go out together, and
    /// no branch depends on a bit (in a half-full filter each such branch is
    /// a coin toss, and a mispredicted one costs more than the loads it would
    /// save).
    #[inline(always)]
    fn contains(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        let mut all = 1u64;
        for i in 0..self.k {
            all &= Self::bit(bits, h.probe(i, self.mask));
        }
        all != 0
    }

    #[inline(always)]
    fn contains_early(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        (0..self.k).all(|i| Self::bit(bits, h.probe(i, self.mask)) != 0)
    }

    /// The words and bits of the first two probes.
    #[inline(always)]
    fn gate(&self, h: &ItemHash) -> StdGate {
        let at = |i: u32| {
            let idx = h.probe(i, self.mask);
            ((idx >> 6) as usize, (idx & 63) as u32)
        };
        let ((w0, s0), (w1, s1)) = (at(0), at((self.k > 1) as u32));
        StdGate { w0, s0, w1, s1 }
    }

    /// The first two bits with no branch between them, then the rest:
    /// an absent item mostly ends at one well-predicted branch (both bits
    /// set in a filter at fill f: f squared of the time), where stopping at
    /// each bit is a coin toss per array.
    #[inline(always)]
    fn contains_gated_by(&self, bits: &[AtomicU64], h: &ItemHash, g: &StdGate) -> bool {
        // SAFETY: the gate's words are masked probes' (`gate`), as in `bit`.
        let (a, b) = unsafe { (word(bits, g.w0), word(bits, g.w1)) };
        // Relaxed: as `bit`. One AND of the two bits, one branch.
        let two = (a.load(Ordering::Relaxed) >> g.s0) & (b.load(Ordering::Relaxed) >> g.s1) & 1;
        two != 0 && (2..self.k).all(|i| Self::bit(bits, h.probe(i, self.mask)) != 0)
    }

    #[inline(always)]
    fn prefetch_first(&self, bits: &[AtomicU64], h: &ItemHash) {
        self.prefetch_probes(bits, h, 0..1);
    }

    #[inline(always)]
    fn prefetch_gated(&self, bits: &[AtomicU64], h: &ItemHash) {
        self.prefetch_probes(bits, h, 0..self.k.min(2));
    }

    #[inline(always)]
    fn prefetch_rest(&self, bits: &[AtomicU64], h: &ItemHash) {
        self.prefetch_probes(bits, h, 1..self.k);
    }

    #[inline(always)]
    fn first_set(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        Self::bit(bits, h.probe(0, self.mask)) != 0
    }

    #[inline(always)]
    fn stripe(&self, h: &ItemHash) -> Option<usize> {
        Some((h.h2 >> 52) as usize & (self.stripes as usize - 1))
    }

    /// Under the stripe no other adder of this item runs, and the stripe's
    /// Acquire made an earlier one's bits visible: the item is new exactly
    /// when one of its bits is 0 now. Only those bits get an atomic OR (a set
    /// bit needs no read-modify-write and no cache-line ownership).
    #[inline(always)]
    fn set(&self, bits: &[AtomicU64], h: &ItemHash) -> bool {
        let mut zeros = [0u64; crate::math::geometry::MAX_K as usize];
        let mut n = 0;
        for i in 0..self.k.min(crate::math::geometry::MAX_K) {
            let idx = h.probe(i, self.mask);
            zeros[n] = idx;
            n += (Self::bit(bits, idx) ^ 1) as usize;
        }
        for &i in &zeros[..n] {
            // SAFETY: a masked probe, as in `bit`.
            let w = unsafe { word(bits, (i >> 6) as usize) };
            // Relaxed: the stripe's Release store publishes the bits to the
            // next taker; queries need no ordering among independent bits.
            w.fetch_or(1 << (i & 63), Ordering::Relaxed);
        }
        n != 0
    }
}
