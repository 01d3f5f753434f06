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

/// Whether a thread with this TID exists in this process's PID namespace,
/// asked of the futex code itself: `FUTEX_TRYLOCK_PI` on a private word of
/// our own that names `tid` makes the kernel look its owner up, and
/// `ESRCH` says there is none. The shared word is never touched. A thread
/// of another PID namespace may carry the same number, or none here: the
/// answer names a thread, it never proves a holder dead. None where the
/// kernel would not say (no PI futexes).
pub fn thread_answers(tid: u32) -> Option<bool> {
    // A private copy: FUTEX_PRIVATE_FLAG is right here, nobody else sees it.
    let word = AtomicU32::new(tid & 0x3fff_ffff);
    // SAFETY: `word` is a valid, aligned u32 of ours that outlives the call;
    // a trylock never sleeps. Taken (a TID of 0, or an owner-died word,
    // neither possible here) leaves only our own private word changed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_TRYLOCK_PI | libc::FUTEX_PRIVATE_FLAG,
            0u32,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if rc == 0 {
        return None;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ESRCH) => Some(false),
        // Held by a thread that exists (EAGAIN), our own (EDEADLK), a
        // kernel thread (EPERM).
        Some(libc::EAGAIN) | Some(libc::EDEADLK) | Some(libc::EPERM) => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_answers_and_a_reaped_one_does_not() {
        // SAFETY: gettid has no arguments and cannot fail.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        assert_eq!(thread_answers(me), Some(true));
        assert_eq!(thread_answers(std::process::id()), Some(true));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: no such thread now (a new process may take the number
        // later, not in this instant on any but a racing host).
        assert_eq!(thread_answers(pid), Some(false));
        // Past the kernel's PID_MAX_LIMIT: no thread anywhere.
        assert_eq!(thread_answers(0x3fff_fff0), Some(false));
    }
}
