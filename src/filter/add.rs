//! Items: add and contains, one at a time and in batches, each call
//! dispatched once on the filter's kind (`plain`, `window`, `grown` do the
//! work); and the pipeline every kind's batches go through beyond the
//! caches (`Filter::pipelined`, over `prefetch_ahead`).

use super::*;

impl Filter {
    //
    // Each operation on items is generic over the layout's `Probe` and is
    // instantiated once per layout by `with_probe!`: the loops below never
    // ask which layout they run.

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
        match &self.kind {
            Kind::Plain => self.try_plain_add_lockfree(p, item),
            Kind::Windowed(win) => self.try_window_add_lockfree(win, p, item),
            Kind::Grown(_) => None,
        }
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
        let r = match &self.kind {
            Kind::Plain => with_probe!(&self.probing, p => self.plain_add(p, item, c)),
            Kind::Windowed(win) => return with_probe!(&self.probing, p => self.window_add_one(win, p, item, c)),
            Kind::Grown(s) => self.grown_add(s, item, c),
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
        match &self.kind {
            Kind::Plain => with_probe!(&self.probing, p => self.plain_add_many(p, items, results, c)),
            Kind::Windowed(win) => with_probe!(&self.probing, p => self.window_add_many(win, p, items, results, c)),
            Kind::Grown(s) => self.grown_add_many(s, items, results, c),
        }
    }

    /// Whether the item is probably present. Loads only (doc/DESIGN.md, C1).
    #[inline]
    pub fn contains(&self, item: &[u8]) -> bool {
        match &self.kind {
            Kind::Plain => with_probe!(&self.probing, p => self.plain_contains(p, item)),
            Kind::Windowed(win) => self.window_contains(win, item),
            Kind::Grown(s) => self.grown_contains(s, item),
        }
    }

    /// Query many items; returns how many are present.
    pub fn contains_many(&self, items: &[&[u8]], results: Option<&mut [u8]>) -> u64 {
        match &self.kind {
            Kind::Plain => with_probe!(&self.probing, p => self.plain_contains_many(p, items, results)),
            Kind::Windowed(win) => with_probe!(&self.probing, p => self.window_contains_many(win, p, items, results)),
            Kind::Grown(s) => self.grown_contains_many(s, items, results),
        }
    }
}
