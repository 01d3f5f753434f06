//! Sizing math: how many probes (`k`) and bits (`m`) a filter gets for a
//! requested capacity and false-positive rate, and the count estimate.
//!
//! Every formula here is the one `bloom.h` uses, so that a filter built by
//! either implementation from the same arguments has the same geometry.

use std::f64::consts::LN_2;

use crate::math::blocked::{best_k, blocked_fp, WORD64_MAX_OVERHEAD};
use crate::math::datasketches;
use crate::math::scheme::{layout_table, Layout, Scheme, BLOCKED_MAX_K};

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
    /// Where an item's bits are (see `math::scheme` and `probe`).
    pub scheme: Scheme,
}

/// Why a capacity / rate pair was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GeometryError {
    Capacity,
    FpRate,
    TooLarge,
    /// Over the DataSketches image's limit (`datasketches::MAX_BITS`).
    TooLargeForImage,
}

impl std::fmt::Display for GeometryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GeometryError::Capacity => "capacity must be a positive integer",
            GeometryError::FpRate => "fp_rate must be between 0 and 1 (exclusive)",
            GeometryError::TooLarge => {
                "capacity is too large: capacity and fp_rate need more than 2^38 bits (32 GiB); use a larger fp_rate or several filters"
            }
            GeometryError::TooLargeForImage => {
                "capacity is too large: capacity and fp_rate need more bits than a DataSketches image holds (2^31 - 5 words); use a larger fp_rate or several filters"
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

    /// The geometry of `layout` for `capacity` and `fp_rate`: its row's
    /// sizing (`scheme::layout_table!`): `bloom.h`'s for the standard layout,
    /// `blocked_geometry`'s for the blocked, DataSketches' builder's.
    pub fn for_layout(capacity: u64, fp_rate: f64, layout: Layout) -> Result<Geometry, GeometryError> {
        macro_rules! sizing {
            (
                ($capacity:ident, $fp_rate:ident, $l:ident)
                $(when $when:meta, $layout:ident $name:literal code $code:literal sizing $sizing:expr, mod $module:ident {
                    $($rest:tt)*
                })+
            ) => {
                match $l {
                    $(#[cfg($when)] Layout::$layout => ($sizing)($capacity, $fp_rate),)+
                }
            };
        }
        layout_table!(sizing!(capacity, fp_rate, layout))
    }

    /// Whether stored values form a geometry this library could have made.
    /// Used on every attach (file headers, serialized bytes are untrusted).
    pub fn is_valid(&self) -> bool {
        macro_rules! shape {
            (
                ($g:ident)
                $(when $when:meta, $layout:ident $name:literal code $code:literal sizing $sizing:expr, mod $module:ident {
                    $($scheme:ident = $id:literal, block $block:literal, shape $shape:ident, probe $probe:ident,
                        doc $doc:literal;)+
                })+
            ) => {
                match $g.scheme {
                    $($(#[cfg($when)] Scheme::$scheme => $shape($g),)+)+
                }
            };
        }
        let g = self;
        layout_table!(shape!(g))
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
            s if s.block_bits() == 0 => estimate_count(self.m, self.k, self.capacity, set),
            _ => blocked_count(self, set),
        }
    }

    /// The chance a random absent item is reported present now, with `set`
    /// bits set: `(X/m)^k` for the standard layout; for a blocked one, the
    /// layout's exact rate at the load `count` estimates.
    pub fn fpp_from_bits_set(&self, set: u64) -> f64 {
        match self.scheme {
            s if s.block_bits() == 0 => estimated_fpp(self.m, self.k, set),
            _ if set >= self.m => 1.0,
            _ => expected_fp(self, self.count_from_bits_set(set) as f64),
        }
    }

    /// The layout the user chose.
    pub fn layout(&self) -> Layout {
        self.scheme.layout()
    }
}

/// The shape of a geometry of k probes over the whole array (`bloom.h`'s):
/// `MIN_K..=MAX_K` probes, a power of two bits.
fn spread_shape(g: &Geometry) -> bool {
    (MIN_K..=MAX_K).contains(&g.k) && g.m.is_power_of_two()
}

/// The shape of a blocked geometry: at most `BLOCKED_MAX_K` bits per item,
/// whole blocks.
fn block_shape(g: &Geometry) -> bool {
    (MIN_K..=BLOCKED_MAX_K).contains(&g.k) && g.m % g.scheme.block_bits() == 0
}

/// The shape of a DataSketches geometry: its builder's limits, whole words.
fn datasketches_shape(g: &Geometry) -> bool {
    (MIN_K..=datasketches::MAX_K).contains(&g.k) && g.m % 64 == 0 && g.m <= datasketches::MAX_BITS
}

/// Apache DataSketches' builder's sizes (its hashing and limits:
/// `math::datasketches`).
impl Geometry {
    /// The builder's `with_accuracy(capacity, fp_rate)`: m = ceil(-n ln p /
    /// (ln 2)^2) rounded up to a multiple of 64, k = ceil((m / n) ln 2) with the
    /// m before rounding, clamped to 1..=32767.
    pub fn datasketches(capacity: u64, fp_rate: f64) -> Result<Geometry, GeometryError> {
        if capacity < 1 {
            return Err(GeometryError::Capacity);
        }
        if !(fp_rate > 0.0 && fp_rate < 1.0) {
            return Err(GeometryError::FpRate);
        }
        let n = capacity as f64;
        let bits = (-n * fp_rate.ln() / (LN_2 * LN_2)).ceil();
        if bits > datasketches::MAX_BITS as f64 {
            return Err(GeometryError::TooLargeForImage);
        }
        let bits = (bits as u64).max(1);
        let k = (bits as f64 / n * LN_2).ceil().clamp(1.0, datasketches::MAX_K as f64) as u32;
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
    pub fn datasketches_of_size(bits: u64, k: u32, capacity: u64, fp_rate: f64) -> Result<Geometry, String> {
        if !(1..=datasketches::MAX_BITS).contains(&bits) {
            return Err(format!(
                "bits must be between 1 and {}, got {bits}",
                datasketches::MAX_BITS
            ));
        }
        if !(1..=datasketches::MAX_K).contains(&k) {
            return Err(format!("hashes must be between 1 and {}, got {k}", datasketches::MAX_K));
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
    pub fn datasketches_implied(m: u64, k: u32) -> Geometry {
        let capacity = ((m as f64 * LN_2 / k as f64).floor() as u64).max(1);
        let mut g = Geometry {
            k,
            m,
            capacity,
            fp_rate: 0.5,
            scheme: Scheme::DataSketches,
        };
        let p = expected_fp(&g, capacity as f64);
        // Never 0 (a huge k) nor 1: the rate must stay a valid one.
        g.fp_rate = p.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON);
        g
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

// ---------------------------------------------------------------- blocked sizing

/// The blocked geometry for `capacity` items at `rate`: the width, `k` and
/// number of blocks with the fewest bits whose exact false-positive rate at
/// capacity is at most `rate` (see `WORD64_MAX_OVERHEAD` for the width).
pub fn blocked_geometry(capacity: u64, rate: f64) -> Result<Geometry, GeometryError> {
    let (k64, l64) = best_k(64, rate);
    let (k128, l128) = best_k(128, rate);
    let per64 = 64.0 / l64;
    let per128 = 128.0 / l128;
    // The choice is the same on every machine (a filter's geometry follows
    // from its arguments alone); one without a 16-byte compare-and-swap
    // refuses to run a 128-bit-block filter rather than size it otherwise.
    let (scheme, block, k, lambda) = if per64 <= WORD64_MAX_OVERHEAD * per128 {
        (Scheme::Word64, 64u64, k64, l64)
    } else {
        (Scheme::Block128, 128u64, k128, l128)
    };
    if lambda.is_nan() || lambda <= 0.0 {
        return Err(GeometryError::TooLarge);
    }
    let blocks = (capacity as f64 / lambda).ceil().max(1.0);
    if blocks * block as f64 > MAX_BITS as f64 {
        return Err(GeometryError::TooLarge);
    }
    // Rounding the block count up only lowers the load: re-check it, since
    // the FP is computed at capacity / blocks.
    let blocks = blocks as u64;
    debug_assert!(blocked_fp(block, k, capacity as f64 / blocks as f64) <= rate);
    Ok(Geometry {
        k,
        m: blocks * block,
        capacity,
        fp_rate: rate,
        scheme,
    })
}

/// The expected false-positive rate of geometry `g` holding `n` items.
pub fn expected_fp(g: &Geometry, n: f64) -> f64 {
    match g.scheme {
        s if s.block_bits() == 0 => (1.0 - (-(g.k as f64) * n / g.m as f64).exp()).powi(g.k as i32),
        s => {
            let b = s.block_bits();
            blocked_fp(b, g.k, n / (g.m / b) as f64)
        }
    }
}

/// Estimated items from `set` bits of a blocked geometry: the inverse of
/// the expected fill. A block of `B` bits holding `J ~ Poisson(l)` items
/// has each bit clear with probability `E[z^J] = exp(-l (1 - z))`, with
/// `z = (1 - 1/B)^k`; so `n = -(b / (1 - z)) ln(1 - X/m)`.
pub fn blocked_count(g: &Geometry, set: u64) -> u64 {
    if set >= g.m {
        return g.capacity;
    }
    let b = g.scheme.block_bits();
    let blocks = (g.m / b) as f64;
    let z = (1.0 - 1.0 / b as f64).powi(g.k as i32);
    let n = -(blocks / (1.0 - z)) * (1.0 - set as f64 / g.m as f64).ln();
    if n <= 0.0 {
        0
    } else {
        (n + 0.5) as u64
    }
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

    /// The chosen geometry meets the rate at capacity, and one block fewer
    /// would not (it is the smallest for that width and k).
    #[test]
    fn blocked_geometry_is_smallest_meeting_the_rate() {
        for cap in [1u64, 7, 100, 1000, 123_457, 10_000_000] {
            for rate in [0.5, 0.1, 0.05, 0.01, 0.001, 0.0001, 1e-5] {
                let g = blocked_geometry(cap, rate).unwrap();
                assert!(g.is_valid(), "{g:?}");
                let b = g.scheme.block_bits();
                let blocks = g.m / b;
                assert!(expected_fp(&g, cap as f64) <= rate * (1.0 + 1e-9), "{g:?}");
                if blocks > 1 {
                    let fewer = blocked_fp(b, g.k, cap as f64 / (blocks - 1) as f64);
                    assert!(fewer > rate * 0.999_999, "{g:?}: {fewer}");
                }
            }
        }
        assert_eq!(blocked_geometry(u64::MAX, 0.01), Err(GeometryError::TooLarge));
    }

    #[test]
    fn count_estimate_inverts_the_expected_fill() {
        let g = blocked_geometry(100_000, 0.01).unwrap();
        assert_eq!(blocked_count(&g, 0), 0);
        assert_eq!(blocked_count(&g, g.m), g.capacity);
        let b = g.scheme.block_bits() as f64;
        let blocks = (g.m as f64) / b;
        for n in [1.0, 1000.0, 50_000.0, 100_000.0, 200_000.0] {
            let z = (1.0 - 1.0 / b).powi(g.k as i32);
            let fill = 1.0 - (-(n / blocks) * (1.0 - z)).exp();
            let set = (fill * g.m as f64).round() as u64;
            let est = blocked_count(&g, set) as f64;
            assert!((est - n).abs() <= 0.002 * n + 1.0, "{n}: {est}");
        }
    }

    /// The builder's sizes, worked out by hand from its formulas.
    #[test]
    fn datasketches_sizing_known_answers() {
        // 1000 items at 1%: ceil(1000 * 4.60517 / 0.480453) = 9586 bits ->
        // 150 words; k = ceil(9.586 * 0.693147) = ceil(6.6444) = 7.
        let g = Geometry::datasketches(1000, 0.01).unwrap();
        assert_eq!((g.m, g.k), (9600, 7));
        // 1 item at 0.5: ceil(0.6931 / 0.4805) = 2 bits -> 64; k = ceil(1.386) = 2.
        let g = Geometry::datasketches(1, 0.5).unwrap();
        assert_eq!((g.m, g.k), (64, 2));
        // 10_000 at 0.001: ceil(10000 * 6.907755 / 0.480453) = 143776 bits
        // (2246.5 words -> 2247); k = ceil(14.3776 * 0.6931) = 10.
        let g = Geometry::datasketches(10_000, 0.001).unwrap();
        assert_eq!((g.m, g.k), (2247 * 64, 10));
        assert!(g.is_valid());
        assert_eq!(Geometry::datasketches(0, 0.1), Err(GeometryError::Capacity));
        for r in [0.0, 1.0, -1.0, f64::NAN] {
            assert_eq!(Geometry::datasketches(10, r), Err(GeometryError::FpRate));
        }
        assert_eq!(
            Geometry::datasketches(u64::MAX, 0.01),
            Err(GeometryError::TooLargeForImage)
        );
    }

    /// Property: for any capacity and rate the builder's geometry is valid,
    /// its m a multiple of 64 no more than 63 bits over the formula.
    #[test]
    fn datasketches_sizing_is_valid_everywhere() {
        for cap in [1u64, 2, 3, 63, 64, 65, 999, 123_457, 10_000_000] {
            for r in [0.9, 0.5, 0.1, 0.01, 1e-4, 1e-9, 1e-15] {
                let g = Geometry::datasketches(cap, r).unwrap();
                assert!(g.is_valid(), "{g:?}");
                let exact = (-(cap as f64) * r.ln() / (LN_2 * LN_2)).ceil() as u64;
                assert!(g.m >= exact && g.m < exact + 64, "{g:?}");
                let im = Geometry::datasketches_implied(g.m, g.k);
                assert!(im.is_valid(), "{im:?}");
            }
        }
    }

    #[test]
    fn datasketches_explicit_size() {
        let g = Geometry::datasketches_of_size(95_851, 7, 1000, 0.01).unwrap();
        assert_eq!((g.m, g.k, g.capacity), (95_872, 7, 1000));
        assert!(g.is_valid());
        assert_eq!(Geometry::datasketches_of_size(1, 1, 1, 0.5).unwrap().m, 64);
        assert_eq!(Geometry::datasketches_of_size(128, 3, 1, 0.5).unwrap().m, 128);
        assert!(Geometry::datasketches_of_size(0, 3, 1, 0.5)
            .unwrap_err()
            .contains("bits"));
        assert!(Geometry::datasketches_of_size(datasketches::MAX_BITS + 1, 3, 1, 0.5)
            .unwrap_err()
            .contains("bits"));
        assert!(Geometry::datasketches_of_size(64, 0, 1, 0.5)
            .unwrap_err()
            .contains("hashes"));
        assert!(Geometry::datasketches_of_size(64, datasketches::MAX_K + 1, 1, 0.5)
            .unwrap_err()
            .contains("hashes"));
        assert!(Geometry::datasketches_of_size(64, 3, 0, 0.5)
            .unwrap_err()
            .contains("capacity"));
        assert!(Geometry::datasketches_of_size(64, 3, 1, 1.0)
            .unwrap_err()
            .contains("fp_rate"));
        assert!(
            Geometry::datasketches_of_size(datasketches::MAX_BITS, datasketches::MAX_K, 1, 0.5)
                .unwrap()
                .is_valid()
        );
    }
}
