//! Waiting for another process's word (doc/DESIGN.md, C4, C11, S3): every wait
//! has a bound, `wait_limit`, for one holder; a holder that keeps a word
//! longer is stopped, or the word was forged (a process that can write
//! the file can name a thread that exists), and the waiter fails naming the
//! word and its holder, holding nothing. The waiter's own token is a
//! forgery it takes over at once (`Shared::gone`), as `keeper::state` does
//! a TID no thread can have.

use super::*;

/// `wait_limit` unless the environment says otherwise.
const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// How long a waiter waits for one holder of a lock word (doc/DESIGN.md,
/// C4): 10 s, or `BLOOMFILTER_SHARED_WAIT_LIMIT` seconds (a number above 0,
/// at most a day), read once per process, when a wait first lasts a slice.
/// A live holder keeps a stripe for nanoseconds, and the exclusive word
/// while its operation moves on (each chunk of a clear or a merge restarts
/// the time); one that keeps a word longer is stopped, or the word was
/// forged.
pub fn wait_limit() -> Duration {
    static LIMIT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("BLOOMFILTER_SHARED_WAIT_LIMIT")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|&v| v > 0.0 && v <= 86_400.0)
            .map_or(WAIT_LIMIT, Duration::from_secs_f64)
    })
}

/// How many times `wait_limit` one wait may last in all, whatever its
/// holders do: a word that keeps naming new holders, or an exclusive
/// operation that keeps moving, restarts the time for one holder, and a
/// process that can write the file could do either for ever (two of its
/// threads taking turns in a stripe's word, say).
pub const WAIT_TOTAL: u32 = 6;

/// The time one wait has waited for one holder: restarted whenever the
/// word names another holder, or the holder shows progress; and the time
/// it has waited in all, never restarted (`WAIT_TOTAL`).
pub(super) struct Waited {
    since: Instant,
    first: Instant,
    seen: (u32, u64),
}

impl Waited {
    pub(super) fn new(seen: (u32, u64)) -> Waited {
        let now = Instant::now();
        Waited {
            since: now,
            first: now,
            seen,
        }
    }

    /// True once `wait_limit` passed with `seen` (the holder's token,
    /// `WAITERS` aside, and a progress word) unchanged, or `WAIT_TOTAL`
    /// times it since the wait began.
    pub(super) fn over(&mut self, seen: (u32, u64)) -> bool {
        self.over_at(seen, Instant::now(), wait_limit())
    }

    /// `over` at `now` with the limit `limit`.
    fn over_at(&mut self, seen: (u32, u64), now: Instant, limit: Duration) -> bool {
        if now.saturating_duration_since(self.first) >= limit * WAIT_TOTAL {
            return true;
        }
        let seen = (seen.0 & !WAITERS, seen.1);
        if seen != (self.seen.0 & !WAITERS, self.seen.1) {
            self.since = now;
            self.seen = seen;
            return false;
        }
        now.saturating_duration_since(self.since) >= limit
    }
}

/// The error of a wait that reached `wait_limit`, for `what`.
pub(super) fn stuck(what: String) -> Error {
    Error::waited_for(what, wait_limit())
}

impl<'a> Shared<'a> {
    /// Whether the holder named by `tok`, on a word the caller `me` waits
    /// for, can never release it: `owner_dead`, or `me`'s own token (a
    /// thread never waits for a word it holds: someone copied the token
    /// there, and no other holder can be named by it, since the slot and
    /// its generation are ours).
    pub(super) fn gone(&self, tok: u32, me: Claim) -> bool {
        tok & !WAITERS == me.token || self.owner_dead(tok)
    }

    /// The error of a wait for `what`, held by `tok`, that reached
    /// `wait_limit`, nothing held: the holder's slot and its word.
    #[cold]
    #[inline(never)]
    pub fn stuck(&self, what: &str, tok: u32) -> Error {
        match untoken(tok) {
            Some((idx, _)) => stuck(format!("{what}, held by {}", self.holder(idx))),
            // 0: a caller that waited for no one word (`rotate`).
            None if tok == 0 => stuck(what.to_string()),
            None => stuck(format!("{what}, held by {tok:#x}")),
        }
    }

    /// Slot `idx`, its word, and whether the thread the word names answers
    /// the kernel here (a thread of another PID namespace may not: a hint,
    /// never a verdict).
    pub(super) fn holder(&self, idx: u32) -> String {
        // Relaxed: only reported.
        let word = self.slots[idx as usize].owner.load(Ordering::Relaxed);
        let thread = match keeper::state(word) {
            State::Held(tid) => match crate::sys::futex::thread_answers(tid) {
                Some(false) => format!(" of thread {tid}, which does not answer"),
                Some(true) => format!(" of thread {tid}, which is alive but does not let go"),
                None => format!(" of thread {tid}"),
            },
            _ => String::new(),
        };
        format!("slot {idx} (word {word:#x}){thread}")
    }

    /// Poll until `word` no longer holds `held` (true), clearing it if its
    /// owner died, or until `limit` from `start` has passed (false).
    pub(super) fn wait_changed(&self, word: &AtomicU32, held: u32, start: std::time::Instant, limit: Duration) -> bool {
        let mut i = 0u32;
        let mut checked = start;
        // Relaxed: a changed word is all we wait for; what its holder wrote
        // is published by the holder's Release and read under our callers'
        // own Acquire (the clean mark, the view).
        while word.load(Ordering::Relaxed) == held {
            i += 1;
            if i < 100 {
                std::hint::spin_loop();
                continue;
            }
            if i < 200 {
                std::thread::yield_now();
                continue;
            }
            if checked.elapsed() >= WAIT_SLICE || i == 200 {
                checked = std::time::Instant::now();
                if self.owner_dead(held) {
                    // AcqRel: as wait_word's take-over.
                    let _ = word.compare_exchange(held, 0, Ordering::AcqRel, Ordering::Relaxed);
                    return true;
                }
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    }

    /// Wait until stripe `s` (`word`) no longer holds `held`; clear it if
    /// its owner died or the token is `me`'s (`gone`). Polls: releasers
    /// store 0 without looking for waiters. An error after `wait_limit`.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_word(&self, word: &AtomicU32, held: u32, me: Claim, s: usize) -> Result<(), Error> {
        // A stripe is held for a few hundred nanoseconds: spin first, then
        // yield (the owner may be preempted), then poll with short sleeps,
        // checking the owner's liveness every WAIT_SLICE.
        for i in 0..200u32 {
            if i < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            if word.load(Ordering::Relaxed) != held {
                return Ok(());
            }
        }
        let mut waited = Waited::new((held, 0));
        loop {
            if self.gone(held, me) {
                // AcqRel: Acquire pairs with whatever the dead owner managed
                // to publish; Release hands the cleared word to the next taker.
                let _ = word.compare_exchange(held, 0, Ordering::AcqRel, Ordering::Relaxed);
                return Ok(());
            }
            if waited.over((held, 0)) {
                return Err(self.stuck(&format!("stripe {s}"), held));
            }
            let polls = (WAIT_SLICE.as_micros() / POLL.as_micros()) as u32;
            for _ in 0..polls {
                std::thread::sleep(POLL);
                if word.load(Ordering::Relaxed) != held {
                    return Ok(());
                }
            }
        }
    }

    /// Wait for the exclusive operation of `tok` to end; recover it if its
    /// owner died (or the token is `me`'s, `gone`). An error after
    /// `wait_limit` without progress (`progress`), nothing held.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_exclusive(&self, tok: u32, me: Claim) -> Result<(), Error> {
        let excl = &self.ctl.excl;
        let mut cur = tok;
        let mut waited = Waited::new(self.progress(cur));
        loop {
            if cur == 0 {
                return Ok(());
            }
            if self.gone(cur, me) {
                // Take the dead owner's lock and finish its work, so that
                // the epoch and any pending clear are left consistent.
                if let Some(g) = self.steal_exclusive(cur, me)? {
                    drop(g);
                }
                return Ok(());
            }
            if waited.over(self.progress(cur)) {
                return Err(self.stuck("the exclusive word", cur));
            }
            sleep_on(&self.ctl.excl, cur);
            cur = excl.load(Ordering::Acquire);
        }
    }

    /// What a waiter for the exclusive word sees of its holder: its token
    /// and the cursor, which a clear, an invert or a merge's application
    /// moves every chunk.
    pub(super) fn progress(&self, cur: u32) -> (u32, u64) {
        // Relaxed: a hint that the holder moves on.
        (cur, self.ctl.cursor.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_at_its_total_whatever_its_holders_do() {
        let limit = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut w = Waited::new((7, 0));
        w.first = t0;
        w.since = t0;
        // One holder: over at the limit, not before.
        assert!(!w.over_at((7, 0), t0 + limit / 2, limit));
        assert!(w.over_at((7, 0), t0 + limit, limit));
        // WAITERS is no new holder.
        let mut w = Waited::new((7, 0));
        w.first = t0;
        w.since = t0;
        assert!(w.over_at((7 | WAITERS, 0), t0 + limit, limit));
        // Holders taking turns, or progress, each within the limit: the
        // time restarts, until the total.
        let mut w = Waited::new((7, 0));
        w.first = t0;
        w.since = t0;
        let step = limit / 2;
        let mut at = t0;
        let mut turns = 0;
        loop {
            at += step;
            turns += 1;
            if w.over_at((7 + turns % 2, turns as u64), at, limit) {
                break;
            }
            assert!(turns < 1000, "never over");
        }
        assert_eq!(at - t0, limit * WAIT_TOTAL);
    }
}
