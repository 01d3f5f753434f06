//! Syscalls and OS mechanisms, each behind a few small functions: the clock,
//! file syscalls, the fork hooks, the futex, `membarrier(2)`, robust futex words
//! with their keeper thread, the `SIGBUS` handler for lost pages, and the room a
//! new mapping has (`memory`). Nothing above this layer calls `libc` for them.

pub mod clock;
pub mod file;
pub mod fork;
pub mod futex;
pub mod keeper;
pub mod membarrier;
pub mod sigbus;
pub mod memory;
