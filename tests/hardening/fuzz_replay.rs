//! The fuzz corpus as regression tests, and a bounded mutation run from it.
//!
//! `tests/corpus/<target>/` holds the seeds and every input the fuzzer ever
//! found interesting or failing (minimized); each is replayed through the
//! target's oracle (`tests/fuzz/oracles.rs`). Then each seed is mutated a
//! fixed number of times with a seeded generator: a deterministic stand-in
//! for the coverage-guided fuzzer (`xt/fuzz.sh`) that runs with every
//! `cargo test`. `FUZZ_ITERS=N` sets the mutations per corpus file
//! (default 200).

use crate::oracles;
use std::panic::{catch_unwind, AssertUnwindSafe};

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

/// Run `f` on `input`; a panic becomes a message naming `what`.
fn check(f: oracles::Target, input: &[u8], what: &dyn Fn() -> String) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| f(input))).map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("{}: {msg}", what())
    })
}

#[test]
fn corpus_replays() {
    for (name, f) in oracles::TARGETS {
        let files = corpus(name);
        assert!(files.len() >= 2, "tests/corpus/{name} holds no seeds");
        let failures: Vec<String> = files
            .iter()
            .filter_map(|(p, b)| check(f, b, &|| p.display().to_string()).err())
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// The named seeds (written by `xt/fuzz-seeds.pl`; the fuzzer's finds are
/// named by their hash) are what the library writes today: each passes the
/// checks, so that the replay and the mutations reach the code behind them.
/// A format change that leaves them stale fails here, not silently.
#[test]
fn named_seeds_are_accepted() {
    use bloomfilter_shared::hooks::{format, serial};
    let named = |target| {
        corpus(target)
            .into_iter()
            .filter(|(p, _)| {
                let n = p.file_name().unwrap().to_string_lossy();
                !(n.len() == 40 && n.bytes().all(|c| c.is_ascii_hexdigit()))
            })
            .collect::<Vec<_>>()
    };
    let mut seen = 0;
    for (p, b) in named("decode") {
        let size = u64::from_le_bytes(b[1..9].try_into().unwrap());
        if let Err(e) = format::decode(&b[9..], size) {
            // The one regression input kept by name is a header that needs resealing.
            assert_eq!(b[0] & 1, 1, "{}: {e}", p.display());
        }
        seen += 1;
    }
    for (p, b) in named("open") {
        let total = u64::from_ne_bytes(b[2 + 56..2 + 64].try_into().unwrap());
        format::decode(&b[2..], total).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        seen += 1;
    }
    for (p, b) in named("serial") {
        serial::parse(&b[1..]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        seen += 1;
    }
    let mut images = 0;
    for (p, b) in named("image") {
        bloomfilter_shared::hooks::datasketches::parse(&b[1..]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        images += 1;
    }
    assert!(images >= 5, "only {images} named DataSketches images");
    assert!(seen >= 20, "only {seen} named seeds");
}

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that sit on the library's limits.
const INTERESTING: [u64; 14] = [
    0,
    1,
    7,
    32,
    33,
    63,
    64,
    4096,
    331_776,
    1 << 38,
    (1 << 38) + 1,
    i64::MAX as u64,
    u64::MAX,
    0x3ff0_0000_0000_0000, // 1.0 as f64
];

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                b[i] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            2 if len >= 8 => {
                // An aligned field set to a limit value (the first byte is
                // the flags byte: fields start one byte in).
                let i = (1 + 4 * rng.below((len - 1) / 4)).min(len - 8);
                let v = INTERESTING[rng.below(INTERESTING.len())];
                b[i..i + 8].copy_from_slice(&v.to_ne_bytes());
            }
            3 if len >= 4 => {
                let i = (1 + 4 * rng.below((len - 1) / 4)).min(len - 4);
                let v = INTERESTING[rng.below(INTERESTING.len())] as u32;
                b[i..i + 4].copy_from_slice(&v.to_ne_bytes());
            }
            4 => b.truncate(rng.below(len + 1)),
            5 => {
                let n = 1 + rng.below(64);
                b.extend((0..n).map(|_| rng.next() as u8));
            }
            6 if !other.is_empty() => {
                // Splice: a piece of another corpus file at the same offset.
                let i = rng.below(other.len());
                let n = rng.below(other.len() - i + 1);
                if i + n <= b.len() {
                    b[i..i + n].copy_from_slice(&other[i..i + n]);
                }
            }
            _ if len > 0 => b[0] ^= 1, // toggle resealing
            _ => b.push(rng.next() as u8),
        }
    }
    b
}

#[test]
fn mutations_of_the_corpus() {
    let iters: usize = std::env::var("FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, f) in oracles::TARGETS {
        let files = corpus(name);
        let mut failures = Vec::new();
        for (i, (path, seed)) in files.iter().enumerate() {
            let other = &files[(i + 1) % files.len()].1;
            for n in 0..iters {
                let input = mutate(&mut rng, seed, other);
                if let Err(e) = check(f, &input, &|| format!("{} mutation {n}", path.display())) {
                    failures.push(format!("{e}\n  input: {input:02x?}"));
                }
            }
            // Random bytes too, of the seed's length and shorter.
            let noise: Vec<u8> = (0..rng.below(seed.len() + 1)).map(|_| rng.next() as u8).collect();
            if let Err(e) = check(f, &noise, &|| format!("{name}: random bytes")) {
                failures.push(e);
            }
        }
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures[..failures.len().min(5)].join("\n")
        );
    }
}
