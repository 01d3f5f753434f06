//! Items: add and contains, one at a time and in batches (pipelined
//! beyond the caches), on a filter that is not windowed.

use super::*;

impl Filter {
    //
    // Each operation on items is generic over the layout's `Probe` and is
    // instantiated once per layout by `with_probe!`: the loops below never
    // ask which layout they run.

    /// Add an item at `loc`; `c` is this handle's slot.
    #[inline(always)]
    fn add_at<P: Probe>(&self, p: &P, loc: &P::Loc, c: Claim) -> Result<bool> {
        let sh = self.shared();
        let bits = self.words_slice();
        let stripe = p.stripe(loc);
        // A new item will lock its stripe: on a filter that fits the caches,
        // fetch that line while the bits are loaded rather than after (the
        // locked op cannot overlap the miss). On a larger one the bit words
        // miss too, and an extra line per present item costs more than it
        // saves per new one.
        if let Some(s) = stripe {
            if !self.beyond_caches() {
                prefetch_line(&sh.stripes[s]);
            }
        }
        // Fast path for an item that is already present.
        if self.present_now(p, bits, loc) {
            return Ok(false);
        }
        match stripe {
            // Adders of this item serialize on its stripe (doc/DESIGN.md, C2).
            Some(s) => {
                if !sh.begin_add(s, c)? {
                    return Err(Error::frozen());
                }
                let new = p.set(bits, loc);
                sh.end_add(s);
                Ok(new)
            }
            // One atomic update decides among adders of this item; the
            // slot mark only keeps exclusive operations out (doc/DESIGN.md, C9).
            None => {
                if !sh.begin_lockfree_add(c)? {
                    return Err(Error::frozen());
                }
                let new = p.set(bits, loc);
                sh.end_lockfree_add(c);
                Ok(new)
            }
        }
    }

    /// `add` in its common case, in as few instructions as it takes: a
    /// plain (unwindowed) blocked filter, written through
    /// this thread's cached light slot (`sync::Owned::lockfree_add_light`), no
    /// exclusive operation under way. None, with nothing done, in every
    /// other case: `add` then goes the whole way.
    #[inline(always)]
    fn try_add_lockfree(&self, item: &[u8]) -> Option<bool> {
        match &self.probing {
            Probing::Word64(p) => self.try_add_lockfree_with(p, item),
            Probing::Block128(p) => self.try_add_lockfree_with(p, item),
            // The striped layouts.
            _ => None,
        }
    }

    #[inline(always)]
    fn try_add_lockfree_with<P: Probe>(&self, p: &P, item: &[u8]) -> Option<bool> {
        debug_assert!(!P::STRIPED);
        if let Some(win) = &self.win {
            return self.try_window_add_lockfree(win, p, item);
        }
        if self.region.readonly || self.grown.is_some() {
            return None;
        }
        let sh = self.control_and_slot(self.cached_claim()?)?;
        // As writable (a present item is answered below without the slot
        // mark, which checks again).
        if !sh.light() || sh.ctl.frozen() {
            return None;
        }
        let h = p.hash(self.seed, item);
        let loc = p.locate(&h);
        let bits = self.words_slice();
        if self.present_now(p, bits, &loc) {
            sh.count_ops(1);
            return Some(false);
        }
        sh.lockfree_add_light(|| p.set(bits, &loc))
    }

    /// Add an item: true if it was probably new (some bit was 0). Inlined
    /// whole (the common case, then a call), so that its callers' common
    /// case has no call of its own.
    #[inline(always)]
    pub fn add(&self, item: &[u8]) -> Result<bool> {
        match self.try_add_lockfree(item) {
            Some(new) => Ok(new),
            None => self.add_whole(item),
        }
    }

    #[inline(never)]
    fn add_whole(&self, item: &[u8]) -> Result<bool> {
        self.writable()?;
        let held = self.claim()?;
        let c = held.c;
        if let Some(win) = &self.win {
            return with_probe!(&self.probing, p => self.window_add_one(win, p, item, c));
        }
        let r = match &self.grown {
            Some(s) => self.grown_add(s, item, c),
            None => with_probe!(&self.probing, p => self.add_at(p, &p.locate(&p.hash(self.seed, item)), c)),
        };
        self.shared().count_ops(c, 1);
        r
    }

    /// Whether the bit array (each generation, for a windowed filter) has
    /// `PIPELINE_MIN_BYTES` or more: larger than the caches, where items are
    /// worth prefetching.
    #[inline(always)]
    pub(in crate::filter) fn beyond_caches(&self) -> bool {
        self.geometry.bytes() >= PIPELINE_MIN_BYTES
    }

    /// Whether adds of this filter mark the slot for a lock-free update
    /// rather than take a stripe (a blocked layout, windowed or not: a
    /// windowed one's adds take a stripe only while it steps).
    #[inline(always)]
    pub(in crate::filter) fn lockfree_adds(&self) -> bool {
        fn striped<P: Probe>(_: &P) -> bool {
            P::STRIPED
        }
        !with_probe!(&self.probing, p => striped(p))
    }

    /// Whether a batch of `n` items goes through `pipelined`'s prefetching.
    #[inline(always)]
    pub(in crate::filter) fn pipelines(&self, n: usize) -> bool {
        self.beyond_caches() && n >= 2 * DISTANCE && pipelining()
    }

    /// Run `f` over the items' hashes in order. When `piped` (the answer of
    /// `pipelines`, asked once per batch), a two-stage software pipeline
    /// hides the memory latency of a filter larger than the caches: item
    /// `i + 2*DISTANCE` is hashed and its first word prefetched; item
    /// `i + DISTANCE` has the rest of its words prefetched (a layout with
    /// one word per item has none) — all of them for an add (it will touch
    /// them), and for a query only when its first word has its bits (most
    /// absent items are decided by their first word, and fetching words they
    /// never read would only waste memory bandwidth).
    #[inline(always)]
    pub(in crate::filter) fn pipelined<P: Probe, F>(
        &self,
        p: &P,
        items: &[&[u8]],
        piped: bool,
        all_words: bool,
        f: F,
    ) -> Result<()>
    where
        F: FnMut(usize, &ItemHash, &P::Loc) -> Result<()>,
    {
        let bits = self.words_slice();
        self.pipelined_by(
            p,
            items,
            piped,
            |_, l| p.prefetch_first(bits, l),
            |_, l| {
                if all_words || p.first_set(bits, l) {
                    p.prefetch_rest(bits, l);
                }
            },
            f,
        )
    }

    /// `pipelined` with the two prefetch stages given: `first` for item
    /// `i + 2*DISTANCE`, `rest` for item `i + DISTANCE` (a windowed filter
    /// prefetches in several generations).
    #[inline(always)]
    pub(in crate::filter) fn pipelined_by<P: Probe, A, B, F>(
        &self,
        p: &P,
        items: &[&[u8]],
        piped: bool,
        first: A,
        rest: B,
        mut f: F,
    ) -> Result<()>
    where
        A: Fn(&ItemHash, &P::Loc),
        B: Fn(&ItemHash, &P::Loc),
        F: FnMut(usize, &ItemHash, &P::Loc) -> Result<()>,
    {
        let n = items.len();
        if !piped {
            for (i, item) in items.iter().enumerate() {
                prefetch_item_ahead(items, i);
                let h = p.hash(self.seed, item);
                f(i, &h, &p.locate(&h))?;
            }
            return Ok(());
        }
        // The items between the early stage and their body: item `j` in
        // slot `j % RING` (`first` of `i + 2 * DISTANCE` comes before the
        // body of `i`, so the ring holds more than `2 * DISTANCE`).
        const RING: usize = 4 * DISTANCE;
        let blank = ItemHash { h1: 0, h2: 1 };
        let mut ring = [(blank, p.locate(&blank)); RING];
        prefetch_ahead(
            &mut ring,
            0..n,
            n,
            |ring, j| {
                let h = p.hash(self.seed, items[j]);
                let l = p.locate(&h);
                first(&h, &l);
                ring[j % RING] = (h, l);
            },
            |ring, j| {
                let (h, l) = &ring[j % RING];
                rest(h, l);
            },
            |ring, i| {
                let (h, l) = &ring[i % RING];
                f(i, h, l)
            },
        )
    }

    /// Add many items; `results[i]` (if given) is 1 for each probably-new
    /// item. Returns how many were new. One operation in `ops`, however
    /// many items (none too), as the original counted write calls.
    pub fn add_many(&self, items: &[&[u8]], results: Option<&mut [u8]>) -> Result<u64> {
        self.writable()?;
        let held = self.claim()?;
        let c = held.c;
        if let Some(win) = &self.win {
            return with_probe!(&self.probing, p => self.window_add_many(win, p, items, results, c));
        }
        if let Some(s) = &self.grown {
            return self.grown_add_many(s, items, results, c);
        }
        with_probe!(&self.probing, p => self.add_many_with(p, items, results, c))
    }

    fn add_many_with<P: Probe>(&self, p: &P, items: &[&[u8]], mut results: Option<&mut [u8]>, c: Claim) -> Result<u64> {
        let mut new = 0u64;
        let sh = self.shared();
        let bits = self.words_slice();
        // Lock-free layouts: one slot mark covers up to MARK_ITEMS adds of
        // the batch (under it no exclusive operation runs, so each `set` is
        // all an add needs); exclusive operations wait for at most that many.
        let mut marked = 0usize;
        let r = self.pipelined(p, items, self.pipelines(items.len()), true, |i, _, l| {
            let n = if P::STRIPED {
                self.add_at(p, l, c)?
            } else {
                if marked == 0 {
                    if !sh.begin_lockfree_add(c)? {
                        return Err(Error::frozen());
                    }
                    marked = MARK_ITEMS;
                }
                let n = p.set(bits, l);
                marked -= 1;
                if marked == 0 {
                    sh.end_lockfree_add(c);
                }
                n
            };
            new += n as u64;
            if let Some(r) = results.as_deref_mut() {
                r[i] = n as u8;
            }
            Ok(())
        });
        if marked != 0 {
            sh.end_lockfree_add(c);
        }
        sh.count_ops(c, 1);
        r.map(|_| new)
    }

    /// Whether the item is probably present. Loads only (doc/DESIGN.md, C1).
    #[inline]
    pub fn contains(&self, item: &[u8]) -> bool {
        if let Some(win) = &self.win {
            return self.window_contains(win, item);
        }
        if let Some(s) = &self.grown {
            return self.grown_contains(s, item);
        }
        with_probe!(&self.probing, p => p.contains(self.words_slice(), &p.locate(&p.hash(self.seed, item))))
    }

    /// Query many items; returns how many are present.
    pub fn contains_many(&self, items: &[&[u8]], results: Option<&mut [u8]>) -> u64 {
        if let Some(win) = &self.win {
            return with_probe!(&self.probing, p => self.window_contains_many(win, p, items, results));
        }
        if let Some(s) = &self.grown {
            return self.grown_contains_many(s, items, results);
        }
        with_probe!(&self.probing, p => self.contains_many_with(p, items, results))
    }

    fn contains_many_with<P: Probe>(&self, p: &P, items: &[&[u8]], mut results: Option<&mut [u8]>) -> u64 {
        let mut present = 0u64;
        let bits = self.words_slice();
        // Pipelined, an absent item's first zero bit usually ends it before
        // its later words were fetched (only the first is prefetched when
        // that bit is 0): stop at the first 0 rather than load them all.
        let early = self.pipelines(items.len());
        let _ = self.pipelined(p, items, early, false, |i, _, l| {
            let found = if early {
                p.contains_early(bits, l)
            } else {
                p.contains(bits, l)
            };
            present += found as u64;
            if let Some(r) = results.as_deref_mut() {
                r[i] = found as u8;
            }
            Ok(())
        });
        present
    }
}
