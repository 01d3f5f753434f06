//! Hardening tests, in one binary (one link under the release profile's LTO):
//! the lock protocol's slow paths within one process, edges of the Rust API,
//! the C API's boundary, and the fuzz corpus replayed with a bounded
//! mutation run (`FUZZ_ITERS`).

mod claims;
mod contention;
mod edges;
mod ffi;
mod fuzz_replay;
mod layouts;
#[path = "../fuzz/oracles.rs"]
mod oracles;
