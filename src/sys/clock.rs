//! The clock windowed filters read.

/// `CLOCK_REALTIME_COARSE` plus its resolution: the time of the last timer
/// tick, read without the counter arithmetic of `CLOCK_REALTIME`, moved up
/// by one tick so that it is never behind the real time (an item is never
/// taken to have been added before it was). So it can be up to one tick
/// ahead: a step, or the forgetting of an item added in the last tick of a
/// period, can come up to one tick early (the documented bounds hold to
/// within a tick). Windowed filters read it on every call.
pub fn now_ns() -> u64 {
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
