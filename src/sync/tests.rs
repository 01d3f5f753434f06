//! The lock protocol's unit tests, on slot tables in private memory.

use super::*;

#[test]
fn tokens_round_trip_and_are_never_zero() {
    for idx in [0, 1, 511, SLOTS - 1] {
        for gen in [0, 1, 12345, GEN_MASK, GEN_MASK + 1, u32::MAX] {
            let t = token(idx, gen);
            assert_ne!(t, 0);
            assert_eq!(t & WAITERS, 0);
            assert_eq!(untoken(t), Some((idx, gen & GEN_MASK)));
            assert_eq!(untoken(t | WAITERS), Some((idx, gen & GEN_MASK)));
        }
    }
    assert_eq!(untoken(0), None);
    assert_eq!(untoken(SLOTS + 1), None);
    assert_eq!(untoken(IDX_MASK), None);
}

/// A zeroed slot table, initialised as a new region's is.
fn table() -> (Vec<Slot>, Control) {
    // SAFETY: Slot and Control are plain atomics and a pthread mutex,
    // for which all-zero bytes are a valid (if uninitialised) state.
    let mut v: Vec<Slot> = (0..SLOTS).map(|_| unsafe { std::mem::zeroed() }).collect();
    // SAFETY: SLOTS zeroed slots that nothing else uses yet.
    unsafe { crate::shm::slots::init_slots(v.as_mut_ptr()) };
    // SAFETY: as above.
    (v, unsafe { std::mem::zeroed() })
}

fn shared<'a>(slots: &'a [Slot], ctl: &'a Control) -> Shared<'a> {
    Shared {
        ctl,
        slots,
        stripes: &[],
        bits: &[],
        scratch: &[],
        journal: None,
    }
}

#[test]
fn a_claim_lives_until_given_back() {
    let (slots, ctl) = table();
    let sh = shared(&slots, &ctl);
    let c = sh.claim_slot(7, false).unwrap();
    assert_eq!(c.idx, 7);
    // Seen from another thread, the owner (this thread) is alive...
    std::thread::scope(|s| {
        s.spawn(|| assert!(!sh.owner_dead(c.token), "live owner judged dead"));
    });
    // ...and a second claim takes the next slot.
    let c2 = sh.claim_slot(7, false).unwrap();
    assert_eq!(c2.idx, 8);
    sh.release_slot(c);
    assert!(sh.owner_dead(c.token), "a released claim's token is dead");
    let c3 = sh.claim_slot(7, false).unwrap();
    assert_eq!(c3.idx, 7);
    assert_ne!(c3.token, c.token, "a new claim has a new generation");
    assert!(!sh.owner_dead(c3.token));
    sh.release_slot(c2);
    sh.release_slot(c3);
}

#[test]
fn a_thread_that_exits_holding_a_slot_is_dead() {
    let (slots, ctl) = table();
    let sh = shared(&slots, &ctl);
    let c = std::thread::scope(|s| s.spawn(|| sh.claim_slot(3, false).unwrap()).join().unwrap());
    // The kernel marked the mutex "owner died" when the thread ended.
    assert!(sh.owner_dead(c.token));
    // Its generation is retired: later checks agree without a trylock.
    assert_ne!(slots[3].gen.load(Ordering::Relaxed), untoken(c.token).unwrap().1);
    assert!(sh.owner_dead(c.token));
    // And the slot can be claimed again.
    let again = sh.claim_slot(3, false).unwrap();
    assert_eq!(again.idx, 3);
    sh.release_slot(again);
}

#[test]
fn a_full_table_overflows_into_the_shared_slot() {
    let (slots, ctl) = table();
    let sh = shared(&slots, &ctl);
    let claims: Vec<Claim> = (0..OVERFLOW).map(|_| sh.claim_slot(0, false).unwrap()).collect();
    assert_eq!(sh.claim_slot(0, false), Err(SyncError::SlotsFull));
    let o = sh.claim_overflow().unwrap();
    assert_eq!(o.idx, OVERFLOW);
    // Another thread waits for the overflow slot until it is given back.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let o2 = sh.claim_overflow().unwrap();
            tx.send(o2).unwrap();
            sh.release_slot(o2);
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "overflow slot taken twice"
        );
        sh.release_slot(o);
        // A hang guard, not a bound: a loaded host may take seconds to run
        // the waiter once the slot is free.
        let o2 = rx.recv_timeout(Duration::from_secs(60)).expect("waiter got the slot");
        assert_ne!(o2.token, o.token);
    });
    for c in claims {
        sh.release_slot(c);
    }
}

#[test]
fn a_foreign_mutex_is_never_handed_to_pthread() {
    let (slots, ctl) = table();
    let sh = shared(&slots, &ctl);
    // SAFETY: overwrite slot 5's mutex bytes with junk, as a hostile file
    // could; nobody holds it.
    unsafe { std::ptr::write_bytes(&slots[5].owner as *const _ as *mut u8, 0xA5, 40) };
    assert_eq!(slots[5].try_own(), Try::Broken);
    assert_eq!(sh.claim_slot(5, false).unwrap().idx, 6, "a broken slot is skipped");
    assert!(sh.owner_dead(token(5, 0)));
}
