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

use bloomfilter_shared::{Filter, Layout, Options, WindowOptions};
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

/// A filter of `layout` and `capacity` with `g` generations (0: plain),
/// the oldest (a plain filter's only) holding `old`, each newer one the
/// next of `fill`.
fn filled(layout: Layout, g: u32, capacity: u64, old: &[&[u8]], fill: &[Vec<Vec<u8>>]) -> Filter {
    let opts = Options {
        layout: Some(layout),
        window: (g > 0).then_some(WindowOptions {
            window_ns: Some(86_400_000_000_000),
            generations: g,
        }),
        ..Options::default()
    };
    let f = Filter::new_anonymous(capacity, 0.01, opts).unwrap();
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

/// The median time of `contains` over `items`, in ns per call.
fn looks(f: &Filter, items: &[&[u8]]) -> f64 {
    median(items.len(), || {
        timed(|| {
            for it in items {
                black_box(f.contains(it));
            }
        })
    })
}

fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64
}

/// The keys of a run: `old` (half the capacity), `fills` sets of as many
/// for the newer generations, `n` absent ones, and `n` new ones per run.
struct KeySets {
    old: Vec<Vec<u8>>,
    fill: Vec<Vec<Vec<u8>>>,
    miss: Vec<Vec<u8>>,
    new: Vec<Vec<Vec<u8>>>,
}

fn key_sets(capacity: u64, fills: usize, n: usize) -> KeySets {
    let half = capacity as usize / 2;
    KeySets {
        old: keys("old", half),
        fill: (0..fills).map(|g| keys(&format!("fill{g}"), half)).collect(),
        miss: keys("miss", n),
        new: (0..RUNS).map(|r| keys(&format!("new{r}"), n)).collect(),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--large") {
        return large();
    }
    let k = key_sets(CAPACITY, 8, KEYS);
    let (old, miss, fill, new_keys) = (refs(&k.old), refs(&k.miss), &k.fill, &k.new);
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
            let f = filled(layout, g, CAPACITY, &old, fill);
            table[0].push(looks(&f, &old[..KEYS]));
            table[1].push(looks(&f, &miss));
            // New keys (each run its own) added to a fresh filter by `add`.
            let adding = |add: &dyn Fn(&Filter, &[&[u8]])| {
                let mut run = 0;
                median(KEYS, || {
                    let fresh = filled(layout, g, CAPACITY, &old, fill);
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
    let k = key_sets(CAP, 3, N);
    let (old, miss, fill, new_keys) = (refs(&k.old), refs(&k.miss), &k.fill, &k.new);
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
            let f = filled(layout, g, cap, &old, fill);
            let mut run = 0;
            let row = [
                looks(&f, &old[..N]),
                looks(&f, &miss),
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
