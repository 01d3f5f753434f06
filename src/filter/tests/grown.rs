//! A filter that grows, in one process: stages added as it fills, every
//! item kept, the rate within `fp_rate`, the bound, files and handles.

use super::*;
use crate::math::scheme::Layout as L;

fn grown(layout: L, factor: u32, max: Option<u64>) -> Options {
    Options {
        layout: Some(layout),
        grow: Some(GrowOptions::new(factor, max).unwrap()),
        ..Options::default()
    }
}

fn item(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// Past its first capacity the filter adds stages, keeps every item and
/// answers absent items within its rate; capacity and bits are the
/// published stages' totals.
#[test]
fn it_grows_and_keeps_every_item_within_its_rate() {
    for layout in [L::Standard, L::Blocked] {
        let f = Filter::new_anonymous(1000, 0.01, grown(layout, 2, None)).unwrap();
        assert_eq!(f.stages(), 1);
        assert_eq!(f.total_capacity(), 1000);
        let n = 30_000u64;
        let mut new = 0;
        for i in 0..n {
            new += f.add(&item(i)).unwrap() as u64;
        }
        // 1000 + 2000 + 4000 + 8000 + 16000 = 31000 >= 30000 > 15000.
        assert_eq!(f.stages(), 5, "{layout:?}");
        assert_eq!(f.total_capacity(), 31_000);
        let bits: u64 = f.stage_stats().iter().map(|s| s.bits).sum();
        assert_eq!(f.total_bits(), bits);
        // At most a few items collide with earlier ones (fp_rate 0.01).
        assert!(new > n - n / 50 && new <= n, "{layout:?}: {new} new");
        for i in 0..n {
            assert!(f.contains(&item(i)), "{layout:?}: item {i} lost");
            assert!(!f.add(&item(i)).unwrap(), "{layout:?}: item {i} new twice");
        }
        let absent = 200_000u64;
        let fp = (n..n + absent).filter(|&i| f.contains(&item(i))).count() as f64 / absent as f64;
        assert!(fp <= 0.01, "{layout:?}: false positive rate {fp}");
        let c = f.count() as f64;
        assert!((c - n as f64).abs() < n as f64 * 0.1, "{layout:?}: count {c}");
    }
}

/// At `max_capacity` a new item is refused naming the bound; every item
/// already added is kept, and present items are still "not new".
#[test]
fn max_capacity_refuses_new_items_and_keeps_the_rest() {
    let f = Filter::new_anonymous(100, 0.01, grown(L::Standard, 2, Some(700))).unwrap();
    let mut added = Vec::new();
    let mut refused = None;
    for i in 0..2000u64 {
        match f.add(&item(i)) {
            Ok(_) => added.push(i),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("a new item past max_capacity is refused");
    assert_eq!(e.kind, ErrorKind::Full);
    assert!(e.msg.contains("max_capacity of 700"), "{}", e.msg);
    assert!(added.len() >= 690 && added.len() <= 720, "{} added", added.len());
    assert_eq!(f.total_capacity(), 700);
    for &i in &added {
        assert!(f.contains(&item(i)));
        assert!(!f.add(&item(i)).unwrap());
    }
}

/// Bad growth options are refused naming them; grow with a window, and
/// the datasketches layout, are refused.
#[test]
fn bad_growth_is_refused() {
    for f in [0, 1, 17, 100] {
        let e = GrowOptions::new(f, None).unwrap_err();
        assert!(e.msg.contains("grow must be an integer from 2 to 16"), "{}", e.msg);
    }
    let e = Filter::new_anonymous(1000, 0.01, grown(L::Standard, 2, Some(999)))
        .err()
        .unwrap();
    assert!(
        e.msg.contains("max_capacity 999 is below the capacity 1000"),
        "{}",
        e.msg
    );
    let e = Filter::new_anonymous(1000, 0.01, grown(L::DataSketches, 2, None))
        .err()
        .unwrap();
    assert!(e.msg.contains("does not grow"), "{}", e.msg);
    let opts = Options {
        window: Some(WindowOptions {
            window_ns: None,
            generations: 4,
        }),
        ..grown(L::Standard, 2, None)
    };
    let e = Filter::new_anonymous(1000, 0.01, opts).err().unwrap();
    assert!(e.msg.contains("grow and window"), "{}", e.msg);
}

/// A second handle of the file sees the stages the first added, a
/// reopen keeps the stored growth, a different one is refused; clear
/// drops the later stages and the filter grows again from empty.
#[test]
fn handles_of_a_file_see_its_stages() {
    let dir = crate::shm::region::scratch_dir("grown-file");
    let path = dir.join("f.bloom");
    let a = Filter::open_file(&path, 500, 0.01, grown(L::Blocked, 4, None)).unwrap();
    let b = Filter::open_file(&path, 500, 0.01, Options::default()).unwrap();
    for i in 0..5000u64 {
        a.add(&item(i)).unwrap();
    }
    assert_eq!(a.stages(), 3);
    assert_eq!(b.stages(), 3);
    for i in 0..5000u64 {
        assert!(b.contains(&item(i)), "item {i}");
        assert!(!b.add(&item(i)).unwrap(), "item {i}");
    }
    let e = Filter::open_file(&path, 500, 0.01, grown(L::Blocked, 2, None))
        .err()
        .unwrap();
    assert!(
        e.msg
            .contains("growth mismatch (the filter grows by 4, not grows by 2)"),
        "{}",
        e.msg
    );
    drop(b);
    let b = Filter::open_file(&path, 500, 0.01, grown(L::Blocked, 4, None)).unwrap();
    assert_eq!(b.stages(), 3);
    b.clear().unwrap();
    assert_eq!(a.stages(), 1);
    assert!(a.is_empty());
    assert!((0..5000u64).all(|i| !a.contains(&item(i))));
    for i in 10_000..15_000u64 {
        assert!(a.add(&item(i)).unwrap() || a.contains(&item(i)));
    }
    assert_eq!(b.stages(), 3);
    assert!((10_000..15_000u64).all(|i| b.contains(&item(i))));
    // Stages added again are zero: the items cleared stay gone.
    let back = (0..5000u64).filter(|&i| b.contains(&item(i))).count();
    assert!(back < 100, "{back} cleared items back");
    drop((a, b));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The published stage count is read from the shared file, untrusted (C6,
/// §8 N8): a word of 0 reads as one stage, a word past the stage limit as
/// the limit; a file that does not hold the stages read is refused,
/// naming the size they need.
#[test]
fn a_stage_count_out_of_range_is_clamped() {
    use std::os::unix::fs::FileExt;
    let dir = crate::shm::region::scratch_dir("grown-count");
    let set_count = |path: &std::path::Path, count: u32| {
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all_at(&count.to_ne_bytes(), crate::shm::format::OFF_STAGES)
            .unwrap();
    };
    // 500 + 1000 + 2000: three stages, the last one the limit.
    for (name, max) in [("bounded", Some(3500)), ("unbounded", None)] {
        let path = dir.join(name);
        let f = Filter::open_file(&path, 500, 0.01, grown(L::Standard, 2, max)).unwrap();
        for i in 0..3000u64 {
            f.add(&item(i)).unwrap();
        }
        assert_eq!(f.stages(), 3, "{name}");
        drop(f);
        set_count(&path, 0);
        let f = Filter::open_file(&path, 500, 0.01, Options::default()).unwrap();
        assert_eq!(f.stages(), 1, "{name}: a count of 0 is one stage");
        drop(f);
        set_count(&path, u32::MAX);
        match Filter::open_file(&path, 500, 0.01, Options::default()) {
            Ok(f) => {
                assert_eq!(max, Some(3500), "{name}: opened with more stages than the file holds");
                assert_eq!(f.stages(), 3, "{name}: a count past the limit is the limit");
                assert!((0..3000u64).all(|i| f.contains(&item(i))), "{name}");
            }
            Err(e) => {
                assert_eq!(max, None, "{name}: {}", e.msg);
                assert!(e.msg.contains("file is shorter than its stages"), "{name}: {}", e.msg);
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A handle's single calls look through lanes it keeps for each stage
/// count (`KeptLanes`): one that asked at every count while another handle
/// grew the filter finds each item as soon as it is added, in every
/// stage, both layouts; after a clear and a new growth it finds the new
/// items and not the cleared ones.
#[test]
fn single_calls_keep_up_with_every_stage() {
    for layout in [L::Standard, L::Blocked] {
        let dir = crate::shm::region::scratch_dir("grown-lanes");
        let path = dir.join("f.bloom");
        let a = Filter::open_file(&path, 200, 0.01, grown(layout, 2, None)).unwrap();
        let b = Filter::open_file(&path, 200, 0.01, Options::default()).unwrap();
        let mut counts = Vec::new();
        for i in 0..6000u64 {
            assert!(a.add(&item(i)).unwrap() || b.contains(&item(i)), "{layout:?}: item {i}");
            assert!(b.contains(&item(i)), "{layout:?}: item {i} at {} stages", b.stages());
            if counts.last() != Some(&b.stages()) {
                counts.push(b.stages());
            }
        }
        assert_eq!(counts, [1, 2, 3, 4, 5], "{layout:?}: the stage counts b asked at");
        assert!((0..6000u64).all(|i| !b.add(&item(i)).unwrap()), "{layout:?}");
        // Absent items within the rate (0.01; 100 expected of 10 000).
        let fp = (1_000_000..1_010_000u64).filter(|&i| b.contains(&item(i))).count();
        assert!(fp < 200, "{layout:?}: {fp} of 10000 absent items found");
        a.clear().unwrap();
        assert_eq!(b.stages(), 1);
        for i in 10_000..13_000u64 {
            a.add(&item(i)).unwrap();
        }
        assert_eq!(b.stages(), 4);
        assert!((10_000..13_000u64).all(|i| b.contains(&item(i))), "{layout:?}");
        let back = (0..6000u64).filter(|&i| b.contains(&item(i))).count();
        assert!(back < 120, "{layout:?}: {back} cleared items back");
        drop((a, b));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// The batches answer as single calls, item by item: `add_many` on one
/// filter and `add` on a twin tell the same items new (duplicates within
/// a batch and items already in older stages among them), with a results
/// array and without, across a growth to many stages; then
/// `contains_many` answers as `contains` for items held in every stage
/// and for absent ones.
#[test]
fn batches_answer_as_single_calls() {
    for layout in [L::Standard, L::Blocked] {
        for factor in [2, 4] {
            let batch = Filter::new_anonymous(100, 0.01, grown(layout, factor, None)).unwrap();
            let single = Filter::new_anonymous(100, 0.01, grown(layout, factor, None)).unwrap();
            let bare = Filter::new_anonymous(100, 0.01, grown(layout, factor, None)).unwrap();
            let mut next = 0u64;
            for (round, size) in [1usize, 7, 255, 256, 257, 1000, 3000, 5000, 9000]
                .into_iter()
                .enumerate()
            {
                // New items, a few twice, and some added rounds ago.
                let mut keys: Vec<[u8; 8]> = (0..size as u64).map(|i| item(next + i)).collect();
                for j in (0..size).step_by(5) {
                    keys.push(item(next + j as u64));
                    keys.push(item((j as u64 * 7919) % (next + 1)));
                }
                next += size as u64;
                let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                let mut r = vec![9u8; items.len()];
                let n = batch.add_many(&items, Some(&mut r)).unwrap();
                let want: Vec<u8> = items.iter().map(|i| single.add(i).unwrap() as u8).collect();
                assert_eq!(r, want, "{layout:?} grow {factor} round {round}");
                assert_eq!(n, want.iter().map(|&w| w as u64).sum::<u64>());
                assert_eq!(
                    bare.add_many(&items, None).unwrap(),
                    n,
                    "{layout:?} grow {factor} round {round}"
                );
                assert_eq!(batch.stages(), single.stages());
            }
            assert!(
                batch.stages() >= 5,
                "{layout:?} grow {factor}: {} stages",
                batch.stages()
            );
            let keys: Vec<[u8; 8]> = (0..next + 20_000).map(item).collect();
            let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            let mut r = vec![9u8; items.len()];
            let n = batch.contains_many(&items, Some(&mut r));
            let want: Vec<u8> = items.iter().map(|i| batch.contains(i) as u8).collect();
            assert_eq!(r, want, "{layout:?} grow {factor}");
            assert!(
                r[..next as usize].iter().all(|&x| x == 1),
                "{layout:?} grow {factor}: an item lost"
            );
            assert!(r[next as usize..].contains(&0));
            assert_eq!(n, want.iter().map(|&w| w as u64).sum::<u64>());
            assert_eq!(batch.contains_many(&items, None), n);
            assert_eq!(bare.contains_many(&items, None), n);
        }
    }
}

/// A batch that reaches `max_capacity` stops at the item a single add
/// refuses, and says how many items went in before it; those are kept.
#[test]
fn a_batch_at_the_bound_says_where_it_stopped() {
    for layout in [L::Standard, L::Blocked] {
        let batch = Filter::new_anonymous(100, 0.01, grown(layout, 2, Some(700))).unwrap();
        let single = Filter::new_anonymous(100, 0.01, grown(layout, 2, Some(700))).unwrap();
        // Items in the filter already come first in the batch: present,
        // not refused.
        let keys: Vec<[u8; 8]> = (0..2000u64).map(item).collect();
        let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        batch.add_many(&items[..300], None).unwrap();
        for i in &items[..300] {
            single.add(i).unwrap();
        }
        let stop = 300 + items[300..].iter().position(|i| single.add(i).is_err()).unwrap();
        let e = batch.add_many(&items, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Full);
        let said = format!("the first {stop} items of this batch were added, none after");
        assert!(e.msg.contains(&said), "{layout:?}: {} (expected {said})", e.msg);
        assert!(items[..stop].iter().all(|i| batch.contains(i)), "{layout:?}");
    }
}
