//! The filter's unit tests; the windowed ones in `window`.

use super::*;

mod grown;
mod grown_merge;
mod window;

use crate::filter::window::BETWEEN;

/// Two adders of an item in a fresh generation of a windowed blocked
/// filter (no stripe): A raises the generation's `last` from 0, then
/// B runs its whole add before A sets the bits. B finds no bits and
/// is told new; A finds B's, and must be told "not new" (an answer
/// from `last`'s old value, 0, would tell it new as well).
#[test]
fn a_fresh_generation_tells_one_of_two_lockfree_adders_new() {
    for rotate in [false, true] {
        let opts = Options {
            layout: Some(crate::math::scheme::Layout::Blocked),
            window: Some(WindowOptions {
                window_ns: Some(3600 * 1_000_000_000),
                generations: 4,
            }),
            ..Options::default()
        };
        let f = Filter::new_memfd("fresh", 10_000, 0.01, opts).unwrap();
        let fd = f.memfd();
        if rotate {
            f.add(b"warm").unwrap();
            f.rotate().unwrap(); // a generation a step has just published
        }
        let w = &f.win().unwrap().w;
        assert_eq!(f.last_word(f.load_view(w).pos).load(Ordering::Relaxed), 0);
        let b_new = std::sync::Arc::new(std::sync::Mutex::new(None));
        let b = b_new.clone();
        BETWEEN.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                // Another thread, so another slot: B's add is lock-free too.
                let r = std::thread::spawn(move || Filter::from_fd(fd).unwrap().add(b"item").unwrap())
                    .join()
                    .unwrap();
                *b.lock().unwrap() = Some(r);
            }))
        });
        let a_new = f.add(b"item").unwrap();
        let b_new = b_new.lock().unwrap().expect("B ran between A's two updates");
        assert!(b_new, "rotate {rotate}: B, first to set the bits, is new");
        assert!(!a_new, "rotate {rotate}: A told new beside B");
    }
}

/// The indexes of the set bits, in order.
fn set_positions(f: &Filter) -> Vec<u64> {
    let mut set = vec![];
    let mut i = 0u64;
    f.for_each_word(|w| {
        set.extend((0..64).filter(|b| w >> b & 1 == 1).map(|b| i * 64 + b));
        i += 1;
    });
    set
}

fn anon(cap: u64, rate: f64) -> Filter {
    Filter::new_anonymous(cap, rate, Options::default()).unwrap()
}

#[test]
fn add_contains_and_known_bits() {
    let f = anon(1000, 0.01);
    assert_eq!((f.geometry().k, f.geometry().m), (7, 16384));
    assert!(!f.contains(b"hello"));
    assert!(f.add(b"hello").unwrap());
    assert!(!f.add(b"hello").unwrap());
    assert!(f.contains(b"hello"));
    // The exact positions computed independently in hashing's tests.
    assert_eq!(set_positions(&f), [12050, 12435, 12820, 13205, 13590, 13975, 14360]);
    assert_eq!(f.bits_set(), 7);
    assert_eq!(f.count(), 1);
    // Both adds counted, new or not (§8 A6).
    assert_eq!(f.ops(), 2);
}

/// Each header makes its kind of handle (`Filter::from_region`), whichever
/// way the filter is opened: new, through its descriptor, and from its
/// portable bytes.
#[test]
fn each_header_makes_its_kind() {
    let kind = |f: &Filter| match f.kind {
        Kind::Plain => "plain",
        Kind::Windowed(_) => "windowed",
        Kind::Grown(_) => "grown",
    };
    let window = Some(WindowOptions {
        window_ns: None,
        generations: 3,
    });
    let grow = Some(GrowOptions::new(2, None).unwrap());
    for (opts, want) in [
        (Options::default(), "plain"),
        (
            Options {
                window,
                ..Options::default()
            },
            "windowed",
        ),
        (
            Options {
                grow,
                ..Options::default()
            },
            "grown",
        ),
    ] {
        let f = Filter::new_memfd("kinds", 1000, 0.01, opts).unwrap();
        assert_eq!(kind(&f), want, "new");
        assert_eq!(
            kind(&Filter::from_fd(f.memfd()).unwrap()),
            want,
            "{want}, through its descriptor"
        );
        let bytes = f.serialize().unwrap();
        assert_eq!(
            kind(&Filter::deserialize(&bytes, None, 0o600).unwrap()),
            want,
            "{want}, from its bytes"
        );
    }
}

/// `n` items `prefix-0`, `prefix-1`, ... cycling over `distinct` names.
fn keys(prefix: &str, n: u32, distinct: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{}", i % distinct).into_bytes())
        .collect()
}

/// Adds `added` items (`distinct` different ones) one by one to a filter
/// and as one batch to another of capacity `cap`, and checks they answer
/// alike; then checks `contains_many` against `contains` on the batch
/// filter for the first `n` of `probed` items, for each `n` of `lens`.
/// Returns the batch filter and its probe items.
fn check_batches(
    cap: u64,
    prefix: &str,
    added: u32,
    distinct: u32,
    probed: u32,
    lens: &[usize],
) -> (Filter, Vec<Vec<u8>>) {
    let a = anon(cap, 0.01);
    let b = anon(cap, 0.01);
    let items = keys(prefix, added, distinct);
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let single: Vec<u8> = refs.iter().map(|i| a.add(i).unwrap() as u8).collect();
    let mut batch = vec![9u8; refs.len()];
    let n = b.add_many(&refs, Some(&mut batch)).unwrap();
    assert_eq!(single, batch);
    assert_eq!(n, single.iter().map(|&x| x as u64).sum::<u64>());
    let probe = keys(prefix, probed, probed);
    let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
    for &n in lens {
        let mut res = vec![9u8; n];
        let present = b.contains_many(&prefs[..n], Some(&mut res));
        let expect: Vec<u8> = prefs[..n].iter().map(|p| b.contains(p) as u8).collect();
        assert_eq!(res, expect, "batch of {n}");
        assert_eq!(present, expect.iter().map(|&x| x as u64).sum::<u64>());
    }
    (b, probe)
}

#[test]
fn batches_match_single_calls() {
    // Every length below the lookahead, and the whole probe list.
    let lens: Vec<usize> = (0..10).chain([4000]).collect();
    let (b, probe) = check_batches(5000, "item", 3000, 2000, 4000, &lens);
    let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
    let mut res = vec![9u8; prefs.len()];
    b.contains_many(&prefs, Some(&mut res));
    assert!(res[..2000].iter().all(|&x| x == 1));
    // Batches shorter than the lookahead.
    for n in 0..10 {
        let mut r = vec![9u8; n];
        assert_eq!(b.contains_many(&prefs[..n], Some(&mut r)), n as u64);
    }
}

/// Both ways through `pipelined` see the same items, in the same order,
/// with the same hashes, and the early-exit test agrees with the full one.
#[test]
fn piped_and_item_by_item_runs_agree() {
    let f = anon(12_000_000, 0.01);
    let items = keys("p", 5_000, 5_000);
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    f.add_many(&refs[..2_500], None).unwrap();
    for all_words in [false, true] {
        let mut seen = [Vec::new(), Vec::new()];
        for (run, piped) in [false, true].into_iter().enumerate() {
            let Probing::Standard(p) = f.probing else {
                unreachable!()
            };
            let bits = f.words_slice();
            f.pipelined(&p, &refs, piped, all_words, |i, h, l| {
                seen[run].push((i, *h, p.contains_early(bits, l), p.contains(bits, l)));
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(seen[0].len(), refs.len());
        assert_eq!(seen[0], seen[1], "all_words {all_words}");
        assert!(seen[0].iter().all(|&(_, _, early, full)| early == full));
        // The filter is nearly empty: no false positive among the absent half.
        assert_eq!(seen[0].iter().filter(|s| s.3).count(), 2_500);
    }
}

/// The pipelined path (bit arrays of PIPELINE_MIN_BYTES and more) gives
/// exactly the results of single calls.
#[test]
fn pipelined_batches_match_single_calls() {
    assert!(anon(12_000_000, 0.01).geometry().bytes() >= PIPELINE_MIN_BYTES);
    let lens = [0, 1, 2 * DISTANCE - 1, 2 * DISTANCE, 2 * DISTANCE + 1, 40_000];
    check_batches(12_000_000, "big", 30_000, 20_000, 40_000, &lens);
}

/// The union and the intersection of filters that `make` gives: `a` holds
/// "x", `b` "y", `c` "y"; `a` is merged with `b`, then intersected with `c`.
/// Returns `a` (holding "y", not "x") and `b`.
fn merge_then_intersect(make: impl Fn() -> Filter) -> (Filter, Filter) {
    let a = make();
    let b = make();
    a.add(b"x").unwrap();
    b.add(b"y").unwrap();
    a.merge(&b).unwrap();
    assert!(a.contains(b"x") && a.contains(b"y"));
    let c = make();
    c.add(b"y").unwrap();
    a.intersect(&c).unwrap();
    assert!(a.contains(b"y") && !a.contains(b"x"));
    (a, b)
}

#[test]
fn set_operations() {
    let (a, b) = merge_then_intersect(|| anon(1000, 0.01));
    a.merge(&a).unwrap();
    a.intersect(&a).unwrap();
    assert!(a.contains(b"y"));
    let d = anon(10, 0.01);
    let e = a.merge(&d).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Mismatch);
    assert!(
        e.msg.starts_with("geometry mismatch (bits 16384 vs 128, hashes 7 vs 7"),
        "{}",
        e.msg
    );
    let s = Filter::new_anonymous(
        1000,
        0.01,
        Options {
            mode: 0,
            seed: 7,
            layout: None,
            window: None,
            size: None,
            grow: None,
        },
    )
    .unwrap();
    assert!(!a.is_compatible(&s));
    let e = a.intersect(&s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Mismatch);
    assert!(e.msg.starts_with("seed mismatch"), "{}", e.msg);
    a.invert().unwrap();
    assert_eq!(a.bits_set(), a.geometry().m - 7);
    a.clear().unwrap();
    assert_eq!(a.bits_set(), 0);
    a.freeze().unwrap();
    assert!(a.frozen());
    assert_eq!(a.add(b"z").unwrap_err().kind, ErrorKind::Frozen);
    assert_eq!(a.clear().unwrap_err().kind, ErrorKind::Frozen);
    assert_eq!(a.merge(&b).unwrap_err().kind, ErrorKind::Frozen);
}

/// A filter in a memfd of `len` bytes holding `image`, sealed as given.
fn sealed_memfd(image: &[u8], len: u64, seals: libc::c_int) -> std::fs::File {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::from(
        crate::sys::file::memfd_create(std::ffi::CStr::from_bytes_with_nul(b"sealed\0").unwrap()).unwrap(),
    );
    f.write_all_at(image, 0).unwrap();
    f.set_len(len).unwrap();
    crate::sys::file::add_seals(f.as_raw_fd(), seals).unwrap();
    f
}

fn image(f: &Filter) -> Vec<u8> {
    // SAFETY: the handle's mapping, its length, read while nothing
    // writes it.
    unsafe { std::slice::from_raw_parts(f.region.base(), f.region.len()) }.to_vec()
}

fn all_words(f: &Filter) -> Vec<u64> {
    let mut v = Vec::new();
    f.for_each_word(|w| v.push(w));
    v
}

/// A memfd sealed against growing (as earlier versions sealed them, or
/// as another program may) cannot hold a journal: merge and intersect
/// still work, in place, and the memfd is not grown (DESIGN G2).
#[test]
fn a_memfd_sealed_against_growing_merges_in_place() {
    use std::os::fd::AsRawFd;
    let a = anon(100_000, 0.01);
    let b = anon(100_000, 0.01);
    for i in 0..3000 {
        a.add(format!("a{i}").as_bytes()).unwrap();
        b.add(format!("b{i}").as_bytes()).unwrap();
    }
    let total = a.mmap_size();
    let fd = sealed_memfd(&image(&a), total, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW);
    let m = Filter::from_fd(fd.as_raw_fd()).unwrap();
    let or: Vec<u64> = all_words(&a).iter().zip(all_words(&b)).map(|(x, y)| x | y).collect();
    m.merge(&b).unwrap();
    assert_eq!(all_words(&m), or);
    assert_eq!(fd.metadata().unwrap().len(), total, "not grown");
    let c = anon(100_000, 0.01);
    c.add(b"a1").unwrap();
    m.intersect(&c).unwrap();
    assert!(m.contains(b"a1") && !m.contains(b"b1"));
    assert_eq!(all_words(&m), all_words(&c));
    assert_eq!(fd.metadata().unwrap().len(), total);
    assert_eq!(m.ops(), a.ops() + 2);
}

/// A memfd of this version is sealed against shrinking only: the
/// journal grows it, and its pages stay for the next one (no process
/// gives back pages another may map: shm::journal).
#[test]
fn a_memfd_grows_for_the_journal_and_keeps_it() {
    use std::os::unix::fs::MetadataExt;
    let a = Filter::new_memfd("grow", 1_000_000, 0.01, Options::default()).unwrap();
    let b = anon(1_000_000, 0.01);
    b.add(b"b").unwrap();
    let fd = a.memfd();
    let md = || {
        // SAFETY: borrowing the handle's descriptor for one fstat.
        let f = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        f.metadata().unwrap()
    };
    let total = a.mmap_size();
    assert_eq!(md().len(), total);
    a.merge(&b).unwrap();
    assert!(a.contains(b"b"));
    let (off, len) = format::journal(&a.region.header).unwrap();
    assert_eq!(md().len(), off + len, "grown to hold the journal");
    assert!(md().blocks() * 512 >= total + len, "the journal's pages are kept");
    a.merge(&b).unwrap();
    assert_eq!(md().len(), off + len, "the next merge reuses them");
    let seals = crate::sys::file::seals(fd).unwrap();
    assert_eq!(seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW), libc::F_SEAL_SHRINK);
    // Another handle through the descriptor maps only the filter.
    let again = Filter::from_fd(fd).unwrap();
    assert_eq!(again.mmap_size(), total);
    assert!(again.contains(b"b"));
}

#[test]
fn seeded_filter_uses_other_positions() {
    let a = Filter::new_anonymous(
        1000,
        0.01,
        Options {
            mode: 0,
            seed: 42,
            layout: None,
            window: None,
            size: None,
            grow: None,
        },
    )
    .unwrap();
    a.add(b"hello").unwrap();
    assert_eq!(set_positions(&a), [6220, 6714, 7208, 7702, 14659, 15153, 15647]);
}

fn blocked(cap: u64, rate: f64) -> Filter {
    let opts = Options {
        layout: Some(Layout::Blocked),
        ..Options::default()
    };
    Filter::new_anonymous(cap, rate, opts).unwrap()
}

/// The FP rate of a blocked filter filled to capacity, measured over
/// 10^6 absent items, is at most the requested one within 3 standard
/// errors, for the rates bench/RESULTS.md's table lists (both widths).
#[test]
fn blocked_fp_at_capacity_is_at_most_the_requested_rate() {
    for (rate, seed) in [(0.05, 0u64), (0.01, 1), (0.001, 2), (0.0001, 3)] {
        let cap = 100_000u64;
        let opts = Options {
            seed,
            layout: Some(Layout::Blocked),
            ..Options::default()
        };
        let f = Filter::new_anonymous(cap, rate, opts).unwrap();
        for i in 0..cap {
            f.add(&i.to_le_bytes()).unwrap();
        }
        let probes = 1_000_000u64;
        let fp = (cap..cap + probes).filter(|i| f.contains(&i.to_le_bytes())).count() as f64 / probes as f64;
        let se = (rate * (1.0 - rate) / probes as f64).sqrt();
        assert!(fp <= rate + 3.0 * se, "rate {rate}: measured {fp} ({:?})", f.geometry());
        // And not absurdly below it: the sizing is not wasting bits.
        assert!(fp >= rate * 0.5, "rate {rate}: measured {fp} ({:?})", f.geometry());
    }
}

/// Blocked filters: every item in one word (or block), a repeat add is
/// not new, the count estimate is close, and batches agree with single
/// calls on both the item-by-item and the pipelined path.
#[test]
fn blocked_items_batches_and_count() {
    for (cap, rate) in [(5000u64, 0.01), (5000, 0.001), (12_000_000, 0.01)] {
        let a = blocked(cap, rate);
        let b = blocked(cap, rate);
        assert_eq!(a.layout(), Layout::Blocked);
        let items = keys("blk", 30_000, 20_000);
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let single: Vec<u8> = refs.iter().map(|i| a.add(i).unwrap() as u8).collect();
        let mut batch = vec![9u8; refs.len()];
        let n = b.add_many(&refs, Some(&mut batch)).unwrap();
        assert_eq!(single, batch, "cap {cap} rate {rate}");
        assert_eq!(n, batch.iter().map(|&x| x as u64).sum::<u64>());
        assert!(a.contains_many(&refs, None) == refs.len() as u64, "a false negative");
        let probe = keys("other", 40_000, 40_000);
        let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
        let mut res = vec![9u8; prefs.len()];
        b.contains_many(&prefs, Some(&mut res));
        let expect: Vec<u8> = prefs.iter().map(|p| b.contains(p) as u8).collect();
        assert_eq!(res, expect);
        assert_eq!(a.serialize().unwrap(), b.serialize().unwrap());
        if cap == 5000 {
            continue;
        }
        // 20 000 distinct items in a large filter: the estimate is close.
        let c = a.count() as f64;
        assert!((c - 20_000.0).abs() < 200.0, "count {c}");
    }
    let f = blocked(1000, 0.01);
    f.add(b"hello").unwrap();
    let set = set_positions(&f);
    assert!(!set.is_empty() && set.len() <= f.geometry().k as usize);
    assert_eq!(set[0] / 64, set[set.len() - 1] / 64, "bits in one word: {set:?}");
    let f = blocked(1000, 0.0001);
    assert_eq!(f.geometry().scheme, crate::math::scheme::Scheme::Block128);
    f.add(b"hello").unwrap();
    let set = set_positions(&f);
    assert_eq!(set[0] / 128, set[set.len() - 1] / 128, "bits in one block: {set:?}");
    assert_eq!(f.count(), 1);
}

#[test]
fn blocked_set_operations_and_layout_mismatch() {
    let (a, _) = merge_then_intersect(|| blocked(1000, 0.01));
    let before = a.bits_set();
    a.invert().unwrap();
    assert_eq!(a.bits_set(), a.geometry().m - before);
    a.invert().unwrap();
    assert!(a.contains(b"y"));
    let s = anon(1000, 0.01);
    assert!(!a.is_compatible(&s) && !s.is_compatible(&a));
    for e in [a.merge(&s).unwrap_err(), s.intersect(&a).unwrap_err()] {
        assert_eq!(e.kind, ErrorKind::Mismatch);
        assert!(e.msg.starts_with("layout mismatch ("), "{}", e.msg);
    }
    a.clear().unwrap();
    assert_eq!(a.bits_set(), 0);
    assert!(a.add(b"z").unwrap());
    a.freeze().unwrap();
    assert_eq!(a.add(b"q").unwrap_err().kind, ErrorKind::Frozen);
    assert!(a.contains(b"z"));
}
