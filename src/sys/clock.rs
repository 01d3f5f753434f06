//! The clock windowed filters read.

/// `CLOCK_REALTIME_COARSE` plus its resolution: the time of the last timer
/// tick, read without the counter arithmetic of `CLOCK_REALTIME`, moved up
/// by one tick so that it is never behind the real time (an item is never
/// taken to have been added before it was). So it can be up to one tick
/// ahead: a step, or the forgetting of an item added in the last tick of a
/// period, can come up to one tick early (the documented bounds hold to
/// within a tick). Windowed filters read it on every call.
pub fn now_ns() -> u64 {
    #[cfg(any(test, feature = "test-hooks"))]
    if let Some(t) = FAKE_NOW.with(|f| f.get()) {
        return t;
    }
    static TICK_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let tick = *TICK_NS.get_or_init(|| {
        let mut r = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: r is a valid timespec to write.
        let ok = unsafe { libc::clock_getres(libc::CLOCK_REALTIME_COARSE, &mut r) } == 0;
        if ok && r.tv_sec >= 0 && r.tv_nsec >= 0 {
            (r.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(r.tv_nsec as u64)
        } else {
            10_000_000 // HZ = 100, the coarsest Linux has
        }
    });
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write; the clock id is one every
    // Linux since 2.6.32 has.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 || ts.tv_sec < 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
        .saturating_add(tick)
}

// A clock the tests drive: a test sets the time its own thread's windowed
// calls read, so that a window's steps and expiries come where the test
// says and not where a loaded machine's scheduler puts them. Per thread:
// tests run side by side in one process, and another thread's handle (a
// test's helper thread) keeps the real clock. Only with `test-hooks` (and
// in the crate's unit tests): the library's build reads the real clock.
#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    static FAKE_NOW: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Make this thread's `now_ns` return `t` (None: the real clock again).
#[cfg(any(test, feature = "test-hooks"))]
pub fn set_fake_now(t: Option<u64>) {
    FAKE_NOW.with(|f| f.set(t));
}

/// Move this thread's fake clock on by `d` ns (from the real time when it
/// was not set).
#[cfg(any(test, feature = "test-hooks"))]
pub fn advance_fake_now(d: u64) {
    let t = FAKE_NOW.with(|f| f.get()).unwrap_or_else(now_ns);
    set_fake_now(Some(t.saturating_add(d)));
}

/// Sets this thread's fake clock for as long as it lives, and gives the
/// real one back when dropped (a failed assertion included).
#[cfg(any(test, feature = "test-hooks"))]
pub struct FakeClock;

#[cfg(any(test, feature = "test-hooks"))]
impl FakeClock {
    /// The fake clock, starting at the real time now.
    pub fn start() -> Self {
        set_fake_now(Some(now_ns()));
        FakeClock
    }

    /// The time the fake clock says.
    pub fn now(&self) -> u64 {
        now_ns()
    }

    /// Set it to `t` (ns since the epoch).
    pub fn set(&self, t: u64) {
        set_fake_now(Some(t));
    }

    /// Move it on by `d` ns.
    pub fn advance(&self, d: u64) {
        advance_fake_now(d);
    }
}

#[cfg(any(test, feature = "test-hooks"))]
impl Drop for FakeClock {
    fn drop(&mut self) {
        set_fake_now(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_clock_is_this_threads_and_goes_away_when_dropped() {
        let real = now_ns();
        {
            let c = FakeClock::start();
            c.set(5);
            assert_eq!(now_ns(), 5);
            c.advance(7);
            assert_eq!(c.now(), 12);
            let other = std::thread::spawn(now_ns).join().unwrap();
            assert!(other >= real, "another thread keeps the real clock");
        }
        assert!(now_ns() >= real, "the real clock again");
    }
}
