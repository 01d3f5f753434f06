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

/// Options of a new plain filter of `layout` (mode 0600), sized by its
/// capacity and rate, seeded with `seed`: what the C API tests start from.
fn plain_options(layout: u32, seed: u64) -> bloomfilter_shared::hooks::ffi::BfsOptions {
    bloomfilter_shared::hooks::ffi::BfsOptions {
        mode: 0o600,
        seed,
        layout,
        generations: 0,
        window: 0.0,
        bits: 0,
        hashes: 0,
        grow: 0,
        max_capacity: 0,
        max_bytes: 0,
    }
}
