//! Windowed queries, the window's state (stats, copy for serialization),
//! and `rotate`.

use super::*;

impl Filter {
    /// Whether a windowed filter holds the item in a visible generation.
    pub(in crate::filter) fn window_contains(&self, win: &Win, item: &[u8]) -> bool {
        with_probe!(&self.probing, p => self.window_contains_one(win, p, &p.locate(&p.hash(self.seed, item))))
    }

    /// `window_look` for one item, without its lists: the generations
    /// newest first, each looked at if its bits are there, until the view
    /// read again after the look is the one looked in (or, for "present",
    /// one step later).
    #[inline(always)]
    fn window_contains_one<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc) -> bool {
        let w = &win.w;
        let gate = p.gate(loc);
        let mut v = self.load_view(w);
        loop {
            let q = self.grid_now(win, v, now_ns());
            let mut slot = v.pos;
            let mut found = false;
            for _ in 0..w.generations() {
                if self.held_visible(win, p, loc, &gate, slot, q) {
                    found = true;
                    break;
                }
                slot = w.slot_before(slot);
            }
            let v2 = self.load_view(w);
            if v2 == v || (found && v.at_most_one_step(v2, w.ring_len())) {
                return found;
            }
            v = v2;
        }
    }

    /// `window_contains` for a batch, in groups of `WINDOW_QUERY_GROUP`
    /// items that share one reading of the clock and the view. The items
    /// are hashed a chunk at a time, so that a batch on generations larger
    /// than the caches can prefetch ahead (`window_look`).
    pub(in crate::filter) fn window_contains_many<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
    ) -> u64 {
        let mut present = 0u64;
        let mut found = [false; WINDOW_QUERY_GROUP];
        let piped = self.pipelines(items.len());
        // Cache-sized generations: no lookahead, a group hashed at a time.
        let chunk_len = if piped { WINDOW_HASH_CHUNK } else { WINDOW_QUERY_GROUP };
        let mut locs: Vec<P::Loc> = Vec::with_capacity(chunk_len.min(items.len()));
        for (ci, chunk) in items.chunks(chunk_len).enumerate() {
            locs.clear();
            locs.extend(chunk.iter().enumerate().map(|(i, item)| {
                prefetch_item_ahead(chunk, i);
                p.locate(&p.hash(self.seed, item))
            }));
            for start in (0..chunk.len()).step_by(WINDOW_QUERY_GROUP) {
                let found = &mut found[..WINDOW_QUERY_GROUP.min(chunk.len() - start)];
                self.window_look(win, p, &locs, start, found, piped);
                for (i, f) in found.iter().enumerate() {
                    present += *f as u64;
                    if let Some(r) = results.as_deref_mut() {
                        r[ci * chunk_len + start + i] = *f as u8;
                    }
                }
            }
        }
        present
    }

    /// Whether a visible generation holds each item of
    /// `locs[start..start + found.len()]` (into `found`), for one reading of
    /// the clock, the view and the generations' `last` words (which decide
    /// which generations are visible: a group looks only at those).
    ///
    /// Newest generation first: a recent item is found after one look.
    /// The order is safe because an answer of "absent" stands only when no
    /// step came between the two reads of the view: without a step no
    /// generation is cleared, and every bit seen clear was clear while the
    /// whole view stood. "Present" stands across one step too: bits seen
    /// set were set (a clear only takes bits away). The items whose answer
    /// does not stand are looked at again; steps come once a period, so
    /// that is rare.
    ///
    /// `piped`: the first look prefetches, as `pipelined` does, in every
    /// visible generation: the first word of the item `2 * DISTANCE` ahead
    /// in `locs`, the rest of the one `DISTANCE` ahead where its first word
    /// has its bits.
    #[inline(always)]
    fn window_look<P: Probe>(&self, win: &Win, p: &P, locs: &[P::Loc], start: usize, found: &mut [bool], piped: bool) {
        let w = &win.w;
        let group = &locs[start..start + found.len()];
        found.fill(false);
        // Which items still need a look: all at first.
        let mut todo = group.len();
        let mut v = self.load_view(w);
        let mut first_look = piped;
        while todo > 0 {
            let q = self.grid_now(win, v, now_ns());
            // The generations visible at `q`, by their `last` read once for
            // the group: the answers stand at this instant (a generation
            // made visible later only adds items concurrent with the call;
            // bits only appear while the view stands).
            let mut buf = [&[][..]; MAX_RING];
            let gens = self.gens_newest_first(win, v, |slot| self.last_visible(w, slot, q), &mut buf);
            if first_look {
                let first = |_: &mut [bool], j: usize| {
                    for g in gens {
                        p.prefetch_first(g, &locs[j]);
                    }
                };
                let rest = |_: &mut [bool], j: usize| {
                    for g in gens {
                        if p.first_set(g, &locs[j]) {
                            p.prefetch_rest(g, &locs[j]);
                        }
                    }
                };
                let look = |found: &mut [bool], i: usize| {
                    found[i - start] = gens.iter().any(|g| p.contains_early(g, &locs[i]));
                    Ok::<(), std::convert::Infallible>(())
                };
                let _ = prefetch_ahead(found, start..start + group.len(), locs.len(), first, rest, look);
                first_look = false;
            } else {
                for (f, loc) in found.iter_mut().zip(group) {
                    if !*f {
                        let gate = p.gate(loc);
                        *f = gens.iter().any(|g| p.contains_gated_by(g, loc, &gate));
                    }
                }
            }
            let v2 = self.load_view(w);
            todo = if v2 == v {
                0
            } else if v.at_most_one_step(v2, w.ring_len()) {
                found.iter().filter(|f| !**f).count() // the absent ones again
            } else {
                found.fill(false);
                group.len() // all again
            };
            v = v2;
        }
    }

    /// Whether generation `slot` is visible at grid `q` (by its `last`).
    #[inline(always)]
    pub(in crate::filter) fn last_visible(&self, w: &Window, slot: u32, q: u64) -> bool {
        // Acquire: pairs with the adders' fetch_max.
        w.visible(self.last_word(slot).load(Ordering::Acquire), q)
    }

    /// The window's facts and the current generation as the clock has it
    /// (None: not windowed): on an idle filter, the generation the due
    /// step would start, though no write has taken it yet.
    pub fn window_stats(&self) -> Option<WindowStats> {
        let win = self.win()?;
        let (m, _) = self.clock_current(win);
        Some(WindowStats {
            window_ns: win.w.given_ns(),
            generations: win.w.generations(),
            current: m,
            current_start_ns: win.w.grid_start_ns(m),
        })
    }

    /// The current generation as the clock has it, read only (readers
    /// write nothing): its start, and its ring slot, or None when it is
    /// the empty generation the due step would make current.
    pub(in crate::filter) fn clock_current(&self, win: &Win) -> (u64, Option<u32>) {
        let w = &win.w;
        let v = self.load_view(w);
        let q = self.grid_now(win, v, now_ns());
        // Acquire: pairs with the adders' fetch_max, as try_step's.
        let oldest_last = self.last_word(w.oldest(v)).load(Ordering::Acquire);
        let (m, same) = w.current_by_clock(v, q, oldest_last);
        (m, same.then_some(v.pos))
    }

    /// `bits_set` of a windowed filter: its current generation's, as the
    /// clock has it (0 once a step is due).
    pub(in crate::filter) fn window_bits_set(&self, win: &Win) -> u64 {
        match self.clock_current(win).1 {
            Some(slot) => bits_in(self.generation(win, slot)),
            None => 0,
        }
    }

    /// Whether no generation visible now holds a bit: then `contains` is
    /// false for every item. Generations the clock expired count as
    /// empty, as `contains` skips them.
    pub(in crate::filter) fn window_is_empty(&self, win: &Win) -> bool {
        let w = &win.w;
        let v = self.load_view(w);
        let q = self.grid_now(win, v, now_ns());
        w.slots_newest_first(v).all(|slot| {
            !self.last_visible(w, slot, q)
                // Relaxed: a count, as bits_set's.
                || self.generation(win, slot).iter().all(|b| b.load(Ordering::Relaxed) == 0)
        })
    }

    /// The window configuration (None: not windowed).
    pub fn window(&self) -> Option<Window> {
        self.win().map(|w| w.w)
    }

    /// Copy a windowed filter's `g` generations into `out` (`g` arrays of
    /// little-endian words, current first), with the view and `last` words
    /// they belong to: the state of `serial`'s windowed bytes.
    ///
    /// The copy is consistent as a whole, not only word by word. It reads
    /// the view before and after copying; the same view means no step
    /// landed meanwhile (a start only grows, so a view never recurs) and
    /// nothing copied was being cleared (only the spare is). One step
    /// meanwhile is answered for the later view: its generations but the
    /// current are the earlier view's but its oldest (the earlier current
    /// copied again, so that every add to it that ended before the step is
    /// in), and its current is the earlier spare, which was clean before
    /// the copy began (so all it holds is adds after the step), copied
    /// afterwards. A writable handle
    /// holds the cleaner word during the copy (if it gets it within
    /// `DRAIN_LIMIT`), so that no spare is cleared and at most that one
    /// step can land; steps are deferred meanwhile (items then live longer
    /// by the copy's time at most). A read-only handle cannot (nor a
    /// writable one that did not get the word), and tries again when more
    /// than one step landed, `SNAPSHOT_TRIES` times, a writable handle
    /// trying for the cleaner word before each.
    pub(crate) fn copy_window(&self, out: &mut [u8]) -> Result<crate::shm::serial::WindowState> {
        let Some(win) = self.win() else {
            return Err(Error::arg("not a windowed filter"));
        };
        let w = &win.w;
        let g = w.generations() as usize;
        let gen_bytes = win.gen_words * 8;
        if out.len() != g * gen_bytes {
            return Err(Error::arg("copy buffer has the wrong size"));
        }
        let held = if self.readonly() { None } else { self.claim().ok() };
        let mut holding = None;
        let copy = |slot: u32, to: &mut [u8]| {
            for (word, bytes) in self.generation(win, slot).iter().zip(to.chunks_exact_mut(8)) {
                // Relaxed: a per-word snapshot, as for a plain filter; the
                // views read around the copy order it against steps.
                bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
        };
        for _ in 0..SNAPSHOT_TRIES {
            if let (None, Some(h)) = (&holding, &held) {
                holding = self.hold_cleaner(h.c);
            }
            let v1 = self.load_view(w);
            // Acquire: pairs with the cleaner's Release of clean[] (the
            // spare's zeros are seen before we rely on them).
            let spare_clean = self.clean_word(w.spare(v1)).load(Ordering::Acquire) == v1.clean_mark();
            // Oldest first, as a query looks: an item only moves to newer
            // generations.
            for d in (0..g).rev() {
                copy(w.slot_at(v1, d as u32), &mut out[d * gen_bytes..(d + 1) * gen_bytes]);
            }
            let v2 = self.load_view(w);
            let view = if v2 == v1 {
                v1
            } else if spare_clean
                && v2.pos == w.spare(v1)
                && v2.m > v1.m
                // Acquire: as above. The earlier spare keeps the clean mark
                // of v1 until it is the spare again, g steps on: so this
                // is one step, not g + 2.
                && self.clean_word(v2.pos).load(Ordering::Acquire) == v1.clean_mark()
            {
                out.copy_within(gen_bytes..(g - 1) * gen_bytes, 2 * gen_bytes);
                // The earlier current again: adds to it that ended before
                // the step (so before v2 was read) must all be in.
                copy(v1.pos, &mut out[gen_bytes..2 * gen_bytes]);
                copy(v2.pos, &mut out[..gen_bytes]);
                v2
            } else {
                continue;
            };
            // After the bits: an adder raises `last` before it sets bits,
            // so every bit copied is covered. Acquire fence: pairs with the
            // adders' Release fence before their bits (the bits above were
            // read Relaxed), as `held_visible`'s; Acquire loads: with the
            // adders' fetch_max.
            fence(Ordering::Acquire);
            // A word above any grid (no add writes one: the mapping is
            // another process's to corrupt) is copied as the largest a
            // copy may hold; either keeps the generation visible for good.
            let last = (0..g as u32)
                .map(|d| {
                    self.last_word(w.slot_at(view, d))
                        .load(Ordering::Acquire)
                        .min(crate::shm::serial::MAX_LAST)
                })
                .collect();
            if self.load_view(w) != view {
                continue;
            }
            return Ok(crate::shm::serial::WindowState {
                window: *w,
                current: view.m,
                last,
            });
        }
        drop(holding);
        Err(Error::new(
            ErrorKind::Busy,
            format!("the filter stepped during each of {SNAPSHOT_TRIES} attempts to copy it"),
        ))
    }

    /// `serialize_into` of a windowed filter: its generations copied
    /// (`copy_window`), then the header and trailer of `serial`'s windowed
    /// bytes; `out` is `serialized_size` bytes long.
    pub(in crate::filter) fn window_serialize_into(&self, win: &Win, out: &mut [u8]) -> Result<()> {
        let g = self.geometry();
        let off = crate::shm::serial::windowed_bits_off(win.w.generations());
        let end = out.len() - crate::shm::serial::TRAILER_LEN;
        let st = self.copy_window(&mut out[off..end])?;
        crate::shm::serial::write_windowed_header(&g, self.seed(), &st, out);
        crate::shm::serial::seal_windowed(out);
        Ok(())
    }

    /// Take a generation step now, due or not: the oldest generation is
    /// discarded. Clears the spare first if it is not clean yet (waiting
    /// for another process clearing it). Errors on a plain filter.
    pub fn rotate(&self) -> Result<()> {
        let Some(win) = self.win() else {
            return Err(Error::arg("rotate needs a windowed filter"));
        };
        self.writable()?;
        let held = self.claim()?;
        let c = held.c;
        // The cleaner word's holder and the view: while neither moves, the
        // wait is for one holder, at most sync::wait_limit.
        // Relaxed, both: progress hints only.
        let seen = || {
            (
                self.cleaner_word().load(Ordering::Relaxed),
                self.view_word().load(Ordering::Relaxed),
            )
        };
        let (mut was, mut since) = (seen(), std::time::Instant::now());
        loop {
            if self.spare_dirty(&win.w) {
                self.clean_spare(win, c, None);
            }
            if self.shared().frozen() {
                return Err(Error::frozen());
            }
            let v = self.load_view(&win.w);
            // A rotate tries the drains again at once.
            win.step_after.set(None);
            if self.try_step(win, now_ns(), true, c) {
                break;
            }
            if self.load_view(&win.w) == v {
                // A blocked filter's step fences the light marks of
                // lock-free adds; where this process cannot, it would wait
                // for as long as such a process has the filter open.
                if self.lockfree_adds() && !self.shared().fence_light_adders(c) {
                    return Err(no_fence(sync::SyncError::NoFence));
                }
                let q = self.grid_now(win, v, now_ns());
                if !self.spare_dirty(&win.w) && win.w.next_view(v, q).is_none() {
                    // Clean spare, same view, no step: the next start does
                    // not fit the view word (only a corrupt file gets there).
                    return Err(Error::new(
                        ErrorKind::Format,
                        "the generation number is at its limit (corrupted file)",
                    ));
                }
                // Another live process is clearing the spare or holds
                // the cleaner word, or a stopped one holds a lock-free
                // add's mark.
                let now = seen();
                if now != was {
                    (was, since) = (now, std::time::Instant::now());
                } else if since.elapsed() >= sync::wait_limit() {
                    let what = match now.0 {
                        0 => "a lock-free add's mark to clear",
                        _ => "the cleaner word",
                    };
                    return Err(self.shared().stuck(what, now.0));
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        // Ready the next step at once.
        self.clean_spare(win, c, None);
        self.shared().count_ops(c, 1);
        Ok(())
    }

    /// Refuse operations a windowed filter does not have.
    pub(in crate::filter) fn not_windowed(&self, what: &str) -> Result<()> {
        match self.win() {
            Some(_) => Err(Error::arg(format!("{what} is not supported on a windowed filter"))),
            None => Ok(()),
        }
    }
}
