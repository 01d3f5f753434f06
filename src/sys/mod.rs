//! Syscalls and OS mechanisms, each behind a few small functions: the clock,
//! file syscalls, the fork hooks, the futex, `membarrier(2)` and robust process-shared
//! mutexes. Nothing above this layer calls `libc` for them.

pub mod clock;
pub mod file;
pub mod fork;
pub mod futex;
// Futex words with a private robust list (doc/DESIGN.md, G1): the slot
// table does not use them yet, so they are built for their tests only.
#[cfg(test)]
pub mod keeper;
pub mod membarrier;
pub mod robust;
