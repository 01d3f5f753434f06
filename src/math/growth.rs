//! The arithmetic of a filter that grows (doc/DESIGN.md, §3 growth): which
//! stages it may have, each stage's capacity, rate and geometry, the
//! filter's overall false-positive bound, and how often a writer adds its
//! count of new items to a stage's fill word (§8 N9).
//!
//! Stage `i` holds `n_0 * f^i` new items at the rate
//! `fp_rate * (1 - r) * r^i`, `r = GROWTH_RATIO`: the rates sum to less than
//! `fp_rate` for any number of stages, and each stage's geometry keeps its
//! rate at capacity at or below its share, so the union bound keeps the
//! whole filter at or below `fp_rate`. Every product and sum of capacities
//! is checked: a stage that would need a number past `u64::MAX` does not
//! exist, it never wraps.

use std::f64::consts::LN_2;

use crate::math::geometry::{
    blocked_geometry, expected_fp, next_pow2_bits, Geometry, GeometryError, MAX_BITS, MAX_K, MIN_K,
};
use crate::math::scheme::{Layout, Scheme};

/// `r`: each stage's rate is this times the previous stage's. Why 4/5 and
/// not another value is in doc/DESIGN.md, §3 growth (the memory each choice
/// costs after 1000 times the first capacity).
pub const GROWTH_RATIO: f64 = 0.8;
/// The most stages a filter has (the header keeps one fill word for each).
pub const MAX_STAGES: u32 = 32;
/// The growth factors `grow` accepts.
pub const MIN_FACTOR: u32 = 2;
pub const MAX_FACTOR: u32 = 16;
/// A writer adds its count of new items to the shared fill word at least
/// this often (§8 N9).
pub const FLUSH_MAX: u64 = 256;
/// ... and at least once per this fraction of what the stage has left.
const FLUSH_SHARE: u64 = 64;

/// Why a growth was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum GrowthError {
    /// `grow` outside `MIN_FACTOR..=MAX_FACTOR`.
    Factor(u32),
    /// `max_capacity` below the first stage's capacity.
    MaxBelowCapacity { max: u64, capacity: u64 },
    /// `max_capacity` beyond what the stages that can exist hold together.
    MaxUnreachable { max: u64, reachable: u64, stages: u32 },
    /// The first stage cannot be sized.
    Geometry(GeometryError),
    /// A layout whose stages are not defined: DataSketches' filter is one
    /// array, as its other implementations read it.
    Layout(Layout),
}

impl std::fmt::Display for GrowthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrowthError::Factor(v) => {
                write!(f, "grow must be an integer from {MIN_FACTOR} to {MAX_FACTOR}, not {v}")
            }
            GrowthError::MaxBelowCapacity { max, capacity } => {
                write!(f, "max_capacity {max} is below the capacity {capacity}")
            }
            GrowthError::MaxUnreachable { max, reachable, stages } => write!(
                f,
                "max_capacity {max} is out of reach: {stages} stages hold at most {reachable} items at this capacity, fp_rate and grow"
            ),
            GrowthError::Geometry(e) => e.fmt(f),
            GrowthError::Layout(l) => write!(f, "the {} layout does not grow", l.name()),
        }
    }
}

/// The shape of a growing filter: what its arguments decide, before any
/// stage is added. A pure value; every process derives the same one from
/// the same arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Growth {
    capacity: u64,
    fp_rate: f64,
    layout: Layout,
    factor: u32,
    max_capacity: Option<u64>,
    limit: u32,
}

/// The rate stage `i` is sized for: `fp_rate * (1 - r) * r^i`.
pub fn stage_rate(fp_rate: f64, i: u32) -> f64 {
    fp_rate * (1.0 - GROWTH_RATIO) * GROWTH_RATIO.powi(i as i32)
}

/// The capacity of stage `i`, `capacity * factor^i`, trimmed so that the
/// stages up to it hold at most `max` items together; None when the stage
/// does not exist (past `max`, or a product or sum past `u64::MAX`).
pub fn stage_capacity(capacity: u64, factor: u32, max: Option<u64>, i: u32) -> Option<u64> {
    let mut before = 0u64;
    let mut n = capacity;
    for _ in 0..i {
        before = before.checked_add(n)?;
        n = n.checked_mul(factor as u64)?;
    }
    // The running total must be a number too, whether or not it is bounded.
    let through = before.checked_add(n)?;
    match max {
        None => Some(n),
        Some(max) if before >= max => None,
        Some(max) => Some(if through > max { max - before } else { n }),
    }
}

/// The standard layout's geometry for one stage: the smallest `k` with
/// `2^-k <= rate` (so the stage's rate at capacity, at most `2^-k` with
/// `m >= n k / ln 2`, is at most `rate`), and `bloom.h`'s `m` for that `k`.
pub fn standard_stage_geometry(capacity: u64, rate: f64) -> Result<Geometry, GeometryError> {
    if capacity < 1 {
        return Err(GeometryError::Capacity);
    }
    if !(rate > 0.0 && rate < 1.0) {
        return Err(GeometryError::FpRate);
    }
    // log2 is correct to an ulp or so; settle k on the exact comparison.
    let mut k = (-rate.log2()).ceil().max(MIN_K as f64);
    while k > MIN_K as f64 && (-(k - 1.0)).exp2() <= rate {
        k -= 1.0;
    }
    while (-k).exp2() > rate {
        k += 1.0;
    }
    if k > MAX_K as f64 {
        return Err(GeometryError::TooLarge);
    }
    let m_opt = (capacity as f64 * k / LN_2).ceil();
    if m_opt > MAX_BITS as f64 {
        return Err(GeometryError::TooLarge);
    }
    Ok(Geometry {
        k: k as u32,
        m: next_pow2_bits(m_opt as u64),
        capacity,
        fp_rate: rate,
        scheme: Scheme::Standard,
    })
}

/// Stage `i`'s geometry with no limit applied: its capacity, its rate, its
/// layout's sizing. None when the stage cannot exist.
fn stage_geometry(
    capacity: u64,
    fp_rate: f64,
    layout: Layout,
    factor: u32,
    max: Option<u64>,
    i: u32,
) -> Option<Geometry> {
    if i >= MAX_STAGES {
        return None;
    }
    let n = stage_capacity(capacity, factor, max, i)?;
    let rate = stage_rate(fp_rate, i);
    match layout {
        Layout::Standard => standard_stage_geometry(n, rate).ok(),
        Layout::Blocked => blocked_stage_geometry(n, rate),
        // A layout grows only when its sizing here says how.
        _ => None,
    }
}

/// A blocked stage's geometry, kept once computed: it costs a search of
/// its `k` (about a millisecond), and every attach of a grown blocked
/// filter needs every stage's (`format::decode` checks the file's size
/// against the last one), so a process computes each at most once
/// (doc/DESIGN.md, §3 growth). The answer depends on the two numbers
/// alone, so a cached one is the one computed.
fn blocked_stage_geometry(n: u64, rate: f64) -> Option<Geometry> {
    type Memo = Vec<((u64, u64), Option<Geometry>)>;
    /// More entries than this and the memo starts over (a process that
    /// opens filters of thousands of different shapes pays the search
    /// again, nothing worse).
    const MEMO_MAX: usize = 4096;
    static MEMO: std::sync::Mutex<Memo> = std::sync::Mutex::new(Vec::new());
    let key = (n, rate.to_bits());
    // A panic elsewhere while holding the lock leaves the memo usable.
    if let Some(&(_, g)) = MEMO
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return g;
    }
    let g = blocked_geometry(n, rate).ok();
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if memo.len() >= MEMO_MAX {
        memo.clear();
    }
    memo.push((key, g));
    g
}

/// The first `i` in `1..=MAX_STAGES` for which `exists` is false, given
/// that it is true for 0, false for `MAX_STAGES`, and monotone. A binary
/// search: a blocked stage's geometry costs milliseconds to compute. An
/// untrimmed stage's existence is monotone (each holds more items than the
/// one before at a lower rate, so needs more bits and at least the same
/// `k`; capacities only overflow further on), and so is starting below
/// `max_capacity`.
fn first_missing(exists: impl Fn(u32) -> bool) -> u32 {
    let (mut lo, mut hi) = (0, MAX_STAGES);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

impl Growth {
    /// The growth of a filter of `capacity` and `fp_rate` in `layout` that
    /// grows by `factor`, at most to `max_capacity` items, or why not.
    pub fn new(
        capacity: u64,
        fp_rate: f64,
        layout: Layout,
        factor: u32,
        max_capacity: Option<u64>,
    ) -> Result<Growth, GrowthError> {
        if !(MIN_FACTOR..=MAX_FACTOR).contains(&factor) {
            return Err(GrowthError::Factor(factor));
        }
        if let Some(max) = max_capacity {
            if max < capacity {
                return Err(GrowthError::MaxBelowCapacity { max, capacity });
            }
        }
        // The first stage's own reasons (a zero capacity, a rate out of
        // range, too many bits) are the caller's to hear.
        if !(fp_rate > 0.0 && fp_rate < 1.0) {
            return Err(GrowthError::Geometry(GeometryError::FpRate));
        }
        let first = stage_rate(fp_rate, 0);
        match layout {
            Layout::Standard => standard_stage_geometry(capacity, first),
            Layout::Blocked => blocked_geometry(capacity, first),
            _ => return Err(GrowthError::Layout(layout)),
        }
        .map_err(GrowthError::Geometry)?;
        // Halve on a monotone question: does the stage exist untrimmed, and
        // does it start below max_capacity? Every stage before the answer
        // exists; the one at it may exist still, trimmed, as the last.
        let exists = |i| stage_geometry(capacity, fp_rate, layout, factor, max_capacity, i).is_some();
        let untrimmed = |i| {
            stage_geometry(capacity, fp_rate, layout, factor, None, i).is_some()
                && max_capacity.map_or(true, |_| stage_capacity(capacity, factor, max_capacity, i).is_some())
        };
        let mut limit = first_missing(untrimmed);
        if exists(limit) {
            limit += 1;
        }
        let g = Growth {
            capacity,
            fp_rate,
            layout,
            factor,
            max_capacity,
            limit,
        };
        if let Some(max) = max_capacity {
            let reachable = g.total_capacity(limit);
            if reachable < max {
                return Err(GrowthError::MaxUnreachable {
                    max,
                    reachable,
                    stages: limit,
                });
            }
        }
        Ok(g)
    }

    /// The growth stored arguments name, `first` being the stored stage 0
    /// (with the filter's `fp_rate`, as headers and bytes keep it): None
    /// unless `new` accepts them and gives that same stage 0, so that every
    /// other stage follows from the arguments alone.
    pub fn stored(first: &Geometry, factor: u32, max_capacity: Option<u64>) -> Option<Growth> {
        let g = Growth::new(
            first.capacity,
            first.fp_rate,
            first.scheme.layout(),
            factor,
            max_capacity,
        )
        .ok()?;
        let s0 = g.stage(0)?;
        ((s0.k, s0.m, s0.scheme) == (first.k, first.m, first.scheme)).then_some(g)
    }

    pub fn factor(&self) -> u32 {
        self.factor
    }

    pub fn max_capacity(&self) -> Option<u64> {
        self.max_capacity
    }

    /// How many stages the filter can have: the leading stages that exist
    /// (capacity within `max_capacity` and `u64`, a geometry within
    /// `MAX_K` and `MAX_BITS`), at most `MAX_STAGES`; at least 1.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Stage `i`'s geometry, None at or past the limit.
    pub fn stage(&self, i: u32) -> Option<Geometry> {
        if i >= self.limit {
            return None;
        }
        stage_geometry(
            self.capacity,
            self.fp_rate,
            self.layout,
            self.factor,
            self.max_capacity,
            i,
        )
    }

    /// The items the first `stages` stages hold together (the filter's
    /// `capacity` once they are published); `stages` is clamped to the limit.
    pub fn total_capacity(&self, stages: u32) -> u64 {
        // Every stage below the limit exists, so its capacity and the
        // running total are numbers (`stage_capacity` checked them).
        (0..stages.min(self.limit))
            .map(|i| stage_capacity(self.capacity, self.factor, self.max_capacity, i).unwrap_or(0))
            .sum()
    }

    /// The bits of the first `stages` stages together.
    pub fn total_bits(&self, stages: u32) -> u64 {
        (0..stages.min(self.limit))
            .filter_map(|i| self.stage(i))
            .map(|g| g.m)
            .sum()
    }

    /// The filter's false-positive rate with its first `stages` stages
    /// each at capacity, by the union bound: the sum of the stages' rates
    /// at capacity. At most `fp_rate` for any `stages`.
    pub fn bound(&self, stages: u32) -> f64 {
        (0..stages.min(self.limit))
            .filter_map(|i| self.stage(i))
            .map(|g| expected_fp(&g, g.capacity as f64))
            .sum()
    }
}

/// Whether a stage of `capacity` holding `fill` new items is full.
pub fn is_full(capacity: u64, fill: u64) -> bool {
    fill >= capacity
}

/// After how many new items of its own a writer adds its count to the
/// fill word of a stage of `capacity` in which it last read `seen`: a
/// sixty-fourth of what the stage has left, between 1 and `FLUSH_MAX`. So
/// the shared word is written at most once per item only near the end, and
/// `w` writers can put at most about `w * flush_every` items past a stage's
/// capacity (§3 growth).
pub fn flush_every(capacity: u64, seen: u64) -> u64 {
    (capacity.saturating_sub(seen) / FLUSH_SHARE).clamp(1, FLUSH_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::blocked;
    use crate::math::geometry::probes_for;

    /// The blocked layouts' faster search gives the exhaustive one's `k`
    /// and load bit for bit, for both widths, at every stage rate of a
    /// grown filter (all 32 stages) for rates from 0.5 to 1e-9 (`blocked`'s
    /// `best_k_is_the_exhaustive_search` covers the other rates).
    #[test]
    fn best_k_is_the_exhaustive_search_at_stage_rates() {
        let mut rates = Vec::new();
        for fp in [0.5, 0.3, 0.1, 0.05, 0.01, 0.005, 0.001, 1e-4, 1e-5, 1e-6, 1e-9] {
            for i in 0..MAX_STAGES {
                rates.push(stage_rate(fp, i));
            }
        }
        for block in [64u64, 128] {
            for &rate in &rates {
                let (k, l) = blocked::best_k(block, rate);
                let (ek, el) = blocked::best_k_exhaustive(block, rate);
                assert_eq!(
                    (k, l.to_bits()),
                    (ek, el.to_bits()),
                    "block {block} rate {rate:e}: {l} vs {el}"
                );
            }
        }
    }

    /// How many tests of the rate each search makes, and how long each
    /// takes (`cargo test --release --locked --lib best_k_cost --
    /// --nocapture`).
    #[test]
    fn best_k_cost() {
        use std::time::Instant;
        let rates: Vec<f64> = (0..32).map(|i| stage_rate(0.01, i)).collect();
        // Tables built before timing.
        blocked::best_k(64, 0.01);
        blocked::best_k(128, 0.01);
        for block in [64u64, 128] {
            // The better of three runs each, alternating.
            let (mut t_fast, mut t_slow) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..3 {
                let start = Instant::now();
                let fast: Vec<_> = rates.iter().map(|&r| blocked::best_k(block, r)).collect();
                t_fast = t_fast.min(start.elapsed().as_secs_f64());
                let start = Instant::now();
                let slow: Vec<_> = rates.iter().map(|&r| blocked::best_k_exhaustive(block, r)).collect();
                t_slow = t_slow.min(start.elapsed().as_secs_f64());
                assert_eq!(fast, slow);
            }
            eprintln!(
                "best_k, block {block}, the 32 stage rates of fp 0.01: {:.2} ms (exhaustive {:.2} ms, {:.1}x)",
                t_fast * 1e3,
                t_slow * 1e3,
                t_slow / t_fast
            );
        }
    }

    const RATES: [f64; 9] = [0.5, 0.25, 0.1, 0.05, 0.01, 0.001, 1e-4, 1e-6, 1e-9];

    #[test]
    fn stage_rates_sum_below_fp_rate_for_any_number_of_stages() {
        for &p in &RATES {
            let mut sum = 0.0;
            for i in 0..=MAX_STAGES * 4 {
                let r = stage_rate(p, i);
                assert!(r > 0.0 && r < p, "stage {i} of {p}: {r}");
                if i > 0 {
                    let ratio = r / stage_rate(p, i - 1);
                    assert!((ratio - GROWTH_RATIO).abs() < 1e-12, "stage {i}: ratio {ratio}");
                }
                sum += r;
                assert!(sum < p, "{} stages of {p} sum to {sum}", i + 1);
            }
            // The sum tends to fp_rate: no rate is wasted for nothing.
            assert!(sum > p * 0.999_999, "{p}: {sum}");
        }
    }

    #[test]
    fn standard_stage_k_is_the_smallest_k_meeting_the_rate() {
        let mut p = 0.9;
        while p > 1e-9 {
            let g = standard_stage_geometry(1000, p).unwrap();
            assert!((-(g.k as f64)).exp2() <= p, "{p}: k {}", g.k);
            if g.k > MIN_K {
                assert!((-(g.k as f64 - 1.0)).exp2() > p, "{p}: k {} is not the smallest", g.k);
            }
            assert!(g.is_valid());
            assert!(g.m as f64 >= 1000.0 * g.k as f64 / LN_2);
            assert!(expected_fp(&g, 1000.0) <= p, "{p}: {}", expected_fp(&g, 1000.0));
            p *= 0.93;
        }
        // Exact powers of two keep their k; lround would round 0.01's
        // share down, ceil does not.
        assert_eq!(standard_stage_geometry(10, 1.0 / 128.0).unwrap().k, 7);
        assert_eq!(standard_stage_geometry(10, 0.0117).unwrap().k, 7);
        assert_eq!(probes_for(0.0117), 6);
        assert_eq!(standard_stage_geometry(10, 0.002).unwrap().k, 9);
        assert_eq!(standard_stage_geometry(0, 0.01), Err(GeometryError::Capacity));
        assert_eq!(standard_stage_geometry(10, 0.0), Err(GeometryError::FpRate));
        assert_eq!(standard_stage_geometry(10, 1.0), Err(GeometryError::FpRate));
        assert_eq!(standard_stage_geometry(10, 1e-12), Err(GeometryError::TooLarge));
        assert_eq!(standard_stage_geometry(1 << 40, 0.01), Err(GeometryError::TooLarge));
    }

    #[test]
    fn capacities_multiply_by_the_factor() {
        for f in MIN_FACTOR..=MAX_FACTOR {
            let mut n = 3u64;
            for i in 0..10 {
                assert_eq!(stage_capacity(3, f, None, i), Some(n), "factor {f} stage {i}");
                n *= f as u64;
            }
        }
        let g = Growth::new(1000, 0.01, Layout::Standard, 4, None).unwrap();
        assert_eq!(g.total_capacity(1), 1000);
        assert_eq!(g.total_capacity(3), 1000 + 4000 + 16000);
        assert_eq!(g.stage(2).unwrap().capacity, 16000);
        assert_eq!(g.total_bits(2), g.stage(0).unwrap().m + g.stage(1).unwrap().m);
        // Clamped to the limit, not past it.
        assert_eq!(g.total_capacity(u32::MAX), g.total_capacity(g.limit()));
    }

    #[test]
    fn capacities_never_wrap() {
        let big = 1u64 << 60;
        assert_eq!(stage_capacity(big, 16, None, 0), Some(big));
        assert_eq!(stage_capacity(big, 16, None, 1), None, "2^64 is not a u64");
        assert_eq!(stage_capacity(big, 14, None, 1), Some(big * 14));
        assert_eq!(stage_capacity(big, 14, None, 2), None);
        // The stage fits, the total of both does not.
        assert_eq!(stage_capacity(big, 15, None, 1), None);
        // The running total overflows before the stage itself does.
        let half = u64::MAX / 2 + 1;
        assert_eq!(stage_capacity(half, 2, None, 0), Some(half));
        assert_eq!(stage_capacity(half - 1, 2, None, 1), None, "total past u64::MAX");
        assert_eq!(stage_capacity(u64::MAX, 2, None, 1), None);
        assert_eq!(stage_capacity(u64::MAX, 2, Some(u64::MAX), 1), None);
        for i in 0..200 {
            if let Some(n) = stage_capacity(7, 16, None, i) {
                assert_eq!(n, 7 * 16u64.pow(i));
            } else {
                assert!(7u128 * 16u128.pow(i) > u64::MAX as u128 / 2, "stage {i} refused early");
                break;
            }
        }
    }

    #[test]
    fn max_capacity_trims_the_last_stage() {
        assert_eq!(stage_capacity(100, 2, Some(250), 0), Some(100));
        assert_eq!(stage_capacity(100, 2, Some(250), 1), Some(150));
        assert_eq!(stage_capacity(100, 2, Some(250), 2), None);
        assert_eq!(stage_capacity(100, 2, Some(300), 1), Some(200));
        assert_eq!(stage_capacity(100, 2, Some(300), 2), None);
        assert_eq!(stage_capacity(100, 2, Some(100), 1), None);
        for max in [1000u64, 1001, 2999, 3000, 3001, 123_456, 10_000_000] {
            for f in [2, 3, 4, 16] {
                let g = Growth::new(1000, 0.01, Layout::Standard, f, Some(max)).unwrap();
                assert_eq!(g.total_capacity(g.limit()), max, "max {max} factor {f}");
                assert_eq!(g.max_capacity(), Some(max));
                assert!(g.stage(g.limit()).is_none());
                for i in 0..g.limit() {
                    let n = g.stage(i).unwrap().capacity;
                    assert!(n <= 1000 * (f as u64).pow(i));
                    if i + 1 < g.limit() {
                        assert_eq!(n, 1000 * (f as u64).pow(i), "only the last stage is trimmed");
                    }
                }
            }
        }
        assert_eq!(
            Growth::new(1000, 0.01, Layout::Standard, 2, Some(999)),
            Err(GrowthError::MaxBelowCapacity {
                max: 999,
                capacity: 1000
            })
        );
        match Growth::new(1000, 0.01, Layout::Standard, 2, Some(u64::MAX)) {
            Err(GrowthError::MaxUnreachable { max, reachable, stages }) => {
                assert_eq!(max, u64::MAX);
                let g = Growth::new(1000, 0.01, Layout::Standard, 2, None).unwrap();
                assert_eq!((reachable, stages), (g.total_capacity(g.limit()), g.limit()));
                assert!(GrowthError::MaxUnreachable { max, reachable, stages }
                    .to_string()
                    .contains("max_capacity"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn factors_outside_two_to_sixteen_are_refused() {
        for f in [0, 1, 17, 100, u32::MAX] {
            let e = Growth::new(1000, 0.01, Layout::Standard, f, None).unwrap_err();
            assert_eq!(e, GrowthError::Factor(f));
            assert!(e.to_string().starts_with("grow must be an integer from 2 to 16"), "{e}");
        }
        for f in MIN_FACTOR..=MAX_FACTOR {
            assert_eq!(Growth::new(1000, 0.01, Layout::Standard, f, None).unwrap().factor(), f);
        }
        assert_eq!(
            Growth::new(0, 0.01, Layout::Standard, 2, None),
            Err(GrowthError::Geometry(GeometryError::Capacity))
        );
        assert_eq!(
            Growth::new(10, 1.5, Layout::Standard, 2, None),
            Err(GrowthError::Geometry(GeometryError::FpRate))
        );
        assert_eq!(
            Growth::new(1 << 36, 0.01, Layout::Standard, 2, None),
            Err(GrowthError::Geometry(GeometryError::TooLarge))
        );
    }

    /// The promise itself: every stage at its capacity stays within its
    /// share, and all of them together within fp_rate, for every number of
    /// stages the filter can have.
    fn check_bound(g: &Growth, p: f64) {
        assert!(g.limit() >= 1 && g.limit() <= MAX_STAGES);
        let mut sums = vec![0.0];
        for i in 0..g.limit() {
            let s = g.stage(i).unwrap();
            assert!(s.is_valid(), "{p} stage {i}: {s:?}");
            let fp = expected_fp(&s, s.capacity as f64);
            assert!(
                fp <= stage_rate(p, i) * (1.0 + 1e-9),
                "{p} stage {i}: {fp} > {}",
                stage_rate(p, i)
            );
            sums.push(sums[i as usize] + fp);
            assert!(
                sums[i as usize + 1] <= p,
                "{p}: {} stages sum to {}",
                i + 1,
                sums[i as usize + 1]
            );
        }
        // `bound` is that sum, for a few stage counts (each call sums anew).
        for s in [1, g.limit() / 2, g.limit(), g.limit() + 1] {
            let b = g.bound(s);
            let want = sums[s.min(g.limit()) as usize];
            assert!((b - want).abs() <= 1e-12 * p, "{p}: bound({s}) {b} vs {want}");
            assert!(b <= p, "{p}: {s} stages bound {b}");
        }
        assert!(g.stage(g.limit()).is_none());
    }

    #[test]
    fn the_bound_holds_for_every_stage_count_standard() {
        for &p in &RATES {
            for f in MIN_FACTOR..=MAX_FACTOR {
                for n in [1u64, 7, 1000, 1_000_000] {
                    match Growth::new(n, p, Layout::Standard, f, None) {
                        Ok(g) => check_bound(&g, p),
                        Err(e) => assert_eq!(e, GrowthError::Geometry(GeometryError::TooLarge), "{n} {p} {f}"),
                    }
                }
            }
        }
    }

    #[test]
    fn the_bound_holds_for_every_stage_count_blocked() {
        for &p in &[0.1, 0.01, 0.001, 1e-4] {
            for f in [2, 4, 16] {
                for n in [1u64, 1000, 1_000_000] {
                    let g = Growth::new(n, p, Layout::Blocked, f, None).unwrap();
                    check_bound(&g, p);
                    assert!(g.stage(0).unwrap().scheme != Scheme::Standard);
                }
            }
        }
    }

    #[test]
    fn the_limit_is_where_a_stage_stops_existing() {
        // Bits: 2^38 at most. At 0.01 a stage needs about 13 bits per
        // item at stage 0, so a first capacity of 2^20 doubles ~13 times.
        let g = Growth::new(1 << 20, 0.01, Layout::Standard, 2, None).unwrap();
        let last = g.stage(g.limit() - 1).unwrap();
        assert!(g.limit() < MAX_STAGES);
        assert!(last.m <= MAX_BITS);
        let next_n = last.capacity * 2;
        assert!(standard_stage_geometry(next_n, stage_rate(0.01, g.limit())).is_err());
        // k: at 1e-6, stage 0 needs k = 23; each stage needs log2(1.25)
        // more, so k passes 32 before stage 32.
        let g = Growth::new(1, 1e-6, Layout::Standard, 2, None).unwrap();
        assert!(g.stage(g.limit() - 1).unwrap().k <= MAX_K);
        assert!(g.limit() < MAX_STAGES);
        // A small filter of a large rate has them all.
        let g = Growth::new(1, 0.5, Layout::Standard, 2, None).unwrap();
        assert_eq!(g.limit(), MAX_STAGES);
    }

    /// The limit found by halving is where a scan stage by stage stops, and
    /// no stage past it exists (existence is monotone).
    #[test]
    fn the_limit_is_found_by_halving() {
        let scan = |g: &Growth, c: u64, p: f64, l: Layout, f: u32, max: Option<u64>| {
            let mut i = 1;
            while stage_geometry(c, p, l, f, max, i).is_some() {
                i += 1;
            }
            assert!((i..=MAX_STAGES + 1).all(|j| stage_geometry(c, p, l, f, max, j).is_none()));
            assert_eq!(g.limit(), i, "{c} {p} {l:?} {f} {max:?}");
        };
        for &p in &RATES {
            for f in [2, 3, 4, 7, 16] {
                for c in [1u64, 1000, 1 << 20, 1 << 30] {
                    // c + 5: a second stage too large untrimmed, trimmed to 5 items.
                    for max in [
                        None,
                        Some(c),
                        Some(c + 5),
                        Some(c * 5 + 3),
                        Some(c.saturating_mul(1 << 20)),
                    ] {
                        if let Ok(g) = Growth::new(c, p, Layout::Standard, f, max) {
                            scan(&g, c, p, Layout::Standard, f, max);
                        }
                    }
                }
            }
        }
        for (c, p, f) in [(1000u64, 0.01, 2u32), (1, 0.001, 4), (1 << 20, 0.1, 16)] {
            let g = Growth::new(c, p, Layout::Blocked, f, None).unwrap();
            scan(&g, c, p, Layout::Blocked, f, None);
        }
        // The second stage too large untrimmed (2^34 items at 16 probes),
        // and trimmed to 5 items, within reach.
        let g = Growth::new(1 << 30, 1e-4, Layout::Standard, 16, Some((1 << 30) + 5)).unwrap();
        assert!(stage_geometry(1 << 30, 1e-4, Layout::Standard, 16, None, 1).is_none());
        assert_eq!((g.limit(), g.stage(1).unwrap().capacity), (2, 5));
        assert_eq!(first_missing(|_| true), MAX_STAGES);
        assert_eq!(first_missing(|i| i == 0), 1);
        for l in 1..=MAX_STAGES {
            assert_eq!(first_missing(|i| i < l), l);
        }
    }

    #[test]
    fn a_grown_first_stage_is_tighter_than_a_plain_filter() {
        for &p in &RATES[..8] {
            let g = Growth::new(1000, p, Layout::Standard, 2, None).unwrap();
            let plain = Geometry::for_capacity(1000, p).unwrap();
            let s0 = g.stage(0).unwrap();
            assert!(s0.k > plain.k, "{p}");
            assert!(s0.m >= plain.m, "{p}");
        }
    }

    #[test]
    fn flushes_come_sooner_near_the_end_of_a_stage() {
        assert_eq!(flush_every(1_000_000, 0), FLUSH_MAX);
        assert_eq!(flush_every(64 * 100, 0), 100);
        assert_eq!(flush_every(64 * 100, 64 * 50), 50);
        assert_eq!(flush_every(1000, 990), 1);
        assert_eq!(flush_every(1000, 1000), 1);
        assert_eq!(flush_every(1000, 5000), 1, "a stage past its capacity");
        assert_eq!(flush_every(1, 0), 1);
        for cap in [1u64, 63, 64, 1000, 1 << 20, u64::MAX] {
            for seen in [0, cap / 2, cap.saturating_sub(1), cap] {
                let e = flush_every(cap, seen);
                assert!((1..=FLUSH_MAX).contains(&e));
                // A writer's own count never carries the stage past its
                // capacity by more than a sixty-fourth of what it had left.
                assert!(e == 1 || e <= (cap - seen) / 64);
            }
        }
        assert!(!is_full(10, 9));
        assert!(is_full(10, 10));
        assert!(is_full(10, 11));
    }
}
