//! The window grid's arithmetic, the decisions every step and query
//! starts from (doc/DESIGN.md §8 W1).

/// Every window given to 0.1 µs or coarser comes back as given, for
/// every number of generations; any stored window's given duration
/// rounds up to it again.
#[test]
fn given_window_comes_back() {
    let (mut given, mut x) = (
        vec![MIN_WINDOW_NS, MAX_WINDOW_NS, 2 * NS_PER_SEC, 7_123_456_700],
        0x9e37_79b9_7f4a_7c15u64,
    );
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = MIN_WINDOW_NS + x % (100_000 * NS_PER_SEC);
        given.push(w / 100 * 100);
        given.push(w / NS_PER_SEC * NS_PER_SEC + NS_PER_SEC);
    }
    for g in 2..=16 {
        for &w in &given {
            let win = Window::new(Some(w), g, 0).unwrap();
            assert_eq!(win.given_ns(), Some(w), "window {w} ns, {g} generations");
        }
        for stored in [MIN_WINDOW_NS + 1, 7_123_456_791, 3 * NS_PER_SEC + 11] {
            let shown = Window::new(Some(stored), g, 0).unwrap().given_ns().unwrap();
            let [again, first] = [shown, stored].map(|w| Window::new(Some(w), g, 0).unwrap());
            assert_eq!(again.window_ns(), first.window_ns(), "{stored} ns, {g} generations");
        }
    }
    assert_eq!(Window::new(None, 4, 0).unwrap().given_ns(), None);
    let w = Window::new(Some(2 * NS_PER_SEC), 4, 0).unwrap();
    assert_eq!(w.window_ns(), Some(2_000_000_001));
    assert_eq!(w.to_string(), "window 2s, 4 generations");
}

/// The current generation by the clock: the view's while no step is
/// due, the fresh one at the clock's grid once one is; never for a
/// manual filter.
#[test]
fn current_by_clock_follows_the_due_step() {
    let w = Window::new(Some(3_000_000_000), 4, 0).unwrap(); // period 1 s
    let v = View { m: 5, pos: 2 };
    // The oldest still visible (written at grid 3): no step.
    assert_eq!(w.current_by_clock(v, 6, 4), (5, true));
    // Same grid as the view: no step, even with the oldest hidden.
    assert_eq!(w.current_by_clock(v, 5, 0), (5, true));
    // The oldest hidden at grid 9: the step would start generation 9.
    assert_eq!(w.current_by_clock(v, 9, 5), (9, false));
    assert_eq!(w.current_by_clock(v, 9, 0), (9, false));
    let manual = Window::new(None, 3, 0).unwrap();
    assert_eq!(manual.current_by_clock(v, 1_000, 0), (5, true));
}

use super::*;
use std::collections::HashSet;

#[test]
fn window_seconds_are_checked() {
    assert_eq!(window_from_secs(2.0), Ok(2 * NS_PER_SEC));
    assert_eq!(window_from_secs(0.001), Ok(MIN_WINDOW_NS));
    assert_eq!(window_from_secs(86_400.0 * 3653.0), Ok(MAX_WINDOW_NS));
    for (bad, says) in [
        (0.0, "more than 0 seconds (got 0)"),
        (-1.0, "more than 0 seconds (got -1)"),
        (f64::NAN, "finite number of seconds (got NaN)"),
        (f64::INFINITY, "finite number of seconds (got inf)"),
        (f64::NEG_INFINITY, "finite number of seconds (got -inf)"),
        (0.0009, "shorter than the shortest"),
        (86_400.0 * 3654.0, "longer than the longest, 315619200"),
    ] {
        let e = window_from_secs(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
        assert!(e.starts_with("window"), "{e}");
    }
}

#[test]
fn generations_are_checked() {
    for g in 2..=16 {
        assert_eq!(check_generations(g), Ok(g as u32));
    }
    for g in [i64::MIN, -1, 0, 1, 17, 1 << 40] {
        let e = check_generations(g).unwrap_err();
        assert_eq!(e, format!("generations must be an integer from 2 to 16 (got {g})"));
    }
    assert!(Window::new(Some(NS_PER_SEC), 1, 0).is_err());
    assert!(Window::new(Some(NS_PER_SEC), 17, 0).is_err());
}

#[test]
fn durations_parse() {
    let h = 3600 * NS_PER_SEC;
    for (text, ns) in [
        ("24h", 24 * h),
        ("90m", 90 * 60 * NS_PER_SEC),
        ("3600", h),
        ("1d", 24 * h),
        ("2s", 2 * NS_PER_SEC),
        (" 2s ", 2 * NS_PER_SEC),
        ("1.5h", 3 * h / 2),
        ("0.5", NS_PER_SEC / 2),
        ("7d", 7 * 24 * h),
        ("10 m", 600 * NS_PER_SEC),
    ] {
        assert_eq!(parse_duration(text), Ok(ns), "{text}");
    }
    for (text, says) in [
        ("", "duration is empty"),
        ("   ", "duration is empty"),
        ("h", "'h' does not start with a number"),
        ("-5s", "'-5s' does not start with a number"),
        ("5x", "'5x' has an unknown unit 'x'"),
        ("5ms", "unknown unit 'ms'"),
        ("1h30m", "unknown unit 'h30m'"),
        ("1.2.3s", "'1.2.3s' does not start with a number"),
        (".", "'.' does not start with a number"),
        ("0", "'0': window must be more than 0 seconds"),
        ("0s", "more than 0 seconds"),
        ("3654d", "longer than the longest"),
        ("99999999999999999999999d", "longer than the longest"),
    ] {
        let e = parse_duration(text).unwrap_err();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}

#[test]
fn window_rounds_up_to_an_exact_period() {
    let w = Window::new(Some(1_000_000_001), 4, 0).unwrap();
    assert_eq!(w.window_ns(), Some(1_000_000_002));
    assert_eq!(w.period_ns(), Some(333_333_334));
    let w = Window::new(Some(24 * 3600 * NS_PER_SEC), 4, 0).unwrap();
    assert_eq!(w.period_ns(), Some(8 * 3600 * NS_PER_SEC));
    assert_eq!(
        w.retention_bounds_ns(),
        Some((24 * 3600 * NS_PER_SEC, 32 * 3600 * NS_PER_SEC))
    );
    for g in 2..=16 {
        for wns in [MIN_WINDOW_NS, MIN_WINDOW_NS + 1, 7 * NS_PER_SEC + 3, MAX_WINDOW_NS] {
            let w = Window::new(Some(wns), g, 5).unwrap();
            let p = w.period_ns().unwrap();
            assert_eq!(p * (g - 1) as u64, w.window_ns().unwrap());
            assert!(w.window_ns().unwrap() >= wns && w.window_ns().unwrap() - wns < (g - 1) as u64);
        }
    }
    assert!(Window::new(Some(MIN_WINDOW_NS - 1), 4, 0).is_err());
    assert!(Window::new(Some(MAX_WINDOW_NS + 1), 4, 0).is_err());
    let m = Window::new(None, 3, 0).unwrap();
    assert_eq!(
        (m.period_ns(), m.grid(u64::MAX), m.retention_bounds_ns()),
        (None, 0, None)
    );
    assert_eq!(format!("{m}"), "manual steps, 3 generations");
    assert_eq!(
        format!("{}", Window::new(Some(2 * NS_PER_SEC), 2, 0).unwrap()),
        "window 2s, 2 generations"
    );
}

#[test]
fn grid_numbers() {
    let w = Window::new(Some(3 * NS_PER_SEC), 4, 1_000).unwrap();
    assert_eq!(w.grid(0), 0, "before epoch0");
    assert_eq!(w.grid(1_000), 0);
    assert_eq!(w.grid(1_000 + NS_PER_SEC - 1), 0);
    assert_eq!(w.grid(1_000 + NS_PER_SEC), 1);
    assert_eq!(w.grid(u64::MAX), (u64::MAX - 1_000) / NS_PER_SEC);
    assert_eq!(w.grid_start_ns(5), Some(1_000 + 5 * NS_PER_SEC));
    assert_eq!(w.grid_start_ns(u64::MAX), None);
    // Steps even at the shortest period over the clock's whole range
    // fit in the view word.
    let fast = Window::new(Some(MIN_WINDOW_NS), 16, 0).unwrap();
    assert!(fast.grid(u64::MAX) <= MAX_START);
}

/// Every instant of a span has the span's grid number; the instants
/// just outside have the numbers either side.
#[test]
fn grid_spans() {
    for (wns, g, epoch) in [
        (3 * NS_PER_SEC, 4, 1_000),
        (MIN_WINDOW_NS, 16, 0),
        (7, 2, 5),
        (MAX_WINDOW_NS, 2, 99),
    ] {
        let Ok(w) = Window::new(Some(wns), g, epoch) else {
            continue; // 7 ns is below the shortest window
        };
        let p = w.period_ns().unwrap();
        let probes = [
            0,
            epoch.saturating_sub(1),
            epoch,
            epoch + 1,
            epoch + p - 1,
            epoch + p,
            epoch + 5 * p + 3,
        ];
        for now in probes.into_iter().chain([u64::MAX - 1, u64::MAX]) {
            let (n, from, to) = w.grid_span(now);
            assert_eq!(n, w.grid(now));
            assert_eq!(n, now.saturating_sub(epoch) / p, "now {now}");
            assert!(from <= now && now < to || to == u64::MAX, "now {now} in [{from}, {to})");
            assert_eq!(w.grid(from), n);
            assert_eq!(w.grid(to - 1), n);
            if to != u64::MAX {
                assert_eq!(w.grid(to), n + 1);
            }
            if from > 0 {
                assert_eq!(w.grid(from - 1), n.saturating_sub(1), "before {from}");
            }
        }
    }
    let manual = Window::new(None, 4, 0).unwrap();
    assert_eq!(manual.grid_span(12345), (0, 0, u64::MAX));
}

#[test]
fn one_step_or_more() {
    let w = Window::new(None, 4, 0).unwrap();
    let v = View { m: 9, pos: 4 };
    assert!(v.at_most_one_step(v, 5));
    let mut n = v;
    for k in 1..=12 {
        n = w.next_view(n, 0).unwrap();
        assert_eq!(v.at_most_one_step(n, 5), k == 1, "{k} steps");
    }
    let jumped = w.next_view(v, 100).unwrap();
    assert!(!v.at_most_one_step(jumped, 5));
    assert!(!v.at_most_one_step(View { m: 10, pos: 4 }, 5));
    let top = View {
        m: View::MAX_START,
        pos: 0,
    };
    assert!(!top.at_most_one_step(View { m: 0, pos: 1 }, 5));
}

#[test]
fn views_pack_and_reject_bad_words() {
    for g in 2..=16u32 {
        let r = g + 1;
        for pos in 0..r {
            for m in [0, 1, 12345, MAX_START] {
                let v = View { m, pos };
                assert!(!View::closed(v.pack()));
                assert_eq!(View::unpack(v.pack(), r), Some(v));
                assert!(View::closed(v.pack() | View::CLOSED));
                assert_eq!(
                    View::unpack(v.pack() | View::CLOSED, r),
                    Some(v),
                    "closed, the same view"
                );
            }
        }
        for pos in r..32 {
            assert_eq!(View::unpack(pos as u64, r), None, "slot {pos} of a ring of {r}");
        }
    }
}

/// Over every ring size and position: the current slot, the `g - 1`
/// before it and the spare are `g + 1` distinct slots; the spare is
/// next after the current one; the oldest becomes the next spare.
#[test]
fn ring_slots() {
    for g in 2..=16u32 {
        let w = Window::new(None, g, 0).unwrap();
        for pos in 0..=g {
            let v = View { m: 7, pos };
            let mut seen = HashSet::new();
            for d in 0..=g {
                assert!(seen.insert(w.slot_at(v, d)));
                assert_eq!(w.slot_at(v, d), (pos + (g + 1) - d) % (g + 1), "g {g} pos {pos} d {d}");
            }
            let walked: Vec<u32> = w.slots_newest_first(v).collect();
            assert_eq!(
                walked,
                (0..g).map(|d| w.slot_at(v, d)).collect::<Vec<_>>(),
                "g {g} pos {pos}"
            );
            assert_eq!(w.spare(v), (pos + 1) % (g + 1));
            let n = w.next_view(v, 0).unwrap();
            assert_eq!(n.pos, w.spare(v));
            assert_eq!(w.spare(n), w.oldest(v));
            assert_eq!(n.m, 8, "a manual step counts one");
        }
    }
}

#[test]
fn step_decisions() {
    let w = Window::new(Some(3 * NS_PER_SEC), 4, 0).unwrap();
    let v = View { m: 10, pos: 2 };
    let clean = v.clean_mark();
    // Due: past the start and the oldest invisible.
    assert_eq!(w.decide_step(v, 11, 8, clean, false), Some(View { m: 11, pos: 3 }));
    // The oldest empty (`last` 0) is not visible either.
    assert_eq!(w.decide_step(v, 11, 0, clean, false), Some(View { m: 11, pos: 3 }));
    assert!(!w.visible(0, 0));
    assert!(w.visible(1, 0) && w.visible(1, 3) && !w.visible(1, 4));
    // Expired: written, and no longer visible (never unwritten).
    assert!(!w.expired(0, 100) && !w.expired(1, 3) && w.expired(1, 4));
    assert!(!Window::new(None, 4, 0).unwrap().expired(1, u64::MAX));
    assert_eq!(Window::raised_last(5, 3), 5);
    assert_eq!(Window::raised_last(5, 9), 10);
    assert_eq!(Window::raised_last(0, u64::MAX), u64::MAX);
    assert_eq!(w.reader_grid(0, 0), 0);
    assert_eq!(w.reader_grid(0, 10), 9, "never before the current's latest add");
    assert_eq!(w.reader_grid(20 * NS_PER_SEC, 10), 20);
    // Not past the start (a clock that went back, or just stepped).
    assert_eq!(w.decide_step(v, 10, 0, clean, false), None);
    assert_eq!(w.decide_step(v, 3, 0, clean, false), None);
    // The oldest still visible (it took adds late): no step.
    assert_eq!(w.decide_step(v, 11, 9, clean, false), None);
    // The spare not clean for this very view: no step.
    assert_eq!(w.decide_step(v, 11, 8, 0, false), None);
    assert_eq!(w.decide_step(v, 11, 8, clean - 1, false), None);
    assert_eq!(w.decide_step(v, 11, 8, clean + 1, false), None);
    // A jump forward: one step, to the clock's grid.
    assert_eq!(w.decide_step(v, 1000, 9, clean, false), Some(View { m: 1000, pos: 3 }));
    // rotate: any time the spare is clean, one past the start at least.
    assert_eq!(w.decide_step(v, 3, 9, clean, true), Some(View { m: 11, pos: 3 }));
    assert_eq!(w.decide_step(v, 3, 9, 0, true), None);
    // The start cannot leave the word.
    let top = View { m: MAX_START, pos: 0 };
    assert_eq!(w.decide_step(top, 0, 0, top.clean_mark(), true), None);
    // A manual filter never steps by itself.
    let m = Window::new(None, 4, 0).unwrap();
    assert_eq!(m.decide_step(v, u64::MAX, 0, clean, false), None);
    assert!(m.visible(0, u64::MAX));
}

/// A sequential run of the protocol's decisions: the ring's bits per
/// slot as item sets, `last` and `clean` per slot, the view. Steps are
/// taken by writers when due and the spare is clean; the cleaner runs
/// `clean_delay` operations after a step.
struct Sim {
    w: Window,
    view: View,
    slots: Vec<HashSet<u32>>,
    last: Vec<u64>,
    clean: Vec<u64>,
    dirty_for: Option<u32>,
    clean_delay: u32,
}

impl Sim {
    fn new(w: Window, clean_delay: u32) -> Sim {
        let r = w.ring_len() as usize;
        let mut clean = vec![0; r];
        let view = w.initial_view();
        clean[w.spare(view) as usize] = view.clean_mark();
        Sim {
            w,
            view,
            slots: vec![HashSet::new(); r],
            last: vec![0; r],
            clean,
            dirty_for: None,
            clean_delay,
        }
    }

    fn run_cleaner(&mut self) {
        match self.dirty_for {
            Some(0) | None => {
                self.dirty_for = None;
                let s = self.w.spare(self.view) as usize;
                self.slots[s].clear();
                self.last[s] = 0;
                self.clean[s] = self.view.clean_mark();
            }
            Some(n) => self.dirty_for = Some(n - 1),
        }
    }

    fn step(&mut self, q: u64, forced: bool) -> bool {
        let oldest = self.w.oldest(self.view) as usize;
        let spare = self.w.spare(self.view) as usize;
        match self
            .w
            .decide_step(self.view, q, self.last[oldest], self.clean[spare], forced)
        {
            Some(n) => {
                assert_eq!(self.clean[spare], self.view.clean_mark());
                assert!(self.slots[spare].is_empty() && self.last[spare] == 0);
                if !forced {
                    assert!(!self.w.visible(self.last[oldest], q), "a visible generation discarded");
                }
                self.view = n;
                self.dirty_for = Some(self.clean_delay);
                true
            }
            None => false,
        }
    }

    fn present(&self, item: u32, q: u64) -> bool {
        (0..self.w.generations()).any(|d| {
            let s = self.w.slot_at(self.view, d) as usize;
            self.w.visible(self.last[s], q) && self.slots[s].contains(&item)
        })
    }

    fn add(&mut self, item: u32, now: u64) -> bool {
        let q = self.w.reader_grid(now, self.last[self.view.pos as usize]);
        let oldest = self.w.oldest(self.view) as usize;
        let spare = self.w.spare(self.view) as usize;
        if !self.step(q, false)
            && self.w.step_due(self.view, q, self.last[oldest])
            && self.clean[spare] != self.view.clean_mark()
        {
            // A step due and the spare not clear yet: the writer clears
            // the rest now and steps (`clear_spare_and_step`).
            self.dirty_for = Some(0);
            self.run_cleaner();
            assert!(self.step(q, false));
        }
        if self.dirty_for.is_some() {
            self.run_cleaner();
        }
        let cur = self.view.pos as usize;
        let was = self.present(item, q);
        self.last[cur] = Window::raised_last(self.last[cur], q);
        self.slots[cur].insert(item);
        !was
    }

    fn contains(&self, item: u32, now: u64) -> bool {
        let cur = self.view.pos as usize;
        self.present(item, self.w.reader_grid(now, self.last[cur]))
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The retention bounds over many (g, period, epoch, add time, query
/// times) combinations, with writers at random moments (so steps come
/// late and the spare is sometimes not clean yet): an item added at `t`
/// is seen at every query before `t + window`; once its generation is
/// no longer current and no later add went to it, it is forgotten at
/// every query from `t + window * g / (g - 1)` on (the grid makes the
/// time a whole period: the bound is exact on the grid); with writers
/// at every period it is forgotten by then in all cases.
#[test]
fn retention_bounds_hold_for_many_schedules() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..3000 {
        let g = 2 + rng.below(15) as u32;
        let window = MIN_WINDOW_NS + rng.below(10 * MIN_WINDOW_NS);
        let epoch = rng.below(1 << 40);
        let w = Window::new(Some(window), g, epoch).unwrap();
        let p = w.period_ns().unwrap();
        let (lower, upper) = w.retention_bounds_ns().unwrap();
        let prompt = round % 2 == 0;
        // Prompt: the stepping writer clears the spare at once. Else a
        // cleaner late by up to two writes (the next step may find the
        // spare not clean yet and be deferred).
        let mut sim = Sim::new(w, if prompt { 0 } else { rng.below(3) as u32 });
        // Writers: every period at a random offset (prompt), or at
        // random gaps of up to three periods.
        let mut now = epoch + rng.below(4 * upper);
        let t_add = now + rng.below(3 * p);
        let end = t_add + 3 * upper;
        let mut added = false;
        let mut last_touch = 0;
        let mut noise = 1_000;
        while now < end {
            if !added && now >= t_add {
                sim.add(7, now);
                added = true;
                last_touch = now;
            }
            if added {
                let seen = sim.contains(7, now);
                if now < last_touch + lower {
                    assert!(seen, "round {round}: g {g} period {p}: gone at +{}", now - last_touch);
                }
                if now >= last_touch + upper {
                    assert!(!seen, "round {round}: g {g} period {p}: kept at +{}", now - last_touch);
                }
            }
            // Another item's add: a writer that steps when due.
            noise += 1;
            sim.add(noise, now);
            now += if prompt { p / 2 + 1 } else { 1 + rng.below(3 * p) };
            if rng.below(50) == 0 && added && now >= last_touch + p {
                // Re-adding extends the item's life.
                assert!(!sim.add(7, now) || now >= last_touch + lower);
                last_touch = now;
            }
        }
    }
}

/// The bounds are tight on the grid: added at the very start of a
/// period, an item is seen until exactly `g` periods later; added at
/// its last nanosecond, until `g - 1` periods and one nanosecond.
#[test]
fn retention_bounds_are_exact_on_the_grid() {
    for g in 2..=16u32 {
        let w = Window::new(Some(MIN_WINDOW_NS * (g - 1) as u64), g, 1_000).unwrap();
        let p = w.period_ns().unwrap();
        for (offset, seen_for) in [(0, g as u64 * p), (p - 1, (g as u64 - 1) * p + 1)] {
            let mut sim = Sim::new(w, 0);
            let t = 1_000 + 5 * p + offset;
            // Writers at every grid boundary keep the steps prompt.
            for k in 0..=5 {
                sim.add(1_000 + k, 1_000 + k as u64 * p);
            }
            assert!(sim.add(1, t));
            for k in 6..g + 9 {
                let at = 1_000 + k as u64 * p;
                assert_eq!(sim.contains(1, at - 1), at - 1 < t + seen_for, "g {g} k {k}");
                sim.add(1_000 + k, at);
                assert_eq!(sim.contains(1, at), at < t + seen_for, "g {g} k {k}");
            }
        }
    }
}

/// With `rotate` only (a manual filter): an item added between two
/// rotations is seen through `g - 1` more and forgotten at the `g`th;
/// re-adding it starts over; exactly one add of it is new per life.
#[test]
fn manual_steps_are_exact() {
    for g in 2..=16u32 {
        let w = Window::new(None, g, 0).unwrap();
        let mut sim = Sim::new(w, 0);
        assert!(sim.add(1, 0));
        assert!(!sim.add(1, 0));
        for k in 1..=3 * g {
            sim.run_cleaner();
            assert!(sim.step(0, true), "g {g}: rotate {k} refused");
            let alive = k % g != 0;
            assert_eq!(sim.contains(1, 0), alive, "g {g} after {k} rotations");
            if !alive {
                assert!(sim.add(1, 0), "g {g}: forgotten, so new again");
            }
        }
        // A rotation with the spare not yet cleared is refused.
        assert!(sim.step(0, true));
        assert!(!sim.step(0, true));
    }
}

/// The clock rule: backwards never steps back nor revives; forwards by
/// `k` periods hides what that much time would, and steps once.
#[test]
fn clock_jumps() {
    for g in 2..=8u32 {
        let w = Window::new(Some(MIN_WINDOW_NS * (g - 1) as u64), g, 0).unwrap();
        let p = w.period_ns().unwrap();
        for back in [1, p, 3 * p, 100 * p] {
            let mut sim = Sim::new(w, 0);
            let mut now = 0;
            for k in 0..(2 * g as u64) {
                now = k * p;
                sim.add(k as u32, now);
            }
            let before = sim.view;
            let old: Vec<bool> = (0..2 * g).map(|i| sim.contains(i, now)).collect();
            let then = now.saturating_sub(back);
            sim.add(1_000, then);
            assert_eq!(sim.view, before, "a clock gone back stepped");
            for i in 0..2 * g {
                assert!(
                    !sim.contains(i, then) || old[i as usize],
                    "g {g}: item {i} revived by a clock {back} ns back"
                );
            }
        }
        // Idle, then one write long after: the old generation stays in
        // the ring but hidden, and a clock gone back does not show it.
        let mut sim = Sim::new(w, 0);
        assert!(sim.add(1, 0));
        sim.add(2, 2 * g as u64 * p);
        assert!(!sim.contains(1, 2 * g as u64 * p));
        for back in [0, p, 2 * g as u64 * p - 1] {
            assert!(!sim.contains(1, back), "g {g}: revived at {back}");
        }
        assert!(sim.add(1, 0), "g {g}: an adder with the clock back revived it");
        for k in 1..=(2 * g as u64) {
            let mut sim = Sim::new(w, 0);
            for i in 0..(2 * g as u64) {
                sim.add(i as u32, i * p);
            }
            let t0 = (2 * g as u64 - 1) * p;
            let before = sim.view;
            let jump = t0 + k * p;
            sim.add(9_999, jump);
            assert_eq!(sim.view.pos, w.spare(before), "g {g} k {k}: one step");
            assert_eq!(sim.view.m, w.grid(jump));
            for i in 0..(2 * g as u64) {
                let expect = i * p + (g as u64 * p) > jump;
                assert_eq!(sim.contains(i as u32, jump), expect, "g {g} jump {k}: item {i}");
            }
            if k >= g as u64 {
                assert!((0..2 * g).all(|i| !sim.contains(i, jump)), "all expire when k >= g");
            }
        }
    }
}
