//! The lock protocol's unit tests, on slot tables in private memory.

use super::*;
use crate::sys::keeper::ShadowMap;

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

/// A zeroed slot table in a shadowed mapping at the offset a region has it
/// (its words are robust futex words, `sys::keeper`), and a control line.
fn table() -> (ShadowMap, Control) {
    let m = ShadowMap::new(None, crate::shm::format::STRIPES_OFF as usize).expect("mmap");
    // SAFETY: Control is plain atomics, for which all-zero bytes are valid.
    (m, unsafe { std::mem::zeroed() })
}

/// The slots of a table from `table`.
fn slots_of(m: &ShadowMap) -> &[Slot] {
    // SAFETY: SLOTS slots of 64 bytes lie at SLOTS_OFF, inside the mapping
    // (STRIPES_OFF long), zeroed by the kernel: every word free.
    unsafe {
        std::slice::from_raw_parts(
            m.as_ptr().add(crate::shm::format::SLOTS_OFF as usize) as *const Slot,
            SLOTS as usize,
        )
    }
}

fn shared<'a>(slots: &'a [Slot], ctl: &'a Control) -> Shared<'a> {
    Shared {
        ctl,
        slots,
        stripes: &[],
        bits: &[],
        scratch: &[],
        journal: None,
        fills: &[],
        stages: None,
    }
}

#[test]
fn a_claim_lives_until_given_back() {
    let (m, ctl) = table();
    let slots = slots_of(&m);
    let sh = shared(slots, &ctl);
    let c = sh.claim_slot(7, false).unwrap();
    assert_eq!(c.idx, 7);
    // Seen from another thread, the owner (this thread) is alive...
    std::thread::scope(|s| {
        // A `Shared` of its own (one is not shared between threads: a
        // grown filter's carries its handle's stage maps).
        s.spawn(|| assert!(!shared(slots, &ctl).owner_dead(c.token), "live owner judged dead"));
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
fn a_thread_holds_its_slot_until_it_gives_it_back() {
    let (m, ctl) = table();
    let slots = slots_of(&m);
    let sh = shared(slots, &ctl);
    // The word is the process's (its keeper's), not the thread's: a thread
    // that ends without giving its slot back leaves it held (`claims`
    // gives a thread's slots back when it ends).
    let c = std::thread::scope(|s| {
        s.spawn(|| shared(slots, &ctl).claim_slot(3, false).unwrap())
            .join()
            .unwrap()
    });
    assert!(!sh.owner_dead(c.token));
    sh.release_slot(c);
    assert!(sh.owner_dead(c.token));
    assert_eq!(keeper::state(slots[3].owner.load(Ordering::Relaxed)), State::Free);
}

#[test]
fn a_process_that_dies_holding_a_slot_is_dead() {
    let (m, ctl) = table();
    let slots = slots_of(&m);
    let sh = shared(slots, &ctl);
    // The child ends at once, holding the slot.
    let ok = crate::sys::fork::in_child(|| sh.claim_slot(3, false).map(|c| c.idx == 3).unwrap_or(false));
    assert!(ok, "child claimed slot 3");
    let c = token(3, slots[3].gen.load(Ordering::Acquire));
    // The kernel marked the word "owner died" when the child ended.
    assert_eq!(keeper::state(slots[3].owner.load(Ordering::Relaxed)), State::Died);
    assert!(sh.owner_dead(c));
    // Its generation is retired: later checks agree without taking the word.
    assert_ne!(slots[3].gen.load(Ordering::Relaxed), untoken(c).unwrap().1);
    assert!(sh.owner_dead(c));
    // And the slot can be claimed again.
    let again = sh.claim_slot(3, false).unwrap();
    assert_eq!(again.idx, 3);
    sh.release_slot(again);
}

#[test]
fn a_full_table_overflows_into_the_shared_slot() {
    let (m, ctl) = table();
    let slots = slots_of(&m);
    let sh = shared(slots, &ctl);
    let claims: Vec<Taken> = (0..OVERFLOW).map(|_| sh.claim_slot(0, false).unwrap()).collect();
    assert_eq!(sh.claim_slot(0, false), Err(SyncError::SlotsFull));
    let (o, lease) = sh.claim_overflow().unwrap();
    assert_eq!(o.idx, OVERFLOW);
    // Its first call is under way (a lease comes back entered).
    // Another thread waits for the overflow slot while the call runs, and
    // gets it once the call ends (the keeper gives the leased word back).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let sh = shared(slots, &ctl);
            let (o2, _) = sh.claim_overflow().unwrap();
            tx.send(o2).unwrap();
            sh.release_slot(o2);
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "overflow slot taken during a call"
        );
        lease.leave();
        // A hang guard, not a bound: a loaded host may take seconds to run
        // the waiter once the slot is free.
        let o2 = rx.recv_timeout(Duration::from_secs(60)).expect("waiter got the slot");
        assert_ne!(o2.token, o.token);
    });
    assert!(lease.revoked() && !lease.enter(), "the first claim's lease is over");
    assert!(sh.owner_dead(o.token));
    slots[OVERFLOW as usize].forget(o); // the word went to the waiter: only forgotten
    let (o3, l3) = sh.claim_overflow().unwrap();
    l3.leave();
    sh.release_slot(o3);
    for c in claims {
        sh.release_slot(c);
    }
}

#[test]
fn a_rewritten_word_is_only_compared() {
    let (m, ctl) = table();
    let slots = slots_of(&m);
    let sh = shared(slots, &ctl);
    let w = &slots[5].owner;
    // Held by a TID that is not ours: skipped, its owner alive.
    w.store(0x0001_0101, Ordering::Relaxed);
    assert_eq!(slots[5].try_own(keeper::new_key()), Try::Held);
    assert!(!sh.owner_dead(token(5, 0)));
    let c = sh.claim_slot(5, false).unwrap();
    assert_eq!(c.idx, 6, "a held slot is skipped");
    sh.release_slot(c);
    // Our own keeper's TID written by someone else: never taken as ours.
    w.store(keeper::holder_tid().unwrap(), Ordering::Relaxed);
    assert_eq!(slots[5].try_own(keeper::new_key()), Try::Held);
    sh.release_slot(Taken {
        idx: 5,
        token: token(5, 0),
        key: keeper::new_key(),
    });
    assert_eq!(
        w.load(Ordering::Relaxed),
        keeper::holder_tid().unwrap(),
        "a word we do not hold is left alone"
    );
    // Every bit set: "owner died", taken over.
    w.store(u32::MAX, Ordering::Relaxed);
    let gen = slots[5].gen.load(Ordering::Relaxed);
    assert!(sh.owner_dead(token(5, gen)));
    assert_ne!(
        slots[5].gen.load(Ordering::Relaxed),
        gen,
        "the dead owner's generation is retired"
    );
    let c = sh.claim_slot(5, false).unwrap();
    assert_eq!(c.idx, 5);
    sh.release_slot(c);
    assert_eq!(keeper::state(w.load(Ordering::Relaxed)), State::Free);
    // A TID no thread can have: nobody's, taken over as a dead owner's.
    w.store(0x3fff_fff0, Ordering::Relaxed);
    let gen = slots[5].gen.load(Ordering::Relaxed);
    assert!(sh.owner_dead(token(5, gen)));
    let c = sh.claim_slot(5, false).unwrap();
    assert_eq!(c.idx, 5, "a slot naming an impossible thread is claimed");
    sh.release_slot(c);
    assert_eq!(keeper::state(w.load(Ordering::Relaxed)), State::Free);
}

#[test]
fn a_waiter_takes_its_own_token_on_a_word_as_forged() {
    let (m, ctl) = table();
    let slots = slots_of(&m);
    // SAFETY: Stripe is a plain atomic, for which all-zero bytes are valid.
    let stripes: [Stripe; 2] = unsafe { std::mem::zeroed() };
    let sh = Shared {
        stripes: &stripes,
        ..shared(slots, &ctl)
    };
    let t = sh.claim_slot(3, false).unwrap();
    let me = t.claim();
    // Our token, alive (we hold the slot), copied into a stripe, the
    // exclusive word and another slot's mark: nobody holds them.
    stripes[1].word.store(me.token, Ordering::Relaxed);
    assert_eq!(sh.begin_add(1, me), Ok(true), "the stripe is taken over");
    assert_eq!(stripes[1].word.load(Ordering::Relaxed), me.token);
    sh.end_add(1);
    ctl.excl.store(me.token | WAITERS, Ordering::Relaxed);
    slots[9].busy.store(me.token, Ordering::Relaxed);
    stripes[0].word.store(me.token, Ordering::Relaxed);
    let g = sh.lock_exclusive(me).expect("the exclusive word is taken over");
    assert_eq!(slots[9].busy.load(Ordering::Relaxed), 0, "the forged mark is cleared");
    assert_eq!(
        stripes[0].word.load(Ordering::Relaxed),
        0,
        "the forged stripe is cleared"
    );
    drop(g);
    assert_eq!(ctl.excl.load(Ordering::Relaxed), 0);
    ctl.journal.store(me.token, Ordering::Relaxed);
    drop(sh.lock_journal(me).expect("the journal word is taken over"));
    assert_eq!(ctl.journal.load(Ordering::Relaxed), 0);
    // Another live token (a slot we hold, another generation's claim is
    // dead; so a second claim of ours) is waited for, not taken.
    let t2 = sh.claim_slot(20, false).unwrap();
    assert!(!sh.gone(t2.token, me));
    sh.release_slot(t2);
    sh.release_slot(t);
}

#[test]
fn a_wait_is_bounded_by_ten_seconds_unless_told_otherwise() {
    if std::env::var_os("BLOOMFILTER_SHARED_WAIT_LIMIT").is_none() {
        assert_eq!(wait_limit(), Duration::from_secs(10));
    }
}
