//! Item bytes to probe positions, exactly as `bloom.h` computes them.
//!
//! One XXH3-128 hash per item; its low half is `h1`, its high half forced odd
//! is `h2`, and probe `i` lands on bit `(h1 + i*h2) mod m` (Kirsch–Mitzenmacher
//! double hashing; wrapping 64-bit arithmetic, `m` a power of two). An odd
//! stride over a power-of-two table never repeats a position within `m` probes.

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// The two halves of an item's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemHash {
    pub h1: u64,
    pub h2: u64,
}

/// Hash an item. Seed 0 is XXH3-128's default (unseeded) hash, which keeps
/// seed-0 filters bit-identical to `bloom.h`.
#[inline]
pub fn hash_item(seed: u64, item: &[u8]) -> ItemHash {
    let h = xxh3_128_with_seed(item, seed);
    ItemHash {
        h1: h as u64,
        h2: ((h >> 64) as u64) | 1,
    }
}

impl ItemHash {
    /// Bit index of probe `i` in a table of `mask + 1` bits.
    #[inline(always)]
    pub fn probe(&self, i: u32, mask: u64) -> u64 {
        self.h1.wrapping_add((i as u64).wrapping_mul(self.h2)) & mask
    }

    /// Iterator over the `k` bit indexes (the tests' model of the standard
    /// layout's probes).
    #[cfg(test)]
    pub fn probes(self, k: u32, mask: u64) -> impl Iterator<Item = u64> {
        (0..k).map(move |i| self.probe(i, mask))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference XXH3-128 values from an independent implementation (the
    // xxHash C library through its Python binding), as (low64, high64).
    const VECTORS: &[(&[u8], u64, u64, u64)] = &[
        (b"", 0, 0x6001c324468d497f, 0x99aa06d3014798d8),
        (b"a", 0, 0xe6c632b61e964e1f, 0xa96faf705af16834),
        (b"hello", 0, 0xc779cfaa5e523818, 0xb5e9c1ad071b3e7f),
        (
            b"hello world, this is a longer item over 16 bytes",
            0,
            0x8696ab5e98e1863e,
            0xd7d5feaad6081e89,
        ),
        (b"hello", 42, 0x8c2f5b7e4cd59e16, 0x6ce89a0bdba81f08),
    ];

    #[test]
    fn xxh3_128_reference_vectors() {
        for &(item, seed, lo, hi) in VECTORS {
            let h = hash_item(seed, item);
            assert_eq!(h.h1, lo, "{item:?}");
            assert_eq!(h.h2, hi | 1, "{item:?}");
        }
        let long: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
        assert_eq!(hash_item(0, &long).h1, 0x1059105ad19bfa09);
        assert_eq!(hash_item(0, &long).h2, 0x111d5771df64cbcb);
    }

    #[test]
    fn probe_positions_known_answers() {
        // Positions computed independently with the same reference hashes.
        let p: Vec<u64> = hash_item(0, b"hello").probes(7, 16383).collect();
        assert_eq!(p, [14360, 13975, 13590, 13205, 12820, 12435, 12050]);
        let p: Vec<u64> = hash_item(0, b"").probes(1, 63).collect();
        assert_eq!(p, [63]);
        let p: Vec<u64> = hash_item(0, b"a").probes(10, (1 << 24) - 1).collect();
        assert_eq!(
            p,
            [9850399, 8894036, 7937673, 6981310, 6024947, 5068584, 4112221, 3155858, 2199495, 1243132]
        );
        let p: Vec<u64> = hash_item(42, b"hello").probes(7, 16383).collect();
        assert_eq!(p, [7702, 15647, 7208, 15153, 6714, 14659, 6220]);
        let x200 = [b'x'; 200];
        let p: Vec<u64> = hash_item(0, &x200).probes(32, (1 << 20) - 1).collect();
        assert_eq!(&p[..4], &[544781, 1007400, 421443, 884062]);
        assert_eq!(p[31], 205906);
    }

    #[test]
    fn odd_stride_never_repeats_within_table() {
        for s in 0..200u64 {
            let h = hash_item(s, &s.to_le_bytes());
            assert_eq!(h.h2 & 1, 1);
            let mut seen = std::collections::HashSet::new();
            for i in 0..64 {
                assert!(seen.insert(h.probe(i, 63)));
            }
        }
    }

    #[test]
    fn wrapping_arithmetic() {
        let h = ItemHash {
            h1: u64::MAX,
            h2: u64::MAX,
        };
        assert_eq!(h.probe(0, 63), 63);
        assert_eq!(h.probe(1, 63), 62); // (2^64-1)*2 mod 2^64 = 2^64-2
        assert_eq!(h.probe(31, u64::MAX), u64::MAX.wrapping_mul(32));
    }
}
