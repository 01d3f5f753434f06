//! libFuzzer target: see `image` in tests/fuzz/oracles.rs.
#![no_main]

#[path = "../../tests/fuzz/oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::image(data));
