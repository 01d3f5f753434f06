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
//! The builder's other sizing, `with_size(bits, hashes)`, is
//! `geometry_of_size` (the options `bits` and `hashes`).

use std::f64::consts::LN_2;

use xxhash_rust::xxh64::xxh64;

use crate::math::geometry::{Geometry, GeometryError};
use crate::math::hashing::ItemHash;
use crate::math::scheme::Scheme;

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

/// The builder's `with_accuracy(capacity, fp_rate)`: m = ceil(-n ln p /
/// (ln 2)^2) rounded up to a multiple of 64, k = ceil((m / n) ln 2) with the
/// m before rounding, clamped to 1..=32767.
pub fn geometry(capacity: u64, fp_rate: f64) -> Result<Geometry, GeometryError> {
    if capacity < 1 {
        return Err(GeometryError::Capacity);
    }
    if !(fp_rate > 0.0 && fp_rate < 1.0) {
        return Err(GeometryError::FpRate);
    }
    let n = capacity as f64;
    let bits = (-n * fp_rate.ln() / (LN_2 * LN_2)).ceil();
    if bits > MAX_BITS as f64 {
        return Err(GeometryError::TooLargeForImage);
    }
    let bits = (bits as u64).max(1);
    let k = (bits as f64 / n * LN_2).ceil().clamp(1.0, MAX_K as f64) as u32;
    Ok(Geometry {
        k,
        m: (bits + 63) / 64 * 64,
        capacity,
        fp_rate,
        scheme: Scheme::DataSketches,
    })
}

/// The builder's `with_size(bits, hashes)`: `bits` rounded up to a multiple
/// of 64, `k` as given; the capacity and rate are the caller's (reported,
/// and `count`'s answer when every bit is set).
pub fn geometry_of_size(bits: u64, k: u32, capacity: u64, fp_rate: f64) -> Result<Geometry, String> {
    if !(1..=MAX_BITS).contains(&bits) {
        return Err(format!("bits must be between 1 and {MAX_BITS}, got {bits}"));
    }
    if !(1..=MAX_K).contains(&k) {
        return Err(format!("hashes must be between 1 and {MAX_K}, got {k}"));
    }
    if capacity < 1 {
        return Err(GeometryError::Capacity.to_string());
    }
    if !(fp_rate > 0.0 && fp_rate < 1.0) {
        return Err(GeometryError::FpRate.to_string());
    }
    Ok(Geometry {
        k,
        m: (bits + 63) / 64 * 64,
        capacity,
        fp_rate,
        scheme: Scheme::DataSketches,
    })
}

/// A geometry for `m` bits and `k` hashes whose capacity and rate were not
/// given (a DataSketches image stores neither): capacity = max(1,
/// floor(m ln 2 / k)), the rate expected at that capacity.
pub fn implied(m: u64, k: u32) -> Geometry {
    let capacity = ((m as f64 * LN_2 / k as f64).floor() as u64).max(1);
    let mut g = Geometry {
        k,
        m,
        capacity,
        fp_rate: 0.5,
        scheme: Scheme::DataSketches,
    };
    let p = crate::math::geometry::expected_fp(&g, capacity as f64);
    // Never 0 (a huge k) nor 1: the rate must stay a valid one.
    g.fp_rate = p.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON);
    g
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

    /// The builder's sizes, worked out by hand from its formulas.
    #[test]
    fn sizing_known_answers() {
        // 1000 items at 1%: ceil(1000 * 4.60517 / 0.480453) = 9586 bits ->
        // 150 words; k = ceil(9.586 * 0.693147) = ceil(6.6444) = 7.
        let g = geometry(1000, 0.01).unwrap();
        assert_eq!((g.m, g.k), (9600, 7));
        // 1 item at 0.5: ceil(0.6931 / 0.4805) = 2 bits -> 64; k = ceil(1.386) = 2.
        let g = geometry(1, 0.5).unwrap();
        assert_eq!((g.m, g.k), (64, 2));
        // 10_000 at 0.001: ceil(10000 * 6.907755 / 0.480453) = 143776 bits
        // (2246.5 words -> 2247); k = ceil(14.3776 * 0.6931) = 10.
        let g = geometry(10_000, 0.001).unwrap();
        assert_eq!((g.m, g.k), (2247 * 64, 10));
        assert!(g.is_valid());
        assert_eq!(geometry(0, 0.1), Err(GeometryError::Capacity));
        for r in [0.0, 1.0, -1.0, f64::NAN] {
            assert_eq!(geometry(10, r), Err(GeometryError::FpRate));
        }
        assert_eq!(geometry(u64::MAX, 0.01), Err(GeometryError::TooLargeForImage));
    }

    /// Property: for any capacity and rate the builder's geometry is valid,
    /// its m a multiple of 64 no more than 63 bits over the formula.
    #[test]
    fn sizing_is_valid_everywhere() {
        for cap in [1u64, 2, 3, 63, 64, 65, 999, 123_457, 10_000_000] {
            for r in [0.9, 0.5, 0.1, 0.01, 1e-4, 1e-9, 1e-15] {
                let g = geometry(cap, r).unwrap();
                assert!(g.is_valid(), "{g:?}");
                let exact = (-(cap as f64) * r.ln() / (LN_2 * LN_2)).ceil() as u64;
                assert!(g.m >= exact && g.m < exact + 64, "{g:?}");
                let im = implied(g.m, g.k);
                assert!(im.is_valid(), "{im:?}");
            }
        }
    }

    #[test]
    fn explicit_size() {
        let g = geometry_of_size(95_851, 7, 1000, 0.01).unwrap();
        assert_eq!((g.m, g.k, g.capacity), (95_872, 7, 1000));
        assert!(g.is_valid());
        assert_eq!(geometry_of_size(1, 1, 1, 0.5).unwrap().m, 64);
        assert_eq!(geometry_of_size(128, 3, 1, 0.5).unwrap().m, 128);
        assert!(geometry_of_size(0, 3, 1, 0.5).unwrap_err().contains("bits"));
        assert!(geometry_of_size(MAX_BITS + 1, 3, 1, 0.5).unwrap_err().contains("bits"));
        assert!(geometry_of_size(64, 0, 1, 0.5).unwrap_err().contains("hashes"));
        assert!(geometry_of_size(64, MAX_K + 1, 1, 0.5).unwrap_err().contains("hashes"));
        assert!(geometry_of_size(64, 3, 0, 0.5).unwrap_err().contains("capacity"));
        assert!(geometry_of_size(64, 3, 1, 1.0).unwrap_err().contains("fp_rate"));
        assert!(geometry_of_size(MAX_BITS, MAX_K, 1, 0.5).unwrap().is_valid());
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
