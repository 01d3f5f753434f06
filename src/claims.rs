//! Which process slot this thread holds for each filter it has open.
//!
//! Slots are per process (per thread, for a threaded program), not per
//! handle (DESIGN C7): every handle of one filter in a thread writes under
//! the same slot, so a process with a thousand handles takes one slot. A
//! slot belongs to the thread that locked its mutex (the kernel marks the
//! mutex when that thread ends), so the table is thread-local.
//!
//! The slot's mutex lies in the mapping of the handle that claimed it (the
//! *holder*): the robust list the kernel walks at thread exit points there.
//! When the holder is dropped it gives the slot back and bumps this
//! thread's epoch, which invalidates what every other handle cached; the
//! next of them to write claims a slot anew.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::Claim;

/// Identity of a filter: device and inode of its mapped object.
pub type Id = (u64, u64);

struct Entry {
    id: Id,
    fork: u32,
    claim: Claim,
    holder: u64,
}

/// Each thread's epochs start at a value no other thread ever used, so a
/// cached epoch from a thread that has ended can never match a new one.
static NEXT_BASE: AtomicU64 = AtomicU64::new(1 << 32);

thread_local! {
    // Relaxed: only uniqueness matters, not order with anything else.
    static EPOCH: Cell<u64> = Cell::new(NEXT_BASE.fetch_add(1 << 32, Ordering::Relaxed));
    static TABLE: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// This thread's current epoch. A claim cached under an epoch stays valid
/// while the epoch is unchanged (the same thread, no holder dropped since).
#[inline(always)]
pub fn epoch() -> u64 {
    EPOCH.with(|e| e.get())
}

/// The slot this thread holds for filter `id` in fork generation `fork`.
pub fn lookup(id: Id, fork: u32) -> Option<Claim> {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        // Entries inherited over fork name the parent's slots: not ours.
        t.retain(|e| e.fork == fork);
        t.iter().find(|e| e.id == id).map(|e| e.claim)
    })
}

/// Record that handle `holder` claimed `claim` for filter `id`.
pub fn insert(id: Id, fork: u32, claim: Claim, holder: u64) {
    TABLE.with(|t| {
        t.borrow_mut().push(Entry {
            id,
            fork,
            claim,
            holder,
        })
    });
}

/// Handle `holder` of filter `id` goes away: if it holds this thread's slot
/// for the filter, forget the slot (the caller gives it back) and start a
/// new epoch.
pub fn forget(id: Id, fork: u32, holder: u64) -> Option<Claim> {
    let gone = TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let i = t
            .iter()
            .position(|e| e.id == id && e.fork == fork && e.holder == holder)?;
        Some(t.swap_remove(i).claim)
    });
    if gone.is_some() {
        EPOCH.with(|e| e.set(e.get() + 1));
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(idx: u32) -> Claim {
        Claim { idx, token: idx + 1 }
    }

    #[test]
    fn one_slot_per_filter_per_thread() {
        let e0 = epoch();
        assert_eq!(lookup((1, 2), 7), None);
        insert((1, 2), 7, claim(3), 100);
        assert_eq!(lookup((1, 2), 7), Some(claim(3)));
        assert_eq!(lookup((1, 3), 7), None, "another filter");
        // Another handle of the filter going away changes nothing.
        assert_eq!(forget((1, 2), 7, 101), None);
        assert_eq!(epoch(), e0);
        // The holder going away forgets the slot and starts a new epoch.
        assert_eq!(forget((1, 2), 7, 100), Some(claim(3)));
        assert_ne!(epoch(), e0);
        assert_eq!(lookup((1, 2), 7), None);
    }

    #[test]
    fn entries_of_another_fork_generation_are_not_ours() {
        insert((5, 5), 1, claim(9), 1);
        assert_eq!(lookup((5, 5), 2), None);
        assert_eq!(lookup((5, 5), 1), None, "purged when seen from generation 2");
    }

    #[test]
    fn threads_have_their_own_tables_and_epochs() {
        insert((8, 8), 1, claim(1), 1);
        let mine = epoch();
        let (theirs, found) = std::thread::spawn(|| (epoch(), lookup((8, 8), 1))).join().unwrap();
        assert_eq!(found, None);
        assert_ne!(theirs >> 32, mine >> 32, "epochs of two threads never meet");
        assert_eq!(forget((8, 8), 1, 1), Some(claim(1)));
    }
}
