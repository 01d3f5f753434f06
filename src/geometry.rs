//! Sizing math: how many probes (`k`) and bits (`m`) a filter gets for a
//! requested capacity and false-positive rate, and the count estimate.
//!
//! Every formula here is the one `bloom.h` uses, so that a filter built by
//! either implementation from the same arguments has the same geometry.

use std::f64::consts::LN_2;

use crate::layout::{self, Layout, Scheme};

/// The smallest bit array (one 64-bit word).
pub const MIN_BITS: u64 = 64;
/// The largest bit array: 2^38 bits (32 GiB). Larger requests are refused,
/// never silently capped (a capped filter would miss its false-positive rate).
pub const MAX_BITS: u64 = 1 << 38;
/// Probe count limits.
pub const MIN_K: u32 = 1;
pub const MAX_K: u32 = 32;

/// The immutable shape of a filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    /// Number of probes per item.
    pub k: u32,
    /// Number of bits; a power of two in `MIN_BITS..=MAX_BITS`.
    pub m: u64,
    /// The capacity the filter was sized for (reported, and the `count` of a
    /// saturated filter).
    pub capacity: u64,
    /// The false-positive rate the filter was sized for.
    pub fp_rate: f64,
    /// Where an item's bits are (see `layout`).
    pub scheme: Scheme,
}

/// Why a capacity / rate pair was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GeometryError {
    Capacity,
    FpRate,
    TooLarge,
}

impl std::fmt::Display for GeometryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GeometryError::Capacity => "capacity must be a positive integer",
            GeometryError::FpRate => "fp_rate must be between 0 and 1 (exclusive)",
            GeometryError::TooLarge => {
                "capacity is too large: capacity and fp_rate need more than 2^38 bits (32 GiB); use a larger fp_rate or several filters"
            }
        })
    }
}

/// `k = lround(-log2(fp_rate))`, clamped to `MIN_K..=MAX_K`.
pub fn probes_for(fp_rate: f64) -> u32 {
    // f64::round rounds half away from zero, exactly as C's lround.
    let k = (-fp_rate.log2()).round();
    if k < MIN_K as f64 {
        MIN_K
    } else if k > MAX_K as f64 {
        MAX_K
    } else {
        k as u32
    }
}

/// The next power of two at or above `v`, at least `MIN_BITS`.
pub fn next_pow2_bits(v: u64) -> u64 {
    if v <= MIN_BITS {
        MIN_BITS
    } else {
        // v > 64 and the caller keeps v <= MAX_BITS, so this cannot overflow.
        v.next_power_of_two()
    }
}

impl Geometry {
    /// The geometry `bloom.h` gives `capacity` and `fp_rate`, or why not.
    pub fn for_capacity(capacity: u64, fp_rate: f64) -> Result<Geometry, GeometryError> {
        if capacity < 1 {
            return Err(GeometryError::Capacity);
        }
        if !(fp_rate > 0.0 && fp_rate < 1.0) {
            return Err(GeometryError::FpRate);
        }
        let k = probes_for(fp_rate);
        let m_opt = (capacity as f64 * k as f64 / LN_2).ceil();
        if m_opt > MAX_BITS as f64 {
            return Err(GeometryError::TooLarge);
        }
        Ok(Geometry {
            k,
            m: next_pow2_bits(m_opt as u64),
            capacity,
            fp_rate,
            scheme: Scheme::Standard,
        })
    }

    /// The geometry of `layout` for `capacity` and `fp_rate`: `bloom.h`'s
    /// for the standard layout, `layout::blocked_geometry`'s for the blocked.
    pub fn for_layout(capacity: u64, fp_rate: f64, layout: Layout) -> Result<Geometry, GeometryError> {
        let g = Geometry::for_capacity(capacity, fp_rate)?;
        match layout {
            Layout::Standard => Ok(g),
            Layout::Blocked => layout::blocked_geometry(capacity, fp_rate),
        }
    }

    /// Whether stored values form a geometry this library could have made.
    /// Used on every attach (file headers, serialized bytes are untrusted).
    pub fn is_valid(&self) -> bool {
        let shape = match self.scheme {
            Scheme::Standard => (MIN_K..=MAX_K).contains(&self.k) && self.m.is_power_of_two(),
            s => (MIN_K..=layout::BLOCKED_MAX_K).contains(&self.k) && self.m % s.block_bits() == 0,
        };
        shape
            && (MIN_BITS..=MAX_BITS).contains(&self.m)
            && self.capacity >= 1
            && self.fp_rate > 0.0
            && self.fp_rate < 1.0
    }

    /// Number of 64-bit words in the bit array.
    pub fn words(&self) -> usize {
        (self.m / 64) as usize
    }

    /// Size of the bit array in bytes.
    pub fn bytes(&self) -> u64 {
        self.m / 8
    }

    /// The estimated number of distinct items from the number of set bits.
    pub fn count_from_bits_set(&self, set: u64) -> u64 {
        match self.scheme {
            Scheme::Standard => estimate_count(self.m, self.k, self.capacity, set),
            _ => layout::blocked_count(self, set),
        }
    }

    /// The chance a random absent item is reported present now, with `set`
    /// bits set: `(X/m)^k` for the standard layout; for a blocked one, the
    /// layout's exact rate at the load `count` estimates.
    pub fn fpp_from_bits_set(&self, set: u64) -> f64 {
        match self.scheme {
            Scheme::Standard => estimated_fpp(self.m, self.k, set),
            _ if set >= self.m => 1.0,
            _ => layout::expected_fp(self, self.count_from_bits_set(set) as f64),
        }
    }

    /// The layout the user chose.
    pub fn layout(&self) -> Layout {
        self.scheme.layout()
    }
}

/// `round(-(m/k) * ln(1 - X/m))`; `capacity` once every bit is set.
pub fn estimate_count(m: u64, k: u32, capacity: u64, set: u64) -> u64 {
    if set >= m {
        return capacity;
    }
    let n = -(m as f64 / k as f64) * (1.0 - set as f64 / m as f64).ln();
    if n <= 0.0 {
        0
    } else {
        (n + 0.5) as u64
    }
}

/// `(X/m)^k`: the chance a random absent item is reported present now.
pub fn estimated_fpp(m: u64, k: u32, set: u64) -> f64 {
    // powf, not powi: the C library's pow, as the XS used to compute it.
    (set as f64 / m as f64).powf(k as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_match_lround_of_minus_log2() {
        assert_eq!(probes_for(0.5), 1);
        assert_eq!(probes_for(0.1), 3); // 3.32
        assert_eq!(probes_for(0.01), 7); // 6.64
        assert_eq!(probes_for(0.001), 10); // 9.97
        assert_eq!(probes_for(0.25), 2);
        assert_eq!(probes_for(0.9), 1); // 0.15 rounds to 0, clamped to 1
        assert_eq!(probes_for(1e-12), 32); // 39.9, clamped
                                           // Halfway case: 2^-2.5 = 0.17677..; lround rounds 2.5 up.
        assert_eq!(probes_for(2f64.powf(-2.5)), 3);
    }

    #[test]
    fn geometry_of_known_sizes() {
        let g = Geometry::for_capacity(1000, 0.01).unwrap();
        // ceil(1000 * 7 / ln 2) = 10099 -> 16384
        assert_eq!((g.k, g.m), (7, 16384));
        let g = Geometry::for_capacity(1, 0.5).unwrap();
        assert_eq!((g.k, g.m), (1, 64));
        let g = Geometry::for_capacity(1_000_000, 0.001).unwrap();
        // ceil(1e6 * 10 / ln 2) = 14426951 -> 2^24
        assert_eq!((g.k, g.m), (10, 1 << 24));
        // Exactly a power of two stays put: capacity*k/ln2 == 128 is not
        // reachable with integers, but next_pow2 of a power of two is itself.
        assert_eq!(next_pow2_bits(128), 128);
        assert_eq!(next_pow2_bits(129), 256);
        assert_eq!(next_pow2_bits(0), 64);
        assert_eq!(next_pow2_bits(65), 128);
    }

    #[test]
    fn refuses_bad_arguments_and_oversize() {
        assert_eq!(Geometry::for_capacity(0, 0.01), Err(GeometryError::Capacity));
        for r in [0.0, 1.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            assert_eq!(Geometry::for_capacity(10, r), Err(GeometryError::FpRate), "{r}");
        }
        // 2^38 * ln2 / 7 items at 1% need just over the cap.
        let limit = (MAX_BITS as f64 * LN_2 / 7.0).floor() as u64;
        assert_eq!(Geometry::for_capacity(limit, 0.01).unwrap().m, MAX_BITS);
        assert_eq!(Geometry::for_capacity(limit + 1, 0.01), Err(GeometryError::TooLarge));
        assert_eq!(Geometry::for_capacity(u64::MAX, 0.01), Err(GeometryError::TooLarge));
    }

    #[test]
    fn every_made_geometry_is_valid() {
        for cap in [1u64, 2, 3, 10, 63, 64, 65, 1000, 123_456, 10_000_000] {
            for r in [0.5, 0.3, 0.1, 0.05, 0.01, 0.001, 1e-6, 1e-9] {
                let g = Geometry::for_capacity(cap, r).unwrap();
                assert!(g.is_valid(), "{g:?}");
                assert!(g.m as f64 >= cap as f64 * g.k as f64 / LN_2);
                assert!(g.m / 2 < ((cap as f64 * g.k as f64 / LN_2).ceil() as u64).max(64));
            }
        }
        let mut g = Geometry::for_capacity(10, 0.01).unwrap();
        g.m = 100;
        assert!(!g.is_valid());
        g.m = 32;
        assert!(!g.is_valid());
        g.m = 64;
        g.k = 33;
        assert!(!g.is_valid());
        g.k = 0;
        assert!(!g.is_valid());
    }

    #[test]
    fn count_estimate() {
        assert_eq!(estimate_count(1024, 7, 100, 0), 0);
        assert_eq!(estimate_count(1024, 7, 100, 1024), 100);
        assert_eq!(estimate_count(1024, 7, 100, 2000), 100);
        // One item sets about k bits: -(1024/7) ln(1 - 7/1024) = 1.0034
        assert_eq!(estimate_count(1024, 7, 100, 7), 1);
        // Half full: (m/k) ln 2 = 101.39 -> 101
        assert_eq!(estimate_count(1024, 7, 100, 512), 101);
        assert_eq!(estimated_fpp(1024, 2, 512), 0.25);
        assert_eq!(estimated_fpp(1024, 7, 0), 0.0);
    }
}
