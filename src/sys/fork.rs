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

/// Stop this process (`SIGSTOP`) until a signal goes on or ends it.
#[cfg(feature = "test-hooks")]
pub fn stop_self() {
    // SAFETY: raising a signal at ourselves.
    unsafe { libc::raise(libc::SIGSTOP) };
}

/// The running thread's `pthread_self`, where its thread pointer cannot be
/// read directly.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn pthread_self() -> usize {
    // SAFETY: pthread_self has no preconditions and cannot fail.
    unsafe { libc::pthread_self() as usize }
}

/// Run `child` in a forked child that ends with `_exit` (status 0 when
/// `child` says true) and never returns into the caller; wait for it:
/// whether it ended with status 0. For tests of what a process leaves
/// behind when it ends.
#[cfg(test)]
pub fn in_child(child: impl FnOnce() -> bool) -> bool {
    // SAFETY: the child only runs `child` and leaves with _exit, never
    // returning into the caller.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let ok = child();
        // SAFETY: ends the child at once, holding whatever `child` took.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
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
