//! The futex calls the lock words sleep and wake on. The words live in a
//! `MAP_SHARED` mapping used by several processes: never
//! `FUTEX_PRIVATE_FLAG`.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep while `*word == val`, at most `timeout`. Spurious returns are fine:
/// every caller re-checks its condition.
pub fn futex_wait(word: &AtomicU32, val: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 in a shared mapping. No
    // FUTEX_PRIVATE_FLAG: waiters and wakers are different processes. The
    // errors (EAGAIN value changed, ETIMEDOUT, EINTR) all mean "re-check".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            val,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wake every process sleeping on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: as in futex_wait; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}
