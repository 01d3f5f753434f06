//! A grown filter's standard stages (doc/DESIGN.md, §3 growth): k probes
//! over the whole stage as `bloom.h`'s layout, an add serialized per item
//! on the same stripe, but its probes after the first two mixed one by one.
//!
//! `bloom.h`'s probes `(h1 + i*h2) mod m` give a table of `m` bits only
//! about `m^2/2` probe sequences: an absent item shares a stored item's
//! whole sequence, or one shifted by a few probes, with a probability near
//! `n/(m^2/2)` per stored item whatever `k` is, and every stage took the
//! low bits of the same sums. Here probe `i` of stage `s` is the top
//! `log2 m` bits of `x_i = h1 + s*SALT + i*h2`, mixed for `i >= 2`:
//! `mix(x)` is wyhash's folded 64x64->128 multiply of `x` and `x ^ MIX`,
//! which is not linear, so probes 2 and on of two items whose sums differ
//! share a position only by chance (`1/m`), probe by probe, as independent
//! probes would, and no pair of items shares a whole sequence. Probes 0
//! and 1 are the top bits of `x_0` and `x_1` themselves: uniform and
//! independent of each other and of the mixed ones for an item, which is
//! all a rate of `f^k` needs, and as cheap as `bloom.h`'s, so that
//! `contains_gated`, which tests them before it branches in every stage a
//! miss looks at, costs what it did (a mix on each would add its multiply's
//! latency to every stage of a miss: 2 to 3 ns a stage, measured).
//! The stages' salts differ, so one item's positions differ from stage to
//! stage; a stage's rate does not depend on the others', and the union
//! bound over the stages needs no more.

use super::{no_patterns, spread_prefetch, spread_probes, Probe, Probing, SpreadGate};
use crate::math::geometry::Geometry;
use crate::math::hashing::ItemHash;

/// Stage `s` adds `s * SALT` to `h1`: odd, `2^64` over the golden ratio,
/// so that one item's mixed positions in one stage say nothing of those in
/// another.
pub const SALT: u64 = 0x9e37_79b9_7f4a_7c15;
/// The constant `mix` multiplies by, `x ^ MIX`: wyhash's (`_wyp1`).
pub const MIX: u64 = 0xe703_7ed1_a0b4_28db;

/// `mix`: the two halves of the 128-bit product `x * (x ^ MIX)`, XORed.
#[inline(always)]
pub fn mix(x: u64) -> u64 {
    let t = (x as u128) * ((x ^ MIX) as u128);
    (t as u64) ^ ((t >> 64) as u64)
}

/// The position of probe `i` of an item located by `StandardStage::locate`
/// (its `h1` salted), in a table of `2^(64 - shift)` bits.
#[inline(always)]
pub fn stage_probe(loc: &ItemHash, i: u32, shift: u32) -> u64 {
    let x = loc.h1.wrapping_add((i as u64).wrapping_mul(loc.h2));
    (if i < 2 { x } else { mix(x) }) >> shift
}

/// A grown filter's standard stage: `k` probes over `2^(64 - shift)` bits,
/// all but the first two mixed (`stage_probe`).
#[derive(Clone, Copy, Debug)]
pub struct StandardStage {
    pub k: u32,
    /// `64 - log2 m`: a position is the top `log2 m` bits of its sum or mix.
    pub shift: u32,
    /// `stage * SALT`.
    pub salt: u64,
    /// Stripes in the table (a power of two).
    pub stripes: u32,
}

impl StandardStage {
    /// Stage `stage` of `m` bits (a power of two, at least 64, as every
    /// standard geometry's) with `k` probes.
    pub fn new(k: u32, m: u64, stage: u32, stripes: u32) -> StandardStage {
        debug_assert!(m.is_power_of_two() && m >= 64);
        StandardStage {
            k,
            // For any m >= 2: positions stay below 2^floor(log2 m) <= m.
            shift: m.leading_zeros() + 1,
            salt: (stage as u64).wrapping_mul(SALT),
            stripes,
        }
    }

    /// Probe `i`'s position (`stage_probe`): below `2^(64 - shift)`,
    /// which is at most `m` (`new`).
    #[inline(always)]
    fn at(&self, h: &ItemHash, i: u32) -> u64 {
        stage_probe(h, i, self.shift)
    }

    spread_prefetch!();
}

impl Probe for StandardStage {
    type Loc = ItemHash;
    type Gate = SpreadGate;
    const STRIPED: bool = true;

    no_patterns!();

    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::StandardStage(p) => Some(p),
            _ => None,
        }
    }

    /// Stage 0's (`Probing::for_stage` makes every stage's).
    fn for_geometry(g: &Geometry, stripes: u32) -> StandardStage {
        StandardStage::new(g.k, g.m, 0, stripes)
    }

    /// The item's hash with the stage's salt added to `h1`; `h2`, which
    /// the stripe is taken from, unchanged.
    #[inline(always)]
    fn locate(&self, h: &ItemHash) -> ItemHash {
        ItemHash {
            h1: h.h1.wrapping_add(self.salt),
            h2: h.h2,
        }
    }

    spread_probes!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::hashing::hash_item;
    use crate::math::rng::xorshift;
    use crate::probe::Standard;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Probe `i` of stage `s` in `m` bits the long way: the 128-bit product
    /// from four 32-bit ones, the position as `floor(v * m / 2^64)`, `v` the
    /// sum (probes 0 and 1) or its mix.
    fn reference(h: ItemHash, s: u64, i: u64, m: u64) -> u64 {
        let x =
            h.h1.wrapping_add(s.wrapping_mul(SALT))
                .wrapping_add(i.wrapping_mul(h.h2));
        let y = x ^ MIX;
        let (xl, xh, yl, yh) = (x & 0xffff_ffff, x >> 32, y & 0xffff_ffff, y >> 32);
        let (ll, lh, hl, hh) = (xl * yl, xl * yh, xh * yl, xh * yh);
        let mid = (ll >> 32) + (lh & 0xffff_ffff) + (hl & 0xffff_ffff);
        let lo = (ll & 0xffff_ffff) | (mid << 32);
        let hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
        let v = if i < 2 { x } else { lo ^ hi };
        (((v as u128) * m as u128) >> 64) as u64
    }

    fn positions(p: &StandardStage, h: ItemHash) -> Vec<u64> {
        let loc = p.locate(&h);
        (0..p.k).map(|i| stage_probe(&loc, i, p.shift)).collect()
    }

    /// Known answers, computed outside Rust (Python's big integers:
    /// `x = h1 + s*SALT + i*h2 mod 2^64`; for `i >= 2`, `t = x * (x ^ MIX)`
    /// and `x = (t mod 2^64) ^ (t >> 64)`; the position `x * m >> 64`), and
    /// the reference above for many more.
    #[test]
    fn known_answers() {
        let h = ItemHash {
            h1: 0x0123_4567_89ab_cdef,
            h2: 0x0fed_cba9_8765_4321,
        };
        let cases: [(u32, u64, u32, &[u64]); 5] = [
            (0, 4096, 8, &[18, 273, 2064, 2440, 2702, 1091, 1040, 1638]),
            (1, 4096, 8, &[2549, 2804, 3809, 2544, 521, 3578, 508, 3269]),
            (5, 1 << 20, 6, &[99210, 164455, 536134, 315443, 124266, 906333]),
            (3, 64, 12, &[54, 58, 19, 39, 45, 46, 5, 7, 27, 17, 2, 24]),
            (
                31,
                1 << 38,
                5,
                &[43720334746, 43720334746, 19379802657, 258570122149, 12620162573],
            ),
        ];
        for (stage, m, k, want) in cases {
            let h = match stage {
                31 => ItemHash {
                    h1: u64::MAX,
                    h2: u64::MAX,
                },
                _ => h,
            };
            assert_eq!(
                positions(&StandardStage::new(k, m, stage, 64), h),
                want,
                "stage {stage} m {m}"
            );
        }
        let mut next = xorshift(0x5eed);
        for b in 6..=38u32 {
            for _ in 0..200 {
                let h = ItemHash {
                    h1: next(),
                    h2: next() | 1,
                };
                let s = (next() % 32) as u32;
                let p = StandardStage::new(32, 1 << b, s, 64);
                let want: Vec<u64> = (0..32).map(|i| reference(h, s as u64, i, 1 << b)).collect();
                assert_eq!(positions(&p, h), want, "b {b} stage {s} {h:?}");
            }
        }
    }

    /// Every position is below m, for every power of two the standard
    /// geometry allows and hashes from random to the extremes; the ways of
    /// asking an array of exactly m bits never leave it (`word`'s debug
    /// assertion) and agree.
    #[test]
    fn positions_stay_in_range() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let extremes = [0, 1, u64::MAX, u64::MAX - 1, 1 << 63, SALT, MIX];
        for b in 6..=38u32 {
            let m = 1u64 << b;
            let p = StandardStage::new(32, m, b % 32, 64);
            let mut hashes: Vec<ItemHash> = (0..500).map(|_| hash_item(0, &next().to_le_bytes())).collect();
            for &a in &extremes {
                for &c in &extremes {
                    hashes.push(ItemHash { h1: a, h2: c | 1 });
                }
            }
            for h in hashes {
                let pos = positions(&p, h);
                assert!(pos.iter().all(|&x| x < m), "b {b} {h:?}: {pos:?}");
            }
        }
        for b in 6..=14u32 {
            let bits: Vec<AtomicU64> = (0..(1u64 << b) / 64).map(|_| AtomicU64::new(0)).collect();
            for k in [1, 2, 7, 32] {
                let p = StandardStage::new(k, 1 << b, 3, 64);
                for round in 0..300 {
                    let h = hash_item(0, &next().to_le_bytes());
                    let loc = p.locate(&h);
                    let all = p.contains(&bits, &loc);
                    assert_eq!(p.contains_early(&bits, &loc), all, "b {b} k {k} round {round}");
                    assert_eq!(p.contains_gated(&bits, &loc), all, "b {b} k {k} round {round}");
                    let x = positions(&p, h)[0];
                    let first = (bits[(x >> 6) as usize].load(Ordering::Relaxed) >> (x & 63)) & 1 == 1;
                    assert_eq!(p.first_set(&bits, &loc), first);
                    p.prefetch_gated(&bits, &loc);
                    p.prefetch_rest(&bits, &loc);
                    let new = p.set(&bits, &loc);
                    assert_eq!(new, !all);
                    assert!(p.contains(&bits, &loc) && p.contains_gated(&bits, &loc));
                    assert!(!p.set(&bits, &loc), "set twice: new twice");
                }
            }
        }
    }

    /// An item's stripe is the same in every stage, at every size, and the
    /// same as the plain standard layout's (stage 0's `Filter::probing`).
    #[test]
    fn stripes_equal_across_stages() {
        let mut next = xorshift(7);
        for _ in 0..2000 {
            let h = hash_item(next(), &next().to_le_bytes());
            let plain = Standard {
                k: 7,
                mask: 4095,
                stripes: 1024,
            };
            let want = plain.stripe(&plain.locate(&h));
            assert!(want.is_some());
            for s in 0..32u32 {
                let p = StandardStage::new(1 + s % 32, 64 << (s % 20), s, 1024);
                assert_eq!(p.stripe(&p.locate(&h)), want, "stage {s}");
            }
        }
    }

    /// What `bloom.h`'s probes cannot do in a small table: two items whose
    /// `h1` and `h2` agree modulo m have all their `(h1 + i*h2) mod m` probes
    /// in common; here they share a position only by chance (1/m), and an
    /// item's positions in one stage say nothing of those in the next.
    #[test]
    fn no_shared_sequences_in_small_tables() {
        let mut next = xorshift(11);
        let m = 4096u64;
        let (k, trials) = (20u32, 2000u64);
        let p = StandardStage::new(k, m, 0, 64);
        let (mut shared, mut across) = (0u64, 0u64);
        for _ in 0..trials {
            let a = ItemHash {
                h1: next(),
                h2: next() | 1,
            };
            let b = ItemHash {
                h1: a.h1.wrapping_add(m.wrapping_mul(next())),
                h2: a.h2.wrapping_add(m.wrapping_mul(next())),
            };
            let (pa, pb): (Vec<u64>, Vec<u64>) = (a.probes(k, m - 1).collect(), b.probes(k, m - 1).collect());
            assert_eq!(pa, pb, "bloom.h's probes of such a pair agree");
            let (sa, sb) = (positions(&p, a), positions(&p, b));
            shared += sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as u64;
            // The same item in stage 1 of the same size.
            let s1 = positions(&StandardStage::new(k, m, 1, 64), a);
            across += sa.iter().zip(&s1).filter(|(x, y)| x == y).count() as u64;
        }
        // k * trials = 40 000 probe pairs, 9.8 expected at 1/m: a tenth of a
        // shared sequence's would already be 4 000.
        for (what, n) in [("pair", shared), ("stages", across)] {
            assert!(n < 40, "{what}: {n} equal positions of {}", k as u64 * trials);
        }
    }
}
