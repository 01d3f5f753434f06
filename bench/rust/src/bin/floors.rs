//! What this machine's memory system allows, measured without the filter:
//! the floors under the figures of `bench/calls.pl` and of the `bench` binary.
//!
//!     cargo run --release --manifest-path bench/rust/Cargo.toml --bin floors
//!
//! 1. Setting one bit in a random word of a 128 KiB array (cache-resident):
//!    a plain load/OR/store against an atomic `fetch_or` (`lock or`), and a
//!    compare-and-swap plus store on a 256 KiB lock array, as an add of a new
//!    item does per bit and per item (DESIGN C2: bits are set with atomic OR).
//! 2. Independent loads of random words of a 256 MiB array, with 4 KiB pages
//!    and with transparent huge pages (`madvise(MADV_HUGEPAGE)` on a private
//!    mapping, which `/sys/kernel/mm/transparent_hugepage/enabled` at
//!    `madvise` allows): the memory-bound floor of a batch on a 256 MiB
//!    filter, per cache line.
//!
//! Median of 5 runs each; ns per operation.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

const RUNS: usize = 5;

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
    fn munmap(addr: *mut u8, len: usize) -> i32;
}
const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
const MADV_HUGEPAGE: i32 = 14;
const HUGE: usize = 2 << 20;

struct XorShift(u64);

impl XorShift {
    #[inline(always)]
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// ns per call of `f`, which does `per` operations.
fn time(per: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_nanos() as f64 / per as f64
            })
            .collect(),
    )
}

fn bit_setting() {
    const WORDS: usize = 16 << 10; // 128 KiB
    const OPS: usize = 7 << 20;
    let words: Vec<AtomicU64> = (0..WORDS).map(|_| AtomicU64::new(0)).collect();
    let locks: Vec<AtomicU32> = (0..4096 * 16).map(|_| AtomicU32::new(0)).collect();
    let mut x = XorShift(0x9e37_79b9_7f4a_7c15);
    let plain = time(OPS, || {
        for _ in 0..OPS {
            let r = x.next();
            let w = &words[(r as usize >> 6) & (WORDS - 1)];
            w.store(w.load(Ordering::Relaxed) | 1 << (r & 63), Ordering::Relaxed);
        }
    });
    let atomic = time(OPS, || {
        for _ in 0..OPS {
            let r = x.next();
            words[(r as usize >> 6) & (WORDS - 1)].fetch_or(1 << (r & 63), Ordering::Relaxed);
        }
    });
    let lock = time(OPS, || {
        for _ in 0..OPS {
            let l = &locks[(x.next() as usize & 4095) * 16];
            black_box(l.compare_exchange(0, 7, Ordering::SeqCst, Ordering::Relaxed).is_ok());
            l.store(0, Ordering::Release);
        }
    });
    println!("## setting one bit of a random word, 128 KiB array (ns per bit)");
    println!("plain load, OR, store          {plain:6.1}");
    println!("atomic fetch_or (lock or)      {atomic:6.1}");
    println!("lock: CAS + release store      {lock:6.1}   (a 256 KiB array of 64-byte locks)");
    println!("an atomic OR costs {:.1} ns more than a plain one", atomic - plain);
}

fn random_loads(huge: bool) -> f64 {
    const LEN: usize = 256 << 20;
    const LOADS: usize = 8 << 20;
    // SAFETY: a fresh private anonymous mapping, aligned by hand to 2 MiB,
    // used only inside this function and unmapped at its end.
    unsafe {
        let raw = mmap(std::ptr::null_mut(), LEN + HUGE, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0);
        assert!(raw as isize != -1, "mmap failed");
        let base = ((raw as usize + HUGE - 1) & !(HUGE - 1)) as *mut u64;
        if huge {
            madvise(base as *mut u8, LEN, MADV_HUGEPAGE);
        }
        let v = std::slice::from_raw_parts_mut(base, LEN / 8);
        for (i, w) in v.iter_mut().enumerate() {
            *w = i as u64;
        }
        let mut x = XorShift(0x1234_5678);
        let idx: Vec<usize> = (0..LOADS).map(|_| x.next() as usize & (v.len() - 1)).collect();
        let ns = time(LOADS, || {
            let mut s = 0u64;
            for &i in &idx {
                s = s.wrapping_add(*v.get_unchecked(i));
            }
            black_box(s);
        });
        munmap(raw, LEN + HUGE);
        ns
    }
}

fn main() {
    println!("# floors of this machine: median of {RUNS} runs");
    bit_setting();
    println!();
    println!("## independent loads of random words of a 256 MiB array (ns per load)");
    println!("4 KiB pages                    {:6.1}", random_loads(false));
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    println!(
        "huge pages (madvise)           {:6.1}   (transparent_hugepage/enabled: {})",
        random_loads(true),
        thp.trim()
    );
}
