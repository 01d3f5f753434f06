//! The blocked layouts' false-positive math (pure).
//!
//! The false-positive rate of a blocked layout is computed exactly for
//! independent uniform bit positions: an absent item's block holds
//! `j ~ Poisson(n/b)` items, whose `k j` bit throws leave `s` distinct bits
//! set (an occupancy distribution); the absent item's own `d` distinct bits
//! (the occupancy of `k` throws) are all among them with probability
//! `C(s,d)/C(B,d)`. Sizing picks the word width, `k` and the word count that
//! meet the requested rate with the fewest bits (see `geometry::blocked_geometry`).

use std::sync::OnceLock;

use crate::math::scheme::BLOCKED_MAX_K;

/// Loads past this many items per block are never needed: sizing looks at
/// mean loads up to the block width, and the Poisson mass beyond
/// `B + 12 sqrt(B) + 20` is below 1e-20 for them.
fn max_load(block: u64) -> usize {
    (block as f64 + 12.0 * (block as f64).sqrt() + 20.0) as usize
}

/// One throw more: `occ[s]` is the chance that `s` distinct bits of a
/// block of `b` are set; each throw sets one uniform bit. Chances below
/// `floor` are dropped: sizing passes the smallest normal double, whose
/// dropped chances move no table entry (the tests check the tables bit
/// for bit), and subnormal arithmetic would make the walk many times
/// slower.
fn throw(occ: &[f64], b: usize, floor: f64) -> Vec<f64> {
    let mut next = vec![0.0; b + 1];
    for s in 0..=b {
        if occ[s] == 0.0 {
            continue;
        }
        next[s] += occ[s] * s as f64 / b as f64;
        if s < b {
            next[s + 1] += occ[s] * (b - s) as f64 / b as f64;
        }
    }
    for v in &mut next {
        if *v < floor {
            *v = 0.0;
        }
    }
    next
}

/// `hits[s]`: the chance that a query of `k` bits finds them all among
/// `s` set bits of a block of `b`, from `query`, the distribution of the
/// query's distinct bits (`k` throws into an empty block): C(s,d)/C(B,d)
/// = prod_{i<d} (s-i)/(B-i) for the d it can have (1..=k).
fn query_hits(query: &[f64], b: usize, k: usize) -> Vec<f64> {
    let kd = k.min(b);
    (0..=b)
        .map(|s| {
            let mut p = 0.0;
            let mut r = 1.0;
            for (d, &qd) in query.iter().enumerate().take(kd + 1).skip(1) {
                if s + 1 < d {
                    break;
                }
                r *= (s + 1 - d) as f64 / (b + 1 - d) as f64;
                p += qd * r;
            }
            p
        })
        .collect()
}

/// `tables[k - 1][j]`, for `k` from 1 to `kmax`: the chance that an absent
/// item's bits are all set in a block of `block` bits holding `j` items,
/// each item setting `k` uniform bits.
///
/// The distribution of set bits after `t` throws does not depend on how
/// the throws group into items, so one walk over `t` serves every `k`: a
/// block holding `j` items of `k` bits has seen `t = j k` throws. Each
/// table entry is the same arithmetic, in the same order, as a walk for
/// that `k` alone (the test below checks this bit for bit), so sizing is
/// unchanged; it is about `kmax` times less work.
fn block_fp_tables(block: u64, kmax: u32) -> Vec<Vec<f64>> {
    let b = block as usize;
    let jmax = max_load(block);
    let kmax = kmax as usize;
    let mut empty = vec![0.0; b + 1];
    empty[0] = 1.0;
    let dot = |occ: &[f64], hits: &[f64]| -> f64 { (0..=b).map(|s| occ[s] * hits[s]).sum() };
    // hits[k - 1]: `query_hits` of a query of k bits, whose distribution
    // is the walk's after k throws.
    let mut hits: Vec<Vec<f64>> = Vec::with_capacity(kmax);
    let mut tables: Vec<Vec<f64>> = vec![Vec::with_capacity(jmax + 1); kmax];
    let mut occ = empty.clone();
    for t in 1..=jmax * kmax {
        occ = throw(&occ, b, f64::MIN_POSITIVE);
        if t <= kmax {
            let h = query_hits(&occ, b, t);
            // A block with no items, once the query of t bits is known.
            tables[t - 1].push(dot(&empty, &h));
            hits.push(h);
        }
        for k in 1..=kmax.min(t) {
            if t % k == 0 && t / k <= jmax {
                tables[k - 1].push(dot(&occ, &hits[k - 1]));
            }
        }
    }
    tables
}

/// The tables for every width and k, computed once per process.
fn table(block: u64, k: u32) -> &'static [f64] {
    static T64: OnceLock<Vec<Vec<f64>>> = OnceLock::new();
    static T128: OnceLock<Vec<Vec<f64>>> = OnceLock::new();
    let cell = if block == 64 { &T64 } else { &T128 };
    let all = cell.get_or_init(|| block_fp_tables(block, BLOCKED_MAX_K));
    &all[(k.clamp(1, BLOCKED_MAX_K) - 1) as usize]
}

/// The false-positive rate of a blocked layout of `block`-bit blocks, `k`
/// bits per item, at a mean load of `lambda` items per block.
pub fn blocked_fp(block: u64, k: u32, lambda: f64) -> f64 {
    let q = table(block, k);
    if lambda <= 0.0 {
        return 0.0;
    }
    // Poisson weights by recurrence from the mode down and up, so that no
    // term under- or overflows for the loads sizing looks at.
    let mode = lambda.floor() as usize;
    let jmax = q.len() - 1;
    if mode >= jmax {
        return 1.0;
    }
    let ln_mode = -lambda + mode as f64 * lambda.ln() - ln_factorial(mode);
    let pm = ln_mode.exp();
    let mut fp = pm * q[mode];
    let mut p = pm;
    for j in (0..mode).rev() {
        p *= (j + 1) as f64 / lambda;
        fp += p * q[j];
    }
    let mut p = pm;
    for (j, &qj) in q.iter().enumerate().skip(mode + 1) {
        p *= lambda / j as f64;
        fp += p * qj;
    }
    fp.min(1.0)
}

/// `ln n!`, from a table of running sums (the same additions, in the same
/// order, as summing `ln 2 + ... + ln n` each time). `blocked_fp` needs it
/// for loads below the longest table, `max_load(128)`.
fn ln_factorial(n: usize) -> f64 {
    static LN_FACT: OnceLock<Vec<f64>> = OnceLock::new();
    let t = LN_FACT.get_or_init(|| {
        let mut t = vec![0.0f64; max_load(128) + 1];
        let mut sum = 0.0f64;
        for (i, v) in t.iter_mut().enumerate().skip(2) {
            sum += (i as f64).ln();
            *v = sum;
        }
        t
    });
    match t.get(n) {
        Some(&v) => v,
        None => (2..=n).map(|i| (i as f64).ln()).sum(),
    }
}

/// The halvings of `max_lambda`'s search after its first test at the
/// block width.
const HALVINGS: usize = 60;

/// `max_lambda`'s search, one test at a time: the largest mean load per
/// block at which `blocked_fp` is at most `rate`, by halving `[0, block]`
/// `HALVINGS` times after testing `block` itself. `path[i]` is the answer
/// of test `i` (`fp <= rate`); every test's load follows from the answers
/// before it, so two searches with the same answers so far test the same
/// load next.
struct Search {
    block: u64,
    k: u32,
    rate: f64,
    lo: f64,
    hi: f64,
    path: Vec<bool>,
    done: bool,
}

impl Search {
    fn new(block: u64, k: u32, rate: f64) -> Search {
        Search {
            block,
            k,
            rate,
            lo: 0.0,
            hi: block as f64,
            path: Vec::with_capacity(HALVINGS + 1),
            done: false,
        }
    }

    /// Make the next test; the load tested and the answer, None once the
    /// search is over.
    fn step(&mut self) -> Option<(f64, bool)> {
        if self.done {
            return None;
        }
        let i = self.path.len();
        let at = if i == 0 { self.hi } else { 0.5 * (self.lo + self.hi) };
        let fits = blocked_fp(self.block, self.k, at) <= self.rate;
        if i == 0 {
            // The whole width fits: the answer is the width itself.
            self.done = fits;
        } else if fits {
            self.lo = at;
        } else {
            self.hi = at;
        }
        self.path.push(fits);
        if self.path.len() == HALVINGS + 1 {
            self.done = true;
        }
        Some((at, fits))
    }

    /// The search's answer, once it is over.
    fn result(&self) -> f64 {
        debug_assert!(self.done);
        if self.path == [true] {
            self.hi
        } else {
            self.lo
        }
    }

    fn finish(mut self) -> Search {
        while self.step().is_some() {}
        self
    }
}

/// A 64-bit-word filter is chosen unless it needs more than this many times
/// the bits of a 128-bit-block one for the same rate: a word costs one
/// `fetch_or`, a block a compare-and-swap loop and two words of the line.
pub const WORD64_MAX_OVERHEAD: f64 = 1.15;

/// The best `(k, items per block)` for a width and rate: the `k` whose
/// `max_lambda` is largest, the smallest such `k` on a tie (as a loop over
/// `k` from 1 keeping only a strictly larger load would find).
///
/// A filter's geometry and so its bytes follow from this answer, so it is
/// the exhaustive search's exactly, found with fewer tests of the rate
/// (no property of `blocked_fp` is assumed): the search of a first `k`,
/// the likeliest winner, runs whole; every other `k`'s search makes the
/// same tests as the best one's until an answer differs. There, the one
/// that found a fit ends at or above the load tested, the other at or
/// below it. A `k` that found no fit is dropped unless the best load is
/// that very load (a tie, which the smaller `k` wins); otherwise its
/// search runs whole and the loads are compared. A `k` whose answers are
/// all the best one's has the same load. About 230 to 320 tests of the rate
/// instead of 16 times 61 (`best_k_cost`, in `growth`); `best_k_is_the_exhaustive_search`
/// compares the answers with the exhaustive search's over rates from 0.5
/// to 1e-15.
pub fn best_k(block: u64, rate: f64) -> (u32, f64) {
    let first = first_guess(block, rate);
    let mut best = Search::new(block, first, rate).finish();
    // Nearest the first guess first: a better `k` found early makes the
    // others differ sooner.
    let order = (1..BLOCKED_MAX_K).flat_map(|d| [first.checked_sub(d), first.checked_add(d)]);
    for k in order.flatten().filter(|k| (1..=BLOCKED_MAX_K).contains(k)) {
        let mut other = Search::new(block, k, rate);
        let mut differs = None;
        while let Some((at, fits)) = other.step() {
            if fits != best.path[other.path.len() - 1] {
                differs = Some((at, fits));
                break;
            }
        }
        let wins = match differs {
            // The same answers: the same load.
            None => k < best.k,
            // No fit where the best one fits: this load stays at or below
            // `at`, the best one's at or above; below it, or at most a tie
            // lost to a smaller best `k`, it cannot win.
            Some((at, false)) if k > best.k || best.result() > at => false,
            Some(_) => {
                other = other.finish();
                let (lo, lb) = (other.result(), best.result());
                lo > lb || (lo == lb && k < best.k)
            }
        };
        if wins {
            best = other;
        }
    }
    (best.k, best.result())
}

/// Where the search starts: the `k` with the lowest rate at a load near
/// the answer, found by a short halving (`COARSE` tests) for `k` near
/// `log2(1 / rate)`. Only the speed depends on it; it is almost always the
/// best `k`, so the other searches differ from its within a few tests.
fn first_guess(block: u64, rate: f64) -> u32 {
    const COARSE: usize = 12;
    let k = (-rate.log2()).round();
    let k = if k.is_nan() || k < 1.0 {
        1
    } else {
        (k as u32).min(BLOCKED_MAX_K)
    };
    let mut coarse = Search::new(block, k, rate);
    for _ in 0..COARSE {
        coarse.step();
    }
    // Between the loads tested last: a fit, and none (or the width).
    let at = if coarse.path == [true] {
        coarse.hi
    } else {
        0.5 * (coarse.lo + coarse.hi)
    };
    if at <= 0.0 {
        return k;
    }
    (1..=BLOCKED_MAX_K)
        .map(|k| (k, blocked_fp(block, k, at)))
        .fold(
            (k, f64::INFINITY),
            |best, (k, fp)| if fp < best.1 { (k, fp) } else { best },
        )
        .0
}

#[cfg(test)]
/// The search as it was first written, test for test: every `k` from
/// 1, its load by halving, a strictly larger load replacing the best
/// (the tests here and in `growth` compare `best_k` with it).
pub fn best_k_exhaustive(block: u64, rate: f64) -> (u32, f64) {
    fn max_lambda(block: u64, k: u32, rate: f64) -> f64 {
        let (mut lo, mut hi) = (0.0f64, block as f64);
        if blocked_fp(block, k, hi) <= rate {
            return hi;
        }
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if blocked_fp(block, k, mid) <= rate {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
    let mut best = (1, 0.0);
    for k in 1..=BLOCKED_MAX_K {
        let l = max_lambda(block, k, rate);
        if l > best.1 {
            best = (k, l);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates the grid below covers: a log-spaced sweep from 0.5 to
    /// 1e-15 and round rates users ask for (every stage rate of a grown
    /// filter: `growth`'s `best_k_is_the_exhaustive_search_at_stage_rates`).
    fn grid_rates() -> Vec<f64> {
        let mut rates: Vec<f64> = (0..=600)
            .map(|i| 0.5 * 10f64.powf(-(i as f64) * 14.7 / 600.0))
            .collect();
        for e in 1..=12 {
            for m in [1.0, 2.0, 2.5, 3.0, 5.0] {
                rates.push(m * 10f64.powi(-e));
            }
        }
        rates.extend([0.999, 0.9, 0.75, 0.6]);
        rates
    }

    /// The faster search gives the exhaustive one's `k` and load bit for
    /// bit, for both widths, at every rate of the grid (a filter's
    /// geometry, and so its file and serialized bytes, follow from them;
    /// the capacity enters only after, as `ceil(capacity / load)`).
    #[test]
    fn best_k_is_the_exhaustive_search() {
        let rates = grid_rates();
        for block in [64u64, 128] {
            for &rate in &rates {
                let (k, l) = best_k(block, rate);
                let (ek, el) = best_k_exhaustive(block, rate);
                assert_eq!(
                    (k, l.to_bits()),
                    (ek, el.to_bits()),
                    "block {block} rate {rate:e}: {l} vs {el}"
                );
            }
        }
    }

    /// A tie between two `k` goes to the smaller, as in the exhaustive
    /// search, and a load that never fits (a rate below every `k`'s) gives
    /// `k` 1 and 0, as it did.
    #[test]
    fn best_k_ties_and_hopeless_rates() {
        for block in [64u64, 128] {
            for rate in [1e-300, 1e-100, 1e-40] {
                assert_eq!(best_k(block, rate), best_k_exhaustive(block, rate), "{rate:e}");
            }
            // Rates at which the whole width fits for several k.
            for rate in [0.9999, 0.99999999] {
                assert_eq!(best_k(block, rate), best_k_exhaustive(block, rate), "{rate}");
                assert_eq!(best_k(block, rate), (1, block as f64));
            }
        }
    }

    /// One table the direct way: `k` throws per item, a walk per `k`,
    /// every chance kept.
    fn block_fp_table_alone(block: u64, k: u32) -> Vec<f64> {
        let b = block as usize;
        let mut query = vec![0.0; b + 1];
        query[0] = 1.0;
        for _ in 0..k {
            query = throw(&query, b, 0.0);
        }
        let hits = query_hits(&query, b, k as usize);
        let mut occ = vec![0.0; b + 1];
        occ[0] = 1.0;
        let mut q = Vec::new();
        for j in 0..=max_load(block) {
            if j > 0 {
                for _ in 0..k {
                    occ = throw(&occ, b, 0.0);
                }
            }
            q.push((0..=b).map(|s| occ[s] * hits[s]).sum());
        }
        q
    }

    /// The shared walk, dropping subnormal chances, gives every table bit
    /// for bit as a walk of its own keeping them all (so sizing is the same
    /// whichever way the tables are made).
    #[test]
    fn shared_walk_matches_one_walk_per_k() {
        for block in [4u64, 64, 128] {
            let all = block_fp_tables(block, BLOCKED_MAX_K);
            assert_eq!(all.len(), BLOCKED_MAX_K as usize);
            for k in 1..=BLOCKED_MAX_K {
                let want = block_fp_table_alone(block, k);
                let got = &all[k as usize - 1];
                assert_eq!(got.len(), want.len(), "block {block} k {k}");
                for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g.to_bits(), w.to_bits(), "block {block} k {k} j {j}: {g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn ln_factorial_table_matches_the_sum() {
        for n in 0..=2 * max_load(128) {
            let want: f64 = (2..=n).map(|i| (i as f64).ln()).sum();
            assert_eq!(ln_factorial(n).to_bits(), (want + 0.0).to_bits(), "n {n}");
        }
    }

    /// The exact block FP table against brute force for tiny blocks, where
    /// every outcome can be enumerated.
    #[test]
    fn block_table_matches_enumeration() {
        // B = 4 is not a width we use, but the table's math is width-free.
        let all = block_fp_tables(4, 3);
        for k in 1..=3u32 {
            let q = &all[k as usize - 1];
            for (j, &qj) in q.iter().enumerate().take(3) {
                // Enumerate all (j+1)*k throws into 4 bins.
                let throws = (j + 1) * k as usize;
                let total = 4usize.pow(throws as u32);
                let mut hits = 0usize;
                for code in 0..total {
                    let mut c = code;
                    let mut set = 0u8;
                    for _ in 0..j * k as usize {
                        set |= 1 << (c % 4);
                        c /= 4;
                    }
                    let mut query = 0u8;
                    for _ in 0..k {
                        query |= 1 << (c % 4);
                        c /= 4;
                    }
                    hits += (query & set == query) as usize;
                }
                let want = hits as f64 / total as f64;
                assert!((qj - want).abs() < 1e-12, "k {k} j {j}: {qj} vs {want}");
            }
        }
    }

    #[test]
    fn fp_is_monotone_in_load_and_known_at_the_ends() {
        for block in [64u64, 128] {
            for k in 1..=BLOCKED_MAX_K {
                assert_eq!(blocked_fp(block, k, 0.0), 0.0);
                let mut last = 0.0;
                for i in 1..200 {
                    let fp = blocked_fp(block, k, i as f64 * block as f64 / 200.0);
                    assert!(fp >= last - 1e-15, "B {block} k {k} at {i}");
                    assert!(fp <= 1.0);
                    last = fp;
                }
            }
            // One bit per item: a bit is set with probability
            // 1 - E[(1-1/B)^J] = 1 - exp(-l/B).
            let l = 10.0;
            let want = 1.0 - (-l / block as f64).exp();
            assert!((blocked_fp(block, 1, l) - want).abs() < 1e-12);
        }
    }
}
