//! A plain filter: one bit array, kept for good (`Kind::Plain`). Its adds
//! and queries, one at a time and in batches (pipelined beyond the
//! caches, through `Filter::pipelined`).

use super::*;

/// Adds of a plain batch under one slot mark, in a lock-free layout: an exclusive
/// operation waits for at most this many (a few microseconds).
const MARK_ITEMS: usize = 256;

impl Filter {
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

    /// `add` on a plain filter (all but its common case,
    /// `try_plain_add_lockfree`).
    #[inline(always)]
    pub(in crate::filter) fn plain_add<P: Probe>(&self, p: &P, item: &[u8], c: Claim) -> Result<bool> {
        self.add_at(p, &p.locate(&p.hash(self.seed, item)), c)
    }

    /// `add` in its common case (`Filter::try_add_lockfree`), on a plain
    /// filter.
    #[inline(always)]
    pub(in crate::filter) fn try_plain_add_lockfree<P: Probe>(&self, p: &P, item: &[u8]) -> Option<bool> {
        if self.region.readonly {
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

    /// `add_many` on a plain filter.
    pub(in crate::filter) fn plain_add_many<P: Probe>(
        &self,
        p: &P,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
        c: Claim,
    ) -> Result<u64> {
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

    /// `contains` on a plain filter. Loads only (doc/DESIGN.md, C1).
    #[inline(always)]
    pub(in crate::filter) fn plain_contains<P: Probe>(&self, p: &P, item: &[u8]) -> bool {
        p.contains(self.words_slice(), &p.locate(&p.hash(self.seed, item)))
    }

    /// `contains_many` on a plain filter.
    pub(in crate::filter) fn plain_contains_many<P: Probe>(
        &self,
        p: &P,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
    ) -> u64 {
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
