//! Slots are per thread and filter, shared by the thread's handles, and a
//! slot's mapping lives as long as its mutex is locked, whichever thread
//! drops the handle and in whatever order thread-locals are destroyed
//! (doc/DESIGN.md §8 S1, S2).

use std::thread;

use bloomfilter_shared::hooks::testing;
use bloomfilter_shared::{Filter, Options};

fn memfd_filter(cap: u64) -> Filter {
    Filter::new_memfd("claims", cap, 0.01, Options::default()).unwrap()
}

#[test]
fn handles_of_one_filter_in_one_thread_share_a_slot() {
    let a = memfd_filter(1000);
    let b = Filter::from_fd(a.memfd()).unwrap();
    assert_eq!(testing::slot_of(&a), testing::slot_of(&b));
    // Another thread has a slot of its own.
    let fd = a.memfd();
    let theirs = thread::spawn(move || {
        let c = Filter::from_fd(fd).unwrap();
        testing::slot_of(&c)
    })
    .join()
    .unwrap();
    assert_ne!(theirs, testing::slot_of(&a));
    // The holder goes: the other handle claims anew, and writes.
    drop(a);
    b.add(b"after the holder").unwrap();
    assert!(b.contains(b"after the holder"));
}

/// The handle that claimed a slot is dropped in another thread: the mapping
/// must stay until the claiming thread gives the slot back (glibc and the
/// kernel write through the mutex's robust-list links while it is locked).
#[test]
fn a_holder_dropped_in_another_thread_keeps_its_mapping() {
    let h = memfd_filter(1000);
    h.add(b"x").unwrap();
    thread::spawn(move || drop(h)).join().unwrap();
    // Lock mutexes of other filters (other sizes, other addresses): each
    // lock links into this thread's robust list, next to the old entry.
    for cap in [10_000, 100_000, 1_000_000] {
        let f = memfd_filter(cap);
        assert!(f.add(b"y").unwrap());
        assert!(f.contains(b"y"));
    }
    // A thread that claims and ends, its holder dropped elsewhere first.
    let (tx, rx) = std::sync::mpsc::channel();
    let t = thread::spawn(move || {
        let f = memfd_filter(1000);
        f.add(b"z").unwrap();
        tx.send(f).unwrap();
    });
    let f = rx.recv().unwrap();
    t.join().unwrap();
    assert!(f.contains(b"z"));
    f.add(b"from the main thread").unwrap();
}

thread_local! {
    static KEPT: std::cell::RefCell<Option<Filter>> = const { std::cell::RefCell::new(None) };
}

/// A handle kept in a thread-local may be destroyed after the claims table:
/// nothing panics (a panic there aborts the process).
#[test]
fn a_handle_in_a_thread_local_outlives_the_claims_table() {
    thread::spawn(|| {
        // KEPT first, the claims table second: thread-locals are destroyed
        // in reverse order, so the table goes before the handle in KEPT.
        KEPT.with(|_| ());
        let f = memfd_filter(1000);
        f.add(b"x").unwrap();
        KEPT.with(|k| *k.borrow_mut() = Some(f));
    })
    .join()
    .unwrap();
}

fn blocked_memfd_filter(cap: u64) -> Filter {
    let opts = Options {
        layout: Some(bloomfilter_shared::Layout::Blocked),
        ..Options::default()
    };
    Filter::new_memfd("claims", cap, 0.01, opts).unwrap()
}

/// A handle caches its thread's slot. Moved to another thread, it writes
/// under that thread's own slot; back home, under its first one again.
#[test]
fn a_handle_moved_between_threads_writes_under_each_threads_slot() {
    for f in [memfd_filter(1000), blocked_memfd_filter(1000)] {
        let g = Filter::from_fd(f.memfd()).unwrap();
        assert!(g.add(b"home").unwrap());
        let home = testing::slot_of(&g);
        let (g, away) = thread::spawn(move || {
            assert!(g.add(b"away").unwrap());
            assert!(testing::writes_under_a_current_slot(&g));
            let away = testing::slot_of(&g);
            (g, away)
        })
        .join()
        .unwrap();
        assert_ne!(away, home);
        assert!(g.add(b"home again").unwrap());
        assert_eq!(testing::slot_of(&g), home);
        assert!(testing::writes_under_a_current_slot(&g));
        assert!(g.contains(b"away") && f.contains(b"home again"));
    }
}

/// A thread ends, giving back the slot a handle cached; the next thread
/// (which the C library usually gives the same thread pointer, reusing
/// the stack and control block) must not write under that cached claim.
#[test]
fn a_claim_cached_by_a_thread_that_ended_is_not_used_by_the_next() {
    let mut reused = 0;
    for round in 0..8 {
        let f = blocked_memfd_filter(1000);
        let fd = f.memfd();
        let (g, first) = thread::spawn(move || {
            let g = Filter::from_fd(fd).unwrap();
            assert!(g.add(b"first").unwrap());
            (g, testing::thread_pointer())
        })
        .join()
        .unwrap();
        let (ok, second) = thread::spawn(move || {
            let ok = g.add(format!("second {round}").as_bytes()).unwrap() && testing::writes_under_a_current_slot(&g);
            (ok, testing::thread_pointer())
        })
        .join()
        .unwrap();
        assert!(ok, "round {round}: the second thread wrote under the first one's slot");
        reused += usize::from(first == second);
    }
    println!("# the next thread had the ended one's thread pointer in {reused} of 8 rounds");
}
