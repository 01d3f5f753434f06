//! Windowed adds: one item, lock-free or under its stripe, and batches.

use super::*;

#[cfg(test)]
thread_local! {
    /// Run by this thread's windowed adds between raising a
    /// generation's `last` and setting the item's bits (the unit tests'
    /// hook).
    pub(in crate::filter) static BETWEEN: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
fn between_last_and_bits() {
    if let Some(mut f) = BETWEEN.with(|b| b.borrow_mut().take()) {
        f();
    }
}

impl Filter {
    /// A windowed add of one item (stripe `s`), under slot `c`.
    #[inline(always)]
    fn window_add_at<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, s: usize, c: Claim, now: u64) -> Result<bool> {
        let w = &win.w;
        let sh = self.shared();
        if !sh.begin_add(s, c)? {
            return Err(Error::frozen());
        }
        let write = |v: View| self.window_write(win, p, loc, v, now);
        let v = self.load_view(w);
        let (q1, new1) = write(v);
        let v2 = self.load_view(w);
        // The current generation's bits decide (`window_write`).
        let (q, had) = if v2 == v {
            (q1, !new1)
        } else {
            // A step landed meanwhile (one at most: the next one's drain
            // waits for our stripe). Answer for the later view; the slot
            // first written counts with what it held before us.
            let (q2, new2) = write(v2);
            (q2, !new1 || !new2)
        };
        // The older generations of the later view (without the slot first
        // written: with an unchanged view it is not among them anyway).
        let had = had || self.held_in_older(win, p, loc, v2.pos, v.pos, q);
        sh.end_add(s);
        Ok(!had)
    }

    /// Whether a generation older than the one at ring slot `pos` holds the
    /// item and is visible at grid `q`, slot `skip` left out (a slot the
    /// add wrote; pass `pos` for none). Walked down the ring by hand
    /// (`slots_newest_first` with a `skip` stays out of line in the
    /// standard layout's build).
    #[inline(always)]
    fn held_in_older<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, pos: u32, skip: u32, q: u64) -> bool {
        let gate = p.gate(loc);
        let mut slot = pos;
        for _ in 1..win.w.generations() {
            slot = win.w.slot_before(slot);
            if slot != skip && self.held_visible(win, p, loc, &gate, slot, q) {
                return true;
            }
        }
        false
    }

    /// A windowed add without the stripe, for a blocked layout (one atomic
    /// update decides among adders of a generation) while the filter is
    /// open: the slot marked as for a plain lock-free add, then the view
    /// word read open. A step first closes the filter and then waits for
    /// every such mark, so the whole add sees one view (`window` module
    /// docs). None, with nothing written, when the filter is
    /// closed, frozen, or under an exclusive operation: the striped add
    /// answers then.
    #[inline(always)]
    fn window_add_lockfree<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, c: Claim, now: u64) -> Option<bool> {
        let o = self.control_and_slot(c)?;
        let v = self.mark_open(&win.w, &o)?;
        let (q, new) = self.window_write(win, p, loc, v, now);
        let had = !new || self.held_in_older(win, p, loc, v.pos, v.pos, q);
        o.unmark();
        Some(!had)
    }

    /// Mark slot `o` and read the view word: the view, if it is open (the
    /// mark then stays set until the caller's `unmark`). None, with the
    /// mark cleared, when the filter is closed, frozen, or under an
    /// exclusive operation (or the word is corrupt).
    #[inline(always)]
    fn mark_open(&self, w: &Window, o: &sync::Owned<'_>) -> Option<View> {
        if o.mark() {
            // SeqCst: the other half of the mark's Dekker pair with a step's
            // close (then drain_marks); it also pairs with the stepping CAS
            // (the published generation's zeros are seen).
            let word = self.view_word().load(Ordering::SeqCst);
            if let Some(v) = View::unpack(word, w.ring_len()).filter(|_| !View::closed(word)) {
                return Some(v);
            }
        }
        o.unmark();
        None
    }

    /// `add` of a windowed blocked filter in its common case, all of it
    /// under the slot's mark (as `window_add_lockfree`): this thread's
    /// cached light slot, the filter open, no step possible at the clock's
    /// grid, nothing exclusive under way. While the mark is set and the
    /// view word was read open, no step and no exclusive operation can
    /// begin (each waits for the mark), so one reading of the view and of
    /// the current generation's `last` serves the whole add, the check for
    /// an item already there included. None, with nothing written, in every
    /// other case: `add` then goes the whole way (`window_add_item`).
    #[inline(always)]
    pub(in crate::filter) fn try_window_add_lockfree<P: Probe>(&self, win: &Win, p: &P, item: &[u8]) -> Option<bool> {
        let w = &win.w;
        if self.region.readonly {
            return None;
        }
        let c = self.cached_claim()?;
        let o = self.control_and_slot(c)?;
        if !o.light() {
            return None;
        }
        let h = p.hash(self.seed, item);
        let loc = p.locate(&h);
        let now = now_ns();
        let v = self.mark_open(w, &o)?;
        let (q, last) = self.grid_and_last(win, v, now);
        if w.step_possible(v, q, false) {
            o.unmark();
            return None;
        }
        if self.beyond_caches() {
            // The older generations' words, asked for before the update's
            // locked instruction holds later loads back.
            let mut buf = [&[][..]; MAX_RING];
            for g in self.gens_newest_first(win, v, |_| true, &mut buf) {
                p.prefetch_gated(g, &loc);
            }
        }
        // An item the current generation holds, with a `last` that covers
        // the grid, needs no write: the answer is "not new".
        let held = p.contains_gated(self.generation(win, v.pos), &loc) && Window::raised_last(last, q) == last;
        let had = held
            || !self.window_write_at(win, p, &loc, v, q, last)
            || self.held_in_older(win, p, &loc, v.pos, v.pos, q);
        o.count_ops(1);
        o.unmark();
        self.clean_slice(win, c, v);
        Some(!had)
    }

    /// Write an item into view `v`'s current generation (under its stripe,
    /// or marked in an open view): the grid, and whether the item was new
    /// there.
    ///
    /// That answer alone, one atomic update, decides for the current
    /// generation, whatever its `last` was: bits there were set by adds
    /// of this generation's life, each after its `last` covered them, and
    /// the generation is visible now (an add never writes an expired one,
    /// as `clear_spare_and_step` has it, but where a stopped process left
    /// it no choice, and then its items are seen again anyway). Deciding
    /// from two updates (`last`'s old value, then the bits) would tell two
    /// adders "new" where one raises a fresh generation's `last` and
    /// another sets the bits in between; the stripe keeps that out only
    /// among striped adders.
    #[inline(always)]
    fn window_write<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, v: View, now: u64) -> (u64, bool) {
        // `last` as grid_and_last read it (Acquire: pairs with the Release
        // of the fetch_max in window_write_at, in whichever adder raised it).
        let (q, seen) = self.grid_and_last(win, v, now);
        (q, self.window_write_at(win, p, loc, v, q, seen))
    }

    /// `window_write` at grid `q`, with the current generation's `last`
    /// read as `seen` (Acquire) at or after the view `v`.
    #[inline(always)]
    fn window_write_at<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, v: View, q: u64, seen: u64) -> bool {
        if seen < q.saturating_add(1) {
            // Written once a period, not on every add: the word's cache
            // line is read by every adder and query (doc/DESIGN.md, C5). Release:
            // pairs with readers' Acquire of last[] (the generation is
            // visible to them from our grid).
            self.last_word(v.pos).fetch_max(q.saturating_add(1), Ordering::Release);
            #[cfg(test)]
            between_last_and_bits();
        }
        // Release fence: `last` as we saw or raised it comes before our
        // bits, for a reader that sees the bits first (`held_visible`'s
        // Acquire fence).
        fence(Ordering::Release);
        p.set(self.generation(win, v.pos), loc)
    }

    /// The fast path of a windowed add: whether the current generation
    /// holds every bit of the item and its `last` already covers the grid
    /// an add would raise it to. Such an add changes nothing and is told
    /// "not new" under the stripe too, so it needs neither the stripe nor a
    /// write. While the view stays the same its current generation only
    /// gains bits (only the spare is ever cleared), so bits seen set at
    /// the last load are all set then; the epoch check keeps a concurrent
    /// `clear` out, as in the plain add's fast path.
    #[inline(always)]
    fn window_held_now<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, now: u64) -> bool {
        let w = &win.w;
        // Acquire: pairs with the Release store that ends an exclusive op.
        let e = self.epoch().load(Ordering::Acquire);
        if e & 1 != 0 {
            return false;
        }
        let v = self.load_view(w);
        // The bits first: an item the generation lacks needs no grid.
        if !p.contains_gated(self.generation(win, v.pos), loc) {
            return false;
        }
        // Acquire fence: pairs with the adders' Release fence before their
        // bits (`last` is at least what the adder of the bits seen went
        // by), and the bit loads complete before the view and epoch are
        // read again (seqlock reader).
        fence(Ordering::Acquire);
        let (q, last) = self.grid_and_last(win, v, now);
        if Window::raised_last(last, q) != last {
            return false;
        }
        self.load_view(w) == v && self.epoch().load(Ordering::Relaxed) == e
    }

    /// Whether generation `slot` holds the item and is visible at grid
    /// `q`. The bits first: most generations lack an item looked for, and
    /// then `last` need not be read.
    #[inline]
    pub(in crate::filter) fn held_visible<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        loc: &P::Loc,
        gate: &P::Gate,
        slot: u32,
        q: u64,
    ) -> bool {
        p.contains_gated_by(self.generation(win, slot), loc, gate) && {
            // Acquire fence: pairs with the adders' Release fence before
            // their bits, so that the `last` read below is at least the one
            // the adder of the bits we saw went by.
            fence(Ordering::Acquire);
            self.last_visible(&win.w, slot, q)
        }
    }

    /// The add stripe of an item in a windowed filter: adders of one item
    /// serialize on it in every layout.
    pub(in crate::filter) fn window_stripe(&self, h: &crate::math::hashing::ItemHash) -> usize {
        (h.h1 ^ h.h2.rotate_left(32)) as usize & (self.stripes as usize - 1)
    }

    /// Windowed adds: each item as `add` does; the spare cleared after.
    pub(in crate::filter) fn window_add_many<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
        c: Claim,
    ) -> Result<u64> {
        let mut new = 0u64;
        // Item `i`'s answer, counted and given back.
        let mut record = |i: usize, n: bool| {
            new += n as u64;
            if let Some(r) = results.as_deref_mut() {
                r[i] = n as u8;
            }
        };
        let r = if self.beyond_caches() {
            self.window_adds_ahead(win, p, items, c, record)
        } else {
            let mut now = 0;
            items.iter().enumerate().try_for_each(|(i, item)| {
                prefetch_item_ahead(items, i);
                let h = p.hash(self.seed, item);
                record(
                    i,
                    self.window_add_item(win, p, i, &h, &p.locate(&h), c, &mut now, || {})?,
                );
                Ok(())
            })
        }
        .map(|_| new);
        self.window_add_done(win, c);
        r
    }

    /// A windowed `add`: `window_add_many`'s work for one item, without a
    /// batch's loop and answers (a large filter's item still has its words
    /// prefetched in every generation before the stripe is taken).
    #[inline(always)]
    pub(in crate::filter) fn window_add_one<P: Probe>(&self, win: &Win, p: &P, item: &[u8], c: Claim) -> Result<bool> {
        let h = p.hash(self.seed, item);
        let loc = p.locate(&h);
        // The view to prefetch in, read once (a hint: a step meanwhile
        // makes some prefetches useless, never an answer wrong).
        let large = self.beyond_caches().then(|| self.load_view(&win.w));
        if let Some(v) = large {
            // Every word of the item in the current generation: a present
            // item's look reads them all, a new item's write too (only
            // its first two would be on their way when the write's locked
            // instructions hold later loads back).
            let cur = self.generation(win, v.pos);
            p.prefetch_first(cur, &loc);
            p.prefetch_rest(cur, &loc);
        }
        let mut now = 0;
        let r = self.window_add_item(win, p, 0, &h, &loc, c, &mut now, || {
            if let Some(v) = large {
                let mut buf = [&[][..]; MAX_RING];
                let gens = self.gens_newest_first(win, v, |_| true, &mut buf);
                self.prefetch_item_gens(p, gens, &h, &loc);
            }
        });
        self.window_add_done(win, c);
        r
    }

    /// The end of a windowed add call: a slice of the spare cleared if it
    /// needs it, and the call counted.
    #[inline(always)]
    fn window_add_done(&self, win: &Win, c: Claim) {
        self.clean_slice(win, c, self.load_view(&win.w));
        self.shared().count_ops(c, 1);
    }

    /// A slice of view `v`'s spare cleared, if it needs it and this
    /// handle's clears are not backing off (`v` a hint: `clean_spare`
    /// decides again).
    #[inline(always)]
    fn clean_slice(&self, win: &Win, c: Claim, v: View) {
        if !not_yet(win.clean_after.get()) && self.spare_dirty_in(&win.w, v) {
            self.clean_spare(win, c, Some(SPARE_SLICE_WORDS));
        }
    }

    /// Prefetch what a windowed add of an item reads first: its gated words
    /// in each of `gens`, and its stripe.
    #[inline(always)]
    fn prefetch_item_gens<P: Probe>(&self, p: &P, gens: &[&[AtomicU64]], h: &ItemHash, l: &P::Loc) {
        for g in gens {
            p.prefetch_gated(g, l);
        }
        prefetch_line(&self.shared().stripes[self.window_stripe(h)]);
    }

    /// Item `i` of a windowed add call; `ahead` runs before the stripe is
    /// taken, when the current generation does not hold the item. The
    /// clock (a timer tick's resolution anyway) and a due step, once per
    /// group of items.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn window_add_item<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        i: usize,
        h: &ItemHash,
        loc: &P::Loc,
        c: Claim,
        now: &mut u64,
        ahead: impl Fn(),
    ) -> Result<bool> {
        if i % WINDOW_QUERY_GROUP == 0 {
            *now = now_ns();
            if let StepState::SpareDirty { expired } = self.step_state(win, *now, false, c) {
                self.clear_spare_and_step(win, c, *now, expired);
            }
        }
        if self.window_held_now(win, p, loc, *now) {
            return Ok(false);
        }
        ahead();
        if !P::STRIPED {
            if let Some(new) = self.window_add_lockfree(win, p, loc, c, *now) {
                return Ok(new);
            }
        }
        self.window_add_at(win, p, loc, self.window_stripe(h), c, *now)
    }

    /// `window_add_many`'s items on generations larger than the caches: a
    /// batch goes through `pipelined_by`, prefetching the item's words in
    /// every generation of the view the batch started in (a step meanwhile
    /// makes some of them useless, never wrong) and its stripe; a call of
    /// fewer items asks for them all at once for each item the current
    /// generation does not hold, before the stripe's locked instruction
    /// holds the reads back. Each item's answer goes to `record`.
    fn window_adds_ahead<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        items: &[&[u8]],
        c: Claim,
        mut record: impl FnMut(usize, bool),
    ) -> Result<()> {
        let mut now = 0;
        let piped = self.pipelines(items.len());
        let mut buf = [&[][..]; MAX_RING];
        let gens = self.gens_newest_first(win, self.load_view(&win.w), |_| true, &mut buf);
        let first = |h: &ItemHash, l: &P::Loc| self.prefetch_item_gens(p, gens, h, l);
        let rest = |_: &ItemHash, l: &P::Loc| {
            // The current generation is written (all its words), the others
            // only read, past their first word if it is set.
            for (i, g) in gens.iter().enumerate() {
                if i == 0 || p.first_set(g, l) {
                    p.prefetch_rest(g, l);
                }
            }
        };
        self.pipelined_by(p, items, piped, first, rest, |i, h, loc| {
            let n = self.window_add_item(win, p, i, h, loc, c, &mut now, || {
                if !piped {
                    first(h, loc);
                }
            })?;
            record(i, n);
            Ok(())
        })
    }

    /// The bit arrays of view `v`'s generations that `keep` keeps, newest
    /// first, in `buf`: where a batch prefetches.
    pub(in crate::filter) fn gens_newest_first<'a>(
        &'a self,
        win: &Win,
        v: View,
        keep: impl Fn(u32) -> bool,
        buf: &'a mut [&'a [AtomicU64]; MAX_RING],
    ) -> &'a [&'a [AtomicU64]] {
        let mut n = 0;
        for slot in win.w.slots_newest_first(v).filter(|&slot| keep(slot)) {
            buf[n] = self.generation(win, slot);
            n += 1;
        }
        &buf[..n]
    }
}
