//! Operations on the whole filter: compatibility, and the exclusive ones
//! (merge and intersect through the journal, invert, clear, freeze).

use super::*;

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
        if self.geometry.scheme == other.geometry.scheme
            && self.geometry.m == other.geometry.m
            && self.geometry.k == other.geometry.k
        {
            // Same shape, other positions: calling it a geometry mismatch
            // would send the reader looking at capacity and fp_rate.
            return Err(Error::new(
                ErrorKind::Mismatch,
                "seed mismatch (the filters hash with different seeds)",
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
        let lock = sh.lock_journal(c);
        let Some(j) = self.region.prepare_journal()? else {
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
        if testing::STOP.with(|s| s.get()) == Some(None) {
            testing::stop_here(None);
        }
        let g = sh.lock_exclusive(c).map_err(no_fence)?;
        if sh.frozen() {
            return Err(Error::frozen()); // g, then lock, drop: all released
        }
        #[cfg(feature = "test-hooks")]
        if let Some(Some(chunks)) = testing::STOP.with(|s| s.get()) {
            g.apply_journal_partly(op, journal, chunks);
            testing::stop_here(Some(g));
        }
        g.apply_journal(op, journal);
        drop(g);
        drop(j);
        drop(lock);
        sh.count_ops(c, 1);
        Ok(true)
    }

    /// Union: OR `other`'s bits in. `other` is copied to the journal first
    /// (lock-free), then ORed in exclusively, so that a merge killed part-way
    /// is finished by whoever writes next; a merge with the same filter is a
    /// no-op.
    pub fn merge(&self, other: &Filter) -> Result<()> {
        self.writable()?;
        self.not_windowed("merge")?;
        other.not_windowed("merge")?;
        self.not_grown("merge")?;
        other.not_grown("merge")?;
        self.check_compatible(other)?;
        let held = self.claim()?;
        let c = held.c;
        let sh = self.shared();
        if self.same_filter(other) {
            sh.count_ops(c, 1); // a write call all the same
            return Ok(());
        }
        if self.journaled(other, PENDING_MERGE, c)? {
            return Ok(());
        }
        // No journal possible (a memfd sealed against growing, as earlier
        // versions made them): OR in place, lock-free, one word at a time,
        // as those versions did; a kill leaves a part merged.
        if !sh.begin_merge(c) {
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
        self.not_grown("intersect")?;
        other.not_grown("intersect")?;
        self.check_compatible(other)?;
        let held = self.claim()?;
        if self.same_filter(other) {
            self.shared().count_ops(held.c, 1); // a write call all the same
            return Ok(());
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
