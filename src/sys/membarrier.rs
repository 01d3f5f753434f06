//! `membarrier(2)`: this process's registration for global expedited
//! barriers, and the barrier itself.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::fork;

// membarrier(2) commands (linux/membarrier.h).
const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;

/// `fork generation << 1 | registered` of this process's registration for
/// `MEMBARRIER_CMD_GLOBAL_EXPEDITED`; 0 before the first try.
static LIGHT_FENCES: AtomicU64 = AtomicU64::new(0);

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes two integers and no pointer; an unknown or
    // filtered command only returns an error.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint, 0 as libc::c_int) }
}

/// Whether this process may mark its slots for lock-free adds with plain
/// stores: it is registered for `MEMBARRIER_CMD_GLOBAL_EXPEDITED`, so an
/// exclusive operation in any process can fence its CPU. Tried once per
/// process (and again in a forked child); false where the kernel is older
/// than 4.16 or a seccomp filter refuses the call.
pub fn light_fences() -> bool {
    let gen = u64::from(fork::fork_generation());
    // Relaxed: a cache of this process's own result; two threads that
    // race both register, which is harmless.
    let v = LIGHT_FENCES.load(Ordering::Relaxed);
    if v >> 1 == gen {
        return v & 1 == 1;
    }
    let want = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
    let q = membarrier(MEMBARRIER_CMD_QUERY);
    let ok = q >= 0
        && q & libc::c_long::from(want) == libc::c_long::from(want)
        && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
    LIGHT_FENCES.store(gen << 1 | u64::from(ok), Ordering::Relaxed);
    ok
}

/// Make every CPU that runs a thread of a registered process execute a
/// full barrier (`MEMBARRIER_CMD_GLOBAL_EXPEDITED`); false when the call
/// failed.
pub fn global_barrier() -> bool {
    membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0
}
