//! Windowed filters against plain ones of the same layout, in the Rust core
//! alone (no Perl call in the way): the work a window adds per call and per
//! item, for g = 2, 4 and 8 generations.
//!
//!     cargo run --release --manifest-path bench/rust/Cargo.toml --bin window [-- --large]
//!
//! Method: as `bench/window.pl`, whose Perl figures include the cost of a
//! method call. Capacity 100 000 per window at 0.01 (cache-resident); a
//! windowed filter has every generation filled to half its capacity
//! (fill, rotate, fill, ...), the oldest with the keys of the "old hit"
//! row; a plain filter holds those keys too. The "new" rows add keys never
//! added before, to a fresh filter each run. Median of 5 runs, ns per call
//! or item, and the ratio to the plain filter of the same run.

use bloomfilter_shared::filter::WindowOptions;
use bloomfilter_shared::{Filter, Layout, Options};
use std::hint::black_box;
use std::time::Instant;

const RUNS: usize = 5;
const CAPACITY: u64 = 100_000;
const KEYS: usize = 40_000;
const BATCH: usize = 1000;

fn keys(tag: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}-{i}-abcdefgh").into_bytes()).collect()
}

fn refs(k: &[Vec<u8>]) -> Vec<&[u8]> {
    k.iter().map(|v| v.as_slice()).collect()
}

/// A filter of `layout` with `g` generations (0: plain), each filled to
/// half its capacity; the oldest (a plain filter's only) holds `old`.
fn filled(layout: Layout, g: u32, old: &[&[u8]], fill: &[Vec<Vec<u8>>]) -> Filter {
    let opts = Options {
        layout: Some(layout),
        window: (g > 0).then_some(WindowOptions {
            window_ns: Some(86_400_000_000_000),
            generations: g,
        }),
        ..Options::default()
    };
    let f = Filter::new_anonymous(CAPACITY, 0.01, opts).unwrap();
    f.add_many(old, None).unwrap();
    for gen in 1..g as usize {
        f.rotate().unwrap();
        f.add_many(&refs(&fill[gen - 1]), None).unwrap();
    }
    f
}

/// The median of `RUNS` timings of `run` over `n` calls or items, in ns.
fn median(n: usize, mut run: impl FnMut() -> f64) -> f64 {
    let mut t: Vec<f64> = (0..RUNS).map(|_| run() / n as f64).collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[RUNS / 2]
}

fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64
}

fn main() {
    if std::env::args().any(|a| a == "--large") {
        return large();
    }
    let half = CAPACITY as usize / 2;
    let old_keys = keys("old", half);
    let old = refs(&old_keys);
    let fill: Vec<Vec<Vec<u8>>> = (0..8).map(|g| keys(&format!("fill{g}"), half)).collect();
    let miss_keys = keys("miss", KEYS);
    let miss = refs(&miss_keys);
    let new_keys: Vec<Vec<Vec<u8>>> = (0..RUNS).map(|r| keys(&format!("new{r}"), KEYS)).collect();
    let rows = [
        "contains, old hit",
        "contains, miss",
        "add, new item",
        "contains_many, misses",
        "add_many, new",
    ];
    for layout in [Layout::Standard, Layout::Blocked] {
        println!("\n## {} layout: ns per call or item (x plain)", layout.name());
        println!("{:<24}{:>8}{:>16}{:>16}{:>16}", "row", "plain", "g=2", "g=4", "g=8");
        let mut table = vec![Vec::new(); rows.len()];
        for g in [0, 2, 4, 8] {
            let f = filled(layout, g, &old, &fill);
            let probe = |items: &[&[u8]]| {
                median(items.len(), || {
                    timed(|| {
                        for it in items {
                            black_box(f.contains(it));
                        }
                    })
                })
            };
            table[0].push(probe(&old[..KEYS]));
            table[1].push(probe(&miss));
            // New keys (each run its own) added to a fresh filter by `add`.
            let adding = |add: &dyn Fn(&Filter, &[&[u8]])| {
                let mut run = 0;
                median(KEYS, || {
                    let fresh = filled(layout, g, &old, &fill);
                    let items = refs(&new_keys[run % RUNS]);
                    run += 1;
                    timed(|| add(&fresh, &items))
                })
            };
            table[2].push(adding(&|f, items| {
                for it in items {
                    black_box(f.add(it).unwrap());
                }
            }));
            table[3].push(median(KEYS, || {
                timed(|| {
                    for c in miss.chunks(BATCH) {
                        black_box(f.contains_many(c, None));
                    }
                })
            }));
            table[4].push(adding(&|f, items| {
                for c in items.chunks(BATCH) {
                    black_box(f.add_many(c, None).unwrap());
                }
            }));
        }
        for (name, t) in rows.iter().zip(&table) {
            print!("{name:<24}{:>8.1}", t[0]);
            for x in &t[1..] {
                print!("{:>9.1} ({:.2})", x, x / t[0]);
            }
            println!();
        }
    }
}

/// `--large`: generations larger than the caches, single calls. A windowed
/// filter (g = 4, capacity 10**7 per window, each generation holding
/// 5 * 10**6 items) against a plain filter of the same capacity and one
/// of five times it (as much memory as the windowed filter's ring of five
/// generations), each holding the 5 * 10**6 items of the windowed
/// filter's oldest generation.
fn large() {
    const CAP: u64 = 10_000_000;
    const N: usize = 200_000;
    let half = CAP as usize / 2;
    let old_keys = keys("old", half);
    let old = refs(&old_keys);
    let fill: Vec<Vec<Vec<u8>>> = (0..3).map(|g| keys(&format!("fill{g}"), half)).collect();
    let miss_keys = keys("miss", N);
    let miss = refs(&miss_keys);
    let new_keys: Vec<Vec<Vec<u8>>> = (0..RUNS).map(|r| keys(&format!("new{r}"), N)).collect();
    println!("\n## generations larger than the caches: ns per call (x plain of the same capacity)");
    println!(
        "{:<10}{:<28}{:>16}{:>16}{:>16}",
        "layout", "filter", "old hit", "miss", "add, new"
    );
    for layout in [Layout::Standard, Layout::Blocked] {
        let mut base = None;
        for (name, cap, g) in [
            ("plain, same capacity", CAP, 0),
            ("plain, 5x capacity", 5 * CAP, 0),
            ("windowed, g=4", CAP, 4),
        ] {
            let opts = Options {
                layout: Some(layout),
                window: (g > 0).then_some(WindowOptions {
                    window_ns: Some(86_400_000_000_000),
                    generations: g,
                }),
                ..Options::default()
            };
            let f = Filter::new_anonymous(cap, 0.01, opts).unwrap();
            f.add_many(&old, None).unwrap();
            for gen in 1..g as usize {
                f.rotate().unwrap();
                f.add_many(&refs(&fill[gen - 1]), None).unwrap();
            }
            let look = |items: &[&[u8]]| {
                median(items.len(), || {
                    timed(|| {
                        for it in items {
                            black_box(f.contains(it));
                        }
                    })
                })
            };
            let mut run = 0;
            let row = [
                look(&old[..N]),
                look(&miss),
                median(N, || {
                    let items = refs(&new_keys[run % RUNS]);
                    run += 1;
                    timed(|| {
                        for it in &items {
                            black_box(f.add(it).unwrap());
                        }
                    })
                }),
            ];
            let b = *base.get_or_insert(row);
            print!("{:<10}{:<28}", layout.name(), name);
            for (x, b) in row.iter().zip(b) {
                print!("{:>9.1} ({:.2})", x, x / b);
            }
            println!();
        }
    }
}
