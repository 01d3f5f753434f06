//! The lock protocol's slow paths inside one process: handles of one filter
//! that hold a stripe, the exclusive lock or a merge mark and then go away
//! (their slot released: their tokens now name a dead owner), and handles in
//! other threads that hold them while alive, so that waiters sleep on the
//! futex and are woken. (tests/processes.rs does the same with real
//! processes and SIGKILL.) No assertion here is about time.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use bloomfilter_shared::hooks::testing;
use bloomfilter_shared::{ErrorKind, Filter, Options};

/// A filter in a memfd and a second handle on it.
fn pair() -> (Filter, Filter) {
    let a = Filter::new_memfd("contention", 1000, 0.01, Options::default()).unwrap();
    let b = Filter::from_fd(a.memfd()).unwrap();
    (a, b)
}

/// Run `hold` on `b` in a thread of its own (handles of one filter in one
/// thread share a slot), then drop `b` there: its slot is released, and the
/// lock `hold` left names a dead owner.
fn in_gone_thread(b: Filter, hold: fn(&Filter)) {
    thread::spawn(move || {
        hold(&b);
        drop(b);
    })
    .join()
    .unwrap();
}

#[test]
fn a_stripe_left_by_a_gone_handle_is_taken_over() {
    let (a, b) = pair();
    in_gone_thread(b, |h| testing::hold_stripe(h, b"x")); // its slot is released; the stripe still names it
    assert!(a.add(b"x").unwrap(), "the add went through and found x new");
    assert!(a.contains(b"x"));
    assert!(!a.add(b"x").unwrap());
}

#[test]
fn a_clear_left_half_done_is_finished_by_the_next_adder() {
    let (a, b) = pair();
    for i in 0..200 {
        a.add(format!("old{i}").as_bytes()).unwrap();
    }
    in_gone_thread(b, testing::hold_half_clear);
    assert!(a.add(b"new").unwrap());
    assert!(a.contains(b"new"));
    let left = (0..200).filter(|i| a.contains(format!("old{i}").as_bytes())).count();
    assert_eq!(left, 0, "the interrupted clear was completed");
    assert_eq!(a.count(), 1);
}

#[test]
fn a_merger_meets_a_dead_exclusive_owner() {
    let (a, b) = pair();
    let other = Filter::new_anonymous(1000, 0.01, Options::default()).unwrap();
    other.add(b"merged").unwrap();
    a.add(b"before").unwrap();
    in_gone_thread(b, testing::hold_half_clear);
    a.merge(&other).unwrap();
    assert!(a.contains(b"merged"));
    assert!(!a.contains(b"before"), "the pending clear ran before the merge");
}

#[test]
fn an_exclusive_operation_meets_a_dead_merge_mark() {
    let (a, b) = pair();
    a.add(b"x").unwrap();
    in_gone_thread(b, testing::hold_merge);
    a.clear().unwrap();
    assert!(a.bits_set() == 0 && !a.contains(b"x"));
    let (c, d) = pair();
    in_gone_thread(d, testing::hold_half_clear);
    c.freeze().unwrap(); // steals the dead owner's lock and finishes its clear
    assert!(c.frozen());
    assert_eq!(c.add(b"y").unwrap_err().kind, ErrorKind::Frozen);
}

/// `hold` takes a lock through a handle in another thread and keeps it until
/// the main thread is about to wait; then the thread either releases it
/// (`release_normally`) or drops its handle (the owner goes away).
fn with_holder(hold: fn(&Filter, &mpsc::Sender<()>), wait: impl FnOnce(&Filter)) {
    let (a, b) = pair();
    let (held_tx, held_rx) = mpsc::channel();
    let t = thread::spawn(move || {
        hold(&b, &held_tx);
        drop(b);
    });
    held_rx.recv().unwrap(); // the lock is held by a live owner now
    wait(&a);
    t.join().unwrap();
}

#[test]
fn waiters_sleep_until_a_live_exclusive_owner_releases() {
    // The holder sleeps inside the lock long enough for the waiter to
    // announce itself on the futex (if it does not, the test still passes:
    // it only checks what the waiter sees).
    let hold = |b: &Filter, held: &mpsc::Sender<()>| {
        testing::while_exclusive(b, || {
            held.send(()).unwrap();
            thread::sleep(Duration::from_millis(100));
        })
    };
    with_holder(hold, |a| {
        assert!(a.add(b"after").unwrap());
        assert!(a.contains(b"after"));
    });
    with_holder(hold, |a| a.clear().unwrap());
    with_holder(hold, |a| {
        let o = Filter::new_anonymous(1000, 0.01, Options::default()).unwrap();
        o.add(b"m").unwrap();
        a.merge(&o).unwrap();
        assert!(a.contains(b"m"));
    });
}

#[test]
fn waiters_take_over_from_a_live_owner_that_goes_away() {
    // The holder keeps the lock and then drops its handle a little later:
    // the waiter, asleep on the futex, finds the owner gone at a timeout.
    let hold_excl = |b: &Filter, held: &mpsc::Sender<()>| {
        testing::hold_half_clear(b);
        held.send(()).unwrap();
        thread::sleep(Duration::from_millis(100));
    };
    with_holder(hold_excl, |a| assert!(a.add(b"z").unwrap()));
    with_holder(hold_excl, |a| a.invert().unwrap());
    let hold_stripe = |b: &Filter, held: &mpsc::Sender<()>| {
        testing::hold_stripe(b, b"same");
        held.send(()).unwrap();
        thread::sleep(Duration::from_millis(100));
    };
    with_holder(hold_stripe, |a| assert!(a.add(b"same").unwrap()));
    let hold_merge = |b: &Filter, held: &mpsc::Sender<()>| {
        testing::hold_merge(b);
        held.send(()).unwrap();
        thread::sleep(Duration::from_millis(100));
    };
    with_holder(hold_merge, |a| a.clear().unwrap());
}
