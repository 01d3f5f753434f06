//! The blocked layouts: all of an item's bits in one 64-bit word
//! (`Word64`) or one 128-bit block (`Block128`), set with one atomic update.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{prefetch_line, word, Probe, Probing};
use crate::math::geometry::Geometry;
use crate::math::hashing::ItemHash;
use crate::math::scheme::BLOCKED_MAX_K;

/// Odd multipliers, one per bit of an item: the fractional digits of the
/// golden ratio and of sqrt(2..17), forced odd.
const MULT: [u64; BLOCKED_MAX_K as usize] = [
    0x9e37_79b9_7f4a_7c15,
    0x6a09_e667_f3bc_c909,
    0xbb67_ae85_84ca_a73b,
    0x3c6e_f372_fe94_f82b,
    0xa54f_f53a_5f1d_36f1,
    0x510e_527f_ade6_82d1,
    0x9b05_688c_2b3e_6c1f,
    0x1f83_d9ab_fb41_bd6b,
    0x5be0_cd19_137e_2179,
    0xcbbb_9d5d_c105_9ed9,
    0x629a_292a_367c_d507,
    0x9159_015a_3070_dd17,
    0x152f_ecd8_f70e_5939,
    0x6733_2667_ffc0_0b31,
    0x8eb4_4a87_6858_1511,
    0xdb0c_2e0d_64f9_8fa7,
];

/// The word (or block) of `n` an item lives in: `(h1 * n) >> 64`.
#[inline(always)]
pub fn block_of(h: &ItemHash, n: u64) -> u64 {
    ((h.h1 as u128 * n as u128) >> 64) as u64
}

/// `m` with the bit within a 64-bit word that multiplier `c` gives the
/// item of second hash half `h2`.
#[inline(always)]
fn with_bit64(m: u64, h2: u64, c: u64) -> u64 {
    m | 1u64 << (h2.wrapping_mul(c) >> 58)
}

/// `with_bit64` for a 128-bit block, as (low word, high word).
#[inline(always)]
fn with_bit128((lo, hi): (u64, u64), h2: u64, c: u64) -> (u64, u64) {
    let p = h2.wrapping_mul(c) >> 57;
    let bit = 1u64 << (p & 63);
    // Branch-free: the high word takes it when p >= 64.
    let high = (p >> 6).wrapping_neg();
    (lo | bit & !high, hi | bit & high)
}

/// The item's bits within a 64-bit word (1 to k bits set).
#[inline(always)]
pub fn mask64(h: &ItemHash, k: u32) -> u64 {
    MULT[..k.min(BLOCKED_MAX_K) as usize]
        .iter()
        .fold(0, |m, &c| with_bit64(m, h.h2, c))
}

/// The item's bits within a 128-bit block, as (low word, high word).
#[inline(always)]
pub fn mask128(h: &ItemHash, k: u32) -> (u64, u64) {
    MULT[..k.min(BLOCKED_MAX_K) as usize]
        .iter()
        .fold((0, 0), |m, &c| with_bit128(m, h.h2, c))
}

/// The bit indexes (in the whole array) of an item's `k` bits in a blocked
/// layout of `n` blocks of `block` bits (64 or 128): the bits `mask64` or
/// `mask128` set in the block `block_of` gives, one per multiplier, in
/// multiplier order (two multipliers may name the same bit).
pub fn blocked_bits(h: &ItemHash, block: u64, n: u64, k: u32) -> impl Iterator<Item = u64> {
    debug_assert!(block == 64 || block == 128);
    let (base, h2) = (block_of(h, n) * block, h.h2);
    let shift = 64 - block.trailing_zeros();
    MULT[..k.min(BLOCKED_MAX_K) as usize]
        .iter()
        .map(move |&c| base + (h2.wrapping_mul(c) >> shift))
}

/// `prefetch_first`, `first_set` and `stripe` of a blocked probe, whose
/// item is one word or block starting at `loc.word`: its first word is the
/// whole item, and one atomic update sets it (no stripe).
macro_rules! one_block_probe {
    () => {
        #[inline(always)]
        fn prefetch_first(&self, bits: &[AtomicU64], l: &Self::Loc) {
            prefetch_line(bits.as_ptr().wrapping_add(l.word));
        }

        #[inline(always)]
        fn first_set(&self, bits: &[AtomicU64], l: &Self::Loc) -> bool {
            self.contains(bits, l)
        }

        #[inline(always)]
        fn stripe(&self, _: &Self::Loc) -> Option<usize> {
            None
        }
    };
}

/// A blocked item's bits within its word or block for every `k` from 0 to
/// `k` (`Probe::patterns`): `m[j]` for `k = j`, each the one before with
/// one more multiplier's bit. Written in place, item after item, by the
/// look that needs them, and never zeroed: returned by value, or zeroed
/// anew, they cost a third of a single grown query.
#[derive(Clone, Copy)]
pub struct Patterns<T: Copy> {
    k: u32,
    m: [MaybeUninit<T>; BLOCKED_MAX_K as usize + 1],
}

impl<T: Copy + Default> Default for Patterns<T> {
    /// The patterns of no bits.
    #[inline(always)]
    fn default() -> Self {
        let mut m = [MaybeUninit::uninit(); BLOCKED_MAX_K as usize + 1];
        m[0].write(T::default());
        Patterns { k: 0, m }
    }
}

impl<T: Copy + Default> Patterns<T> {
    /// The pattern of `k` bits, or of the most these patterns have.
    #[inline(always)]
    fn get(&self, k: u32) -> T {
        // SAFETY: m[0] is written by `default` and m[1..=self.k] by `make`
        // before it sets `self.k` (the only writers), and self.k <=
        // BLOCKED_MAX_K, so the index is in bounds and its entry written.
        unsafe { self.m.get_unchecked(k.min(self.k) as usize).assume_init() }
    }

    /// Make the patterns of up to `k` bits (at most `BLOCKED_MAX_K`),
    /// each from the one before and multiplier `MULT[i]` (`add`).
    #[inline(always)]
    fn make(&mut self, k: u32, add: impl Fn(T, u64) -> T) {
        let k = k.min(BLOCKED_MAX_K);
        let mut m = T::default();
        for (i, &c) in MULT[..k as usize].iter().enumerate() {
            m = add(m, c);
            self.m[i + 1].write(m);
        }
        self.k = k;
    }
}

/// Blocked, 64-bit words.
#[derive(Clone, Copy, Debug)]
pub struct Word64 {
    pub k: u32,
    /// Number of words.
    pub n: u64,
}

/// Where a `Word64` item is: its word and its bits there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordLoc {
    pub word: usize,
    pub mask: u64,
}

impl Probe for Word64 {
    type Loc = WordLoc;
    type Gate = ();
    const STRIPED: bool = false;

    #[inline(always)]
    fn gate(&self, _: &WordLoc) {}

    #[inline(always)]
    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::Word64(p) => Some(p),
            _ => None,
        }
    }

    fn for_geometry(g: &Geometry, _stripes: u32) -> Word64 {
        Word64 { k: g.k, n: g.m / 64 }
    }

    fn positions(&self, h: &ItemHash, out: &mut Vec<u64>) {
        out.extend(blocked_bits(h, 64, self.n, self.k));
    }

    type Patterns = Patterns<u64>;
    const FLAT: bool = true;

    #[inline(always)]
    fn k(&self) -> u32 {
        self.k
    }

    /// `mask64` for every k up to this one's, in one pass.
    #[inline(always)]
    fn patterns(&self, h: &ItemHash, pats: &mut Patterns<u64>) {
        pats.make(self.k, |m, c| with_bit64(m, h.h2, c));
    }

    #[inline(always)]
    fn locate_in(&self, h: &ItemHash, pats: &Patterns<u64>) -> WordLoc {
        WordLoc {
            word: block_of(h, self.n) as usize,
            mask: pats.get(self.k),
        }
    }

    #[inline(always)]
    fn locate(&self, h: &ItemHash) -> WordLoc {
        WordLoc {
            word: block_of(h, self.n) as usize,
            mask: mask64(h, self.k),
        }
    }

    #[inline(always)]
    fn contains(&self, bits: &[AtomicU64], l: &WordLoc) -> bool {
        // SAFETY: block_of(h, n) < n, the number of words.
        let w = unsafe { word(bits, l.word) };
        // Relaxed: as Standard::bit.
        w.load(Ordering::Relaxed) & l.mask == l.mask
    }

    one_block_probe!();

    #[inline(always)]
    fn set(&self, bits: &[AtomicU64], l: &WordLoc) -> bool {
        // SAFETY: as in contains.
        let w = unsafe { word(bits, l.word) };
        // Relaxed: the word's modification order alone decides which adder
        // of an item sees a bit missing; ordering against exclusive
        // operations is the adder's slot mark's (see `sync`).
        w.fetch_or(l.mask, Ordering::Relaxed) & l.mask != l.mask
    }
}

/// Blocked, 128-bit blocks (two words, the first at an even index).
#[derive(Clone, Copy, Debug)]
pub struct Block128 {
    pub k: u32,
    /// Number of blocks.
    pub n: u64,
}

/// Where a `Block128` item is: the index of its block's first word and its
/// bits in the two words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLoc {
    pub word: usize,
    pub lo: u64,
    pub hi: u64,
}

impl Block128 {
    #[inline(always)]
    fn pair<'a>(bits: &'a [AtomicU64], l: &BlockLoc) -> (&'a AtomicU64, &'a AtomicU64) {
        // SAFETY: word = 2 * block_of(h, n) with n blocks of 2 words, so
        // word + 1 < 2n = the number of words.
        unsafe { (word(bits, l.word), word(bits, l.word + 1)) }
    }
}

impl Probe for Block128 {
    type Loc = BlockLoc;
    type Gate = ();
    const STRIPED: bool = false;

    #[inline(always)]
    fn gate(&self, _: &BlockLoc) {}

    #[inline(always)]
    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::Block128(p) => Some(p),
            _ => None,
        }
    }

    fn for_geometry(g: &Geometry, _stripes: u32) -> Block128 {
        Block128 { k: g.k, n: g.m / 128 }
    }

    fn positions(&self, h: &ItemHash, out: &mut Vec<u64>) {
        out.extend(blocked_bits(h, 128, self.n, self.k));
    }

    type Patterns = Patterns<(u64, u64)>;
    const FLAT: bool = true;

    #[inline(always)]
    fn k(&self) -> u32 {
        self.k
    }

    /// `mask128` for every k up to this one's, in one pass.
    #[inline(always)]
    fn patterns(&self, h: &ItemHash, pats: &mut Patterns<(u64, u64)>) {
        pats.make(self.k, |m, c| with_bit128(m, h.h2, c));
    }

    #[inline(always)]
    fn locate_in(&self, h: &ItemHash, pats: &Patterns<(u64, u64)>) -> BlockLoc {
        let (lo, hi) = pats.get(self.k);
        BlockLoc {
            word: 2 * block_of(h, self.n) as usize,
            lo,
            hi,
        }
    }

    #[inline(always)]
    fn locate(&self, h: &ItemHash) -> BlockLoc {
        let (lo, hi) = mask128(h, self.k);
        BlockLoc {
            word: 2 * block_of(h, self.n) as usize,
            lo,
            hi,
        }
    }

    #[inline(always)]
    fn contains(&self, bits: &[AtomicU64], l: &BlockLoc) -> bool {
        let (a, b) = Self::pair(bits, l);
        // Relaxed: as Standard::bit (two independent snapshots; bits only
        // appear between exclusive operations).
        (a.load(Ordering::Relaxed) & l.lo == l.lo) & (b.load(Ordering::Relaxed) & l.hi == l.hi)
    }

    one_block_probe!();

    #[inline(always)]
    fn set(&self, bits: &[AtomicU64], l: &BlockLoc) -> bool {
        let (a, b) = Self::pair(bits, l);
        // Relaxed: a first guess for the compare-and-swap, which checks it.
        let mut cur = (a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
        loop {
            if cur.0 & l.lo == l.lo && cur.1 & l.hi == l.hi {
                // Every bit was set: by the read that the last failed CAS
                // returned (atomic), or by two loads of bits that only
                // appear between exclusive operations.
                return false;
            }
            let new = (cur.0 | l.lo, cur.1 | l.hi);
            // SAFETY: word is even and the bit array is page aligned, so the
            // two words are one 16-byte-aligned block inside the mapping;
            // Block128 filters are only opened where cas128 is available.
            match unsafe { cas128(a.as_ptr(), cur, new) } {
                Ok(()) => return true,
                Err(now) => cur = now,
            }
        }
    }
}

/// Whether this machine can update a 128-bit block atomically.
pub fn cas128_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("cmpxchg16b")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One 16-byte compare-and-swap of the block at `p` from `old` to `new`
/// (low word first); Err with the block's value when it was not `old`.
/// Sequentially consistent (`lock cmpxchg16b`).
///
/// # Safety
/// `p` is 16-byte aligned, valid for reads and writes of 16 bytes that are
/// otherwise accessed only atomically, and `cas128_available()`.
#[inline(always)]
unsafe fn cas128(p: *mut u64, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
    debug_assert!(p as usize % 16 == 0);
    #[cfg(target_arch = "x86_64")]
    {
        let (lo, hi): (u64, u64);
        // SAFETY: the caller's promise. rbx cannot be named as an operand
        // (LLVM reserves it), so the new low word is swapped into it around
        // the instruction and rbx restored after. The address is pinned to
        // rdi: as a `reg` operand LLVM may give it rbx, which the swap then
        // overwrites (seen as a SIGSEGV once inlined into a windowed add).
        unsafe {
            std::arch::asm!(
                "xchg {nlo}, rbx",
                "lock cmpxchg16b xmmword ptr [rdi]",
                "mov rbx, {nlo}",
                in("rdi") p,
                nlo = inout(reg) new.0 => _,
                in("rcx") new.1,
                inout("rax") old.0 => lo,
                inout("rdx") old.1 => hi,
                options(nostack),
            );
        }
        if (lo, hi) == old {
            Ok(())
        } else {
            Err((lo, hi))
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, new);
        unreachable!("Block128 filters are refused on this architecture")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::geometry::MAX_BITS;
    use crate::math::hashing::hash_item;
    use crate::math::rng::xorshift;

    /// The patterns a probe works out for every k up to its own give the
    /// place `locate` gives, for every probe of no more bits, and none
    /// beyond `BLOCKED_MAX_K`.
    #[test]
    fn patterns_give_every_smaller_k_its_place() {
        let mut next = xorshift(0xdead_beef);
        for _ in 0..2000 {
            let h = ItemHash { h1: next(), h2: next() };
            for wide in 1..=BLOCKED_MAX_K + 2 {
                let (w, b) = (Word64 { k: wide, n: 1000 }, Block128 { k: wide, n: 1000 });
                let (mut pw, mut pb) = (Patterns::default(), Patterns::default());
                // Over another item's.
                w.patterns(&ItemHash { h1: 1, h2: 3 }, &mut pw);
                b.patterns(&ItemHash { h1: 1, h2: 3 }, &mut pb);
                w.patterns(&h, &mut pw);
                b.patterns(&h, &mut pb);
                for k in 0..=wide {
                    let (w, b) = (Word64 { k, n: 77 }, Block128 { k, n: 77 });
                    assert_eq!(w.locate_in(&h, &pw), w.locate(&h), "word64 k {k} of {wide}");
                    assert_eq!(b.locate_in(&h, &pb), b.locate(&h), "block128 k {k} of {wide}");
                }
            }
        }
    }

    #[test]
    fn multipliers_are_odd_and_distinct() {
        let set: std::collections::HashSet<u64> = MULT.iter().copied().collect();
        assert_eq!(set.len(), MULT.len());
        assert!(MULT.iter().all(|m| m & 1 == 1));
    }

    /// Every block index is in range, for block counts at the edges and
    /// hashes at the edges; the extremes are reached.
    #[test]
    fn block_of_is_in_range_and_reaches_both_ends() {
        let hs = [0u64, 1, u64::MAX / 2, u64::MAX / 2 + 1, u64::MAX - 1, u64::MAX];
        for n in [1u64, 2, 3, 5, 7, 1000, 1 << 32, (1 << 32) + 1, MAX_BITS / 64, u64::MAX] {
            for &h1 in &hs {
                let h = ItemHash { h1, h2: 1 };
                assert!(block_of(&h, n) < n, "n {n} h1 {h1}");
            }
            assert_eq!(block_of(&ItemHash { h1: 0, h2: 1 }, n), 0);
            assert_eq!(block_of(&ItemHash { h1: u64::MAX, h2: 1 }, n), n - 1);
        }
    }

    /// Over many items, every word of a non-power-of-two table gets its
    /// share (a chi-square test at a generous bound).
    #[test]
    fn blocks_are_uniform() {
        let n = 97u64;
        let mut counts = vec![0u64; n as usize];
        let items = 97_000u64;
        for i in 0..items {
            counts[block_of(&hash_item(0, &i.to_le_bytes()), n) as usize] += 1;
        }
        let e = (items / n) as f64;
        let chi: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        // 96 degrees of freedom: the 99.99th percentile is about 150.
        assert!(chi < 150.0, "chi-square {chi}");
    }

    /// Masks have between 1 and k bits, and for every k each bit position
    /// of the word (block) is used about equally often.
    #[test]
    fn masks_have_at_most_k_bits_and_cover_the_word() {
        let mut next = xorshift(0x1234_5678);
        for k in 1..=BLOCKED_MAX_K {
            let mut pos64 = [0u32; 64];
            let mut pos128 = [0u32; 128];
            let trials = 20_000;
            let mut bits = 0u64;
            for _ in 0..trials {
                let h = ItemHash {
                    h1: next(),
                    h2: next() | 1,
                };
                let m = mask64(&h, k);
                assert!((1..=k).contains(&m.count_ones()), "k {k}");
                bits += m.count_ones() as u64;
                for (b, p) in pos64.iter_mut().enumerate() {
                    *p += (m >> b & 1) as u32;
                }
                let (lo, hi) = mask128(&h, k);
                assert!((1..=k).contains(&(lo.count_ones() + hi.count_ones())), "k {k}");
                for b in 0..64 {
                    pos128[b] += (lo >> b & 1) as u32;
                    pos128[64 + b] += (hi >> b & 1) as u32;
                }
            }
            // Each throw hits a given bit with probability 1/64 (1/128).
            let e64 = bits as f64 / 64.0;
            for (b, &p) in pos64.iter().enumerate() {
                assert!(
                    (p as f64 - e64).abs() < 6.0 * e64.sqrt() + 5.0,
                    "k {k} bit {b}: {p} vs {e64}"
                );
            }
            let total128: u32 = pos128.iter().sum();
            let e128 = total128 as f64 / 128.0;
            for (b, &p) in pos128.iter().enumerate() {
                assert!((p as f64 - e128).abs() < 6.0 * e128.sqrt() + 5.0, "k {k} bit {b}");
            }
            // Distinct bits per item match the occupancy of k throws.
            let expect = 64.0 * (1.0 - (63.0f64 / 64.0).powi(k as i32));
            let mean = bits as f64 / trials as f64;
            assert!((mean - expect).abs() < 0.05, "k {k}: mean bits {mean} vs {expect}");
        }
        assert_eq!(mask64(&ItemHash { h1: 0, h2: 1 }, 0), 0);
    }
}
