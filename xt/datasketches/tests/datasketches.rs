//! The `datasketches` layout against Apache DataSketches itself: the
//! `datasketches` crate 0.6.0 (feature `bloom`), in a crate of its own so
//! that neither the library nor its lock file holds it.
//!
//! Items go in as raw bytes — a newtype whose `Hash` writes the bytes alone,
//! which is how DataSketches' Java and C++ versions hash a byte array (Rust's
//! own `Hash` of a slice would add a length prefix) — and as `u64`, which
//! the crate hashes as its 8 little-endian bytes. For several seeds,
//! capacities and rates: our image equals theirs byte for byte; theirs read
//! by us answers every query as theirs; ours read by the crate answers as
//! ours; a union and an intersection across the two agree.

use std::hash::{Hash, Hasher};

use bloomfilter_shared::hooks::datasketches::{deserialize_to, write};
use bloomfilter_shared::hooks::ffi::BFS_DATASKETCHES_SEED;
use bloomfilter_shared::{Filter, Layout, Options, Target};
use datasketches::bloom::{BloomFilter, BloomFilterBuilder};

/// A byte string hashed as DataSketches' Java and C++ versions hash a byte
/// array: its bytes, nothing else.
struct Raw<'a>(&'a [u8]);

impl Hash for Raw<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.0)
    }
}

/// One item of the test, as both sides take it.
#[derive(Clone)]
enum Item {
    Bytes(Vec<u8>),
    Long(u64),
}

impl Item {
    fn ours(&self) -> Vec<u8> {
        match self {
            Item::Bytes(b) => b.clone(),
            Item::Long(x) => x.to_le_bytes().to_vec(),
        }
    }
    fn insert(&self, t: &mut BloomFilter) {
        match self {
            Item::Bytes(b) => t.insert(Raw(b)),
            Item::Long(x) => t.insert(*x),
        }
    }
    fn in_theirs(&self, t: &BloomFilter) -> bool {
        match self {
            Item::Bytes(b) => t.contains(&Raw(b)),
            Item::Long(x) => t.contains(x),
        }
    }
}

/// `n` items from `state`: byte strings of 0 to 80 bytes (both sides of
/// XXH64's 32-byte stripe) and longs, alternately.
fn items(state: &mut u64, n: usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            let x = *state;
            if i % 2 == 0 {
                Item::Bytes(
                    (0..(x % 81) as usize)
                        .map(|j| (x >> (j % 8 * 8)) as u8 ^ j as u8)
                        .collect(),
                )
            } else {
                Item::Long(x)
            }
        })
        .collect()
}

fn ours(cap: u64, rate: f64, seed: u64) -> Filter {
    let o = Options {
        seed,
        layout: Some(Layout::DataSketches),
        ..Options::default()
    };
    Filter::new_anonymous(cap, rate, o).unwrap()
}

fn theirs(cap: u64, rate: f64, seed: u64) -> BloomFilter {
    BloomFilterBuilder::with_accuracy(cap, rate).seed(seed).build().unwrap()
}

fn read(bytes: &[u8]) -> Filter {
    deserialize_to(bytes, Target::Anonymous, None, None).unwrap()
}

const SEEDS: [u64; 4] = [9001, 0, 42, u64::MAX];
const SIZES: [(u64, f64); 5] = [(1, 0.5), (37, 0.3), (100, 0.01), (1000, 0.001), (5000, 0.05)];

#[test]
fn the_default_seed_is_datasketches() {
    let t = BloomFilterBuilder::with_accuracy(100, 0.01).build().unwrap();
    assert_eq!(t.seed(), BFS_DATASKETCHES_SEED);
}

#[test]
fn same_geometry_and_image_byte_for_byte() {
    let mut state = 0x9e37_79b9_7f4a_7c15;
    for seed in SEEDS {
        for (cap, rate) in SIZES {
            let (o, mut t) = (ours(cap, rate, seed), theirs(cap, rate, seed));
            assert_eq!(o.geometry().m, t.capacity() as u64, "m for {cap} at {rate}");
            assert_eq!(o.geometry().k, t.num_hashes() as u32, "k for {cap} at {rate}");
            // Empty: 24 bytes each.
            assert_eq!(write(&o).unwrap(), t.serialize(), "empty, seed {seed}, {cap} at {rate}");
            for it in items(&mut state, cap as usize) {
                let was = match &it {
                    Item::Bytes(b) => t.contains_and_insert(&Raw(b)),
                    Item::Long(x) => t.contains_and_insert(x),
                };
                assert_eq!(o.add(&it.ours()).unwrap(), !was, "seed {seed}, {cap} at {rate}");
            }
            assert_eq!(write(&o).unwrap(), t.serialize(), "seed {seed}, {cap} at {rate}");
        }
    }
}

/// Filled to capacity on one side, read on the other: every query (the
/// items added and as many others) answered alike, both ways.
#[test]
fn each_reads_the_others_image() {
    let mut state = 0x2545_f491_4f6c_dd1d;
    for seed in SEEDS {
        for (cap, rate) in SIZES {
            let added = items(&mut state, cap as usize);
            let others = items(&mut state, 2000);
            // Theirs, read by us.
            let mut t = theirs(cap, rate, seed);
            added.iter().for_each(|it| it.insert(&mut t));
            let mine = read(&t.serialize());
            assert_eq!((mine.seed(), mine.geometry().k as u16), (seed, t.num_hashes()));
            assert_eq!(mine.bits_set(), t.bits_used());
            let mut hits = 0;
            for it in added.iter().chain(&others) {
                let o = mine.contains(&it.ours());
                assert_eq!(o, it.in_theirs(&t), "seed {seed}, {cap} at {rate}");
                hits += o as usize;
            }
            assert!(hits >= added.len(), "no false negatives");
            // Ours, read by the crate.
            let o = ours(cap, rate, seed);
            added.iter().for_each(|it| {
                o.add(&it.ours()).unwrap();
            });
            let back = BloomFilter::deserialize(&write(&o).unwrap()).unwrap();
            assert_eq!(back.bits_used(), o.bits_set());
            for it in added.iter().chain(&others) {
                assert_eq!(
                    it.in_theirs(&back),
                    o.contains(&it.ours()),
                    "seed {seed}, {cap} at {rate}"
                );
            }
            // And the two round trips meet: the same bytes.
            assert_eq!(back.serialize(), t.serialize());
        }
    }
}

/// A union and an intersection, one operand from each side, give the same
/// filter whichever side computes them.
#[test]
fn union_and_intersection_across_the_two() {
    let mut state = 0x0123_4567_89ab_cdef;
    for seed in [9001, 7] {
        for (cap, rate) in [(500u64, 0.01), (64, 0.2)] {
            let a = items(&mut state, cap as usize);
            let b = items(&mut state, cap as usize);
            let both = items(&mut state, cap as usize / 2);
            // A on our side, B on theirs; the shared items on both.
            let oa = ours(cap, rate, seed);
            for it in a.iter().chain(&both) {
                oa.add(&it.ours()).unwrap();
            }
            let mut tb = theirs(cap, rate, seed);
            b.iter().chain(&both).for_each(|it| it.insert(&mut tb));
            let (a_img, b_img) = (write(&oa).unwrap(), tb.serialize());

            // Union: theirs of (A read by the crate) | B; ours of A | (B read by us).
            let mut tu = BloomFilter::deserialize(&a_img).unwrap();
            tu.union(&tb).unwrap();
            let ou = read(&a_img);
            ou.merge(&read(&b_img)).unwrap();
            assert_eq!(write(&ou).unwrap(), tu.serialize(), "union, seed {seed}");
            for it in a.iter().chain(&b).chain(&both) {
                assert!(ou.contains(&it.ours()) && it.in_theirs(&tu));
            }

            let mut ti = BloomFilter::deserialize(&a_img).unwrap();
            ti.intersect(&tb).unwrap();
            let oi = read(&a_img);
            oi.intersect(&read(&b_img)).unwrap();
            assert_eq!(write(&oi).unwrap(), ti.serialize(), "intersection, seed {seed}");
            for it in &both {
                assert!(oi.contains(&it.ours()) && it.in_theirs(&ti));
            }
            assert!(oi.bits_set() < ou.bits_set());
        }
    }
}

/// The explicit size (`bits`, `hashes`) is the builder's `with_size`: the
/// same words, the same image after the same items.
#[test]
fn explicit_size_is_with_size() {
    let mut state = 0x0bad_5eed;
    for (bits, k) in [(1u64, 1u32), (64, 3), (95_851, 7), (1000, 40)] {
        let o = Filter::new_anonymous(
            100,
            0.01,
            Options {
                seed: 5,
                layout: Some(Layout::DataSketches),
                size: Some((bits, k)),
                ..Options::default()
            },
        )
        .unwrap();
        let mut t = BloomFilterBuilder::with_size(bits, k as u16).seed(5).build().unwrap();
        assert_eq!(o.geometry().m, t.capacity() as u64, "{bits} bits");
        for it in items(&mut state, 50) {
            o.add(&it.ours()).unwrap();
            it.insert(&mut t);
        }
        assert_eq!(write(&o).unwrap(), t.serialize(), "{bits} bits, {k} hashes");
    }
}
