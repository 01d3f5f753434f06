//! Apache DataSketches' Bloom filter, the arithmetic: how it hashes an item
//! and where the item's bits are, and how its builder sizes a filter. The
//! facts are those of the `datasketches` crate 0.6.0 (`bloom`), the same as
//! its Java and C++ versions; `xt/datasketches/tests/datasketches.rs` checks them against
//! the crate itself.
//!
//! * h0 = XXH64(item bytes, seed), h1 = XXH64(item bytes, h0);
//! * for i = 1..=k, bit `((h0 + i*h1) >> 1) mod m` (wrapping 64-bit
//!   arithmetic), that is bit `b & 63` of little-endian word `b >> 6`;
//! * m a multiple of 64 (not a power of two), k up to 32767.
//!
//! The builder's sizing, `with_accuracy(capacity, fp_rate)` and
//! `with_size(bits, hashes)` (the options `bits` and `hashes`), is
//! `Geometry::datasketches` and `Geometry::datasketches_of_size` in
//! `geometry`, which sizes every layout.

use xxhash_rust::xxh64::xxh64;

use crate::math::hashing::ItemHash;

/// Most hash functions DataSketches accepts (`i16::MAX`).
pub const MAX_K: u32 = 32767;

/// Most bits: the image's word count is a signed 32-bit field and the whole
/// image must fit a signed 32-bit length in longs (the builder's
/// `MAX_NUM_BITS`: (2^31 - 1 - 4) words).
pub const MAX_BITS: u64 = (i32::MAX as u64 - 4) * 64;

/// An item's two hashes: `h1` holds h0 and `h2` holds h1.
#[inline]
pub fn hash(seed: u64, item: &[u8]) -> ItemHash {
    let h0 = xxh64(item, seed);
    ItemHash {
        h1: h0,
        h2: xxh64(item, h0),
    }
}

/// Bit index of probe `i` (1-based) in a table of `m` bits.
#[inline(always)]
pub fn bit_index(h: &ItemHash, i: u32, m: u64) -> u64 {
    (h.h1.wrapping_add((i as u64).wrapping_mul(h.h2)) >> 1) % m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XXH64 reference values (the xxHash C library's `XXH64`).
    #[test]
    fn xxh64_reference_vectors() {
        assert_eq!(xxh64(b"", 0), 0xef46db3751d8e999);
        assert_eq!(xxh64(b"a", 0), 0xd24ec4f1a98c6e5b);
        assert_eq!(xxh64(b"abc", 0), 0x44bc2cf5ad770999);
    }

    /// Probes are 1-based, shifted right once, reduced mod m; wrapping.
    #[test]
    fn bit_index_formula() {
        let h = ItemHash { h1: 10, h2: 4 };
        assert_eq!(bit_index(&h, 1, 64), 7); // (10 + 4) >> 1
        assert_eq!(bit_index(&h, 2, 64), 9);
        assert_eq!(bit_index(&h, 30, 64), 65 % 64);
        let h = ItemHash {
            h1: u64::MAX,
            h2: u64::MAX,
        };
        // MAX + MAX = 2^64 - 2, >> 1 = 2^63 - 1.
        assert_eq!(bit_index(&h, 1, 1 << 20), ((1u64 << 63) - 1) % (1 << 20));
        for s in 0..500u64 {
            let h = hash(s, &s.to_le_bytes());
            for i in 1..=40 {
                assert!(bit_index(&h, i, 192) < 192);
            }
        }
        assert_eq!(hash(7, b"x").h1, xxh64(b"x", 7));
        assert_eq!(hash(7, b"x").h2, xxh64(b"x", xxh64(b"x", 7)));
    }
}
