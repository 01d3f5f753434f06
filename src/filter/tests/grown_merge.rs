//! Merge and intersect of filters that grow (doc/DESIGN.md, G5, and
//! §8 M6-M10): stage by stage for a merge, stage 0 alone and only with a
//! one-stage operand for an intersect, refused with the reason otherwise.

use super::*;
use crate::math::scheme::Layout as L;

fn grown(layout: L, factor: u32) -> Options {
    Options {
        layout: Some(layout),
        grow: Some(GrowOptions::new(factor, None).unwrap()),
        ..Options::default()
    }
}

fn item(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// A grown filter of first capacity 1000 holding items `from..to`.
fn holding(layout: L, from: u64, to: u64) -> Filter {
    let f = Filter::new_anonymous(1000, 0.01, grown(layout, 2)).unwrap();
    for i in from..to {
        f.add(&item(i)).unwrap();
    }
    f
}

/// Each published stage's fill word.
fn fills(f: &Filter) -> Vec<u64> {
    f.stage_stats().iter().map(|s| s.fill).collect()
}

/// A merge of grown filters, whichever has more stages, leaves every item
/// of both present, the stage count the larger of the two, the operand
/// unchanged, and each stage's fill word at least its own before and at
/// least the items its set bits estimate.
#[test]
fn merge_keeps_every_item_of_both_whatever_their_stages() {
    for layout in [L::Standard, L::Blocked] {
        // (items of A, items of B): A fewer stages, more, as many.
        for (na, nb) in [(500u64, 6000u64), (6000, 500), (2500, 2600)] {
            let a = holding(layout, 0, na);
            let b = holding(layout, 1_000_000, 1_000_000 + nb);
            let (sa, sb) = (a.stages(), b.stages());
            let before = fills(&a);
            let b_bytes = b.serialize().unwrap();
            a.merge(&b).unwrap();
            assert_eq!(a.stages(), sa.max(sb), "{layout:?} {na}/{nb}");
            let lost_a = (0..na).filter(|&i| !a.contains(&item(i))).count();
            let lost_b = (0..nb).filter(|&i| !a.contains(&item(1_000_000 + i))).count();
            assert_eq!((lost_a, lost_b), (0, 0), "{layout:?} {na}/{nb}: items lost");
            assert!(b.serialize().unwrap() == b_bytes, "{layout:?}: the operand changed");
            let after = fills(&a);
            for (j, st) in a.stage_stats().iter().enumerate() {
                assert!(
                    after[j] >= before.get(j).copied().unwrap_or(0),
                    "{layout:?} stage {j}: fill lowered"
                );
                let g = a.grown().unwrap().all[j].geometry;
                let set: u64 = a
                    .stage_bits(a.grown().unwrap(), j as u32)
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed).count_ones() as u64)
                    .sum();
                assert!(
                    after[j] >= g.count_from_bits_set(set),
                    "{layout:?} stage {j}: fill {} below its bits",
                    after[j]
                );
                assert_eq!(st.capacity, g.capacity);
            }
            // Stage 0 of both was full: the merged one holds about twice
            // its capacity, and says so.
            if sa > 1 && sb > 1 {
                assert!(after[0] > 1500, "{layout:?}: stage 0 fill {} after the merge", after[0]);
            }
        }
    }
}

/// A merge that overfills the newest stage makes the next new item add a
/// stage: the fill word counts the merged items.
#[test]
fn a_merge_that_overfills_the_newest_stage_makes_the_next_item_grow_it() {
    for layout in [L::Standard, L::Blocked] {
        let a = holding(layout, 0, 700);
        let b = holding(layout, 10_000, 10_700);
        assert_eq!((a.stages(), b.stages()), (1, 1));
        a.merge(&b).unwrap();
        assert_eq!(a.stages(), 1);
        assert!(fills(&a)[0] > 1000, "{layout:?}: fill {:?}", fills(&a));
        assert!(a.add(b"one more").unwrap());
        assert_eq!(a.stages(), 2, "{layout:?}: the next new item grows the filter");
        assert!((0..700).all(|i| a.contains(&item(i)) && a.contains(&item(10_000 + i))));
    }
}

/// Intersect with a one-stage operand: every item both hold stays (A's
/// later stages are kept as they are), most items only A holds in stage 0
/// go; with an operand of more stages it is refused and nothing changes.
#[test]
fn intersect_with_one_stage_keeps_what_both_hold_and_refuses_more() {
    for layout in [L::Standard, L::Blocked] {
        // A: items 0..3000 over stages 0 (about 0..1000) and 1. An item
        // stage 0 answers for wrongly is not stored in stage 1: only those
        // new in stage 1 are A's there.
        let a = Filter::new_anonymous(1000, 0.01, grown(layout, 2)).unwrap();
        let mut in_stage_1 = Vec::new();
        for i in 0..3000u64 {
            let later = a.stages() == 2;
            if a.add(&item(i)).unwrap() && later {
                in_stage_1.push(i);
            }
        }
        assert_eq!(a.stages(), 2);
        assert!(in_stage_1.len() > 1900, "{} items in stage 1", in_stage_1.len());
        // B: some of A's stage 0, some of A's stage 1, some of its own.
        let b = Filter::new_anonymous(1000, 0.01, grown(layout, 2)).unwrap();
        for i in (0..300).chain(2000..2300).chain(50_000..50_300) {
            b.add(&item(i)).unwrap();
        }
        assert_eq!(b.stages(), 1);
        let refused = holding(layout, 100_000, 102_000);
        assert_eq!(refused.stages(), 2);
        let before = a.serialize().unwrap();
        let e = a.intersect(&refused).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Mismatch);
        assert!(
            e.msg
                .starts_with("the other filter has grown to 2 stages; an item both filters hold"),
            "{}",
            e.msg
        );
        assert!(
            a.serialize().unwrap() == before,
            "{layout:?}: a refused intersect changed the filter"
        );

        let fill_before = fills(&a);
        a.intersect(&b).unwrap();
        assert_eq!(a.stages(), 2);
        assert_eq!(fills(&a), fill_before, "intersect leaves the fill words");
        let lost = (0..300).chain(2000..2300).filter(|&i| !a.contains(&item(i))).count();
        assert_eq!(lost, 0, "{layout:?}: items both hold lost");
        // Only A, in stage 1: kept, as stage 1 is.
        assert!(in_stage_1.iter().all(|&i| a.contains(&item(i))), "{layout:?}");
        // Only A, in stage 0 (300..900): most are gone.
        let kept = (300..900).filter(|&i| a.contains(&item(i))).count();
        assert!(kept < 60, "{layout:?}: {kept} of 600 items only A held in stage 0 kept");
        // Only B: not added.
        let b_only = (50_000..50_300).filter(|&i| a.contains(&item(i))).count();
        assert!(b_only < 30, "{layout:?}: {b_only} items only B held");
    }
}

/// Compatibility: a grown filter with a plain one, or one that grows by
/// another factor or bound, is refused naming the growth of each.
#[test]
fn other_growth_is_a_mismatch() {
    let a = holding(L::Standard, 0, 10);
    let plain = Filter::new_anonymous(1000, 0.01, Options::default()).unwrap();
    let by4 = Filter::new_anonymous(1000, 0.01, grown(L::Standard, 4)).unwrap();
    let bounded = Filter::new_anonymous(
        1000,
        0.01,
        Options {
            grow: Some(GrowOptions::new(2, Some(5000)).unwrap()),
            ..grown(L::Standard, 2)
        },
    )
    .unwrap();
    for (other, want) in [
        (&plain, "growth mismatch (grows by 2 vs does not grow)"),
        (&by4, "growth mismatch (grows by 2 vs grows by 4)"),
        (&bounded, "growth mismatch (grows by 2 vs grows by 2 up to 5000 items)"),
    ] {
        for e in [a.merge(other).unwrap_err(), a.intersect(other).unwrap_err()] {
            assert_eq!(e.kind, ErrorKind::Mismatch);
            assert_eq!(e.msg, want);
        }
    }
    let e = plain.merge(&a).unwrap_err();
    assert_eq!(e.msg, "growth mismatch (does not grow vs grows by 2)");
    let blocked = holding(L::Blocked, 0, 10);
    assert!(a.merge(&blocked).unwrap_err().msg.starts_with("layout mismatch"));
}

/// A merge or an intersect with the same filter, through this handle or
/// another of its file, changes nothing.
#[test]
fn the_same_filter_is_a_no_op() {
    let dir = crate::shm::region::scratch_dir("grown-merge-self");
    let path = dir.join("f.bloom");
    let a = Filter::open_file(&path, 500, 0.01, grown(L::Standard, 2)).unwrap();
    for i in 0..2000u64 {
        a.add(&item(i)).unwrap();
    }
    let b = Filter::open_file(&path, 500, 0.01, Options::default()).unwrap();
    assert_eq!(b.stages(), 3);
    let before = a.serialize().unwrap();
    a.merge(&a).unwrap();
    a.merge(&b).unwrap();
    a.intersect(&b).unwrap();
    assert!(a.serialize().unwrap() == before);
    drop((a, b));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Merged stages serialize and come back whole; a second handle of the
/// file sees the stages a merge added; the journal leaves no bytes in the
/// published stages and the file keeps working after.
#[test]
fn merged_stages_round_trip_and_are_seen_by_other_handles() {
    let dir = crate::shm::region::scratch_dir("grown-merge-file");
    let path = dir.join("f.bloom");
    let a = Filter::open_file(&path, 1000, 0.01, grown(L::Blocked, 2)).unwrap();
    let other = Filter::open_file(&path, 1000, 0.01, Options::default()).unwrap();
    for i in 0..300u64 {
        a.add(&item(i)).unwrap();
    }
    let b = holding(L::Blocked, 1_000_000, 1_007_000);
    assert_eq!(b.stages(), 3);
    a.merge(&b).unwrap();
    assert_eq!(other.stages(), 3);
    let all = |f: &Filter| (0..300).chain(1_000_000..1_007_000).all(|i| f.contains(&item(i)));
    assert!(all(&other), "a second handle sees every item");
    let bytes = a.serialize().unwrap();
    let d = Filter::deserialize(&bytes, None, 0).unwrap();
    assert_eq!(d.stages(), 3);
    assert!(all(&d));
    assert_eq!(fills(&d), fills(&a));
    // Merged again (a journal where stage 3 goes), then grown past it:
    // the new stage is empty but for what was added to it.
    a.merge(&b).unwrap();
    for i in 2_000_000..2_010_000u64 {
        a.add(&item(i)).unwrap();
    }
    assert!(a.stages() >= 4);
    assert!(all(&other));
    let absent = (5_000_000..5_020_000u64).filter(|&i| other.contains(&item(i))).count();
    assert!(absent < 20_000 / 100, "{absent} false positives of 20000");
    drop((a, other));
    std::fs::remove_dir_all(&dir).unwrap();
}
