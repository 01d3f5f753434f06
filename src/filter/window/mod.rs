//! A windowed filter (`math::window` has its design and arithmetic): the
//! words of the window, the step protocol, and the spare's cleaning.

mod add;
mod query;

#[cfg(test)]
pub(in crate::filter) use add::BETWEEN;

use super::*;

/// How long a windowed filter's cleaner waits for adds in flight before it
/// leaves the clear to a later writer: far longer than an add takes, so
/// mostly a stopped adder makes it give up (steps wait meanwhile, and
/// items live longer, never shorter).
pub(in crate::filter) const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_millis(20);
/// After a drain that gave up, how long this handle's adds leave the
/// spare alone: an adder pays DRAIN_LIMIT at most once in this long.
pub(in crate::filter) const DRAIN_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);
/// How much of the spare a windowed add call clears (64 KiB: a few
/// microseconds). Right after a step the spare is clean again after
/// generation bytes / 64 KiB writing calls, long before the next step is
/// due; a step that finds it not clean yet waits for more writes (items
/// only live longer meanwhile).
pub(in crate::filter) const SPARE_SLICE_WORDS: usize = 8192;
/// Items of a windowed `contains_many` that share one reading of the clock
/// and the view, and of an `add_many` that share one reading of the clock
/// (and one look for a due step): few enough that the clock is read every
/// few microseconds.
const WINDOW_QUERY_GROUP: usize = 64;
/// Items of a windowed `contains_many` hashed at a time (ahead of their
/// looks, which then prefetch ahead within the chunk).
const WINDOW_HASH_CHUNK: usize = 1024;
/// The most ring slots a windowed filter has (generations and the spare).
const MAX_RING: usize = Window::MAX_GENERATIONS as usize + 1;

/// Attempts of a windowed copy that cannot hold the cleaner word (a
/// read-only handle) before it gives up: each fails only when two steps
/// land during one copy of the generations.
const SNAPSHOT_TRIES: u32 = 16;

/// The cleaner word held by a windowed copy, released when it ends.
struct CleanerHold<'a>(&'a AtomicU32);

impl Drop for CleanerHold<'_> {
    fn drop(&mut self) {
        // Release: pairs with the next cleaner's Acquire (take_cleaner).
        self.0.store(0, Ordering::Release);
    }
}

/// A windowed filter's facts, copied from the validated header, and this
/// handle's own state of its steps and clears (`Kind::Windowed`).
pub(in crate::filter) struct Win {
    pub(in crate::filter) w: Window,
    /// Words of one generation's bit array.
    pub(in crate::filter) gen_words: usize,
    /// Where each ring slot's bit array starts, in the mapping; the
    /// entries past the ring point at slot 0's, so that every entry is a
    /// generation's start (`Filter::generation`).
    gens: [*const AtomicU64; MAX_RING],
    /// Until when this handle's adds leave the spare alone: its last clear
    /// found a stopped adder in the drain (see `DRAIN_LIMIT`).
    pub(in crate::filter) clean_after: Cell<Option<std::time::Instant>>,
    /// How many times this handle's clears gave up on a drain: the tests'
    /// measure of how often adds paid `DRAIN_LIMIT`, which a loaded
    /// machine's clock cannot give.
    #[cfg(test)]
    pub(in crate::filter) drains_given_up: Cell<u32>,
    /// Until when this handle leaves closing and opening the filter to
    /// lock-free adds alone, having found a stopped adder in a drain (see
    /// `DRAIN_LIMIT`).
    pub(in crate::filter) step_after: Cell<Option<std::time::Instant>>,
    /// The clock's last grid number and the instants `[from, to)` it holds
    /// for (`Window::grid_span`): most calls find the clock still inside.
    grid_cache: Cell<(u64, u64, u64)>,
}

impl Win {
    /// The state of window `w` over the bit array at `bits`, generations
    /// of `gen_words` words each.
    pub(in crate::filter) fn new(w: Window, gen_words: usize, bits: *const AtomicU64) -> Win {
        let mut gens = [bits; MAX_RING];
        for (slot, g) in gens.iter_mut().enumerate().take(w.ring_len() as usize) {
            // SAFETY: the bit array is `ring_len` generations of
            // `gen_words` words (words = gen_words * arrays, and a
            // windowed header's arrays are its ring), so each slot's
            // start lies inside it.
            *g = unsafe { bits.add(slot * gen_words) };
        }
        Win {
            w,
            gen_words,
            gens,
            clean_after: Cell::new(None),
            #[cfg(test)]
            drains_given_up: Cell::new(0),
            step_after: Cell::new(None),
            grid_cache: Cell::new((0, 0, 0)),
        }
    }
}

/// What `stats` reports of a windowed filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowStats {
    /// The window in ns as it was given (`Window::given_ns`; None:
    /// stepped only by `rotate`).
    pub window_ns: Option<u64>,
    pub generations: u32,
    /// The current generation's number: the grid period it started in
    /// (for a filter stepped only by `rotate`, the steps taken).
    pub current: u64,
    /// When the current generation's period started, in ns since the Unix
    /// epoch (None for a filter stepped only by `rotate`).
    pub current_start_ns: Option<u64>,
}

/// What `Filter::step_state` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepState {
    /// This call stepped.
    Stepped,
    /// No step due, or another process took it.
    NoStep,
    /// A step is due, but the spare is not clear yet; `expired`: nor is
    /// the current generation visible any more.
    SpareDirty { expired: bool },
}

/// The window of a new filter made with options `wo`, starting now.
pub(in crate::filter) fn new_window(wo: WindowOptions) -> Result<Window> {
    let g = wo.generations_or(Window::DEFAULT_GENERATIONS);
    Window::new(wo.window_ns, g, now_ns()).map_err(Error::arg)
}

/// Where a windowed image's state `st` goes in a new filter of window
/// `w` (`Filter::with_state`): the view its current generation is slot 0
/// of, and the `(header offset, word)` pairs of the view, `last` and
/// clean words.
pub(in crate::filter) fn state_words(w: Window, st: &crate::shm::serial::WindowState) -> (View, Vec<(u64, u64)>) {
    debug_assert_eq!(st.window, w);
    debug_assert_eq!(st.last.len(), w.generations() as usize);
    let v = View { m: st.current, pos: 0 };
    let mut words = vec![(format::OFF_VIEW, v.pack())];
    for (d, last) in st.last.iter().enumerate() {
        words.push((format::OFF_LAST + 8 * w.slot_at(v, d as u32) as u64, *last));
    }
    // write_header marked slot 1 clean for the initial view's step; mark
    // it for this view's.
    words.push((format::OFF_CLEAN + 8 * w.spare(v) as u64, v.clean_mark()));
    (v, words)
}

/// A windowed filter's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowOptions {
    /// The window in ns (`window::window_from_secs`); None: the filter
    /// steps only when told (`rotate`).
    pub window_ns: Option<u64>,
    /// 2 to 16; 0 when not given: `Window::DEFAULT_GENERATIONS` for a new
    /// filter, an existing one's (or windowed bytes') own otherwise.
    pub generations: u32,
}

impl WindowOptions {
    /// The options for a window of `secs` seconds (0: stepped only by
    /// `rotate`) and `generations` (None: not given), each checked.
    pub fn from_secs(secs: f64, generations: Option<u32>) -> Result<WindowOptions> {
        Ok(WindowOptions {
            window_ns: if secs == 0.0 {
                None
            } else {
                Some(crate::math::window::window_from_secs(secs).map_err(Error::arg)?)
            },
            generations: match generations {
                None => 0,
                Some(g) => crate::math::window::check_generations(g as i64).map_err(Error::arg)?,
            },
        })
    }

    /// The generations asked for, `existing` when not given.
    pub fn generations_or(&self, existing: u32) -> u32 {
        if self.generations == 0 {
            existing
        } else {
            self.generations
        }
    }
}

impl Filter {
    /// Refuse an explicit window that differs from this filter's (the
    /// generations, when not given, are the filter's).
    pub(in crate::filter) fn check_window(self, want: Option<WindowOptions>) -> Result<Filter> {
        let Some(wo) = want else { return Ok(self) };
        let g = wo.generations_or(self.win().map_or(Window::DEFAULT_GENERATIONS, |s| s.w.generations()));
        let asked = Window::new(wo.window_ns, g, 0);
        let ok = self.win().is_some_and(|s| {
            s.w.generations() == g && asked.as_ref().ok().map(|w| w.window_ns()) == Some(s.w.window_ns())
        });
        if ok {
            return Ok(self);
        }
        Err(Error::new(
            ErrorKind::Mismatch,
            format!(
                "window mismatch (the filter has {}, not {})",
                self.win().map_or_else(|| "no window".to_string(), |s| s.w.to_string()),
                asked.map_or_else(|e| e, |w| w.to_string())
            ),
        ))
    }

    //
    // The step protocol of the `window` module docs; the decisions are its
    // functions, this only reads and writes the shared words.

    /// The shared word at header offset `off`.
    pub(in crate::filter) fn win_word(&self, off: u64) -> &AtomicU64 {
        // SAFETY: the window words are at fixed 8-aligned offsets of the
        // header page (format's static asserts), inside every mapping.
        unsafe { &*self.at::<AtomicU64>(off) }
    }

    pub(in crate::filter) fn view_word(&self) -> &AtomicU64 {
        self.win_word(format::OFF_VIEW)
    }

    pub(in crate::filter) fn last_word(&self, slot: u32) -> &AtomicU64 {
        self.win_word(format::OFF_LAST + 8 * slot as u64)
    }

    fn clean_word(&self, slot: u32) -> &AtomicU64 {
        self.win_word(format::OFF_CLEAN + 8 * slot as u64)
    }

    fn cleaner_word(&self) -> &AtomicU32 {
        // SAFETY: as win_word; 4-aligned.
        unsafe { &*self.at::<AtomicU32>(format::OFF_CLEANER) }
    }

    /// The current view. A word no step could have written (the mapping is
    /// another process's to corrupt) reads as slot 0: wrong answers, never
    /// an address outside the ring.
    pub(in crate::filter) fn load_view(&self, w: &Window) -> View {
        self.load_view_word(w).0
    }

    /// The current view and the word it was read from (a step's CAS
    /// expects the word: a corrupt one is then replaced, not kept).
    fn load_view_word(&self, w: &Window) -> (View, u64) {
        // SeqCst: an adder reads the view after taking its stripe, the
        // cleaner reads it before reading the stripes (the drain's Dekker
        // pair); it pairs with the stepping CAS.
        let word = self.view_word().load(Ordering::SeqCst);
        let v = View::unpack(word, w.ring_len()).unwrap_or(View {
            m: (word & !View::CLOSED) >> 5,
            pos: 0,
        });
        (v, word)
    }

    /// Generation `slot`'s bit array.
    #[inline(always)]
    pub(in crate::filter) fn generation(&self, win: &Win, slot: u32) -> &[AtomicU64] {
        // Slots come from a view (`View::unpack` checks them) or the ring
        // arithmetic, so they are below the ring's length; the index check
        // (against MAX_RING) is the one check left.
        let start = win.gens[slot as usize];
        // SAFETY: every entry of `gens` is the start of a generation of
        // `gen_words` words inside the mapping (`from_region`), which
        // lives as long as `self`.
        unsafe { std::slice::from_raw_parts(start, win.gen_words) }
    }

    /// The grid a reader or writer of view `v` goes by now.
    fn grid_now(&self, win: &Win, v: View, now: u64) -> u64 {
        self.grid_and_last(win, v, now).0
    }

    /// `grid_now`, and the current generation's `last` it went by.
    fn grid_and_last(&self, win: &Win, v: View, now: u64) -> (u64, u64) {
        // Acquire: pairs with an adder's fetch_max (its grid is seen).
        let cur_last = self.last_word(v.pos).load(Ordering::Acquire);
        (
            Window::reader_grid_of(self.clock_grid(win, now), cur_last).max(v.m),
            cur_last,
        )
    }

    /// `w.grid(now)`, without a division while `now` stays in the span of
    /// the last one worked out.
    #[inline]
    fn clock_grid(&self, win: &Win, now: u64) -> u64 {
        let w = &win.w;
        let (n, from, to) = win.grid_cache.get();
        if from <= now && now < to {
            return n;
        }
        let span = w.grid_span(now);
        win.grid_cache.set(span);
        span.0
    }

    /// Take a step if one is due (or `forced`) and the spare is clean.
    /// True when this call stepped. `c` is this handle's slot: a blocked
    /// filter's steps go through `step_lockfree`.
    pub(in crate::filter) fn try_step(&self, win: &Win, now: u64, forced: bool, c: Claim) -> bool {
        self.step_state(win, now, forced, c) == StepState::Stepped
    }

    /// `try_step`, telling a step that is due but waits for the spare's
    /// clear apart from no step at all.
    fn step_state(&self, win: &Win, now: u64, forced: bool, c: Claim) -> StepState {
        let w = &win.w;
        let (v, word) = self.load_view_word(w);
        let q = self.grid_now(win, v, now);
        if !w.step_possible(v, q, forced) {
            if View::closed(word) {
                self.step_lockfree(win, now, forced, c);
            }
            return StepState::NoStep; // the common case: nothing more to read
        }
        // Acquire: pairs with the cleaner's Release of clean[] (the zeroed
        // words are seen before the slot is published) and the adders'
        // fetch_max of last[].
        let oldest_last = self.last_word(w.oldest(v)).load(Ordering::Acquire);
        let spare_clean = self.clean_word(w.spare(v)).load(Ordering::Acquire);
        match w.decide_step(v, q, oldest_last, spare_clean, forced) {
            // A blocked filter's step: under the cleaner word, which
            // decides again.
            Some(_) if self.lockfree_adds() => match self.step_lockfree(win, now, forced, c) {
                true => StepState::Stepped,
                false => StepState::NoStep,
            },
            // SeqCst: the step is the one write every reader and the drain
            // order themselves by. A failed CAS: someone else stepped.
            Some(n) => match self
                .view_word()
                .compare_exchange(word, n.pack(), Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => StepState::Stepped,
                Err(_) => StepState::NoStep,
            },
            None if !forced && spare_clean != v.clean_mark() && w.step_due(v, q, oldest_last) => {
                // Acquire: as oldest_last's.
                let cur_last = self.last_word(v.pos).load(Ordering::Acquire);
                StepState::SpareDirty {
                    expired: w.expired(cur_last, q),
                }
            }
            None => {
                if View::closed(word) {
                    self.step_lockfree(win, now, forced, c); // only opens it
                }
                StepState::NoStep
            }
        }
    }

    /// A step is due and the spare not clear yet (the writing calls since
    /// the last step were too few to clear it a slice each): clear the rest
    /// of it now, then step. Called before an add takes its stripe.
    ///
    /// When the current generation has `expired` (nobody wrote for a
    /// window), the add must not write it: raising its `last` would bring
    /// its expired items back. Then this waits for another process that is
    /// clearing the spare or stepping, for as long as that advances; one
    /// that stops advancing for four times DRAIN_LIMIT (longer than its
    /// drains may wait: a stopped process), or a drain that cannot finish,
    /// leaves the add to write the old generation, and its items live
    /// longer, as with any step deferred by a stopped process.
    #[cold]
    #[inline(never)]
    fn clear_spare_and_step(&self, win: &Win, c: Claim, now: u64, expired: bool) {
        let w = &win.w;
        let cursor = self.win_word(format::OFF_CURSOR);
        // Relaxed, both: progress hints only.
        let progress = || (cursor.load(Ordering::Relaxed), self.view_word().load(Ordering::Relaxed));
        let mut seen = progress();
        let mut until = std::time::Instant::now() + 4 * DRAIN_LIMIT;
        loop {
            if not_yet(win.clean_after.get()) {
                return; // a drain failed lately: a stopped adder holds a stripe
            }
            self.clean_spare(win, c, None);
            if self.step_state(win, now, false, c) == StepState::Stepped || !expired {
                return;
            }
            // Another process may hold the cleaner word, clearing or
            // stepping (a blocked filter's step takes it too): go on once
            // the current generation is one that has not expired.
            let (v, _) = self.load_view_word(w);
            let (q, cur_last) = self.grid_and_last(win, v, now);
            if !w.expired(cur_last, q) {
                return;
            }
            let at = progress();
            if at != seen {
                seen = at;
                until = std::time::Instant::now() + 4 * DRAIN_LIMIT;
            } else if std::time::Instant::now() >= until {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// A blocked filter's step, under the cleaner word (`window` module
    /// docs): close the filter to lock-free adds, wait for those in
    /// flight and then for the striped ones, step, wait for the striped
    /// adds that may have read the earlier view, open it again. Without a
    /// step due (or `forced`), only the opening, of a filter a stepper
    /// left closed. Nobody else waits:
    /// with the word held by a live process this returns at once, and adds
    /// go on, through their stripes while the filter is closed. A stopped
    /// adder that keeps a drain waiting past `DRAIN_LIMIT` leaves the
    /// filter closed (and the step not taken, for a lock-free one) for a
    /// later writer; this handle then leaves it alone for `DRAIN_BACKOFF`.
    #[cold]
    #[inline(never)]
    fn step_lockfree(&self, win: &Win, now: u64, forced: bool, c: Claim) -> bool {
        if not_yet(win.step_after.get()) {
            return false;
        }
        if !self.take_cleaner(c) {
            return false;
        }
        let (stepped, drained) = self.step_closed(win, now, forced, c);
        if !drained {
            win.step_after.set(Some(std::time::Instant::now() + DRAIN_BACKOFF));
        }
        // Release: pairs with the next cleaner's Acquire.
        self.cleaner_word().store(0, Ordering::Release);
        stepped
    }

    /// `step_lockfree`'s work, holding the cleaner word: whether it
    /// stepped, and whether its drains ended (false: a stopped adder).
    /// Only the holder of the cleaner word changes a blocked filter's view
    /// word, so the CASes below fail only on a corrupt word.
    fn step_closed(&self, win: &Win, now: u64, forced: bool, c: Claim) -> (bool, bool) {
        let w = &win.w;
        let sh = self.shared();
        let (v, mut word) = self.load_view_word(w);
        let q = self.grid_now(win, v, now);
        let mut stepped = false;
        // Acquire: as try_step.
        let oldest_last = self.last_word(w.oldest(v)).load(Ordering::Acquire);
        let spare_clean = self.clean_word(w.spare(v)).load(Ordering::Acquire);
        if let Some(n) = w.decide_step(v, q, oldest_last, spare_clean, forced) {
            // A process that cannot fence light marks leaves the step to
            // one that can while another has them (not closing meanwhile).
            if !membarrier::light_fences() && !sh.fence_light_adders(c) {
                return (false, false);
            }
            if !View::closed(word) {
                // SeqCst: the Dekker pair with a lock-free adder's mark,
                // then its view load (drain_marks reads the marks after).
                let closed = word | View::CLOSED;
                if self
                    .view_word()
                    .compare_exchange(word, closed, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
                {
                    return (false, true);
                }
                word = closed;
            }
            // Then the striped adds in flight: one begun while the filter
            // was open may have written a bit a lock-free add found; it
            // must not answer for the next view (`window` module docs).
            if !sh.drain_marks(c, DRAIN_LIMIT) || !sh.drain_stripes(DRAIN_LIMIT) {
                return (false, false);
            }
            // SeqCst: as try_step's; the filter stays closed.
            let next = n.pack() | View::CLOSED;
            if self
                .view_word()
                .compare_exchange(word, next, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                return (false, true);
            }
            (word, stepped) = (next, true);
        }
        if View::closed(word) {
            // Every stripe adder that read an earlier view is done once the
            // stripes held after our view load were released (the drain's
            // Dekker pair with begin_add, then view load).
            if !sh.drain_stripes(DRAIN_LIMIT) {
                return (stepped, false);
            }
            // SeqCst: lock-free adders read the view after their mark.
            let _ = self
                .view_word()
                .compare_exchange(word, word & !View::CLOSED, Ordering::SeqCst, Ordering::Relaxed);
        }
        (stepped, true)
    }

    /// Whether the spare of the current view still needs clearing.
    pub(in crate::filter) fn spare_dirty(&self, w: &Window) -> bool {
        self.spare_dirty_in(w, self.load_view(w))
    }

    /// Whether view `v`'s spare still needs clearing.
    #[inline(always)]
    fn spare_dirty_in(&self, w: &Window, v: View) -> bool {
        // Relaxed: a hint; clean_spare decides under the cleaner claim.
        self.clean_word(w.spare(v)).load(Ordering::Relaxed) != v.clean_mark()
    }

    /// Claim the cleaner word for `c`; a dead owner's claim is taken over.
    /// False when a live process (or this slot, reentering) holds it. The
    /// first look is a load: no CAS on the shared line while a live
    /// process is at it.
    fn take_cleaner(&self, c: Claim) -> bool {
        let sh = self.shared();
        let cw = self.cleaner_word();
        // Relaxed: only a guess at what the CAS expects.
        let mut cur = cw.load(Ordering::Relaxed);
        loop {
            if cur == c.token {
                return false; // ours already (reentry)
            }
            if cur != 0 && !sh.owner_dead(cur) {
                return false;
            }
            // AcqRel: Acquire pairs with the previous cleaner's Release (its
            // cursor and zeroed words are seen); Release is not needed to
            // take.
            match cw.compare_exchange(cur, c.token, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(held) => cur = held,
            }
        }
    }

    /// The cleaner word for a copy (`copy_window`): taken as soon as the
    /// live cleaner lets go of it (it holds it for one slice at a time), or
    /// None after DRAIN_LIMIT.
    fn hold_cleaner(&self, c: Claim) -> Option<CleanerHold<'_>> {
        let until = std::time::Instant::now() + DRAIN_LIMIT;
        loop {
            if self.take_cleaner(c) {
                return Some(CleanerHold(self.cleaner_word()));
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            for _ in 0..1000 {
                // Relaxed: a hint; take_cleaner's CAS decides.
                if self.cleaner_word().load(Ordering::Relaxed) == 0 {
                    break;
                }
                std::hint::spin_loop();
            }
            std::thread::yield_now();
        }
    }

    /// Clear the spare, unless another live process is at it: all of it,
    /// or (`slice`) at most that many words of it, going on from where the
    /// last cleaner stopped. Adds clear a slice each, so that no add pays
    /// for a whole generation; `rotate` clears all. Never called holding a
    /// stripe.
    fn clean_spare(&self, win: &Win, c: Claim, slice: Option<usize>) {
        let w = &win.w;
        let sh = self.shared();
        let cw = self.cleaner_word();
        if !self.take_cleaner(c) {
            return;
        }
        let v = self.load_view(w);
        let spare = w.spare(v);
        let mark = v.clean_mark();
        // Acquire: pairs with our predecessors' Release of clean[].
        if self.clean_word(spare).load(Ordering::Acquire) != mark {
            let bits = self.generation(win, spare);
            let for_word = self.win_word(format::OFF_CURSOR_FOR);
            let cursor = self.win_word(format::OFF_CURSOR);
            // Acquire: pairs with the Release below, so that a cleaner
            // taking over from a dead one sees the cursor reset with the
            // mark (and the zeros up to a cursor with its value).
            let mut done = if for_word.load(Ordering::Acquire) == mark {
                (cursor.load(Ordering::Acquire) as usize).min(bits.len())
            } else {
                // The first slice of this spare. Every adder that read a
                // view older than `v` must be done first (an adder reads
                // the view after taking its stripe); or a stopped one holds
                // its stripe, and a later writer retries. Later slices need
                // no drain: every adder since read `v` or a later view.
                if !sh.drain_stripes(DRAIN_LIMIT) {
                    win.clean_after.set(Some(std::time::Instant::now() + DRAIN_BACKOFF));
                    #[cfg(test)]
                    win.drains_given_up.set(win.drains_given_up.get() + 1);
                    // Release: pairs with the next cleaner's Acquire.
                    cw.store(0, Ordering::Release);
                    return;
                }
                // Relaxed, then Release: the cursor is 0 before the mark
                // says it is this spare's (a cleaner killed between the two
                // leaves the old mark, and its successor starts over).
                cursor.store(0, Ordering::Relaxed);
                for_word.store(mark, Ordering::Release);
                0
            };
            let stop = slice.map_or(bits.len(), |n| done.saturating_add(n).min(bits.len()));
            while done < stop {
                let end = (done + sync::CHUNK * 64).min(stop);
                for b in &bits[done..end] {
                    // Relaxed: nobody reads or writes the spare; the Release
                    // of clean[] below publishes the zeros.
                    b.store(0, Ordering::Relaxed);
                }
                done = end;
                // Release: the zeros before the cursor that covers them
                // (pairs with the Acquire above, in the next cleaner).
                cursor.store(done as u64, Ordering::Release);
            }
            if done == bits.len() {
                // Relaxed: published with clean[] below.
                self.last_word(spare).store(0, Ordering::Relaxed);
                // Release: pairs with try_step's Acquire: zeros and last first.
                self.clean_word(spare).store(mark, Ordering::Release);
            }
        }
        // Release: pairs with the next cleaner's Acquire.
        cw.store(0, Ordering::Release);
    }
}
