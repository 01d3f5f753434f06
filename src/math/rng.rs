//! The tests' random numbers: xorshift64 (shifts 13, 7, 17) from a fixed
//! seed, so that every run draws the same.

/// The generator seeded with `x` (not 0), as a closure giving the next
/// value at each call.
pub fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
