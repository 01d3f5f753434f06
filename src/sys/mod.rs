//! Syscalls and OS mechanisms, each behind a few small functions: the clock,
//! file syscalls, the fork hooks, the futex, `membarrier(2)` and robust process-shared
//! mutexes. Nothing above this layer calls `libc` for them.

pub mod clock;
pub mod file;
pub mod fork;
pub mod futex;
// The slot protocol moves onto it next; until then only its tests use it.
#[cfg(test)]
pub mod keeper;
pub mod membarrier;
pub mod robust;
