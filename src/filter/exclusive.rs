//! Operations on the whole filter: compatibility, and the exclusive ones
//! (merge and intersect through the journal, invert, clear, freeze).

use super::grown::Stages;
use super::*;

/// How a filter grows, in words: "grows by 4 up to 1000 items", "does not
/// grow".
fn growth_shown(g: Option<crate::math::growth::Growth>) -> String {
    match g {
        None => "does not grow".to_string(),
        Some(g) => match g.max_capacity() {
            Some(m) => format!("grows by {} up to {m} items", g.factor()),
            None => format!("grows by {}", g.factor()),
        },
    }
}

impl Filter {
    /// Same layout, bit array shape and hash: their bits mean the same items.
    pub fn is_compatible(&self, other: &Filter) -> bool {
        self.geometry.scheme == other.geometry.scheme
            && self.geometry.m == other.geometry.m
            && self.geometry.k == other.geometry.k
            && self.seed == other.seed
            && self.growth() == other.growth()
    }

    fn same_filter(&self, other: &Filter) -> bool {
        self.region.same_object(&other.region)
    }

    fn check_compatible(&self, other: &Filter) -> Result<()> {
        if self.is_compatible(other) {
            return Ok(());
        }
        if self.layout() != other.layout() {
            return Err(Error::new(
                ErrorKind::Mismatch,
                format!(
                    "layout mismatch ({} vs {})",
                    self.layout().name(),
                    other.layout().name()
                ),
            ));
        }
        let how = |f: &Filter| f.growth().map(|g| (g.factor(), g.max_capacity()));
        if how(self) != how(other) {
            return Err(Error::new(
                ErrorKind::Mismatch,
                format!(
                    "growth mismatch ({} vs {})",
                    growth_shown(self.growth()),
                    growth_shown(other.growth())
                ),
            ));
        }
        let same_shape = self.geometry.scheme == other.geometry.scheme
            && self.geometry.m == other.geometry.m
            && self.geometry.k == other.geometry.k;
        if same_shape && self.seed != other.seed {
            // Same shape, other positions: calling it a geometry mismatch
            // would send the reader looking at capacity and fp_rate.
            return Err(Error::new(
                ErrorKind::Mismatch,
                "seed mismatch (the filters hash with different seeds)",
            ));
        }
        if same_shape {
            // Grown filters whose first stages agree but were sized from
            // another capacity or fp_rate: their later stages differ.
            return Err(Error::new(
                ErrorKind::Mismatch,
                "growth mismatch (the stages after the first differ: the filters were made with another \
                 capacity or fp_rate)",
            ));
        }
        Err(Error::new(
            ErrorKind::Mismatch,
            format!(
                "geometry mismatch (bits {} vs {}, hashes {} vs {}, seeds {})",
                self.geometry.m,
                other.geometry.m,
                self.geometry.k,
                other.geometry.k,
                if self.seed == other.seed { "equal" } else { "differ" }
            ),
        ))
    }

    /// Run an exclusive operation.
    fn exclusive<R>(&self, f: impl FnOnce(&sync::Exclusive<'_>, &[AtomicU64]) -> R) -> Result<R> {
        self.writable()?;
        let held = self.claim()?;
        let c = held.c;
        let sh = self.shared();
        let g = sh.lock_exclusive(c).map_err(no_fence)?;
        if sh.frozen() {
            return Err(Error::frozen()); // g drops: lock released
        }
        let r = f(&g, self.words_slice());
        drop(g);
        sh.count_ops(c, 1);
        Ok(r)
    }

    /// Run journaled `op` (`PENDING_MERGE`, `PENDING_INTERSECT`) with
    /// `other` as operand, so that a process killed anywhere leaves the
    /// filter as before or as after (`sync::lock_journal`): take the
    /// journal word, copy `other` into the journal (reading it lock-free,
    /// holding no lock of ours but the journal word: never two filters'
    /// locks at once), then apply the journal exclusively. `Ok(false)`:
    /// this filter's storage cannot hold a journal (a memfd sealed against
    /// growing); nothing was done.
    fn journaled(&self, other: &Filter, op: u32, c: Claim) -> Result<bool> {
        let sh = self.shared();
        let lock = sh.lock_journal(c)?;
        let Some(j) = self.region.prepare_journal(1)? else {
            return Ok(false); // `lock` drops: the word is given back
        };
        let journal = j.words();
        for (d, s) in journal.iter().zip(other.words_slice()) {
            // Relaxed: a per-word snapshot of a concurrently changing
            // filter; `begin`'s Release of pending publishes the copy to a
            // recoverer.
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        #[cfg(feature = "test-hooks")]
        testing::stop_after_copy();
        let g = sh.lock_exclusive(c).map_err(no_fence)?;
        if sh.frozen() {
            return Err(Error::frozen()); // g, then lock, drop: all released
        }
        #[cfg(feature = "test-hooks")]
        testing::stop_part_applied(&g, op, journal);
        let applied = g.apply_journal(op, journal);
        debug_assert!(applied, "a journal of the bit array's size");
        drop(g);
        drop(j);
        drop(lock);
        sh.count_ops(c, 1);
        Ok(true)
    }

    /// Grow this filter (`s` its stages) until it has `want` stages, as a
    /// full stage does, a stage at a time under that growth's own locks.
    /// A failure names the reason; the stages added before it stay, empty.
    fn grow_to(&self, s: &Stages, want: u32, c: Claim) -> Result<()> {
        loop {
            let n = self.stages_now(s)?;
            if n >= want {
                return Ok(());
            }
            if let Err(mut e) = self.grow(s, n, c) {
                if e.kind != ErrorKind::Io {
                    return Err(e); // frozen meanwhile, or the like: as it is
                }
                let why = e.msg.strip_prefix("the filter is full and ").unwrap_or(&e.msg);
                let why = why.strip_suffix("; nothing was added").unwrap_or(why);
                e.msg = format!(
                    "the filter must grow to the other filter's {want} stages, and {why}; \
                     nothing was merged (stages added before stay, empty)"
                );
                return Err(e);
            }
        }
    }

    /// Merge or intersect (`op`) grown `other` (`so` its stages) into this
    /// grown filter (`s`), crash-atomically over all the stages it
    /// changes (doc/DESIGN.md, C3, G5). A merge first grows this filter to
    /// the other's stage count; then, holding the journal word (no stage
    /// can be added meanwhile), the other's stages are copied into a
    /// journal as long as all of ours (the rest: OR's and AND's identity,
    /// zeros and ones), and applied under `excl` if no clear dropped
    /// stages in between (else it starts over). Stage j of the other holds
    /// its items as stage j here does: the same geometry, the same hashing.
    fn grown_journaled(&self, s: &Stages, other: &Filter, so: &Stages, op: u32, c: Claim) -> Result<()> {
        let sh = self.shared();
        loop {
            let want = other.stages_now(so)?;
            if op == PENDING_INTERSECT && want > 1 {
                return Err(Self::intersect_grown(want));
            }
            self.grow_to(s, want, c)?;
            let lock = sh.lock_journal(c)?;
            let n = self.stages_now(s)?;
            let theirs = other.stages_now(so)?;
            if op == PENDING_INTERSECT && theirs > 1 {
                return Err(Self::intersect_grown(theirs)); // lock drops
            }
            if theirs > n {
                continue; // a clear dropped stages, or the other grew: lock drops
            }
            let what = if op == PENDING_MERGE { "merge" } else { "intersect" };
            let Some(j) = self.region.prepare_journal(n)? else {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "the filter's memfd is sealed against growing, so it has no room for the journal \
                         that makes a {what} of filters that grow crash-safe; nothing was changed"
                    ),
                ));
            };
            let journal = j.words();
            let rest = if op == PENDING_MERGE { 0 } else { u64::MAX };
            let mut theirs = (0..theirs).flat_map(|i| other.stage_bits(so, i));
            for d in journal {
                // Relaxed: a per-word snapshot of a concurrently changing
                // filter; `begin`'s Release of pending publishes the copy
                // to a recoverer.
                let w = theirs.next().map_or(rest, |w| w.load(Ordering::Relaxed));
                d.store(w, Ordering::Relaxed);
            }
            #[cfg(feature = "test-hooks")]
            testing::stop_after_copy();
            let g = sh.lock_exclusive(c).map_err(no_fence)?;
            if sh.frozen() {
                return Err(Error::frozen()); // g, then lock, drop: all released
            }
            if sh.journal_stages() != n {
                continue; // a clear dropped stages meanwhile: g, j, lock drop
            }
            #[cfg(feature = "test-hooks")]
            testing::stop_part_applied(&g, op, journal);
            if !g.apply_journal(op, journal) {
                return Err(Error::new(
                    ErrorKind::Io,
                    "a stage of the filter cannot be mapped; nothing was changed",
                ));
            }
            drop(g);
            drop(j);
            drop(lock);
            sh.count_ops(c, 1);
            return Ok(());
        }
    }

    /// Why a filter cannot be intersected with one grown to `n` stages.
    fn intersect_grown(n: u32) -> Error {
        Error::new(
            ErrorKind::Mismatch,
            format!(
                "the other filter has grown to {n} stages; an item both filters hold can sit \
                 in different stages, so no stage can be intersected without losing it; nothing was changed"
            ),
        )
    }

    /// Union: OR `other`'s bits in. `other` is copied to the journal first
    /// (lock-free), then ORed in exclusively, so that a merge killed part-way
    /// is finished by whoever writes next; a merge with the same filter is a
    /// no-op.
    pub fn merge(&self, other: &Filter) -> Result<()> {
        self.writable()?;
        self.not_windowed("merge")?;
        other.not_windowed("merge")?;
        self.check_compatible(other)?;
        let held = self.claim()?;
        let c = held.c;
        let sh = self.shared();
        if self.same_filter(other) {
            sh.count_ops(c, 1); // a write call all the same
            return Ok(());
        }
        if let (Kind::Grown(s), Kind::Grown(so)) = (&self.kind, &other.kind) {
            return self.grown_journaled(s, other, so, PENDING_MERGE, c);
        }
        if self.journaled(other, PENDING_MERGE, c)? {
            return Ok(());
        }
        // No journal possible (a memfd sealed against growing, as earlier
        // versions made them): OR in place, lock-free, one word at a time,
        // as those versions did; a kill leaves a part merged.
        if !sh.begin_merge(c)? {
            return Err(Error::frozen());
        }
        for i in 0..self.words {
            // Relaxed: a per-word snapshot of a concurrently changing filter;
            // the busy mark's Release publishes our ORs to a drainer.
            let s = other.word(i).load(Ordering::Relaxed);
            let w = self.word(i);
            if s != 0 && w.load(Ordering::Relaxed) & s != s {
                w.fetch_or(s, Ordering::Relaxed);
            }
        }
        sh.end_merge(c);
        sh.count_ops(c, 1);
        Ok(())
    }

    /// Intersection: AND `other`'s bits in, exclusively, from a copy in the
    /// journal (see merge).
    pub fn intersect(&self, other: &Filter) -> Result<()> {
        self.writable()?;
        self.not_windowed("intersect")?;
        other.not_windowed("intersect")?;
        self.check_compatible(other)?;
        let held = self.claim()?;
        if self.same_filter(other) {
            self.shared().count_ops(held.c, 1); // a write call all the same
            return Ok(());
        }
        if let (Kind::Grown(s), Kind::Grown(so)) = (&self.kind, &other.kind) {
            return self.grown_journaled(s, other, so, PENDING_INTERSECT, held.c);
        }
        if self.journaled(other, PENDING_INTERSECT, held.c)? {
            return Ok(());
        }
        drop(held);
        // No journal possible (see merge): AND in place, exclusively.
        self.exclusive(|_, words| {
            for (i, w) in words.iter().enumerate() {
                let s = other.word(i).load(Ordering::Relaxed);
                // Relaxed: we are exclusive; the epoch/excl release publishes.
                w.store(w.load(Ordering::Relaxed) & s, Ordering::Relaxed);
            }
        })
    }

    /// Flip every bit, exclusively. A process killed part-way leaves it to
    /// the next exclusive owner to finish.
    pub fn invert(&self) -> Result<()> {
        self.not_windowed("invert")?;
        self.not_grown("invert")?;
        self.exclusive(|g, _| g.transform(PENDING_INVERT))
    }

    /// Reset to empty, exclusively; finished by the next exclusive owner if
    /// this process is killed part-way.
    pub fn clear(&self) -> Result<()> {
        self.exclusive(|g, _| g.transform(PENDING_CLEAR))
    }

    /// Seal the filter for good and flush it.
    pub fn freeze(&self) -> Result<()> {
        self.exclusive(|_, _| {
            // Release: pairs with the Acquire loads in `writable`/`frozen`.
            self.flags().fetch_or(format::FLAG_FROZEN, Ordering::Release);
        })?;
        self.sync_stages()?;
        self.region.sync()?;
        self.region.sync_header()
    }
}
