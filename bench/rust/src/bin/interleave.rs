//! A layout question for windowed filters larger than the caches, measured
//! without the filter: how long a query that reads an item's word in every
//! generation takes when each generation is its own array (as windowed
//! filters are stored) and when the generations' words of an item lie side
//! by side (word `i` of ring slot `s` at `i * (g + 1) + s`), against one
//! array (a plain filter).
//!
//!     cargo run --release --manifest-path bench/rust/Cargo.toml --bin interleave
//!
//! Blocked 64-bit words, 12 bits per item, 40 million items per generation
//! (60 MB each: beyond the caches), g = 4 generations in a ring of 5, and
//! 4 KiB pages (ordinary heap memory). Each lookup's address depends on the
//! word the previous one loaded, so the figure is the latency of one query
//! after another, as a loop of single calls sees it, not the throughput of
//! overlapping ones. Median of 5 runs; ns per lookup.

use std::time::Instant;

const G: usize = 4;
const RING: usize = G + 1;
const PER_GEN: u64 = 40_000_000;
const LOOKUPS: u64 = 2_000_000;
const RUNS: usize = 5;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The item's word among `words`, and its 5 bits there.
fn locate(h: u64, words: usize) -> (usize, u64) {
    let idx = ((h as u128 * words as u128) >> 64) as usize;
    let h2 = mix(h ^ 0x5555);
    let mut m = 0;
    for c in [0x9e37_79b9u64, 0x85eb_ca6b, 0xc2b2_ae35, 0x27d4_eb2f, 0x1656_67b1] {
        m |= 1u64 << (h2.wrapping_mul(c) >> 58);
    }
    (idx, m)
}

/// ns per lookup of `look` (word index and mask to the bits it found),
/// each lookup's key depending on the previous one's answer.
fn time(words: usize, look: impl Fn(usize, u64) -> u64) -> f64 {
    let mut runs: Vec<f64> = (0..RUNS)
        .map(|_| {
            let (mut acc, t) = (0u64, Instant::now());
            for i in 0..LOOKUPS {
                let (idx, m) = locate(mix(i ^ acc ^ 0xdead_0000_0000), words);
                acc = acc.wrapping_add(look(idx, m));
            }
            std::hint::black_box(acc);
            t.elapsed().as_nanos() as f64 / LOOKUPS as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[RUNS / 2]
}

fn main() {
    let words = (PER_GEN * 12 / 64) as usize;
    let mut plain = vec![0u64; words];
    let mut separate = vec![0u64; words * RING];
    let mut interleaved = vec![0u64; words * RING];
    for s in 0..G {
        for i in 0..PER_GEN {
            let (idx, m) = locate(mix(i + s as u64 * PER_GEN), words);
            separate[s * words + idx] |= m;
            interleaved[idx * RING + s] |= m;
            if s == 0 {
                plain[idx] |= m;
            }
        }
    }
    let p = time(words, |idx, m| plain[idx] & m);
    let s = time(words, |idx, m| (0..G).fold(0, |f, g| f | separate[g * words + idx] & m));
    let i = time(words, |idx, m| {
        let group = &interleaved[idx * RING..idx * RING + RING];
        (0..G).fold(0, |f, g| f | group[g] & m)
    });
    println!("# one item's word in every generation, g = {G}, {PER_GEN} items per generation: ns per lookup");
    println!("plain (one array)          {p:7.1}");
    println!("separate generations       {s:7.1}  ({:.2}x plain)", s / p);
    println!("interleaved generations    {i:7.1}  ({:.2}x plain)", i / p);
}
