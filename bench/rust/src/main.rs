//! Throughput of `bloomfilter_shared::Filter` against two in-heap Rust Bloom
//! filters (`bloomfilter::Bloom` and `fastbloom::BloomFilter`), measured in
//! the same run so that the ratios, not the absolute times, are the result
//! (STYLE point 7).
//!
//!     cargo run --release --manifest-path bench/rust/Cargo.toml [-- --large]
//!
//! Every filter is sized for the same capacity at a 1% false-positive rate and
//! sees the same keys in the same order: printable 16- and 32-byte strings
//! from a fixed-seed xorshift. Each figure is the median of 5 repetitions.
//!
//! Sizes: "cache" (capacity 100_000, about 128 KiB of bits, in L2) always;
//! "large" (capacity 200_000_000, 2^31 bits = 256 MiB for ours) with
//! `--large`. At both sizes the filters hold exactly `capacity` keys when the
//! queries are timed.
//!
//! - cache: an add repetition clears the filter (untimed) and adds the
//!   100_000 member keys, 10 times; a query repetition makes 10 passes over
//!   the 100_000 member (hit) or non-member (miss) keys.
//! - large: each filter is first filled (timed once, shown above the table,
//!   ours through `add_many`) with capacity - 10_000_000 keys streamed from
//!   another xorshift; then each add repetition adds 1_000_000 new keys
//!   (ours: 5 sets with `add`, 5 with `add_many`; the others time their
//!   single insert on the first 5 sets and add the last 5 untimed), so every
//!   filter ends with the same 200_000_000 keys; a query repetition makes one
//!   pass over 1_000_000 member or non-member keys. The three filters (about
//!   710 MiB) coexist.
//!
//! Within each repetition the filters take turns, so a busy spell of a shared
//! machine lands on all of them, not on one.

use std::hint::black_box;
use std::time::Instant;

use bloomfilter_shared::{Filter, Layout, Options};

const FP_RATE: f64 = 0.01;
const REPS: usize = 5;
const BATCH: usize = 1000;
const KEY_LENS: [usize; 2] = [16, 32];
/// Seeds of the key streams: members, non-members, the large fill.
const SEED_MEMBERS: u64 = 0x9E37_79B9_7F4A_7C15;
const SEED_MISSES: u64 = 0xD1B5_4A32_D192_ED03;
const SEED_FILL: u64 = 0x8CB9_2BA7_2F3D_8DD7;
/// Fixed seeds for the other filters (their default constructors draw random
/// ones, and nothing but the keys is to vary between runs). bloomfilter keys
/// its two SipHashes with the two halves: equal halves give equal hashes and
/// a degenerate probe sequence (measured fp rate 3.8% instead of 1%).
const BLOOM_SEED: [u8; 32] = *b"bloomfilter-shared bench seed 32";
const FAST_SEED: u128 = 7;

// ------------------------------------------------------------------ keys

/// Marsaglia xorshift64.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Append one printable key of `len` bytes (base-64 alphabet).
    fn key_into(&mut self, len: usize, out: &mut Vec<u8>) {
        const ALPHA: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut left = 0;
        let mut r = 0u64;
        for _ in 0..len {
            if left == 0 {
                r = self.next();
                left = 10; // 10 six-bit digits per 64-bit draw
            }
            out.push(ALPHA[(r & 63) as usize]);
            r >>= 6;
            left -= 1;
        }
    }
}

/// `n` keys of `len` bytes, stored back to back.
struct Keys {
    len: usize,
    buf: Vec<u8>,
}

impl Keys {
    fn new(seed: u64, len: usize, n: usize) -> Keys {
        let mut g = XorShift(seed);
        let mut buf = Vec::with_capacity(n * len);
        for _ in 0..n {
            g.key_into(len, &mut buf);
        }
        Keys { len, buf }
    }

    fn refs(&self) -> Vec<&[u8]> {
        self.buf.chunks_exact(self.len).collect()
    }
}

// ------------------------------------------------------------------ filters

/// What the harness needs of a filter. `add` is `&mut` because the heap
/// filters need it; ours takes `&self`.
trait Bench {
    const NAME: &'static str;
    const BATCHED: bool = false;
    fn make(capacity: u64) -> Self;
    fn contains(&self, k: &[u8]) -> bool;
    fn add(&mut self, k: &[u8]);
    fn contains_many(&self, _ks: &[&[u8]]) -> u64 {
        unreachable!()
    }
    fn add_many(&mut self, _ks: &[&[u8]]) {
        unreachable!()
    }
    fn clear(&mut self);
    /// Bits and hashes per item, for the header.
    fn shape(&self) -> (u64, u32);
}

struct Ours(Filter);

impl Bench for Ours {
    const NAME: &'static str = "ours";
    const BATCHED: bool = true;
    fn make(capacity: u64) -> Self {
        Ours(Filter::new_anonymous(capacity, FP_RATE, Options::default()).expect("filter"))
    }
    #[inline]
    fn contains(&self, k: &[u8]) -> bool {
        self.0.contains(k)
    }
    #[inline]
    fn add(&mut self, k: &[u8]) {
        black_box(self.0.add(k).expect("add"));
    }
    #[inline]
    fn contains_many(&self, ks: &[&[u8]]) -> u64 {
        self.0.contains_many(ks, None)
    }
    #[inline]
    fn add_many(&mut self, ks: &[&[u8]]) {
        black_box(self.0.add_many(ks, None).expect("add_many"));
    }
    fn clear(&mut self) {
        self.0.clear().expect("clear");
    }
    fn shape(&self) -> (u64, u32) {
        let g = self.0.geometry();
        (g.m, g.k)
    }
}

/// Ours, blocked layout (all of an item's bits in one word).
struct OursBlocked(Ours);

impl Bench for OursBlocked {
    const NAME: &'static str = "ours-blocked";
    const BATCHED: bool = true;
    fn make(capacity: u64) -> Self {
        let opts = Options {
            layout: Some(Layout::Blocked),
            ..Options::default()
        };
        OursBlocked(Ours(Filter::new_anonymous(capacity, FP_RATE, opts).expect("filter")))
    }
    #[inline]
    fn contains(&self, k: &[u8]) -> bool {
        self.0.contains(k)
    }
    #[inline]
    fn add(&mut self, k: &[u8]) {
        self.0.add(k)
    }
    #[inline]
    fn contains_many(&self, ks: &[&[u8]]) -> u64 {
        self.0.contains_many(ks)
    }
    #[inline]
    fn add_many(&mut self, ks: &[&[u8]]) {
        self.0.add_many(ks)
    }
    fn clear(&mut self) {
        self.0.clear()
    }
    fn shape(&self) -> (u64, u32) {
        self.0.shape()
    }
}

struct BloomCrate(bloomfilter::Bloom<[u8]>);

impl Bench for BloomCrate {
    const NAME: &'static str = "bloomfilter";
    fn make(capacity: u64) -> Self {
        BloomCrate(
            bloomfilter::Bloom::new_for_fp_rate_with_seed(capacity as usize, FP_RATE, &BLOOM_SEED)
                .expect("bloom"),
        )
    }
    #[inline]
    fn contains(&self, k: &[u8]) -> bool {
        self.0.check(k)
    }
    #[inline]
    fn add(&mut self, k: &[u8]) {
        self.0.set(k);
    }
    fn clear(&mut self) {
        self.0.clear();
    }
    fn shape(&self) -> (u64, u32) {
        (self.0.len(), self.0.number_of_hash_functions())
    }
}

struct FastBloom(fastbloom::BloomFilter);

impl Bench for FastBloom {
    const NAME: &'static str = "fastbloom";
    fn make(capacity: u64) -> Self {
        FastBloom(
            fastbloom::BloomFilter::with_false_pos(FP_RATE)
                .seed(&FAST_SEED)
                .expected_items(capacity as usize),
        )
    }
    #[inline]
    fn contains(&self, k: &[u8]) -> bool {
        self.0.contains(k)
    }
    #[inline]
    fn add(&mut self, k: &[u8]) {
        black_box(self.0.insert(k));
    }
    fn clear(&mut self) {
        self.0.clear();
    }
    fn shape(&self) -> (u64, u32) {
        (self.0.num_bits() as u64, self.0.num_hashes())
    }
}

// ------------------------------------------------------------------ timing

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// ns/item of `passes` single-call queries over `keys`; also the hit count
/// of the last pass (a check that hits hit and misses mostly miss).
fn time_contains<F: Bench>(f: &F, keys: &[&[u8]], passes: usize) -> (f64, u64) {
    let mut hits = 0;
    let t = Instant::now();
    for _ in 0..passes {
        hits = 0;
        for &k in keys {
            hits += black_box(f.contains(black_box(k))) as u64;
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (passes * keys.len()) as f64;
    (ns, black_box(hits))
}

fn time_contains_many<F: Bench>(f: &F, keys: &[&[u8]], passes: usize) -> (f64, u64) {
    let mut hits = 0;
    let t = Instant::now();
    for _ in 0..passes {
        hits = 0;
        for b in keys.chunks(BATCH) {
            hits += black_box(f.contains_many(black_box(b)));
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (passes * keys.len()) as f64;
    (ns, black_box(hits))
}

fn time_add<F: Bench>(f: &mut F, keys: &[&[u8]], batched: bool) -> f64 {
    let t = Instant::now();
    if batched {
        for b in keys.chunks(BATCH) {
            f.add_many(black_box(b));
        }
    } else {
        for &k in keys {
            f.add(black_box(k));
        }
    }
    t.elapsed().as_nanos() as f64
}

// ------------------------------------------------------------------ results

#[derive(Clone, Copy, PartialEq)]
enum Op {
    ContainsHit,
    ContainsMiss,
    Add,
    ContainsManyHit,
    ContainsManyMiss,
    AddMany,
}

/// In the order they run: adds first, so the queries see a full filter.
const OPS: [Op; 6] = [
    Op::Add,
    Op::AddMany,
    Op::ContainsHit,
    Op::ContainsMiss,
    Op::ContainsManyHit,
    Op::ContainsManyMiss,
];

/// In the order the tables list them: singles, then batches.
const TABLE_OPS: [Op; 6] = [
    Op::ContainsHit,
    Op::ContainsMiss,
    Op::Add,
    Op::ContainsManyHit,
    Op::ContainsManyMiss,
    Op::AddMany,
];

impl Op {
    fn label(self) -> &'static str {
        match self {
            Op::ContainsHit => "contains hit",
            Op::ContainsMiss => "contains miss",
            Op::Add => "add",
            Op::ContainsManyHit => "contains_many hit",
            Op::ContainsManyMiss => "contains_many miss",
            Op::AddMany => "add_many",
        }
    }
    fn batched(self) -> bool {
        matches!(self, Op::ContainsManyHit | Op::ContainsManyMiss | Op::AddMany)
    }
    /// The single-call operation of the other filters it is compared with.
    fn baseline(self) -> Op {
        match self {
            Op::ContainsManyHit => Op::ContainsHit,
            Op::ContainsManyMiss => Op::ContainsMiss,
            Op::AddMany => Op::Add,
            o => o,
        }
    }
}

/// One filter's figures at one size and key length.
struct Run {
    lib: &'static str,
    shape: (u64, u32),
    ns: Vec<(Op, f64)>,
    /// Hits out of the queried non-members: the measured false-positive rate.
    fp: f64,
    /// The large size's fill (not in the table), ns/item, one run.
    fill_ns: Option<f64>,
}

impl Run {
    fn get(&self, op: Op) -> Option<f64> {
        self.ns.iter().find(|(o, _)| *o == op).map(|&(_, v)| v)
    }
}

/// The keys of one size and key length.
struct Work<'a> {
    /// Query passes per repetition; cache size: also fills per add repetition.
    passes: usize,
    hit: &'a [&'a [u8]],
    miss: &'a [&'a [u8]],
    /// Large size: the distinct add sets (REPS for `add`, REPS for
    /// `add_many`). Cache size: empty; an add repetition clears the filter
    /// and adds `hit` again.
    adds: &'a [Vec<&'a [u8]>],
}

/// Repetition `r` of `op` on `f`: ns/item and the hits of one pass, or None
/// where `f` has no such operation (it then adds the keys ours adds, untimed,
/// so that all filters keep holding the same keys).
fn rep<F: Bench>(f: &mut F, op: Op, r: usize, w: &Work) -> Option<(f64, u64)> {
    if op.batched() && !F::BATCHED {
        if op == Op::AddMany && !w.adds.is_empty() {
            time_add(f, &w.adds[REPS + r], false);
        }
        return None;
    }
    Some(match op {
        Op::ContainsHit => time_contains(f, w.hit, w.passes),
        Op::ContainsMiss => time_contains(f, w.miss, w.passes),
        Op::ContainsManyHit => time_contains_many(f, w.hit, w.passes),
        Op::ContainsManyMiss => time_contains_many(f, w.miss, w.passes),
        Op::Add | Op::AddMany if w.adds.is_empty() => {
            let mut ns = 0.0;
            for _ in 0..w.passes {
                f.clear();
                ns += time_add(f, w.hit, op.batched());
            }
            (ns / (w.passes * w.hit.len()) as f64, 0)
        }
        Op::Add | Op::AddMany => {
            let set = &w.adds[if op == Op::Add { r } else { REPS + r }];
            (time_add(f, set, op.batched()) / set.len() as f64, 0)
        }
    })
}

enum Lib {
    Ours(Ours),
    Bloom(BloomCrate),
    Fast(FastBloom),
    Blocked(OursBlocked),
}

/// Run `$e` with `$f` bound to the concrete filter (monomorphic hot loops).
macro_rules! on {
    ($lib:expr, $f:ident => $e:expr) => {
        match $lib {
            Lib::Ours($f) => $e,
            Lib::Bloom($f) => $e,
            Lib::Fast($f) => $e,
            Lib::Blocked($f) => $e,
        }
    };
}

fn libs(capacity: u64) -> Vec<Lib> {
    vec![
        Lib::Ours(Ours::make(capacity)),
        Lib::Bloom(BloomCrate::make(capacity)),
        Lib::Fast(FastBloom::make(capacity)),
        Lib::Blocked(OursBlocked::make(capacity)),
    ]
}

fn new_run<F: Bench>(f: &F) -> Run {
    Run { lib: F::NAME, shape: f.shape(), ns: vec![], fp: 0.0, fill_ns: None }
}

/// Add `n` keys streamed from the fill xorshift (ours through add_many);
/// ns/item.
fn fill<F: Bench>(f: &mut F, len: usize, n: u64) -> f64 {
    let mut g = XorShift(SEED_FILL);
    let mut buf = Vec::with_capacity(BATCH * len);
    let (mut done, mut ns) = (0u64, 0.0);
    while done < n {
        let c = (n - done).min(BATCH as u64) as usize;
        buf.clear();
        for _ in 0..c {
            g.key_into(len, &mut buf);
        }
        let refs: Vec<&[u8]> = buf.chunks_exact(len).collect();
        ns += time_add(f, &refs, F::BATCHED);
        done += c as u64;
    }
    ns / n.max(1) as f64
}

/// Every operation, REPS times; within a repetition the filters take turns
/// (rotating who goes first), so that a slow spell of the machine lands on
/// all of them rather than on one.
fn measure(libs: &mut [Lib], w: &Work) -> Vec<Run> {
    let mut runs: Vec<Run> = libs.iter().map(|l| on!(l, f => new_run(f))).collect();
    for op in OPS {
        let mut v = vec![Vec::new(); libs.len()];
        for r in 0..REPS {
            for j in 0..libs.len() {
                let i = (r + j) % libs.len();
                if let Some((ns, hits)) = on!(&mut libs[i], f => rep(f, op, r, w)) {
                    v[i].push(ns);
                    match op {
                        Op::ContainsHit | Op::ContainsManyHit => {
                            assert_eq!(hits, w.hit.len() as u64, "{}: a member was not found", runs[i].lib)
                        }
                        Op::ContainsMiss => runs[i].fp = hits as f64 / w.miss.len() as f64,
                        _ => {}
                    }
                }
            }
        }
        for (run, v) in runs.iter_mut().zip(v) {
            if !v.is_empty() {
                run.ns.push((op, median(v)));
            }
        }
    }
    runs
}

fn print_size(size: &str, len: usize, capacity: u64, runs: &[Run]) {
    println!("\n## {size}: capacity {capacity}, fp_rate {FP_RATE}, {len}-byte keys\n");
    for r in runs {
        let (m, k) = r.shape;
        print!(
            "    {:<12} {:>11} bits ({:>7.1} MiB), k = {:>2}, measured fp rate {:.4}",
            r.lib,
            m,
            m as f64 / 8.0 / 1048576.0,
            k,
            r.fp
        );
        match r.fill_ns {
            Some(ns) => println!(", fill {ns:.1} ns/item (1 run)"),
            None => println!(),
        }
    }
    println!();
    println!(
        "| {:<18} | {:<5} | {:>4} | {:>9} | {:>11} | {:>9} | {:>10} | {:>10} |",
        "operation", "size", "key", "ours ns", "bloomfilter", "fastbloom", "ours/bloom", "ours/fast"
    );
    println!("|{:-<20}|{:-<7}|{:->6}|{:->11}|{:->13}|{:->11}|{:->12}|{:->12}|", "", "", "", "", "", "", "", "");
    let ours = &runs[0];
    for op in TABLE_OPS {
        let o = ours.get(op).unwrap();
        let b = runs[1].get(op.baseline()).unwrap();
        let f = runs[2].get(op.baseline()).unwrap();
        let (bl, fl) = if op == op.baseline() {
            (format!("{b:.1}"), format!("{f:.1}"))
        } else {
            (format!("({b:.1})"), format!("({f:.1})"))
        };
        println!(
            "| {:<18} | {:<5} | {:>4} | {:>9.1} | {:>11} | {:>9} | {:>10.2} | {:>10.2} |",
            op.label(),
            size,
            len,
            o,
            bl,
            fl,
            o / b,
            o / f
        );
    }
    // The blocked layout against our standard one and fastbloom (also a
    // blocked filter, single-process).
    let bl = &runs[3];
    println!();
    println!(
        "| {:<18} | {:<5} | {:>4} | {:>10} | {:>9} | {:>9} | {:>13} | {:>14} |",
        "operation", "size", "key", "blocked ns", "ours ns", "fastbloom", "blocked/ours", "blocked/fast"
    );
    println!("|{:-<20}|{:-<7}|{:->6}|{:->12}|{:->11}|{:->11}|{:->15}|{:->16}|", "", "", "", "", "", "", "", "");
    for op in TABLE_OPS {
        let x = bl.get(op).unwrap();
        let o = ours.get(op).unwrap();
        let f = runs[2].get(op.baseline()).unwrap();
        let fl = if op == op.baseline() { format!("{f:.1}") } else { format!("({f:.1})") };
        println!(
            "| {:<18} | {:<5} | {:>4} | {:>10.1} | {:>9.1} | {:>9} | {:>13.2} | {:>14.2} |",
            op.label(),
            size,
            len,
            x,
            o,
            fl,
            x / o,
            x / f
        );
    }
}

fn main() {
    let large = std::env::args().skip(1).any(|a| a == "--large");
    if std::env::args().skip(1).any(|a| a != "--large") {
        eprintln!("usage: bench [--large]");
        std::process::exit(2);
    }
    println!("# bloomfilter-shared vs bloomfilter 3 and fastbloom: ns per item, median of {REPS}");
    println!();
    println!("Ratios are ours / theirs: below 1 means ours is faster. Note:");
    println!("- `bloomfilter::Bloom` and `fastbloom::BloomFilter` are single-process");
    println!("  in-heap filters (plain loads/stores, `&mut self` inserts); ours is a");
    println!("  shared mapping used by many processes with atomic ops: Relaxed loads");
    println!("  to query; per add an epoch check and a per-process op counter, and for");
    println!("  a new item a stripe lock (SeqCst CAS, released by a store) and an");
    println!("  atomic OR per bit that was 0.");
    println!("- Hashing differs: ours one XXH3-128 per item, bloomfilter two SipHash-1-3");
    println!("  and a 64-bit modulo per probe, fastbloom one SipHash-1-3; fastbloom is a");
    println!("  blocked filter (all probes of an item in one 512-bit block, so one cache");
    println!("  line per item), ours and bloomfilter probe k independent lines.");
    println!("- ours-blocked: our blocked layout (all bits of an item in one 64-bit word;");
    println!("  an add is one fetch_or plus the process's own slot mark, no stripe).");
    println!("- Batched rows (contains_many, add_many; batches of {BATCH}) are compared with");
    println!("  the others' single calls (in parentheses): they have no batch API.");

    let cache_cap = 100_000u64;
    for len in KEY_LENS {
        let hit_keys = Keys::new(SEED_MEMBERS, len, cache_cap as usize);
        let miss_keys = Keys::new(SEED_MISSES, len, cache_cap as usize);
        let (hit, miss) = (hit_keys.refs(), miss_keys.refs());
        let w = Work { passes: 10, hit: &hit, miss: &miss, adds: &[] };
        let runs = measure(&mut libs(cache_cap), &w);
        print_size("cache", len, cache_cap, &runs);
    }

    if large {
        let cap = 200_000_000u64;
        let set = 1_000_000usize;
        for len in KEY_LENS {
            let add_keys = Keys::new(SEED_MEMBERS, len, 2 * REPS * set);
            let miss_keys = Keys::new(SEED_MISSES, len, set);
            let all = add_keys.refs();
            let adds: Vec<Vec<&[u8]>> = all.chunks(set).map(|c| c.to_vec()).collect();
            drop(all);
            let miss = miss_keys.refs();
            let w = Work { passes: 1, hit: &adds[0], miss: &miss, adds: &adds };
            let mut ls = libs(cap);
            let base = cap - (2 * REPS * set) as u64;
            let fills: Vec<f64> = ls.iter_mut().map(|l| on!(l, f => fill(f, len, base))).collect();
            let mut runs = measure(&mut ls, &w);
            for (r, ns) in runs.iter_mut().zip(fills) {
                r.fill_ns = Some(ns);
            }
            print_size("large", len, cap, &runs);
        }
    } else {
        println!("\n(large size, a 256 MiB filter: run with -- --large)");
    }
}
