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
use std::sync::Arc;

use memmap2::MmapRaw;

use crate::format::SLOTS_OFF;
use crate::sync::{self, Claim, Slot};

/// Identity of a filter: device and inode of its mapped object.
pub type Id = (u64, u64);

/// A slot this thread holds. It owns a reference to the mapping the slot's
/// mutex lies in, so that the mapping is never unmapped while the mutex is
/// locked and on this thread's robust list (the kernel walks that list when
/// the thread ends, and glibc writes through it at every lock and unlock).
struct Entry {
    id: Id,
    fork: u32,
    claim: Claim,
    holder: u64,
    map: Arc<MmapRaw>,
}

impl Entry {
    /// Whether the handle that claimed the slot is gone (dropped, perhaps in
    /// another thread, which could not give the slot back).
    fn orphaned(&self) -> bool {
        Arc::strong_count(&self.map) == 1
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // Only in the process that claimed it: a forked child's copy of the
        // table names its parent's slots (and a mutex it does not hold).
        if self.fork == sync::fork_generation() {
            // SAFETY: the slot table lies at SLOTS_OFF of every mapping this
            // library makes (validated when it was attached), and `map`
            // keeps the mapping alive for this call.
            let slot =
                unsafe { &*(self.map.as_ptr().add(SLOTS_OFF as usize) as *const Slot).add(self.claim.idx as usize) };
            slot.release(self.claim);
        }
    }
}

/// Each thread's epochs start at a value no other thread ever used, so a
/// cached epoch from a thread that has ended can never match a new one.
static NEXT_BASE: AtomicU64 = AtomicU64::new(1 << 32);

thread_local! {
    // Relaxed: only uniqueness matters, not order with anything else.
    static EPOCH: Cell<u64> = Cell::new(NEXT_BASE.fetch_add(1 << 32, Ordering::Relaxed));
    // Dropped when the thread ends: every slot it still holds is given back
    // then (Entry's Drop), in the thread that holds the mutexes.
    static TABLE: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// This thread's current epoch. A claim cached under an epoch stays valid
/// while the epoch is unchanged (the same thread, no slot given back since).
/// 0 once the thread's table is gone (thread exit): nothing matches it.
#[inline(always)]
pub fn epoch() -> u64 {
    EPOCH.try_with(|e| e.get()).unwrap_or(0)
}

fn new_epoch() {
    let _ = EPOCH.try_with(|e| e.set(e.get() + 1));
}

/// Entries of another fork generation, and orphaned ones, go; when any
/// slot is given back, a new epoch starts (other handles claim anew).
fn prune(t: &mut Vec<Entry>, fork: u32) {
    let before = t.len();
    t.retain(|e| e.fork == fork && !e.orphaned());
    if t.len() != before {
        new_epoch();
    }
}

/// The slot this thread holds for filter `id` in fork generation `fork`.
pub fn lookup(id: Id, fork: u32) -> Option<Claim> {
    TABLE
        .try_with(|t| {
            let mut t = t.borrow_mut();
            prune(&mut t, fork);
            t.iter().find(|e| e.id == id).map(|e| e.claim)
        })
        .ok()
        .flatten()
}

/// Record that handle `holder`, whose mapping is `map`, claimed `claim` for
/// filter `id`. False when the thread's table is gone (the thread is
/// ending): the caller then gives the slot back after its call.
pub fn insert(id: Id, fork: u32, claim: Claim, holder: u64, map: Arc<MmapRaw>) -> bool {
    TABLE
        .try_with(|t| {
            t.borrow_mut().push(Entry {
                id,
                fork,
                claim,
                holder,
                map,
            })
        })
        .is_ok()
}

/// Handle `holder` of filter `id` goes away: if it holds this thread's slot
/// for the filter, give the slot back and start a new epoch.
pub fn forget(id: Id, fork: u32, holder: u64) {
    let gone = TABLE.try_with(|t| {
        let mut t = t.borrow_mut();
        let i = t
            .iter()
            .position(|e| e.id == id && e.fork == fork && e.holder == holder)?;
        Some(t.swap_remove(i))
    });
    if let Ok(Some(e)) = gone {
        drop(e); // gives the slot back
        new_epoch();
    }
}
