//! The words several processes write, other than the bits: the header's
//! control line, the slot table and the add stripes, each on its own cache
//! line; their layout here, their protocol in `sync`.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// The header's control line: written only by exclusive operations and by
/// waiters announcing themselves.
#[repr(C, align(64))]
pub struct Control {
    pub flags: AtomicU32,
    pub epoch: AtomicU32,
    pub excl: AtomicU32,
    /// The exclusive operation under way that a recoverer can finish.
    pub pending: AtomicU32,
    /// Its progress: `2c` when chunks below `c` are done, `2c + 1` while
    /// chunk `c` is being changed and the scratch holds its words as they
    /// were before.
    pub cursor: AtomicU64,
    /// The journal's owner token (a merger or intersecter, see
    /// `lock_journal`), with WAITERS when someone sleeps on it; 0 when free.
    pub journal: AtomicU32,
    /// A grown filter's published stage count (§8 N6; 0 or 1 in a new
    /// file: stage 0 alone); 0 in every other filter.
    pub stages: AtomicU32,
}

/// One process slot: its own cache line, written only by its owner (and by a
/// process taking it over from a dead owner).
#[repr(C, align(64))]
pub struct Slot {
    /// The slot's robust futex word (`sys::keeper`): 0 while free, else the
    /// TID of the owning process's keeper with the kernel's bits. Only the
    /// keeper changes it; every other reader only compares it.
    pub owner: AtomicU32,
    /// Claim generation: changed, by the holder of `owner`, whenever the slot
    /// is claimed or given back, so every token of an earlier claim is dead.
    pub gen: AtomicU32,
    /// Owner token while a merge is in flight, else 0.
    pub busy: AtomicU32,
    /// `LIGHT` while the owner marks `busy` for lock-free adds with plain
    /// stores, relying on exclusive operations to fence it with
    /// `membarrier(2)` (`fence_light_adders`); 0 otherwise. Set by the
    /// claimant, reset with every new generation.
    pub fence: AtomicU32,
    /// Operations performed through this slot, over all its owners.
    pub ops: AtomicU64,
    /// Zero in every file this library writes.
    pub reserved: [AtomicU64; 5],
}

/// One add stripe, alone on its cache line (doc/DESIGN.md, C5).
#[repr(C, align(64))]
pub struct Stripe {
    pub word: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Control>() == 64);
const _: () = assert!(std::mem::size_of::<Slot>() == 64);
const _: () = assert!(std::mem::size_of::<Stripe>() == 64);
// Every slot's word lies within the shadow's reach (sys::keeper::SHADOW).
const _: () = assert!(crate::shm::format::STRIPES_OFF as usize <= crate::sys::keeper::SHADOW);
