//! The journal: how a merge or an intersect survives its process
//! (doc/DESIGN.md, C3).
//!
//! The operand is another mapping (maybe another process's memory) that
//! is gone when a recoverer comes, so it is first copied into the journal,
//! storage beside the filter that every process mapping the filter can
//! reach. Then, exclusive, the journal is ORed or ANDed in chunk by chunk
//! under `pending` and `cursor`, as clear and invert run. The journal word
//! makes its users take turns: it is taken before the journal is written
//! and given back after its use; the journal's space is kept
//! (`shm::journal`: the word can be forged, so nobody takes pages another
//! process may map on its word). Order: journal word, then
//! excl; never the other way round except by a CAS that does not wait
//! (`reclaim_journal`), so nothing deadlocks. No other filter's lock is
//! held meanwhile.
//!
//! A grown filter's operation runs over all of its published stages at
//! once, as one sequence of words (stage 0, then stage 1, ...), from a
//! journal as long as all of them (`format::journal_for`). The stage count
//! cannot change while the operation is pending: growth and clear take
//! `excl`, which finishes a pending operation first. The stages past the
//! first are mapped by the layer above (`StageSet`), for the operation's
//! owner and for whoever finishes it alike.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// A grown filter's stages, as the filter layer maps them: what a
/// journaled operation needs beyond stage 0 (`Shared::bits`).
pub trait StageSet {
    /// The words of stages `0..n`, each mapped by this handle; None when
    /// one cannot be (a file shorter than its published stages).
    fn stage_words(&self, n: u32) -> Option<Vec<&[AtomicU64]>>;
    /// Raise the fill word of each of stages `0..n` to at least the items
    /// its set bits estimate (a merge's end: a stage that took more than
    /// its capacity is full, and the next new item adds a stage).
    fn raise_fills(&self, n: u32);
}

impl<'a> Shared<'a> {
    /// Take the journal word for `me`, waiting for a live user and taking
    /// it over from a dead one. Whatever a dead user left pending is
    /// finished (by `lock_exclusive`'s resume) before the caller may write
    /// the journal. An error, nothing held, when a wait reached
    /// `wait_limit` (the journal word and the pending work left as found).
    pub fn lock_journal(&self, me: Claim) -> Result<JournalLock<'a>, Error> {
        let word = &self.ctl.journal;
        let mut waited: Option<Waited> = None;
        let was = loop {
            // Acquire: pairs with the Release in JournalLock's drop; the
            // last user's journal writes come before ours.
            let cur = match word.compare_exchange(0, me.token, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break 0,
                Err(cur) => cur,
            };
            if self.gone(cur, me) {
                // AcqRel: Acquire as above (from whatever the dead user
                // published); Release hands on the word with our token.
                if word
                    .compare_exchange(cur, me.token, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    break cur & !WAITERS;
                }
                continue;
            }
            // A user copying its operand moves nothing shared: only another
            // user restarts the time.
            if waited.get_or_insert_with(|| Waited::new((cur, 0))).over((cur, 0)) {
                return Err(self.stuck("the journal word", cur));
            }
            sleep_on(word, cur);
        };
        // Acquire: pairs with `begin`'s Release store of pending.
        if journaled(self.ctl.pending.load(Ordering::Acquire)) {
            // A dead user's operation; only the journal word's holder sets
            // it, so it cannot be anyone else's. Taking the exclusive lock
            // finishes it from the journal, which we now keep unchanged
            // until that is done.
            if let Err(e) = self.take_exclusive(me) {
                // The journal stays as the dead user left it, for whoever
                // comes next (our own token, forged, is nobody's: free).
                let back = if was == me.token { 0 } else { was };
                // Release: as JournalLock's drop, without freeing anything.
                if word.swap(back, Ordering::Release) & WAITERS != 0 {
                    futex_wake(word);
                }
                return Err(e);
            }
        }
        Ok(JournalLock { sh: *self })
    }

    /// Holding the exclusive lock: if the journal's user died, take its
    /// word (a CAS: never waits, since we hold excl) and give it back, so
    /// that the next merger need not take it over. The space stays.
    /// Nothing is pending by now (resume ran).
    pub(super) fn reclaim_journal(&self, me: Claim) {
        let word = &self.ctl.journal;
        // Acquire: pairs with the Release of the word's last change.
        let cur = word.load(Ordering::Acquire);
        if cur == 0 || !self.owner_dead(cur) {
            return;
        }
        // AcqRel: as lock_journal's take-over. Losing means another
        // process took it over: it gives the word back when it is done.
        if word
            .compare_exchange(cur, me.token, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            drop(JournalLock { sh: *self });
        }
    }

    /// The stages a journaled operation runs over: a grown filter's
    /// published stages (the `stages` word, untrusted: clamped to 1 and
    /// the limit), 1 for any other filter.
    pub fn journal_stages(&self) -> u32 {
        if self.stages.is_none() {
            return 1;
        }
        // Acquire: pairs with the Release store that publishes a stage
        // (growth), so that its mapping covers storage reserved for it.
        let limit = (self.fills.len() as u32).max(1);
        self.ctl.stages.load(Ordering::Acquire).clamp(1, limit)
    }

    /// The words a journaled operation over `n` stages changes, stage by
    /// stage; None when a stage cannot be mapped.
    fn journal_targets(&self, n: u32) -> Option<Vec<&'a [AtomicU64]>> {
        match self.stages {
            Some(s) => s.stage_words(n),
            None => Some(vec![self.bits]),
        }
    }

    /// Run journaled operation `op` over `chunks` of the targets' words,
    /// taken as one sequence, reading the operand's words from `journal`
    /// (as long as all of them). Redoing a chunk is harmless (OR and AND
    /// of fixed words), so the cursor just moves past each chunk once it
    /// is done.
    fn run_journal(&self, op: u32, chunks: Range<usize>, targets: &[&[AtomicU64]], journal: &[AtomicU64]) {
        debug_assert_eq!(targets.iter().map(|t| t.len()).sum::<usize>(), journal.len());
        for c in chunks {
            let (lo, hi) = (c * CHUNK, ((c + 1) * CHUNK).min(journal.len()));
            let mut base = 0;
            for t in targets {
                let (a, b) = (lo.max(base), hi.min(base + t.len()));
                if a < b {
                    for (w, j) in t[a - base..b - base].iter().zip(&journal[a..b]) {
                        // Relaxed: we are exclusive; the epoch/excl release
                        // publishes.
                        w.store(
                            apply_journal(op, w.load(Ordering::Relaxed), j.load(Ordering::Relaxed)),
                            Ordering::Relaxed,
                        );
                    }
                }
                base += t.len();
            }
            // Release: the chunk's new words before the cursor passes it
            // (pairs with the Acquire in resume).
            self.ctl.cursor.store(2 * c as u64 + 2, Ordering::Release);
        }
    }

    /// What a finished journaled `op` over `n` stages does besides its
    /// words: a grown filter's merge raises its fill words (`StageSet`).
    /// Run by the merger, or a resumer, once every chunk is done; again
    /// harmlessly.
    fn finish_journal(&self, op: u32, n: u32) {
        if let (PENDING_MERGE, Some(s)) = (op, self.stages) {
            s.raise_fills(n);
        }
    }

    /// Finish journaled `op` a dead owner left, from chunk `cur / 2` on.
    /// The journal must be whole: its user wrote all of it before setting
    /// pending (resume's Acquire pairs with that Release). Unreachable, not
    /// the size of the stages (a damaged file claiming a merge), or a stage
    /// that cannot be mapped: drop the operation, touch no bit.
    pub(super) fn resume_journal(&self, op: u32, cur: u64) {
        let n = self.journal_stages();
        let journal = self.journal.and_then(|s| s.map_journal(n));
        match (self.journal_targets(n), journal) {
            (Some(targets), Some(j)) if j.words().len() == targets.iter().map(|t| t.len()).sum::<usize>() => {
                let chunks = (j.words().len() + CHUNK - 1) / CHUNK;
                // The cursor comes from shared memory: one out of range (a
                // damaged file) finishes nothing.
                let c = usize::try_from(cur / 2).map_or(chunks, |c| c.min(chunks));
                // Relaxed: a statistic (resumed_chunks).
                #[cfg(feature = "test-hooks")]
                RESUMED_CHUNKS.fetch_add((chunks - c) as u64, Ordering::Relaxed);
                self.run_journal(op, c..chunks, &targets, j.words());
                self.finish_journal(op, n);
            }
            _ => {}
        }
        // Done: whoever holds excl next must not redo it (the journal may
        // be freed or rewritten from here on).
        self.ctl.pending.store(PENDING_NONE, Ordering::Release);
    }
}

impl Exclusive<'_> {
    /// Run journaled operation `op` (`PENDING_MERGE`, `PENDING_INTERSECT`)
    /// over every word of the `journal_stages()` stages, `journal` (the
    /// caller's mapping of their journal, whole, written before this call)
    /// holding the operand. Needs the journal word (`lock_journal`);
    /// whoever finds this lock's owner dead finishes it from its own
    /// mapping of the journal. False, nothing done, when a stage cannot be
    /// mapped or `journal` is not as long as the stages.
    pub fn apply_journal(&self, op: u32, journal: &[AtomicU64]) -> bool {
        self.apply_journal_upto(op, journal, usize::MAX)
    }

    /// Apply journaled `op` to the first `chunks` chunks and stop there: an
    /// operation killed part-way. For the crash tests.
    #[cfg(feature = "test-hooks")]
    pub fn apply_journal_partly(&self, op: u32, journal: &[AtomicU64], chunks: usize) -> bool {
        self.apply_journal_upto(op, journal, chunks)
    }

    fn apply_journal_upto(&self, op: u32, journal: &[AtomicU64], upto: usize) -> bool {
        debug_assert!(journaled(op));
        let n = self.sh.journal_stages();
        let Some(targets) = self.sh.journal_targets(n) else {
            return false;
        };
        if targets.iter().map(|t| t.len()).sum::<usize>() != journal.len() {
            return false;
        }
        self.begin(op);
        let chunks = (journal.len() + CHUNK - 1) / CHUNK;
        self.sh.run_journal(op, 0..chunks.min(upto), &targets, journal);
        if upto >= chunks {
            self.sh.finish_journal(op, n);
        }
        true
    }
}

/// Held while the journal is in use; gives the word back when dropped (so
/// an early return never leaves it behind). The journal's space stays
/// (`shm::journal`: a forged word must never make anyone take pages from
/// under a live user).
pub struct JournalLock<'a> {
    sh: Shared<'a>,
}

impl Drop for JournalLock<'_> {
    fn drop(&mut self) {
        let word = &self.sh.ctl.journal;
        // Release: the journal's writes (and nothing pending) before the
        // word is free (pairs with lock_journal's Acquire).
        if word.swap(0, Ordering::Release) & WAITERS != 0 {
            futex_wake(word);
        }
    }
}
