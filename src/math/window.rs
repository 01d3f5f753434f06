//! Time-windowed dedup: the generation arithmetic (pure) and the design of
//! the step protocol.
//!
//! # What a windowed filter is
//!
//! A windowed filter keeps `g` generations (2 to 16, default 4), each a full
//! filter of the chosen layout. `add` puts an item in the *current*
//! generation and reports it new unless some *visible* generation holds it;
//! `contains` looks in the visible ones. A *step* every
//! `period = window / (g - 1)` makes a fresh generation current and
//! discards the oldest.
//!
//! The generations live in a ring of `g + 1` slots: the extra slot is the
//! *spare*, cleared ahead of time (while nobody reads or writes it), so a
//! step only publishes an already clean slot and never clears anything
//! while someone waits. The memory cost is one generation more than `g`.
//!
//! # Time
//!
//! Wall-clock time (`CLOCK_REALTIME`, shared by all processes of a host) in
//! integer nanoseconds since the Unix epoch. The window is kept in whole
//! nanoseconds, rounded up to a multiple of `g - 1` so that the period is
//! exact; the *grid* number of an instant is
//! `grid(t) = floor((t - epoch0) / period)` (0 before `epoch0`, the
//! creation time). Every rule below works on grid numbers, so the clock's
//! granularity is one period: two instants of the same period are the same
//! time to the filter.
//!
//! Each ring slot has a `last` word: one more than the greatest grid number
//! at which an item was added to the generation it holds (0: none yet, as
//! for the empty generations of a new filter). A generation is *visible* at
//! grid `q` while `last - 1 + g > q`: an item added at grid `q0` is seen while
//! `q < q0 + g`, that is until at least `t + window` (the period of `q0`
//! plus `g - 1` more) and no later than `t + window * g / (g - 1)` once
//! its generation takes no more adds. Readers apply this rule themselves
//! (no step needed, nothing written), so an idle filter forgets too.
//!
//! A step is *due* at grid `q` when `q` is past the current generation's
//! start `m` and the oldest ring generation is no longer visible. It makes
//! the spare current with start `max(q, m + 1)`; the oldest generation's
//! slot becomes the next spare. So a step only ever discards a generation
//! nobody can see: the lower bound holds whatever the schedule.
//!
//! The clock rule. The shared current generation (`m` in the view) only
//! moves forward, by one slot per step. A clock jumping backwards steps
//! nothing (no step is due until the clock passes `m` again, so items live
//! longer by the jump) and revives nothing that a writer has seen expire:
//! readers take `q = max(grid(now), last of the current generation)`, and
//! every adder raises that `last` to its own grid. A clock jumping forward
//! by `k` periods hides at once every generation whose `last - 1 + g <= q`
//! (all of them when `k >= g`): items expire early by up to the jump, as
//! they would had that time really passed. It still makes one step only
//! (the spare is the only clean slot); the hidden generations are simply
//! not read, and leave the ring one step at a time, each cleared when it
//! becomes the spare, so no step ever clears more than one generation.
//! `rotate` takes a step whenever the spare is clean (clearing it first
//! if need be), due or not (a
//! manual filter, with no window, steps only so): an item added between
//! two rotations is seen through `g - 1` more and forgotten at the `g`th.
//!
//! # The step protocol
//!
//! Shared words, besides the existing item stripes and process slots:
//! `view` (one 64-bit word: the current generation's start `m` and ring
//! slot `pos`, and a top bit that closes a blocked filter to lock-free
//! adds while it steps), per ring slot `last` and `clean` (the `m + 1` of
//! the view from which a step may publish that slot: it is zero and its
//! `last` is 0), and `cleaner` (the owner token of whoever clears the
//! spare or steps a blocked filter).
//!
//! * **Step** (any writer that sees one due, before its own add; `rotate`):
//!   read `view`; if `clean[spare]` is `m + 1`, CAS `view` to the next
//!   view. Constant time, waits for nothing; a failed CAS means another
//!   process stepped. A spare not clean yet (the writes since the last
//!   step were too few to clear it a slice each): the writer clears the
//!   rest itself before its add, then steps; another process at that
//!   clear leaves the writer to add, the step deferred, unless the current
//!   generation has *expired* (no add for a window): an add must not raise
//!   its `last`, which would bring its items back, so it waits for that
//!   clear while it advances. Only a stopped process (holding the cleaner
//!   or a stripe) defers a step for longer: its items live longer.
//! * **Add** at grid `q` (`reader_grid`, after any due step): take the
//!   item's stripe; read `view` (`v`); raise the current slot's `last`
//!   to `q + 1` (`fetch_max`; its old value takes no part in the
//!   answer: that generation is visible, its bits all count), then set
//!   the item's bits there, noting whether it was new there; re-read
//!   `view` (`v2`). If it moved (one step at most, see the drain), do
//!   the same in `v2`'s current slot. Look for the item
//!   in the other generations visible in `v2` (a slot we wrote counts with
//!   what it held before us); release the stripe. New iff it was in none
//!   before us. (When an add races a step, the generation it first wrote
//!   may live one period longer than the bound: its `last` was raised.)
//! * **Clear the spare** (whoever stepped, after its own add has answered,
//!   or any writer finding the spare dirty; never while holding a stripe):
//!   claim `cleaner` (a dead owner's claim is taken over, a live one's is
//!   left alone); compute the spare from `view`; if it is clean for this
//!   view, stop; *drain*: wait until every stripe held when we look has
//!   been released (or its owner is dead); zero the slot, set its `last` to
//!   0, set `clean[spare] = m + 1`; release `cleaner`. The zeroing goes in
//!   chunks with a cursor, so a process killed mid-clear leaves the rest to
//!   the next one (the same resumable scheme as `clear`).
//! * **Lock-free add** (blocked layouts, whose one atomic update of the
//!   item's word or block decides among adders of a generation): mark the
//!   process slot (as a plain filter's lock-free add), read `view`; if its
//!   top bit (*closed*) is set, clear the mark and add as above. Else
//!   raise `last`, set the bits in the view's current generation, look in
//!   its other visible ones, clear the mark. No stripe, no second view.
//!   A single `add` does all of it under the mark, the look for an item
//!   the current generation already holds too (no step and no exclusive
//!   operation begins while the mark is set), and leaves a due step to
//!   the whole path (`Filter::try_window_add_lockfree`).
//! * **Step of a blocked filter**, under the cleaner claim (only its
//!   holder changes such a filter's `view`; a claim held by a live process
//!   means someone is at it, and the caller goes on): set *closed*; wait
//!   for every slot mark (after a `membarrier`, for light marks); wait for
//!   every stripe; CAS `view` to the next view, still closed; wait for
//!   every stripe again; clear *closed*. A writer that finds `view` closed
//!   with no step to take does the last two under the claim (a stepper
//!   killed in between, or one that gave up on a stopped adder after
//!   `DRAIN_LIMIT`: the filter then stays closed, adds go through their
//!   stripes, and the step waits, as a clear does).
//! * **Query** at grid `reader_grid`: read `view`; for each visible
//!   generation, newest first, the item's bits; re-read `view`. "Absent"
//!   stands if the view did not change (no generation was cleared while
//!   we looked), "present" also after `at_most_one_step` (a clear only
//!   takes bits away); otherwise look again. No lock, no write, nobody
//!   waited for.
//!
//! Why it holds:
//! * Exactly once. Striped adders of one item serialize on its stripe:
//!   two adders of an item in two generations (one with the view
//!   before a step, one after) cannot agree through loads and stores of
//!   each other's generation alone (that is consensus); the stripe is the
//!   common read-modify-write. Under the stripe, the bits an adder reads
//!   can change only by steps, which add an empty generation and discard
//!   an invisible one.
//! * Lock-free adds. While `view` is open no step lands under a mark (the
//!   step closes, then waits for the marks: a Dekker pair with the
//!   adder's mark, then `view` load), so a lock-free add reads, writes
//!   and looks in one view, where the atomic update decides. A striped
//!   add never overlaps a lock-free one across a step: the step waits for
//!   the stripes after the marks (a striped add begun while the filter
//!   was open, whose first write a lock-free add may have found, ends
//!   before the step), and the filter opens only after the stripes held
//!   after the step are released (every striped add that read the earlier
//!   view is done). Why the claim: the flag alone cannot tell a close
//!   from a later one, and a stepper whose drain came before another
//!   writer opened and a third closed again would step under a lock-free
//!   add (`tests/window_model.rs` has two writers, too few to show it).
//! * The re-read. A step may land between an adder's `view` read and its
//!   write. Answering for the view read after the write is always
//!   linearizable (at the later of the write and the step); answering for
//!   the earlier view is not when the item was only in the generation the
//!   step discarded: a query between the step and the write found it gone,
//!   then the adder said "seen". The second write keeps the item's life
//!   counted from its own add.
//! * The drain. Adders take their stripe before they read `view`, the
//!   cleaner reads `view` after the step and then the stripes (both
//!   `SeqCst`: Dekker), so every adder that read a view older than the
//!   step is waited for. Hence at most one step happens during an
//!   adder's hold (the next needs a spare its drain waits on), its writes
//!   land only in the current or the previous generation, and never in a
//!   slot being cleared or already clean.
//! * Queries. An item only moves to newer generations: an adder writes
//!   the new current one before it releases its stripe, and the older one
//!   is cleared only after a drain has seen that release. Looking oldest
//!   first, a reader that finds an older copy gone finds the newer one. A
//!   reader whose view is one step stale is linearizable just after that
//!   step; two steps stale, a slot it read may have been cleared after the
//!   item moved past its view (the next spare's drain does not wait for
//!   readers), hence the re-read.
//! * Nothing live is cleared: the spare is at ring distance `g` from the
//!   current slot, and a step needs `clean[spare]` for the very view it
//!   replaces, so a slot is published only after its clear completed.
//! * Crashes. A step is one CAS. A killed adder leaves its stripe, taken
//!   over as today, or its mark, which a drain takes over. A stepper of a
//!   blocked filter killed holding the claim leaves `view` closed (adds go
//!   through their stripes): the next writer takes the claim over, and
//!   steps or opens. A killed cleaner leaves `cleaner` held by a dead token
//!   and the spare not marked clean: the next writer takes the claim over
//!   and finishes; meanwhile steps are deferred, nobody waits.
//! * Waiting. Queries wait for nothing. Adders wait only for their stripe
//!   (as today) and never for a step or a clear. Only the cleaner and a
//!   blocked filter's stepper wait, in their drains, for adds in flight; a
//!   stopped adder holding a stripe or a mark defers steps (items then
//!   live longer) but holds up no one.
//!
//! `tests/window_model.rs` checks this protocol exhaustively.

use std::fmt;

const NS_PER_SEC: u64 = 1_000_000_000;
/// Fewest generations: the current one and one before it.
const MIN_GENERATIONS: u32 = Window::MIN_GENERATIONS;
const MAX_GENERATIONS: u32 = Window::MAX_GENERATIONS;
const MIN_WINDOW_NS: u64 = Window::MIN_WINDOW_NS;
const MAX_WINDOW_NS: u64 = Window::MAX_WINDOW_NS;
/// Bits of the view word that hold the ring slot.
const POS_BITS: u32 = 5;
const MAX_START: u64 = View::MAX_START;

const _: () = assert!(MAX_GENERATIONS < 1 << POS_BITS);

/// The window in nanoseconds from a number of seconds, as the API takes it.
pub fn window_from_secs(secs: f64) -> Result<u64, String> {
    if !secs.is_finite() {
        return Err(format!("window must be a finite number of seconds (got {secs})"));
    }
    if secs <= 0.0 {
        return Err(format!("window must be more than 0 seconds (got {secs})"));
    }
    let ns = (secs * NS_PER_SEC as f64).round();
    if ns < MIN_WINDOW_NS as f64 {
        return Err(format!("window of {secs} seconds is shorter than the shortest, 0.001"));
    }
    if ns > MAX_WINDOW_NS as f64 {
        return Err(format!(
            "window of {secs} seconds is longer than the longest, {} (3653 days)",
            MAX_WINDOW_NS / NS_PER_SEC
        ));
    }
    Ok(ns as u64)
}

/// Check a number of generations.
pub fn check_generations(g: i64) -> Result<u32, String> {
    if (MIN_GENERATIONS as i64..=MAX_GENERATIONS as i64).contains(&g) {
        Ok(g as u32)
    } else {
        Err(format!(
            "generations must be an integer from {MIN_GENERATIONS} to {MAX_GENERATIONS} (got {g})"
        ))
    }
}

/// A duration as the command line takes it: a number of seconds (`3600`,
/// `1.5`), or a number with a unit `s`, `m` (minutes), `h` or `d` (`90m`,
/// `24h`, `1d`, `2s`). Returns nanoseconds, within the window's limits.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("duration is empty (give e.g. 24h, 90m, 3600 or 2s)".to_string());
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let well_formed = num.chars().filter(|&c| c == '.').count() <= 1 && num.chars().any(|c| c.is_ascii_digit());
    if !well_formed {
        return Err(format!("duration '{s}' does not start with a number"));
    }
    let unit_secs: u64 = match unit.trim_start() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        u => return Err(format!("duration '{s}' has an unknown unit '{u}' (use s, m, h or d)")),
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("duration '{s}' does not start with a number"))?;
    window_from_secs(value * unit_secs as f64).map_err(|e| format!("duration '{s}': {e}"))
}

/// Where the current generation is: its start (a grid number) and its ring
/// slot. Shared as one word, so a step is one CAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// The grid number at which the current generation started (for a
    /// manual filter, the number of steps taken).
    pub m: u64,
    /// Its ring slot, `< g + 1`.
    pub pos: u32,
}

impl View {
    /// The largest generation start a view can hold.
    pub const MAX_START: u64 = u64::MAX >> (POS_BITS + 1);
    /// The view word's top bit: set while the filter is closed to
    /// lock-free adds (a blocked layout's, see the step protocol). Not
    /// part of the view.
    pub const CLOSED: u64 = 1 << 63;

    /// The view as a shared word, open to lock-free adds.
    pub fn pack(self) -> u64 {
        debug_assert!(self.m <= MAX_START && self.pos < 1 << POS_BITS);
        self.m << POS_BITS | self.pos as u64
    }

    /// The view in a shared word (open or closed), or `None` when the word
    /// cannot be one for this ring (the mapping is untrusted input).
    pub fn unpack(word: u64, ring_len: u32) -> Option<View> {
        let pos = (word & ((1 << POS_BITS) - 1)) as u32;
        (pos < ring_len).then_some(View {
            m: (word & !Self::CLOSED) >> POS_BITS,
            pos,
        })
    }

    /// Whether a view word closes the filter to lock-free adds.
    pub fn closed(word: u64) -> bool {
        word & Self::CLOSED != 0
    }

    /// Whether `later` (read after `self`) is the same view or the one a
    /// single step makes. Exact: a step raises the start by one at least,
    /// so `g + 2` steps cannot look like one. A single step after a late
    /// or forward-jumped clock (start up by more than one) counts as more.
    pub fn at_most_one_step(self, later: View, ring_len: u32) -> bool {
        later == self || (later.pos == (self.pos + 1) % ring_len && Some(later.m) == self.m.checked_add(1))
    }

    /// The `clean` value that lets a step leave this view.
    pub fn clean_mark(self) -> u64 {
        self.m + 1
    }
}

/// A validated window configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// `None`: a manual filter, stepped only by `rotate`.
    window_ns: Option<u64>,
    generations: u32,
    epoch_ns: u64,
    /// `window_ns / (generations - 1)`, worked out once: queries and adds
    /// use it on every call.
    period_ns: Option<u64>,
}

impl Window {
    /// Fewest generations: the current one and one before it.
    pub const MIN_GENERATIONS: u32 = 2;
    /// Most generations (the ring, one more, fits the view's 5-bit slot).
    pub const MAX_GENERATIONS: u32 = 16;
    /// Generations when none are asked for.
    pub const DEFAULT_GENERATIONS: u32 = 4;
    /// Shortest window: 1 ms.
    pub const MIN_WINDOW_NS: u64 = 1_000_000;
    /// Longest window: 3653 days (ten years). Longer would only keep items
    /// a filter sized for one window cannot hold anyway.
    pub const MAX_WINDOW_NS: u64 = 3653 * 86_400 * NS_PER_SEC;

    /// `window_ns` within `MIN_WINDOW_NS..=MAX_WINDOW_NS` (rounded up to a
    /// multiple of `generations - 1`), or `None` for a manual filter.
    pub fn new(window_ns: Option<u64>, generations: u32, epoch_ns: u64) -> Result<Window, String> {
        let g = check_generations(generations as i64)?;
        let window_ns = match window_ns {
            None => None,
            Some(w) if !(MIN_WINDOW_NS..=MAX_WINDOW_NS).contains(&w) => {
                return Err(format!(
                    "window of {w} ns is outside {MIN_WINDOW_NS}..={MAX_WINDOW_NS} ns"
                ))
            }
            Some(w) => {
                let step = (g - 1) as u64;
                Some((w + step - 1) / step * step)
            }
        };
        Ok(Window {
            window_ns,
            generations: g,
            epoch_ns,
            period_ns: window_ns.map(|w| w / (g - 1) as u64),
        })
    }

    pub fn generations(&self) -> u32 {
        self.generations
    }

    /// Ring slots: the generations and the spare.
    pub fn ring_len(&self) -> u32 {
        self.generations + 1
    }

    /// The window as stored (a multiple of `generations - 1` ns).
    pub fn window_ns(&self) -> Option<u64> {
        self.window_ns
    }

    /// The window as it was most likely given: of the durations that
    /// `new` rounds up to the stored one (the last `generations - 1` ns up
    /// to it), the one with the fewest significant digits. A window given
    /// to 0.1 µs or coarser comes back exactly (two such durations are
    /// 100 ns apart, the rounding at most 15 ns).
    pub fn given_ns(&self) -> Option<u64> {
        let w = self.window_ns?;
        let step = (self.generations - 1) as u64;
        let mut unit = NS_PER_SEC * 1_000_000_000;
        loop {
            let c = w / unit * unit;
            if unit == 1 || c > w - step {
                return Some(c);
            }
            unit /= 10;
        }
    }

    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// Time between steps: `window / (g - 1)`, exact.
    pub fn period_ns(&self) -> Option<u64> {
        self.period_ns
    }

    /// The grid number of an instant (0 for a manual filter, and before
    /// `epoch0`).
    pub fn grid(&self, now_ns: u64) -> u64 {
        self.grid_span(now_ns).0
    }

    /// The grid number of an instant and the instants `[from, to)` that
    /// share it, so that a caller can keep it and skip the division while
    /// its clock stays inside. A manual filter's one grid spans all time.
    pub fn grid_span(&self, now_ns: u64) -> (u64, u64, u64) {
        match self.period_ns {
            None => (0, 0, u64::MAX),
            Some(p) if now_ns < self.epoch_ns => (0, 0, self.epoch_ns.saturating_add(p)),
            Some(p) => {
                let n = (now_ns - self.epoch_ns) / p;
                let from = self.epoch_ns + n * p; // <= now_ns: no overflow
                (n, from, from.saturating_add(p))
            }
        }
    }

    /// When grid period `n` starts, if it is representable.
    pub fn grid_start_ns(&self, n: u64) -> Option<u64> {
        self.period_ns()?.checked_mul(n)?.checked_add(self.epoch_ns)
    }

    /// The view of a new filter: generation start 0 in slot 0; slot 1 is
    /// clean for the first step (`clean[1] = 1`), every slot's `last` is 0.
    pub fn initial_view(&self) -> View {
        View { m: 0, pos: 0 }
    }

    /// The ring slot at `distance` generations before the current one
    /// (0: the current; `g`: the spare).
    pub fn slot_at(&self, v: View, distance: u32) -> u32 {
        let r = self.ring_len();
        debug_assert!(distance <= self.generations && v.pos < r);
        // One compare instead of two divisions: the query path calls this
        // for every generation.
        let d = if distance < r { distance } else { distance % r };
        let pos = if v.pos < r { v.pos } else { v.pos % r };
        let s = pos + r - d;
        if s >= r {
            s - r
        } else {
            s
        }
    }

    /// The live generations' slots, newest first: `slot_at(v, d)` for `d`
    /// in `0..generations`, walked down the ring without a division.
    pub fn slots_newest_first(&self, v: View) -> impl Iterator<Item = u32> {
        let (w, r) = (*self, self.ring_len());
        let mut s = if v.pos < r { v.pos } else { v.pos % r };
        (0..self.generations).map(move |_| {
            let cur = s;
            s = w.slot_before(s);
            cur
        })
    }

    /// The ring slot one generation older than slot `s < g + 1`.
    #[inline(always)]
    pub fn slot_before(&self, s: u32) -> u32 {
        if s == 0 {
            self.ring_len() - 1
        } else {
            s - 1
        }
    }

    /// The slot a step publishes, and which is cleared in the meantime.
    pub fn spare(&self, v: View) -> u32 {
        self.slot_at(v, self.generations)
    }

    /// The oldest generation's slot, which a step discards.
    pub fn oldest(&self, v: View) -> u32 {
        self.slot_at(v, self.generations - 1)
    }

    /// Whether a generation whose `last` word is `last` (one more than the
    /// grid of its latest add; 0 for none) is visible at grid `q`. A manual
    /// filter's generations are all visible (the ring alone bounds them).
    pub fn visible(&self, last: u64, q: u64) -> bool {
        self.window_ns.is_none() || (last != 0 && (last - 1).saturating_add(self.generations as u64) > q)
    }

    /// Whether a generation whose `last` word is `last` held items that
    /// have all expired at grid `q`. Writing such a generation would raise
    /// its `last` and bring them back: an add must not, while it is the
    /// current one, until a step replaces it (never for a manual filter,
    /// nor for a generation nobody wrote).
    pub fn expired(&self, last: u64, q: u64) -> bool {
        last != 0 && !self.visible(last, q)
    }

    /// The `last` word after an add at grid `q`.
    pub fn raised_last(last: u64, q: u64) -> u64 {
        last.max(q.saturating_add(1))
    }

    /// The grid a reader goes by: its clock, but never earlier than what
    /// the latest writer of the current generation saw.
    pub fn reader_grid(&self, now_ns: u64, current_last: u64) -> u64 {
        Self::reader_grid_of(self.grid(now_ns), current_last)
    }

    /// `reader_grid` from the clock's grid number.
    pub fn reader_grid_of(clock_grid: u64, current_last: u64) -> u64 {
        clock_grid.max(current_last.saturating_sub(1))
    }

    /// Whether the clock asks for a step: `q` past the current start, and
    /// the oldest generation (`oldest_last`) no longer visible. Never for
    /// a manual filter.
    pub fn step_due(&self, v: View, q: u64, oldest_last: u64) -> bool {
        self.step_possible(v, q, false) && !self.visible(oldest_last, q)
    }

    /// Whether a step may be taken at grid `q` (forced, or the clock past
    /// the current start): when not, `decide_step` says no whatever the
    /// oldest and spare generations hold, and they need not be read.
    pub fn step_possible(&self, v: View, q: u64, forced: bool) -> bool {
        forced || (self.window_ns.is_some() && q > v.m)
    }

    /// The view after a step taken at grid `q` (due or by `rotate`), or
    /// `None` when the start would leave the view word.
    pub fn next_view(&self, v: View, q: u64) -> Option<View> {
        let m = q.max(v.m.checked_add(1)?);
        (m <= MAX_START).then(|| View { m, pos: self.spare(v) })
    }

    /// The whole step decision: the next view when a step should be taken
    /// now (`forced` for `rotate`), given the spare's `clean` word.
    pub fn decide_step(&self, v: View, q: u64, oldest_last: u64, spare_clean: u64, forced: bool) -> Option<View> {
        let wanted = forced || self.step_due(v, q, oldest_last);
        if wanted && spare_clean == v.clean_mark() {
            self.next_view(v, q)
        } else {
            None
        }
    }

    /// The current generation as the clock has it at grid `q`, had the
    /// due step been taken (a reader takes none): its start, and whether
    /// it is view `v`'s current one (false: the fresh generation the step
    /// would make current, which holds nothing). A step is due only once
    /// the oldest generation is hidden, so the others stay what they are.
    pub fn current_by_clock(&self, v: View, q: u64, oldest_last: u64) -> (u64, bool) {
        match self.step_due(v, q, oldest_last).then(|| self.next_view(v, q)).flatten() {
            Some(n) => (n.m, false),
            None => (v.m, true),
        }
    }

    /// The promised retention, in nanoseconds: an item added at `t` is seen
    /// until at least `t + lower` and, once its generation takes no more
    /// adds, forgotten by `t + upper` (`upper = lower * g / (g - 1)`).
    pub fn retention_bounds_ns(&self) -> Option<(u64, u64)> {
        let w = self.window_ns?;
        Some((w, self.period_ns()? * self.generations as u64))
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.window_ns {
            Some(w) => write!(
                f,
                "window {}s, {} generations",
                self.given_ns().unwrap_or(w) as f64 / NS_PER_SEC as f64,
                self.generations
            ),
            None => write!(f, "manual steps, {} generations", self.generations),
        }
    }
}

#[cfg(test)]
mod tests;
