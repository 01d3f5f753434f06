//! A grown filter's looks over its stages (doc/DESIGN.md, G5): a batch's
//! chunk of items hashed once, then each item looked for in the published
//! stages, newest first (`Lanes::look`), and the items none holds added to
//! the newest stage; a single call's look and add the same way, through
//! lanes the handle keeps (`KeptLanes`).
//!
//! Item by item, over the stages as `Lanes`: every stage of a filter has
//! its layout, so one layout's code (`with_probe!` once per batch) walks an
//! array of the stages' probes and bits, and what an item's places in all
//! of them share is worked out once (`Probe::patterns`: a blocked item's
//! bits for every `k`). An absent item's looks in the stages are
//! independent loads, which the processor overlaps; in stages beyond the
//! caches (the newest, the largest) the words of the item `DISTANCE`
//! places ahead are prefetched, as the plain batches do.
//!
//! New items of a chunk are added under one slot mark held over their run
//! (a lock-free layout) or each under its stripe, straight into the newest
//! stage at the place the look worked out, while the look stands: the
//! stage count and the epoch as the look saw them (`add_under`'s rule, for
//! a run). An item that finds the stage full, or the look no longer
//! standing, goes the single add's way (`add_absent`).

use super::lanes::{with_kept, KeptLanes, Lanes};
use super::{Seen, Stages};
use crate::filter::*;
use crate::math::hashing::hash_item;

/// Items of a grown batch hashed and looked for at a time: one reading of
/// the stage count (and, for an add, of the epoch) per chunk; its hashes
/// and places stay in the first-level cache.
const GROWN_CHUNK: usize = 256;

/// One chunk of a batch: the items' hashes, whether a stage holds each and
/// each one's place in the newest stage.
struct Chunk<P: Probe> {
    hashes: [ItemHash; GROWN_CHUNK],
    found: [bool; GROWN_CHUNK],
    at: [P::Loc; GROWN_CHUNK],
    len: usize,
}

impl<P: Probe> Chunk<P> {
    fn new(p: &P) -> Chunk<P> {
        let h = ItemHash { h1: 0, h2: 0 };
        Chunk {
            hashes: [h; GROWN_CHUNK],
            found: [false; GROWN_CHUNK],
            at: [p.locate(&h); GROWN_CHUNK],
            len: 0,
        }
    }

    /// Hash `items` (at most `GROWN_CHUNK`), none found yet.
    fn fill(&mut self, seed: u64, items: &[&[u8]]) {
        debug_assert!(items.len() <= GROWN_CHUNK);
        for (i, item) in items.iter().enumerate() {
            prefetch_item_ahead(items, i);
            self.hashes[i] = hash_item(seed, item);
        }
        self.len = items.len();
        self.found[..items.len()].fill(false);
    }

    /// Look for every item of the chunk in `lanes` (`Lanes::look`),
    /// prefetching `DISTANCE` items ahead in the stages beyond the caches;
    /// `at` only for an add (`place`). Not inlined: its callers are two,
    /// and a walk's body inlined into each would be left a call per item
    /// (one per chunk instead).
    #[inline(never)]
    fn look<'b>(&mut self, lanes: &Lanes<P>, bits: impl Fn(usize) -> &'b [AtomicU64] + Copy, place: bool) {
        let len = self.len;
        let piped = lanes.beyond() > 0 && len > DISTANCE && pipelining();
        let mut pats = P::Patterns::default();
        let look = |ch: &mut Self, j: usize| {
            let (found, at) = lanes.look(bits, &ch.hashes[j], &mut pats);
            ch.found[j] = found;
            if place {
                ch.at[j] = at;
            }
            Ok::<(), std::convert::Infallible>(())
        };
        // One stage: the stages' words `DISTANCE` items ahead, when piped.
        let rest = |ch: &mut Self, j: usize| {
            if piped {
                lanes.prefetch(bits, &ch.hashes[j]);
            }
        };
        let _ = prefetch_ahead(self, 0..len, len, |_, _| {}, rest, look);
    }
}

impl Filter {
    /// The first `n` stages (mapped) as lanes of layout `P`; None if one
    /// is not of `P` (never: every stage has the filter's layout).
    fn lanes<P: Probe>(&self, s: &Stages, n: u32) -> Option<Lanes<P>> {
        if (0..n).any(|i| P::of(&s.all[i as usize].probing).is_none()) {
            return None;
        }
        Lanes::new((0..n).rev().filter_map(|i| {
            let p = *P::of(&s.all[i as usize].probing)?;
            Some((p, i as usize, self.stage_bits(s, i).len()))
        }))
    }

    /// The bits a look reads for a lane's stage (`Lanes::look`).
    #[inline(always)]
    fn bits_of<'a>(&'a self, s: &'a Stages) -> impl Fn(usize) -> &'a [AtomicU64] + Copy + 'a {
        move |i| self.stage_bits(s, i as u32)
    }

    /// `f` of the lanes of the first `n` stages, kept in `s` once every one
    /// of them has bits (mapped: `stages_now`), else made for this call;
    /// None when none has bits (as when `n` is 0): no stage holds an item.
    #[inline]
    fn with_lanes<R>(&self, s: &Stages, n: u32, f: impl FnOnce(&KeptLanes) -> R) -> Option<R> {
        let cell = (n as usize).checked_sub(1).and_then(|i| s.kept.get(i))?;
        if let Some(k) = cell.get() {
            return Some(f(k));
        }
        let made = match &s.all[0].probing {
            Probing::StandardStage(_) => self.lanes(s, n).map(KeptLanes::Standard),
            Probing::Word64(_) => self.lanes(s, n).map(KeptLanes::Word64),
            Probing::Block128(_) => self.lanes(s, n).map(KeptLanes::Block128),
            // Never: the other layouts do not grow.
            _ => None,
        }?;
        if with_kept!(&made, l => l.len()) != n as usize {
            return Some(f(&made));
        }
        Some(f(cell.get_or_init(|| Box::new(made))))
    }

    /// Whether one of the first `n` stages holds the item (`Lanes::look`).
    pub(in crate::filter) fn some_stage_holds(&self, s: &Stages, n: u32, h: &ItemHash) -> bool {
        self.with_lanes(
            s,
            n,
            |k| with_kept!(k, l => l.look(self.bits_of(s), h, &mut Default::default()).0),
        )
        .unwrap_or(false)
    }

    /// A grown filter's add (§8 N1, N7): present in a published stage, not
    /// new; else, under the item's stripe (standard) or the slot mark
    /// (blocked), into the newest stage unless it is full, in which case a
    /// stage is added (`grow`) and the add starts over.
    pub(in crate::filter) fn grown_add(&self, s: &Stages, item: &[u8], c: Claim) -> Result<bool> {
        let h = hash_item(self.seed, item);
        let n = self.stages_now(s)?;
        self.with_lanes(s, n, |k| with_kept!(k, l => self.grown_add_in(l, s, n, &h, c)))
            .unwrap_or_else(|| self.add_absent(s, &h, None, c))
    }

    #[inline(always)]
    fn grown_add_in<P: Probe>(&self, lanes: &Lanes<P>, s: &Stages, n: u32, h: &ItemHash, c: Claim) -> Result<bool> {
        // Not new if a stage holds it, read as a seqlock reader (A1): an
        // odd epoch (a growth or another exclusive operation) sends the add
        // the long way, as do lanes that miss a stage (one not mapped).
        let mut look = None;
        let seen = self
            .look_stood(|| look = Some(lanes.look(self.bits_of(s), h, &mut Default::default())))
            .filter(|_| lanes.len() == n as usize)
            .map(|epoch| Seen { epoch, stages: n });
        match look {
            Some((true, _)) if seen.is_some() => Ok(false),
            Some((_, at)) => self.add_seen::<P>(s, h, &at, seen, c),
            None => self.add_absent(s, h, None, c),
        }
    }

    /// A grown filter's `contains_many` (§8 N8): each chunk's answers are
    /// those of the stages published when it began (a stage published
    /// later only holds items added during the call). A stage that cannot
    /// be mapped makes the chunk's answers "present", as `grown_contains`.
    pub(in crate::filter) fn grown_contains_many(
        &self,
        s: &Stages,
        items: &[&[u8]],
        results: Option<&mut [u8]>,
    ) -> u64 {
        with_probe!(&s.all[0].probing, p => self.grown_contains_many_in(p, s, items, results))
    }

    fn grown_contains_many_in<P: Probe>(
        &self,
        p: &P,
        s: &Stages,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
    ) -> u64 {
        let mut present = 0u64;
        let mut ch = Chunk::new(p);
        for (ci, chunk) in items.chunks(GROWN_CHUNK).enumerate() {
            ch.fill(self.seed, chunk);
            match self.stages_now(s) {
                Ok(n) => match self.lanes::<P>(s, n) {
                    Some(lanes) => ch.look(&lanes, self.bits_of(s), false),
                    // No stage has bits: none holds an item (as
                    // `some_stage_holds`).
                    None => ch.found[..ch.len].fill(false),
                },
                Err(_) => ch.found[..ch.len].fill(true),
            }
            for (i, &f) in ch.found[..ch.len].iter().enumerate() {
                present += f as u64;
                if let Some(r) = results.as_deref_mut() {
                    r[ci * GROWN_CHUNK + i] = f as u8;
                }
            }
        }
        present
    }

    /// A grown filter's `add_many`, one write call under one claim: per
    /// chunk, the items a published stage holds are found by one look read
    /// as a seqlock reader (as `grown_add`'s), then the others are added in
    /// order (`add_chunk`); an error stops the batch at its item.
    pub(in crate::filter) fn grown_add_many(
        &self,
        s: &Stages,
        items: &[&[u8]],
        results: Option<&mut [u8]>,
        c: Claim,
    ) -> Result<u64> {
        let r = with_probe!(&s.all[0].probing, p => self.grown_add_many_in(p, s, items, results, c));
        self.shared().count_ops(c, 1);
        r
    }

    fn grown_add_many_in<P: Probe>(
        &self,
        p: &P,
        s: &Stages,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
        c: Claim,
    ) -> Result<u64> {
        let mut new = 0u64;
        let mut ch = Chunk::new(p);
        for (ci, chunk) in items.chunks(GROWN_CHUNK).enumerate() {
            ch.fill(self.seed, chunk);
            let base = ci * GROWN_CHUNK;
            let n = self.stages_now(s).map_err(|e| batch_error(e, base))?;
            // The found answers stand only with the epoch unchanged over
            // the look; otherwise every item goes the long way.
            let seen = self.lanes::<P>(s, n).and_then(|lanes| {
                self.look_stood(|| ch.look(&lanes, self.bits_of(s), true))
                    .map(|epoch| Seen { epoch, stages: n })
            });
            if seen.is_none() {
                ch.found[..ch.len].fill(false);
            }
            let mut done = |i: usize, n: bool| {
                new += n as u64;
                if let Some(r) = results.as_deref_mut() {
                    r[base + i] = n as u8;
                }
            };
            self.add_chunk(s, &ch, seen, c, &mut done)
                .map_err(|(i, e)| batch_error(e, base + i))?;
        }
        Ok(new)
    }

    /// Add the chunk's items no stage was found to hold, in order, each
    /// item's `done(i, new)` called in order (the found ones' too); an
    /// error stops at its item.
    ///
    /// Exactly once (N7), as a single add: an item is added under its
    /// stripe, or under the slot mark held over a run of items (a
    /// lock-free layout); under it no exclusive operation runs, so with the
    /// stage count and the epoch as the look saw them (`seen`) the older
    /// stages are as the look found them (`add_under`'s argument) and the
    /// newest stage's one update (under the stripe, or atomic) tells at
    /// most one adder new. An item that finds the newest stage full, or
    /// the look no longer standing, is added as a single add is
    /// (`add_absent`), with the stripe or mark given back first: a growth
    /// drains every mark, its own process's too.
    fn add_chunk<P: Probe>(
        &self,
        s: &Stages,
        ch: &Chunk<P>,
        seen: Option<Seen>,
        c: Claim,
        done: &mut impl FnMut(usize, bool),
    ) -> std::result::Result<(), (usize, Error)> {
        let sh = self.shared();
        let newest = seen.and_then(|v| P::of(&s.all[v.stages as usize - 1].probing).map(|p| (v, *p)));
        let mut i = 0;
        while i < ch.len {
            if ch.found[i] {
                done(i, false);
                i += 1;
                continue;
            }
            let Some((v, p)) = newest else {
                let new = self.add_absent(s, &ch.hashes[i], None, c).map_err(|e| (i, e))?;
                done(i, new);
                i += 1;
                continue;
            };
            let stripe = p.stripe(&ch.at[i]);
            if !sh.begin_item_add(stripe, c).map_err(|e| (i, e))? {
                return Err((i, Error::frozen()));
            }
            // One item under a stripe, the rest of the chunk under a mark.
            let mut slow = false;
            loop {
                let new = match ch.found[i] {
                    true => false,
                    false => match self.put_seen(s, v, &p, &ch.at[i]) {
                        Some(new) => new,
                        None => {
                            slow = true;
                            break;
                        }
                    },
                };
                done(i, new);
                i += 1;
                if stripe.is_some() || i == ch.len {
                    break;
                }
            }
            sh.end_item_add(stripe, c);
            if slow {
                let new = self.add_absent(s, &ch.hashes[i], seen, c).map_err(|e| (i, e))?;
                done(i, new);
                i += 1;
            }
        }
        Ok(())
    }
}

/// An add's error at item `i` of a batch: the items before it are in; say
/// so, rather than the single add's "nothing was added".
fn batch_error(mut e: Error, i: usize) -> Error {
    if let Some(head) = e.msg.strip_suffix("; nothing was added") {
        e.msg = format!("{head}; the first {i} items of this batch were added, none after");
    }
    e
}

#[cfg(test)]
mod tests {
    use super::super::lanes::LANE_PREFETCH_BYTES;
    use super::*;
    use crate::math::rng::xorshift;
    use crate::probe::{Block128, StandardStage, Word64};

    /// A chunk's look over stages of one layout, each with its own size
    /// and `k`, answers as `contains` stage by stage: found exactly when a
    /// stage holds the item, every item set somewhere found, and its place
    /// in the newest stage `locate`'s. `words` are the stages' sizes, the
    /// newest last; `big` puts the newest beyond the caches, where the look
    /// prefetches ahead.
    fn look_agrees<P: Probe>(stages: &[(P, usize)], name: &str)
    where
        P::Loc: PartialEq + std::fmt::Debug,
    {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let arrays: Vec<Vec<AtomicU64>> = stages
            .iter()
            .map(|&(_, words)| (0..words).map(|_| AtomicU64::new(0)).collect())
            .collect();
        let keys: Vec<[u8; 8]> = (0..GROWN_CHUNK as u64).map(|i| i.to_le_bytes()).collect();
        // Item i set in stage i % (stages + 1) (the last: in none), then
        // random bits up to about a quarter of each array.
        for (i, k) in keys.iter().enumerate() {
            if let Some((p, _)) = stages.get(i % (stages.len() + 1)) {
                let bits = &arrays[i % (stages.len() + 1)];
                p.set(bits, &p.locate(&hash_item(7, k)));
            }
        }
        for bits in &arrays {
            for _ in 0..bits.len() * 16 {
                let i = next() as usize % (bits.len() * 64);
                bits[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
            }
        }
        let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let lanes = Lanes::new(stages.iter().enumerate().rev().map(|(i, &(p, words))| (p, i, words))).unwrap();
        assert_eq!(lanes.len(), stages.len());
        let bits = |i: usize| &arrays[i][..];
        let newest = stages.last().unwrap().0;
        for len in [1, DISTANCE, DISTANCE + 1, GROWN_CHUNK] {
            let mut ch = Chunk::new(&newest);
            ch.fill(7, &items[..len]);
            ch.look(&lanes, bits, true);
            let mut only = Chunk::new(&newest);
            only.fill(7, &items[..len]);
            only.look(&lanes, bits, false);
            assert_eq!(only.found, ch.found, "{name}, {len} items: with and without places");
            for (i, item) in items[..len].iter().enumerate() {
                let h = hash_item(7, item);
                let want = stages
                    .iter()
                    .zip(&arrays)
                    .any(|(&(p, _), a)| p.contains(a, &p.locate(&h)));
                assert_eq!(ch.found[i], want, "{name}, {len} items: item {i}");
                assert!(want || i % (stages.len() + 1) == stages.len(), "{name}: item {i} lost");
                if !want {
                    let at = newest.locate(&h);
                    assert_eq!(ch.at[i], at, "{name}: item {i}'s place in the newest stage");
                }
            }
        }
    }

    #[test]
    fn a_look_over_stages_answers_as_each_stage() {
        let big = (LANE_PREFETCH_BYTES / 8) as usize;
        for newest in [4096usize, big] {
            let beyond = if newest == big { "beyond the caches" } else { "small" };
            look_agrees(
                &[
                    (Word64 { k: 6, n: 64 }, 64),
                    (Word64 { k: 7, n: 512 }, 512),
                    (Word64 { k: 7, n: newest as u64 }, newest),
                ],
                &format!("word64, {beyond}"),
            );
            look_agrees(
                &[
                    (Block128 { k: 8, n: 32 }, 64),
                    (Block128 { k: 10, n: 256 }, 512),
                    (
                        Block128 {
                            k: 9,
                            n: newest as u64 / 2,
                        },
                        newest,
                    ),
                ],
                &format!("block128, {beyond}"),
            );
            let st = |k, words: usize, stage| (StandardStage::new(k, words as u64 * 64, stage, 64), words);
            look_agrees(
                &[st(5, 64, 0), st(6, 512, 1), st(7, newest, 2)],
                &format!("standard, {beyond}"),
            );
            look_agrees(&[st(7, newest, 0)], &format!("standard, one stage, {beyond}"));
        }
    }
}
