//! Fork hooks: the fork generation, which changes in a child after every
//! fork, and the claim stamp, which changes with it (and whenever a cached
//! claim must be looked up again: see `sync::claims`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

static FORK_GEN: AtomicU32 = AtomicU32::new(1);
static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn on_fork_child() {
    // Relaxed: the child is single-threaded right after fork; handles read it
    // on their next operation in this same thread.
    FORK_GEN.fetch_add(1, Ordering::Relaxed);
    // The parent's cached claims name the parent's slots.
    new_stamp();
}

/// The current fork generation; it changes in a child after every fork, so a
/// handle notices it was inherited without a `getpid` on the hot path.
#[inline]
pub fn fork_generation() -> u32 {
    ATFORK.call_once(|| {
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe {
            libc::pthread_atfork(None, None, Some(on_fork_child));
        }
    });
    FORK_GEN.load(Ordering::Relaxed)
}

/// Changed whenever a slot is given back anywhere in the process, a
/// thread's table goes, or the process is a fork's child: a cached claim
/// names the value it was cached under (`Ticket`).
static STAMP: AtomicU64 = AtomicU64::new(0);

/// The claim stamp now (see `sync::claims::ticket`).
#[inline(always)]
pub fn stamp() -> u64 {
    // Relaxed: every change that must invalidate this thread's claims
    // happens-before this load (made by this thread; by a thread that ended
    // before one with its thread pointer could start; or in the fork
    // child's own handler), so coherence shows it here.
    STAMP.load(Ordering::Relaxed)
}

/// Invalidate every cached claim of the process (they are looked up again).
pub fn new_stamp() {
    // Relaxed: see stamp().
    STAMP.fetch_add(1, Ordering::Relaxed);
}
