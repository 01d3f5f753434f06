//! Windowed filters: retention, steps, the spare, serialization, batches.

use super::*;
use crate::filter::window::{DRAIN_BACKOFF, DRAIN_LIMIT, SPARE_SLICE_WORDS};
use crate::math::rng::xorshift;
use crate::sys::clock::FakeClock;

fn windowed(window_ns: Option<u64>, g: u32, layout: Option<Layout>) -> Filter {
    let opts = Options {
        layout,
        window: Some(WindowOptions {
            window_ns,
            generations: g,
        }),
        ..Options::default()
    };
    Filter::new_anonymous(1000, 0.01, opts).unwrap()
}

/// Stepped by `rotate` only: an item added between two rotations is
/// seen through `g - 1` more and forgotten at the `g`th; re-adding it
/// starts its life over; one add per life is new. Both layouts.
#[test]
fn windowed_rotate_retention_is_exact() {
    for layout in [None, Some(Layout::Blocked)] {
        for g in [2u32, 4, 16] {
            let f = windowed(None, g, layout);
            assert_eq!(f.mmap_size(), format::ring_layout(f.geometry().m, g + 1).total);
            assert!(f.add(b"a").unwrap());
            assert!(!f.add(b"a").unwrap());
            for k in 1..=3 * g {
                f.rotate().unwrap();
                let alive = k % g != 0;
                assert_eq!(f.contains(b"a"), alive, "g {g} after {k} rotations");
                if !alive {
                    assert!(f.add(b"a").unwrap(), "g {g}: forgotten, so new again");
                }
            }
            // Re-adding extends: added, then re-added after g - 1 steps.
            let f = windowed(None, g, layout);
            f.add(b"b").unwrap();
            for _ in 0..g - 1 {
                f.rotate().unwrap();
            }
            assert!(!f.add(b"b").unwrap());
            for k in 1..g {
                f.rotate().unwrap();
                assert!(f.contains(b"b"), "g {g}: re-added, gone after {k}");
            }
            f.rotate().unwrap();
            assert!(!f.contains(b"b"), "g {g}: kept past g steps of its re-add");
            let w = f.window_stats().unwrap();
            assert_eq!((w.window_ns, w.generations, w.current_start_ns), (None, g, None));
            assert_eq!(w.current, 2 * g as u64 - 1, "one count per step");
        }
    }
}

/// A timed window, 200 ms, g = 2 and 4: seen within the window,
/// forgotten by window * g / (g - 1) plus one period. The clock is this
/// thread's fake one, moved 10 ms between looks: what is tested is the
/// window's arithmetic against the clock, not how fast the machine runs.
#[test]
fn windowed_real_time() {
    for g in [2u32, 4] {
        let clock = FakeClock::start();
        let f = windowed(Some(200_000_000), g, None);
        let (lower, upper) = f.window().unwrap().retention_bounds_ns().unwrap();
        let period = f.window().unwrap().period_ns().unwrap();
        let t0 = clock.now();
        let elapsed = || clock.now() - t0;
        assert!(f.add(b"x").unwrap());
        while elapsed() < lower * 9 / 10 {
            assert!(f.contains(b"x"), "g {g}: gone at {} ns", elapsed());
            f.add(b"other").unwrap();
            clock.advance(10_000_000);
        }
        clock.set(t0 + upper + period);
        f.add(b"noise").unwrap();
        assert!(!f.contains(b"x"), "g {g}: kept past {} ns", elapsed());
        assert!(f.add(b"x").unwrap(), "g {g}: forgotten, so new again");
        let w = f.window_stats().unwrap();
        assert!(w.current >= g as u64, "g {g}: steps taken {}", w.current);
    }
}

/// The same with the real clock, where a loaded machine may put any
/// pause between two lines: an answer of "absent" fails the test only
/// when the call ended before the item's lower bound (so its reading of
/// the clock came before it), and the forgetting is looked at after
/// sleeping past the upper bound from after the add (a sleep only ever
/// lasts longer). A tenth of the lower bound is left for the clock's
/// tick (`now_ns`).
#[test]
fn windowed_real_time_on_the_real_clock() {
    for g in [2u32, 4] {
        let f = windowed(Some(200_000_000), g, None);
        let (lower, upper) = f.window().unwrap().retention_bounds_ns().unwrap();
        let period = f.window().unwrap().period_ns().unwrap();
        let t0 = std::time::Instant::now();
        assert!(f.add(b"x").unwrap());
        let added = std::time::Instant::now();
        while (t0.elapsed().as_nanos() as u64) < lower * 9 / 10 {
            let seen = f.contains(b"x");
            let after = t0.elapsed();
            assert!(
                seen || after.as_nanos() as u64 >= lower * 9 / 10,
                "g {g}: gone at {after:?}"
            );
            f.add(b"other").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let past = std::time::Duration::from_nanos(upper + period);
        std::thread::sleep(past.saturating_sub(added.elapsed()));
        f.add(b"noise").unwrap();
        assert!(!f.contains(b"x"), "g {g}: kept past {:?}", added.elapsed());
        assert!(f.add(b"x").unwrap(), "g {g}: forgotten, so new again");
    }
}

/// A file keeps its window when reopened; another window is refused;
/// a plain filter's operations on all bits are refused.
#[test]
fn windowed_file_reopens_and_refuses() {
    let dir = region::scratch_dir("win");
    let path = dir.join("w.bf");
    let wo = WindowOptions {
        window_ns: Some(3_000_000_000),
        generations: 4,
    };
    let opts = Options {
        mode: 0o600,
        window: Some(wo),
        ..Options::default()
    };
    let a = Filter::open_file(&path, 1000, 0.01, opts).unwrap();
    assert!(a.add(b"kept").unwrap());
    let w = a.window().unwrap();
    drop(a);
    let b = Filter::open_file(&path, 1000, 0.01, Options::default()).unwrap();
    assert_eq!(b.window(), Some(w));
    assert!(b.contains(b"kept"));
    for other in [
        WindowOptions {
            window_ns: Some(2_000_000_000),
            generations: 4,
        },
        WindowOptions {
            window_ns: Some(3_000_000_000),
            generations: 3,
        },
    ] {
        let o = Options {
            window: Some(other),
            ..Options::default()
        };
        let e = Filter::open_file(&path, 1000, 0.01, o).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Mismatch);
        assert!(
            e.msg
                .starts_with("window mismatch (the filter has window 3s, 4 generations"),
            "{}",
            e.msg
        );
    }
    let plain = anon(1000, 0.01);
    let e = plain.rotate().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Arg);
    for e in [
        b.merge(&plain).unwrap_err(),
        plain.merge(&b).unwrap_err(),
        b.invert().unwrap_err(),
    ] {
        assert!(e.msg.ends_with("is not supported on a windowed filter"), "{}", e.msg);
    }
    b.clear().unwrap();
    assert!(!b.contains(b"kept"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A single `add` (its common case under the slot mark alone) and an
/// item of `add_many` (the batch's path) answer alike, step after step,
/// in both blocked layouts and the standard one.
#[test]
fn windowed_single_adds_answer_as_batches() {
    use crate::math::scheme::Scheme;
    for (layout, rate, scheme) in [
        (Layout::Standard, 0.01, Scheme::Standard),
        (Layout::Blocked, 0.01, Scheme::Word64),
        (Layout::Blocked, 0.001, Scheme::Block128),
    ] {
        let make = || {
            let window = Some(WindowOptions {
                window_ns: None,
                generations: 3,
            });
            let opts = Options {
                layout: Some(layout),
                window,
                ..Options::default()
            };
            Filter::new_anonymous(1000, rate, opts).unwrap()
        };
        let (one, many) = (make(), make());
        assert_eq!(one.geometry().scheme, scheme);
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for round in 0..40 {
            // Items drawn from a small pool: some new, some in older
            // generations, some in the current one.
            let items: Vec<Vec<u8>> = (0..50).map(|_| format!("item-{}", next() % 120).into_bytes()).collect();
            let refs: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
            let mut got = vec![0u8; refs.len()];
            many.add_many(&refs, Some(&mut got)).unwrap();
            let singles: Vec<u8> = refs.iter().map(|i| one.add(i).unwrap() as u8).collect();
            assert_eq!(singles, got, "{scheme:?}, round {round}");
            if round % 3 == 2 {
                one.rotate().unwrap();
                many.rotate().unwrap();
            }
        }
        assert_eq!(all_words(&one), all_words(&many), "{scheme:?}: the same bits");
    }
}

/// 128-bit blocks in a windowed filter: every generation's blocks are
/// 16-byte aligned and the compare-and-swap lands where it should.
#[test]
fn windowed_block128() {
    let opts = Options {
        layout: Some(Layout::Blocked),
        window: Some(WindowOptions {
            window_ns: None,
            generations: 4,
        }),
        ..Options::default()
    };
    let f = Filter::new_anonymous(1000, 0.001, opts).unwrap();
    assert_eq!(f.geometry().scheme, crate::math::scheme::Scheme::Block128);
    for round in 0..6u32 {
        let new = (0..500u32)
            .filter(|i| f.add(&(round * 1000 + i).to_le_bytes()).unwrap())
            .count();
        // At most a few false positives among 500 at 0.001.
        assert!(new >= 495, "round {round}: {new} new");
        f.rotate().unwrap();
    }
    assert!(
        (5000..5500u32).all(|i| f.contains(&i.to_le_bytes())),
        "no false negative"
    );
    let kept = (1000..1500u32).filter(|i| f.contains(&i.to_le_bytes())).count();
    assert!(kept <= 5, "round 1 forgotten after 5 rotations: {kept} left");
}

/// A blocked windowed filter is open to lock-free adds between steps;
/// a step closes it, steps, and opens it again. Left closed (as by a
/// stepper killed in between), the next add opens it, unless a stripe
/// held as by a stopped adder keeps the opening waiting: adds then go
/// through their stripes and answer as ever.
#[test]
fn windowed_blocked_steps_close_and_open_the_view_word() {
    let f = windowed(None, 3, Some(Layout::Blocked));
    let closed = || View::closed(f.view_word().load(Ordering::SeqCst));
    assert!(f.add(b"a").unwrap());
    assert!(!closed(), "open after an add");
    f.rotate().unwrap();
    assert!(!closed(), "open after a step");
    assert_eq!(f.window_stats().unwrap().current, 1);
    f.view_word().fetch_or(View::CLOSED, Ordering::SeqCst);
    assert_eq!(f.window_stats().unwrap().current, 1, "the flag is not part of the view");
    assert!(f.contains(b"a"));
    assert!(f.add(b"b").unwrap());
    assert!(!closed(), "opened by the next add");
    // Closed again, with a stripe held: the opening gives up after
    // DRAIN_LIMIT, and adds answer through their stripes.
    f.view_word().fetch_or(View::CLOSED, Ordering::SeqCst);
    let c = f.claim().unwrap().c;
    let s = f.window_stripe(&crate::math::hashing::hash_item(f.seed, b"held"));
    assert_eq!(f.shared().begin_add(s, c), Ok(true));
    assert!(!f.add(b"a").unwrap(), "present");
    assert!(closed(), "still closed");
    for i in 0..100u32 {
        let b = i.to_le_bytes();
        if f.window_stripe(&crate::math::hashing::hash_item(f.seed, &b)) != s {
            assert!(f.add(&b).unwrap() || f.contains(&b));
            assert!(!f.add(&b).unwrap(), "{i} added once");
        }
    }
    assert!(closed(), "left alone for DRAIN_BACKOFF");
    f.shared().end_add(s);
    f.win().unwrap().step_after.set(None);
    assert!(f.add(b"c").unwrap());
    assert!(!closed(), "opened once the stripe is free");
}

/// A lock-free add in flight (its slot's mark, held as by a stopped
/// process) keeps a blocked filter's step from landing: the step
/// closes the filter, gives up after DRAIN_LIMIT and leaves it closed
/// with the view unchanged; adds go on through their stripes. Once the
/// mark is gone the step lands and the filter opens.
#[test]
fn windowed_blocked_step_waits_for_lockfree_adds() {
    let f = windowed(None, 3, Some(Layout::Blocked));
    assert!(f.add(b"a").unwrap());
    let sh = f.shared();
    let other = sh.claim_slot(7, false).unwrap();
    let o = f.control_and_slot(other.claim()).unwrap();
    assert!(o.mark(), "a mark as a lock-free adder sets it");
    let c = f.claim().unwrap().c;
    let win = f.win().unwrap();
    let t = std::time::Instant::now();
    assert!(!f.try_step(win, now_ns(), true, c), "no step past a lock-free add");
    assert!(t.elapsed() >= DRAIN_LIMIT, "it waited {:?}", t.elapsed());
    assert!(View::closed(f.view_word().load(Ordering::SeqCst)));
    assert_eq!(f.window_stats().unwrap().current, 0);
    assert!(f.add(b"b").unwrap());
    assert!(!f.add(b"a").unwrap());
    o.unmark();
    f.win().unwrap().step_after.set(None);
    assert!(f.try_step(win, now_ns(), true, c));
    assert_eq!(f.window_stats().unwrap().current, 1);
    assert!(!View::closed(f.view_word().load(Ordering::SeqCst)));
    assert!(!f.add(b"b").unwrap(), "b in the previous generation");
    sh.release_slot(other);
}

/// An adder stopped holding its stripe: the cleaner gives up after
/// DRAIN_LIMIT, adds go on (paying that once per DRAIN_BACKOFF), steps
/// wait for the spare; once the stripe is free the next clear and step
/// happen.
///
/// How long the waits took depends on the machine (a loaded one stretches
/// a 20 ms drain to a second); what the design promises is how many there
/// are: one drain given up by the rotate, and by the adds at most one per
/// DRAIN_BACKOFF of their run. Those counts are asserted; the times are
/// printed, and bounded only by `NO_HANG`, far beyond any pause of a
/// loaded machine and far below a wait that never ends.
#[test]
fn windowed_stopped_adder_holds_up_no_adder() {
    const NO_HANG: std::time::Duration = std::time::Duration::from_secs(60);
    let f = windowed(None, 3, None);
    let c = f.claim().unwrap().c;
    let s = f.window_stripe(&crate::math::hashing::hash_item(f.seed, b"held"));
    assert_eq!(
        f.shared().begin_add(s, c),
        Ok(true),
        "a stripe held as by a stopped adder"
    );
    // The first step publishes the clean spare at once; clearing the
    // next one gives up on the held stripe.
    let t_rotate = std::time::Instant::now();
    f.rotate().unwrap();
    let took = t_rotate.elapsed();
    println!("# rotate with a stopped adder took {took:?} (DRAIN_LIMIT {DRAIN_LIMIT:?})");
    assert!(took < NO_HANG, "rotate took {took:?}");
    assert_eq!(
        f.win().unwrap().drains_given_up.get(),
        1,
        "the rotate gave up one drain, once"
    );
    assert!(f.spare_dirty(&f.win().unwrap().w), "the spare is left dirty");
    // Items of other stripes (the held one is this thread's own).
    let items: Vec<[u8; 4]> = (0..2000u32)
        .map(|i| i.to_le_bytes())
        .filter(|b| f.window_stripe(&crate::math::hashing::hash_item(f.seed, b)) != s)
        .take(1000)
        .collect();
    let t = std::time::Instant::now();
    for b in &items {
        f.add(b).unwrap();
    }
    let took = t.elapsed();
    let paid = f.win().unwrap().drains_given_up.get() - 1;
    println!("# 1000 adds with a stopped adder took {took:?}, {paid} drain(s) given up");
    assert!(took < NO_HANG, "1000 adds took {took:?}");
    // The backoff began with the rotate's drain, after `t_rotate`: the
    // adds' k-th given-up drain begins k DRAIN_BACKOFFs after it at least.
    let allowed = (t_rotate.elapsed().as_nanos() / DRAIN_BACKOFF.as_nanos()) as u32;
    assert!(
        paid <= allowed,
        "{paid} drains given up in {took:?} of adds: more than one per {DRAIN_BACKOFF:?}"
    );
    f.shared().end_add(s);
    f.win().unwrap().clean_after.set(None);
    f.add(b"held").unwrap();
    assert!(!f.spare_dirty(&f.win().unwrap().w), "cleared once the stripe is free");
    f.rotate().unwrap();
    assert_eq!(f.window_stats().unwrap().current, 2);
}

/// After a step, each add clears one slice of the spare, going on from
/// where the last stopped, and the spare is clean (every word 0) after
/// as many adds as it has slices. A generation of 4 MiB: 64 slices.
#[test]
fn windowed_adds_clear_the_spare_a_slice_each() {
    let opts = Options {
        window: Some(WindowOptions {
            window_ns: None,
            generations: 2,
        }),
        ..Options::default()
    };
    let f = Filter::new_anonymous(3_000_000, 0.01, opts).unwrap();
    let win = f.win().unwrap();
    let slices = win.gen_words.div_ceil(SPARE_SLICE_WORDS);
    assert!(slices >= 32, "{} words: {slices} slices", win.gen_words);
    let old: Vec<[u8; 8]> = (0..200_000u64).map(|i| i.to_le_bytes()).collect();
    f.rotate().unwrap();
    for b in &old {
        f.add(b).unwrap();
    }
    f.rotate().unwrap(); // `old` in the older generation
    for b in &old[..1000] {
        f.add(b).unwrap(); // and these in the current one too
    }
    // Step as a timed filter's add does: `old`'s generation becomes
    // the spare, and nothing is cleared yet.
    assert!(f.try_step(win, now_ns(), true, f.claim().unwrap().c));
    let w = &win.w;
    let spare = w.spare(f.load_view(w));
    let dirty = |f: &Filter| {
        f.generation(win, spare)
            .iter()
            .filter(|x| x.load(Ordering::Relaxed) != 0)
            .count()
    };
    assert!(dirty(&f) > 0);
    let cursor = f.win_word(format::OFF_CURSOR);
    for n in 1..slices {
        f.add(format!("new-{n}").as_bytes()).unwrap();
        assert!(f.spare_dirty(w), "after {n} adds of {slices}");
        assert_eq!(
            cursor.load(Ordering::Relaxed) as usize,
            n * SPARE_SLICE_WORDS,
            "add {n}"
        );
    }
    f.add(b"last").unwrap();
    assert!(!f.spare_dirty(w), "clean after {slices} adds");
    assert_eq!(dirty(&f), 0);
    assert!(f.contains(&old[0]), "added again: in the older generation");
    assert!(!f.contains(&old[1000]), "forgotten");
}

/// A write that finds a step due and the spare not clear yet (too few
/// writes since the last step to clear it a slice each) clears the
/// rest and steps before it adds: an idle filter's expired current
/// generation is never written again (its items would come back), and
/// items are forgotten on time however few the writes.
#[test]
fn a_due_step_clears_the_rest_of_the_spare_first() {
    let period = 200_000_000u64; // ns
    let opts = Options {
        window: Some(WindowOptions {
            window_ns: Some(period),
            generations: 2,
        }),
        ..Options::default()
    };
    // This thread's clock, moved by the test: the periods are where the
    // test puts them however slow the machine.
    let clock = FakeClock::start();
    let sleep_to = |t: u64| {
        if t > clock.now() {
            clock.set(t);
        }
    };
    // The current generation expired: written at grid q0, nothing since.
    let f = Filter::new_anonymous(300_000, 0.01, opts).unwrap();
    let win = f.win().unwrap();
    assert!(win.gen_words > 2 * SPARE_SLICE_WORDS);
    let w = &win.w;
    f.add(b"x").unwrap();
    sleep_to(w.epoch_ns() + period + period / 4);
    f.add(b"z").unwrap(); // steps; one slice of the new spare cleared
    assert!(f.spare_dirty(w));
    let z_at = now_ns();
    // Forgotten by z's time plus g periods (plus a tick of the clock).
    sleep_to(z_at + 2 * period + period / 2);
    assert!(!f.contains(b"z"), "expired");
    let before = f.load_view(w);
    assert!(f.add(b"y").unwrap());
    assert!(!f.contains(b"z"), "brought back by another item's add");
    assert_ne!(f.load_view(w), before, "no step");
    assert!(f.add(b"z").unwrap(), "z new again");

    // A due step, the current generation still visible: g = 3.
    let opts = Options {
        window: Some(WindowOptions {
            window_ns: Some(2 * period),
            generations: 3,
        }),
        ..Options::default()
    };
    let f = Filter::new_anonymous(300_000, 0.01, opts).unwrap();
    let w = &f.win().unwrap().w;
    let e = w.epoch_ns();
    f.add(b"z").unwrap(); // grid 0
    sleep_to(e + period + period / 4);
    f.add(b"a").unwrap(); // steps; the spare left dirty
    assert!(f.spare_dirty(w));
    for k in 2..6u64 {
        // One write per period, too few to clear the spare by slices.
        sleep_to(e + k * period + period / 4);
        let before = f.load_view(w);
        f.add(format!("w{k}").as_bytes()).unwrap();
        assert_ne!(f.load_view(w), before, "period {k}: the step was deferred");
        assert_eq!(f.contains(b"z"), k < 3, "period {k}");
    }
}

/// An add of an item the current generation holds takes no stripe: it
/// answers while another adder (stopped, as it were) holds the item's
/// stripe. A `rotate` that needs the spare cleared waits for that
/// adder, and goes on once it is released.
#[test]
fn windowed_present_add_takes_no_stripe_and_rotate_waits_for_a_stopped_adder() {
    let dir = region::scratch_dir("win-stripe");
    let path = dir.join("w.bf");
    let opts = Options {
        mode: 0o600,
        window: Some(WindowOptions {
            window_ns: None,
            generations: 3,
        }),
        ..Options::default()
    };
    let f = Filter::open_file(&path, 1000, 0.01, opts).unwrap();
    // Another thread's own handle of the same filter.
    let other = |what: fn(&Filter) -> Result<bool>| {
        let path = path.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let g = Filter::open_file(&path, 1000, 0.01, Options::default()).unwrap();
            let _ = tx.send(what(&g).map_err(|e| e.to_string()));
        });
        rx
    };
    f.add(b"held").unwrap();
    let c = f.claim().unwrap().c;
    let s = f.window_stripe(&crate::math::hashing::hash_item(f.seed, b"held"));
    assert_eq!(
        f.shared().begin_add(s, c),
        Ok(true),
        "the stripe held as by a stopped adder"
    );
    // Minutes, not seconds, for an answer (a loaded machine), yet a wait
    // for the held stripe (for ever) still fails.
    let r = other(|g| g.add(b"held")).recv_timeout(std::time::Duration::from_secs(60));
    assert_eq!(r, Ok(Ok(false)), "answered, not new, with the stripe held");
    // Make the spare dirty, as an add's step does.
    let win = f.win().unwrap();
    let w = win.w;
    assert!(f.try_step(win, now_ns(), true, f.claim().unwrap().c));
    assert!(f.spare_dirty(&w));
    let rx = other(|g| g.rotate().map(|_| true));
    assert!(
        rx.recv_timeout(std::time::Duration::from_millis(300)).is_err(),
        "rotate waits for the stopped adder"
    );
    f.shared().end_add(s);
    assert_eq!(
        rx.recv_timeout(std::time::Duration::from_secs(60)),
        Ok(Ok(true)),
        "and goes on after"
    );
    assert_eq!(f.window_stats().unwrap().current, 2);
    drop(f);
    let _ = std::fs::remove_dir_all(&dir);
}

fn win_items(step: u32, n: u32) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("step {step} item {i}").into_bytes()).collect()
}

/// What a windowed filter answers for every item of `steps` steps.
fn answers(f: &Filter, steps: u32, n: u32) -> Vec<bool> {
    (0..steps)
        .flat_map(|s| win_items(s, n))
        .map(|i| f.contains(&i))
        .collect()
}

/// Round trips of windowed filters (g = 2, 4, 16; both layouts; stepped
/// by rotate only and timed; anonymous, file and memfd): the copy has
/// the same window, epoch, view and stats and answers the same for
/// every item; stepped alike, the two forget every item after exactly
/// the same number of steps; the copy serializes to the same bytes.
#[test]
fn windowed_round_trip_keeps_answers_and_retention() {
    let dir = region::scratch_dir("winser");
    let mut case = 0;
    for layout in [None, Some(Layout::Blocked)] {
        for g in [2u32, 4, 16] {
            for window_ns in [None, Some(3600 * 1_000_000_000)] {
                case += 1;
                let f = windowed(window_ns, g, layout);
                let steps = g + 2;
                for s in 0..steps {
                    for i in win_items(s, 20) {
                        f.add(&i).unwrap();
                    }
                    if s + 1 < steps {
                        f.rotate().unwrap();
                    }
                }
                let bytes = f.serialize().unwrap();
                assert_eq!(bytes.len() as u64, crate::shm::serial::windowed_len(f.geometry().m, g));
                let path = dir.join(format!("c{case}"));
                let to = match case % 3 {
                    0 => Target::Anonymous,
                    1 => Target::File(&path, 0o600),
                    _ => Target::Memfd(b"copy"),
                };
                let d = Filter::deserialize_to(&bytes, to, None, None).unwrap();
                assert_eq!(d.window(), f.window(), "case {case}: window and epoch");
                assert_eq!(d.window_stats(), f.window_stats(), "case {case}");
                assert_eq!(d.window_stats().unwrap().current, steps as u64 - 1);
                assert_eq!((d.geometry(), d.seed()), (f.geometry(), f.seed()));
                assert_eq!(d.bits_set(), f.bits_set(), "case {case}");
                let before = answers(&f, steps, 20);
                assert_eq!(answers(&d, steps, 20), before, "case {case}");
                // Only the last g steps' items are there.
                let alive = before.iter().filter(|&&b| b).count();
                assert!(
                    alive >= 20 * g as usize && alive < 20 * (g as usize + 1),
                    "case {case}: {alive}"
                );
                assert_eq!(d.serialize().unwrap(), bytes, "case {case}: a second round trip");
                for k in 1..=g {
                    f.rotate().unwrap();
                    d.rotate().unwrap();
                    let a = answers(&f, steps, 20);
                    assert_eq!(answers(&d, steps, 20), a, "case {case}: after {k} more steps");
                    let left = a.iter().filter(|&&b| b).count();
                    assert!(left <= 20 * (g - k) as usize + 2, "case {case}: {left} left after {k}");
                }
                // Both take new items the same way afterwards.
                for i in win_items(100, 20) {
                    assert_eq!(d.add(&i).unwrap(), f.add(&i).unwrap());
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The options against windowed bytes: the same window (or rotate-only
/// with the same generations) is accepted; another is a window
/// mismatch; plain bytes with a window give a windowed filter whose
/// current generation holds their items, forgotten after g steps.
#[test]
fn windowed_deserialize_options() {
    let timed = windowed(Some(3_000_000_000), 4, None);
    timed.add(b"t").unwrap();
    let manual = windowed(None, 3, None);
    manual.add(b"m").unwrap();
    let wo = |window_ns, generations| Some(WindowOptions { window_ns, generations });
    let (tb, mb) = (timed.serialize().unwrap(), manual.serialize().unwrap());
    let ok = Filter::deserialize_to(&tb, Target::Anonymous, None, wo(Some(3_000_000_000), 4)).unwrap();
    assert!(ok.contains(b"t"));
    let ok = Filter::deserialize_to(&mb, Target::Anonymous, None, wo(None, 3)).unwrap();
    assert!(ok.contains(b"m"));
    for (bytes, other, has) in [
        (&tb, wo(Some(2_000_000_000), 4), "window 3s, 4 generations"),
        (&tb, wo(Some(3_000_000_000), 3), "window 3s, 4 generations"),
        (&tb, wo(None, 4), "window 3s, 4 generations"),
        (&mb, wo(None, 4), "manual steps, 3 generations"),
        (&mb, wo(Some(3_000_000_000), 3), "manual steps, 3 generations"),
    ] {
        let e = Filter::deserialize_to(bytes, Target::Anonymous, None, other)
            .err()
            .unwrap();
        assert_eq!(e.kind, ErrorKind::Mismatch);
        assert!(
            e.msg
                .starts_with(&format!("window mismatch (the bytes have {has}, not ")),
            "{}",
            e.msg
        );
    }
    let e = Filter::deserialize_to(&tb, Target::Anonymous, Some(Layout::Blocked), None)
        .err()
        .unwrap();
    assert!(e.msg.starts_with("layout mismatch"), "{}", e.msg);

    let plain = anon(1000, 0.01);
    plain.add(b"p").unwrap();
    let pb = plain.serialize().unwrap();
    for g in [2u32, 4] {
        let d = Filter::deserialize_to(&pb, Target::Anonymous, None, wo(None, g)).unwrap();
        assert_eq!(d.window().unwrap().generations(), g);
        assert_eq!(d.geometry(), plain.geometry());
        assert_eq!(d.bits_set(), plain.bits_set(), "the bits are the current generation's");
        assert!(!d.add(b"p").unwrap(), "seen");
        for k in 1..g {
            d.rotate().unwrap();
            assert!(d.contains(b"p"), "g {g}: gone after {k} steps");
        }
        d.rotate().unwrap();
        assert!(!d.contains(b"p"), "g {g}: kept past {g} steps");
    }
    let d = Filter::deserialize_to(&pb, Target::Anonymous, None, wo(Some(3_000_000_000), 4)).unwrap();
    let w = d.window().unwrap();
    assert_eq!(w.window_ns(), Some(3_000_000_000));
    let now = now_ns();
    assert!(
        w.epoch_ns() <= now && now - w.epoch_ns() < 60_000_000_000,
        "epoch0 is now"
    );
    assert!(d.contains(b"p"));
    // Plain bytes, no window: a plain filter as before.
    assert!(Filter::deserialize_to(&pb, Target::Anonymous, None, None)
        .unwrap()
        .window()
        .is_none());
}

/// A copy taken while another handle steps the filter as fast as it
/// can is always of one view: with items of step `j` added right after
/// the step to `j`, the copy at start `m` holds those of steps
/// `m - g + 1 .. m - 1` complete (step 0 has none) and none of step
/// `m - g`. A writable
/// handle (which holds the cleaner) always copies; a read-only one
/// (which retries) may give up on a filter stepping this fast (§8 W10).
#[test]
fn windowed_copy_is_consistent_while_stepping() {
    use std::os::fd::AsRawFd;
    let g = 3u32;
    let opts = Options {
        window: Some(WindowOptions {
            window_ns: None,
            generations: g,
        }),
        ..Options::default()
    };
    // 2 MiB generations: a copy takes long enough for steps to land.
    let f = Filter::new_memfd("steps", 1_000_000, 0.001, opts).unwrap();
    let ro_file = std::fs::File::open(format!("/proc/self/fd/{}", f.memfd())).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Stops the stepping thread however the checks end (a failed one
    // panics inside the scope, which then waits for it).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let fd = f.memfd();
    std::thread::scope(|sc| {
        let _stop = Stop(&stop);
        sc.spawn(|| {
            let w = Filter::from_fd(fd).unwrap();
            let mut j = 0u32;
            while !stop.load(Ordering::Relaxed) {
                w.rotate().unwrap();
                j += 1;
                for i in win_items(j, 10) {
                    w.add(&i).unwrap();
                }
                // A step every fraction of a copy's time: steps land
                // during copies, yet the copier is not starved.
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let ro = Filter::from_fd(ro_file.as_raw_fd()).unwrap();
        assert!(ro.readonly());
        let mut checked = 0;
        let mut busy = 0;
        // A hundred copies, and more until 25 were checked: a loaded
        // machine makes more of them give up (Busy), not fewer of them
        // consistent. Only a run where copies keep giving up for two
        // minutes fails for it.
        let t0 = std::time::Instant::now();
        let mut round = 0;
        while round < 100 || checked < 25 {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(120),
                "{checked} copies checked in {round} rounds, {busy} busy"
            );
            round += 1;
            let h = if round % 2 == 0 { &f } else { &ro };
            let bytes = match h.serialize() {
                Ok(b) => b,
                Err(e) => {
                    // A read-only handle cannot hold the cleaner word;
                    // a writable one that did not get it within its
                    // wait (a loaded machine, this thread stepping
                    // non-stop) copies as a read-only one does. Either
                    // may give up, saying so.
                    assert_eq!(e.kind, ErrorKind::Busy, "round {round}: {}", e.msg);
                    busy += 1;
                    continue;
                }
            };
            let d = Filter::deserialize(&bytes, None, 0o600).unwrap();
            let m = d.window_stats().unwrap().current as u32;
            for s in m.saturating_sub(g - 1).max(1)..m {
                for i in win_items(s, 10) {
                    assert!(d.contains(&i), "round {round}: start {m}, step {s} incomplete");
                }
            }
            if m >= g {
                let gone = win_items(m - g, 10).iter().filter(|i| d.contains(i)).count();
                assert!(gone <= 1, "round {round}: start {m}: step {} kept", m - g);
            }
            checked += 1;
        }
        // On an idle machine, every copy through the writable handle is
        // checked: about half of the hundred rounds.
        println!("# copies while stepping: {checked} checked, {busy} busy in {round} rounds");
    });
}

/// Generations larger than the caches: batches go through the
/// prefetching pipeline (adds and queries), and answer item by item as
/// single calls do, across rotations, in both layouts and both block
/// widths, for lengths around the pipeline's stages and hash chunks.
#[test]
fn windowed_pipelined_batches_match_single_calls() {
    for (layout, rate) in [
        (None, 0.01),
        (Some(Layout::Blocked), 0.01),
        (Some(Layout::Blocked), 0.0001),
    ] {
        let make = || {
            let opts = Options {
                layout,
                window: Some(WindowOptions {
                    window_ns: None,
                    generations: 3,
                }),
                ..Options::default()
            };
            Filter::new_anonymous(4_000_000, rate, opts).unwrap()
        };
        let (one, many) = (make(), make());
        assert!(one.geometry().bytes() >= PIPELINE_MIN_BYTES && one.pipelines(2 * DISTANCE));
        // Four rounds of 6000 adds (half of them repeats of the round
        // before), a rotation after each: the oldest round is forgotten.
        let mut probe: Vec<Vec<u8>> = Vec::new();
        for round in 0..4u32 {
            let items: Vec<Vec<u8>> = (0..6000u32)
                .map(|i| format!("r{} {}", round - (i % 2 == 1 && round > 0) as u32, i / 2).into_bytes())
                .collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            let single: Vec<u8> = refs.iter().map(|i| one.add(i).unwrap() as u8).collect();
            let mut batch = vec![9u8; refs.len()];
            let n = many.add_many(&refs, Some(&mut batch)).unwrap();
            assert_eq!(batch, single, "{layout:?} {rate} round {round}");
            assert_eq!(n, single.iter().map(|&x| x as u64).sum::<u64>());
            assert!(n > 2000 && n < 6000, "{layout:?} round {round}: {n} new");
            one.rotate().unwrap();
            many.rotate().unwrap();
            probe.extend(items);
            probe.extend((0..500u32).map(|i| format!("never {round} {i}").into_bytes()));
        }
        let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
        let expect: Vec<u8> = prefs.iter().map(|p| one.contains(p) as u8).collect();
        let present = expect.iter().filter(|&&x| x == 1).count();
        assert!(
            present > 5000 && present < prefs.len() - 5000,
            "{layout:?}: {present} present"
        );
        for len in [
            0,
            1,
            2 * DISTANCE - 1,
            2 * DISTANCE,
            2 * DISTANCE + 1,
            1023,
            1024,
            1025,
            prefs.len(),
        ] {
            let mut res = vec![9u8; len];
            let n = many.contains_many(&prefs[..len], Some(&mut res));
            assert_eq!(res, expect[..len], "{layout:?} {rate}: batch of {len}");
            assert_eq!(n, expect[..len].iter().map(|&x| x as u64).sum::<u64>());
        }
    }
}

/// A windowed `contains_many` answers as `contains` item by item, in
/// groups and across group ends, both layouts, with generations of
/// different ages (and items of none).
#[test]
fn windowed_contains_many_answers_as_contains() {
    for layout in [None, Some(Layout::Blocked)] {
        let f = windowed(None, 4, layout);
        let items: Vec<Vec<u8>> = (0..1000u32).map(|i| format!("item {i}").into_bytes()).collect();
        for (round, chunk) in items.chunks(200).enumerate() {
            for it in chunk.iter().step_by(2) {
                f.add(it).unwrap();
            }
            if round < 4 {
                f.rotate().unwrap();
            }
        }
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let one: Vec<u8> = refs.iter().map(|it| f.contains(it) as u8).collect();
        let mut many = vec![9u8; refs.len()];
        let n = f.contains_many(&refs, Some(&mut many));
        assert_eq!(many, one, "{layout:?}");
        assert_eq!(n, one.iter().map(|&x| x as u64).sum::<u64>());
        assert!(n > 300 && n < 700, "{layout:?}: {n} present: some forgotten, some not");
        for len in [0, 1, 63, 64, 65, 129] {
            assert_eq!(
                f.contains_many(&refs[..len], None),
                one[..len].iter().map(|&x| x as u64).sum::<u64>()
            );
        }
    }
}

/// A windowed `contains_many` of a timed filter whose older generations
/// are expired by the clock (not yet stepped out: only writes step)
/// answers as `contains`: an expired generation's items are absent, a
/// live older one's present. Window 3 s, g = 4: a period of 1 s, so
/// items added in period 0 are forgotten from 4 s on, those of period 1
/// seen until 5 s.
#[test]
fn windowed_contains_many_skips_generations_the_clock_expired() {
    let items = |tag: &str| -> Vec<Vec<u8>> { (0..200u32).map(|i| format!("{tag} {i}").into_bytes()).collect() };
    let (old, live, none) = (items("old"), items("live"), items("none"));
    // This thread's fake clock: the looks come in period 4 however slow
    // the machine.
    let clock = FakeClock::start();
    let t0 = clock.now();
    let until = |secs: f64| clock.set(t0 + (secs * 1e9) as u64);
    let fs: Vec<Filter> = [None, Some(Layout::Blocked)]
        .into_iter()
        .map(|l| windowed(Some(3_000_000_000), 4, l))
        .collect();
    for f in &fs {
        for it in &old {
            f.add(it).unwrap();
        }
    }
    until(1.5);
    for f in &fs {
        for it in &live {
            f.add(it).unwrap();
        }
    }
    until(4.3);
    let all: Vec<&[u8]> = old.iter().chain(&live).chain(&none).map(|v| v.as_slice()).collect();
    for f in &fs {
        let one: Vec<u8> = all.iter().map(|it| f.contains(it) as u8).collect();
        let mut many = vec![9u8; all.len()];
        let n = f.contains_many(&all, Some(&mut many));
        assert_eq!(many, one, "{:?}", f.layout());
        let count = |r: &[u8]| r.iter().filter(|&&x| x == 1).count();
        assert!(count(&many[..200]) < 10, "{:?}: expired items seen", f.layout());
        assert_eq!(count(&many[200..400]), 200, "{:?}: live items missed", f.layout());
        assert!(count(&many[400..]) < 10, "{:?}: items never added", f.layout());
        assert_eq!(n as usize, count(&many));
    }
}

/// An idle timed filter's numbers follow the clock, with no write: once a
/// step is due the current generation is the fresh one the step would
/// make (generation and start as the clock says, no bits, count 0);
/// `is_empty` holds once every generation with items is hidden, when
/// `contains` finds none of them. The mapping is the same byte for byte
/// after every reading. Both layouts; the clock is this thread's fake one.
#[test]
fn an_idle_windowed_filters_numbers_follow_the_clock() {
    for layout in [None, Some(Layout::Blocked)] {
        let clock = FakeClock::start();
        let f = windowed(Some(1_000_000_000), 4, layout);
        let w = f.window().unwrap();
        let (e, period) = (w.epoch_ns(), w.period_ns().unwrap());
        let items: Vec<[u8; 4]> = (0..100u32).map(|i| i.to_le_bytes()).collect();
        for it in &items {
            f.add(it).unwrap();
        }
        let mapping = || {
            // SAFETY: the whole mapping, which lives as long as `f`; this
            // thread alone uses the filter, so nothing changes meanwhile.
            unsafe { std::slice::from_raw_parts(f.base, f.region.len()) }.to_vec()
        };
        let seen = |f: &Filter| items.iter().filter(|it| f.contains(&it[..])).count();
        let numbers = |f: &Filter| {
            let s = f.window_stats().unwrap();
            (s.current, s.current_start_ns, f.bits_set(), f.count(), f.is_empty())
        };
        let before = mapping();
        let (_, _, bits, count, empty) = numbers(&f);
        assert!(
            bits > 0 && (90..=110).contains(&count) && !empty,
            "{layout:?}: {count} counted"
        );
        // Within period 0: as written.
        clock.set(e + period / 2);
        assert_eq!(numbers(&f), (0, Some(e), bits, count, false), "{layout:?}");
        // Period 1: a step is due (the oldest generation holds nothing);
        // the items are in the generation before the current one.
        clock.set(e + period + period / 2);
        assert_eq!(numbers(&f), (1, Some(e + period), 0, 0, false), "{layout:?}");
        assert_eq!(f.estimated_fpp(), 0.0, "{layout:?}");
        assert_eq!(seen(&f), 100, "{layout:?}");
        // Period 4: the items' generation is hidden, as if stepped out.
        clock.set(e + 4 * period + period / 2);
        assert_eq!(numbers(&f), (4, Some(e + 4 * period), 0, 0, true), "{layout:?}");
        assert_eq!(seen(&f), 0, "{layout:?}");
        assert!(mapping() == before, "{layout:?}: a reading wrote to the mapping");
        // A write takes the step the numbers described.
        assert!(f.add(b"new").unwrap());
        let s = f.window_stats().unwrap();
        assert_eq!((s.current, f.load_view(&w).m), (4, 4), "{layout:?}");
        assert!(!f.is_empty() && f.bits_set() > 0, "{layout:?}");
    }
    // Without a window only rotations step: the clock changes nothing.
    let clock = FakeClock::start();
    let f = windowed(None, 3, None);
    f.add(b"a").unwrap();
    let bits = f.bits_set();
    clock.advance(1_000_000_000_000);
    assert_eq!(f.window_stats().unwrap().current, 0);
    assert_eq!(f.bits_set(), bits);
    assert!(!f.is_empty());
}
