//! Which process slot this thread holds for each filter it has open.
//!
//! Slots are per process (per thread, for a threaded program), not per
//! handle (doc/DESIGN.md, C7): every handle of one filter in a thread writes under
//! the same slot, so a process with a thousand handles takes one slot. A
//! slot belongs to the thread that claimed it (its process's keeper holds
//! the slot's word for it), so the table is thread-local, and a thread
//! that ends gives its slots back.
//!
//! The slot's word lies in the mapping of the handle that claimed it (the
//! *holder*): the keeper's robust list, which the kernel walks when the
//! process dies, has an entry in that mapping's shadow.
//! When the holder is dropped it gives the slot back and bumps the
//! process's stamp, which invalidates what every other handle cached; the
//! next of them to write looks its slot up (or claims one) anew.

use std::cell::RefCell;
use std::sync::Arc;

use crate::shm::format::SLOTS_OFF;
use crate::sync::{Claim, Slot, Taken};
use crate::sys::fork;
use crate::sys::keeper::{Lease, ShadowMap};

/// Identity of a filter: device and inode of its mapped object.
pub type Id = (u64, u64);

/// A slot this thread holds. It owns a reference to the mapping the slot's
/// word lies in, so that the mapping is never unmapped while the word is
/// held and its shadow entry on the keeper's robust list (the kernel walks
/// that list when the process dies, and the keeper writes through it at
/// every take and give).
struct Entry {
    id: Id,
    fork: u32,
    taken: Taken,
    holder: u64,
    map: Arc<ShadowMap>,
    /// The overflow slot's lease (`Shared::claim_overflow`).
    lease: Option<Arc<Lease>>,
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
        // table names its parent's slots (and words its keeper holds).
        if self.fork == fork::fork_generation() {
            // SAFETY: the slot table lies at SLOTS_OFF of every mapping this
            // library makes (validated when it was attached), and `map`
            // keeps the mapping alive for this call.
            let slot =
                unsafe { &*(self.map.as_ptr().add(SLOTS_OFF as usize) as *const Slot).add(self.taken.idx as usize) };
            // A leased claim (the overflow slot) is entered first, so that
            // its keeper cannot give the word away while the generation
            // changes; one it gave away already is only forgotten.
            if self.lease.as_ref().map_or(true, |l| l.enter()) {
                slot.release(self.taken);
            } else {
                slot.forget(self.taken);
            }
        }
    }
}

thread_local! {
    // Dropped when the thread ends: every slot it still holds is given back
    // then (Entry's Drop), in the thread that claimed them.
    static TABLE: RefCell<Table> = const { RefCell::new(Table(Vec::new())) };
}

/// A thread's entries; a new stamp when they go, so that a thread that
/// later gets the same thread pointer finds no claim of this one valid.
struct Table(Vec<Entry>);

impl Drop for Table {
    fn drop(&mut self) {
        self.0.clear(); // gives the slots back
        fork::new_stamp();
    }
}

/// Under which a claim was cached: the thread, and the process's stamp.
/// A cached claim stays valid while `ticket()` still returns its ticket:
/// the same thread, no slot given back and no fork since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    thread: usize,
    stamp: u64,
}

impl Ticket {
    /// A ticket `ticket()` never returns: no thread pointer is 0.
    pub const NONE: Ticket = Ticket { thread: 0, stamp: 0 };
}

/// This thread's ticket now: its thread pointer and a load (no
/// thread-local variable, which costs a `__tls_get_addr` call in a shared
/// library).
#[inline(always)]
pub fn ticket() -> Ticket {
    Ticket {
        thread: thread_pointer(),
        stamp: fork::stamp(),
    }
}

/// A value no other live thread of the process has: the thread pointer
/// (the x86-64 and AArch64 ELF TLS ABIs keep it in `fs:0`, the thread
/// control block's pointer to itself, and `tpidr_el0`), else pthread_self.
/// A later thread may get the same value: `Table`'s Drop takes a new stamp.
#[inline(always)]
pub(crate) fn thread_pointer() -> usize {
    let tp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads one word of the running thread's control block, which
    // every thread of a Linux process with ELF TLS has; no other effect.
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags, pure));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads the thread pointer register; no other effect.
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags, pure));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        tp = crate::sys::fork::pthread_self();
    }
    tp
}

/// Entries of another fork generation, and orphaned ones, go; when any
/// slot is given back, a new stamp (other handles look theirs up anew).
fn prune(t: &mut Vec<Entry>, fork: u32) {
    let before = t.len();
    t.retain(|e| e.fork == fork && !e.orphaned());
    if t.len() != before {
        fork::new_stamp();
    }
}

/// The slot this thread holds for filter `id` in fork generation `fork`,
/// with its lease for the overflow slot.
pub fn lookup(id: Id, fork: u32) -> Option<(Claim, Option<Arc<Lease>>)> {
    TABLE
        .try_with(|t| {
            let mut t = t.borrow_mut();
            prune(&mut t.0, fork);
            t.0.iter()
                .find(|e| e.id == id)
                .map(|e| (e.taken.claim(), e.lease.clone()))
        })
        .ok()
        .flatten()
}

/// Give back this thread's claim `claim` of filter `id` (its lease was
/// revoked), and take a new stamp.
pub fn drop_claim(id: Id, claim: Claim) {
    let gone = TABLE.try_with(|t| {
        let mut t = t.borrow_mut();
        let i = t.0.iter().position(|e| e.id == id && e.taken.claim() == claim)?;
        Some(t.0.swap_remove(i))
    });
    if let Ok(Some(e)) = gone {
        drop(e); // gives the slot back
        fork::new_stamp();
    }
}

/// Record that handle `holder`, whose mapping is `map`, took `taken` for
/// filter `id` (with the overflow slot's `lease`). False when the thread's
/// table is gone (the thread is ending): the caller then gives the slot
/// back after its call.
pub fn insert(id: Id, fork: u32, taken: Taken, holder: u64, map: Arc<ShadowMap>, lease: Option<Arc<Lease>>) -> bool {
    TABLE
        .try_with(|t| {
            t.borrow_mut().0.push(Entry {
                id,
                fork,
                taken,
                holder,
                map,
                lease,
            })
        })
        .is_ok()
}

/// Handle `holder` of filter `id` goes away: if it holds this thread's slot
/// for the filter, give the slot back and take a new stamp.
pub fn forget(id: Id, fork: u32, holder: u64) {
    let gone = TABLE.try_with(|t| {
        let mut t = t.borrow_mut();
        let i =
            t.0.iter()
                .position(|e| e.id == id && e.fork == fork && e.holder == holder)?;
        Some(t.0.swap_remove(i))
    });
    if let Ok(Some(e)) = gone {
        drop(e); // gives the slot back
        fork::new_stamp();
    }
}
