//! A grown filter's batches (doc/DESIGN.md, G5): a chunk of items hashed
//! once and looked for stage by stage, newest first, with the plain
//! batches' prefetching in a stage beyond the caches; an item found in a
//! stage is not looked for in the older ones.
//!
//! Stage by stage rather than item by item: each stage's walk runs one
//! layout's code (`with_probe!` once per stage, not once per item and
//! stage) over one bit array, and an absent item's looks in the stages
//! are independent loads that a stage's loop lets the processor overlap.

use super::grown::{Seen, Stages};
use super::*;
use crate::math::hashing::hash_item;

/// Items of a grown batch hashed and looked for at a time: one reading of
/// the stage count (and, for an add, of the epoch) per chunk; its hashes
/// stay in the first-level cache (16 bytes an item).
const GROWN_CHUNK: usize = 256;

/// One chunk of a batch: the items' hashes, which of them are still to be
/// looked for (indexes into `hashes`), and what each look found.
struct Chunk {
    hashes: [ItemHash; GROWN_CHUNK],
    todo: [u16; GROWN_CHUNK],
    todo_len: usize,
    found: [bool; GROWN_CHUNK],
    len: usize,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            hashes: [ItemHash { h1: 0, h2: 0 }; GROWN_CHUNK],
            todo: [0; GROWN_CHUNK],
            todo_len: 0,
            found: [false; GROWN_CHUNK],
            len: 0,
        }
    }

    /// Hash `items` (at most `GROWN_CHUNK`), every one still to be looked for.
    fn fill(&mut self, seed: u64, items: &[&[u8]]) {
        debug_assert!(items.len() <= GROWN_CHUNK);
        for (i, item) in items.iter().enumerate() {
            prefetch_item_ahead(items, i);
            self.hashes[i] = hash_item(seed, item);
            self.todo[i] = i as u16;
        }
        self.len = items.len();
        self.todo_len = items.len();
        self.found[..items.len()].fill(false);
    }
}

impl Filter {
    /// Look for the chunk's items still to be looked for in the first `n`
    /// stages (mapped), newest first: an item a stage holds is marked
    /// found and leaves `todo`.
    fn stages_hold_chunk(&self, s: &Stages, n: u32, ch: &mut Chunk) {
        let mut top = n;
        while top > 0 && ch.todo_len > 0 {
            top = with_probe!(&s.all[top as usize - 1].probing, p => self.run_holds(p, s, top, ch));
        }
    }

    /// Walk stages `top - 1` and down while they have `first`'s layout (all
    /// of them, mostly), an item's place in one worked out from its place in
    /// the stage before (`Probe::relocate`); returns the stage count left
    /// to walk.
    #[inline(always)]
    fn run_holds<P: Probe>(&self, first: &P, s: &Stages, mut top: u32, ch: &mut Chunk) -> u32 {
        let mut locs = [first.locate(&ItemHash { h1: 0, h2: 1 }); GROWN_CHUNK];
        let mut prev: Option<&P> = None;
        while top > 0 && ch.todo_len > 0 {
            let Some(p) = P::of(&s.all[top as usize - 1].probing) else {
                break;
            };
            let bits = self.stage_bits(s, top - 1);
            if !bits.is_empty() {
                stage_holds(p, prev, bits, ch, &mut locs);
                prev = Some(p);
            }
            top -= 1;
        }
        top
    }

    /// A grown filter's `contains_many` (§8 N8): each chunk's answers are
    /// those of the stages published when it began (a stage published
    /// later only holds items added during the call). A stage that cannot
    /// be mapped makes the chunk's answers "present", as `grown_contains`.
    pub(in crate::filter) fn grown_contains_many(
        &self,
        s: &Stages,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
    ) -> u64 {
        let mut present = 0u64;
        let mut ch = Chunk::new();
        for (ci, chunk) in items.chunks(GROWN_CHUNK).enumerate() {
            ch.fill(self.seed, chunk);
            match self.stages_now(s) {
                Ok(n) => self.stages_hold_chunk(s, n, &mut ch),
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
    /// chunk, the items a published stage holds are found by one walk read
    /// as a seqlock reader (as `grown_add`'s look), then the others are
    /// added in order, each under its stripe or the slot mark
    /// (`add_absent`); an error stops the batch at its item.
    pub(in crate::filter) fn grown_add_many(
        &self,
        s: &Stages,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
        c: Claim,
    ) -> Result<u64> {
        let mut new = 0u64;
        let mut ch = Chunk::new();
        let mut r = Ok(());
        'chunks: for (ci, chunk) in items.chunks(GROWN_CHUNK).enumerate() {
            ch.fill(self.seed, chunk);
            let base = ci * GROWN_CHUNK;
            // The found answers stand only with the epoch unchanged over
            // the walk; otherwise every item goes the long way.
            let held = self.stages_now(s).map(|n| {
                let stood = self.look_stood(|| self.stages_hold_chunk(s, n, &mut ch));
                if stood.is_none() {
                    ch.found[..ch.len].fill(false);
                }
                stood.map(|epoch| Seen { epoch, stages: n })
            });
            let seen = match held {
                Ok(seen) => seen,
                Err(e) => {
                    r = Err(batch_error(e, base));
                    break;
                }
            };
            for i in 0..ch.len {
                let n = if ch.found[i] {
                    false
                } else {
                    match self.add_absent(s, &ch.hashes[i], seen, c) {
                        Ok(n) => n,
                        Err(e) => {
                            r = Err(batch_error(e, base + i));
                            break 'chunks;
                        }
                    }
                };
                new += n as u64;
                if let Some(r) = results.as_deref_mut() {
                    r[base + i] = n as u8;
                }
            }
        }
        self.shared().count_ops(c, 1);
        r.map(|_| new)
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

/// One stage's walk over the chunk's items still to be looked for: those
/// the stage holds are marked found, the rest stay in `todo`, in order.
/// `locs[i]` is item `i`'s place in the stage walked before, by `prev`
/// (None: none was), and becomes its place in this one. In a stage beyond
/// the caches, as `Filter::pipelined`: the item `2 * DISTANCE` places
/// ahead has the words its first test reads prefetched, the one
/// `DISTANCE` ahead the rest where its first word has its bits.
#[inline(always)]
fn stage_holds<P: Probe>(p: &P, prev: Option<&P>, bits: &[AtomicU64], ch: &mut Chunk, locs: &mut [P::Loc]) {
    let len = ch.todo_len;
    let piped = bits.len() as u64 * 8 >= PIPELINE_MIN_BYTES && len >= 2 * DISTANCE && pipelining();
    let place = |locs: &mut [P::Loc], idx: usize, h: &ItemHash| {
        let l = match prev {
            Some(q) if P::RELOCATES => p.relocate(h, q, &locs[idx]),
            _ => p.locate(h),
        };
        // Kept for the next stage, or for the look `2 * DISTANCE` later.
        if P::RELOCATES || piped {
            locs[idx] = l;
        }
        l
    };
    let mut kept = 0;
    if piped {
        for &idx in &ch.todo[..2 * DISTANCE] {
            let l = place(locs, idx as usize, &ch.hashes[idx as usize]);
            p.prefetch_gated(bits, &l);
        }
        for &idx in &ch.todo[..DISTANCE] {
            let l = &locs[idx as usize];
            if p.first_set(bits, l) {
                p.prefetch_rest(bits, l);
            }
        }
    }
    for j in 0..len {
        let idx = ch.todo[j] as usize;
        let l = if piped {
            if j + DISTANCE < len {
                let ahead = &locs[ch.todo[j + DISTANCE] as usize];
                if p.first_set(bits, ahead) {
                    p.prefetch_rest(bits, ahead);
                }
            }
            // `todo[j + 2 * DISTANCE]` is read before any write reaches
            // it: writes go to `kept <= j`.
            if j + 2 * DISTANCE < len {
                let next = ch.todo[j + 2 * DISTANCE] as usize;
                let l = place(locs, next, &ch.hashes[next]);
                p.prefetch_gated(bits, &l);
            }
            locs[idx]
        } else {
            place(locs, idx, &ch.hashes[idx])
        };
        if p.contains_gated(bits, &l) {
            ch.found[idx] = true;
        } else {
            ch.todo[kept] = idx as u16;
            kept += 1;
        }
    }
    ch.todo_len = kept;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rng::xorshift;
    use crate::probe::{Block128, Standard, Word64};

    /// A stage's walk answers as `contains` item by item, on an array
    /// beyond the caches (where it prefetches ahead) and on a small one,
    /// for every layout, with items found leaving `todo` in order.
    fn walk_agrees<P: Probe>(p: P, words: usize, name: &str) {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let bits: Vec<AtomicU64> = (0..words).map(|_| AtomicU64::new(0)).collect();
        let keys: Vec<[u8; 8]> = (0..GROWN_CHUNK as u64).map(|i| i.to_le_bytes()).collect();
        // Half the items set, then random bits up to about half the array.
        for k in keys.iter().step_by(2) {
            p.set(&bits, &p.locate(&hash_item(7, k)));
        }
        for _ in 0..words * 32 {
            let i = next() as usize % (words * 64);
            bits[i / 64].fetch_or(1 << (i % 64), std::sync::atomic::Ordering::Relaxed);
        }
        let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        for len in [1, 2 * DISTANCE - 1, 2 * DISTANCE, 2 * DISTANCE + 1, GROWN_CHUNK] {
            let mut ch = Chunk::new();
            ch.fill(7, &items[..len]);
            let mut locs = [p.locate(&hash_item(0, b"")); GROWN_CHUNK];
            stage_holds(&p, None, &bits, &mut ch, &mut locs);
            let want: Vec<bool> = items[..len]
                .iter()
                .map(|i| p.contains(&bits, &p.locate(&hash_item(7, i))))
                .collect();
            assert_eq!(&ch.found[..len], &want[..], "{name}, {words} words, {len} items");
            let left: Vec<u16> = (0..len as u16).filter(|&i| !want[i as usize]).collect();
            assert_eq!(&ch.todo[..ch.todo_len], &left[..], "{name}, {words} words, {len} items");
            assert!(want.iter().step_by(2).all(|&w| w), "{name}: a set item not found");
        }
    }

    /// Two stages walked in turn, the second's places worked out from the
    /// first's (`relocate`): an item is found exactly when one of the two
    /// arrays holds it.
    fn two_stages_agree<P: Probe>(older: P, newer: P, words: (usize, usize), name: &str) {
        let keys: Vec<[u8; 8]> = (0..GROWN_CHUNK as u64).map(|i| i.to_le_bytes()).collect();
        let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let a: Vec<AtomicU64> = (0..words.0).map(|_| AtomicU64::new(0)).collect();
        let b: Vec<AtomicU64> = (0..words.1).map(|_| AtomicU64::new(0)).collect();
        // Every third item in the older stage, every fifth in the newer.
        for (i, k) in keys.iter().enumerate() {
            let h = hash_item(7, k);
            if i % 3 == 0 {
                older.set(&a, &older.locate(&h));
            }
            if i % 5 == 0 {
                newer.set(&b, &newer.locate(&h));
            }
        }
        let mut ch = Chunk::new();
        ch.fill(7, &items);
        let mut locs = [newer.locate(&hash_item(0, b"")); GROWN_CHUNK];
        stage_holds(&newer, None, &b, &mut ch, &mut locs);
        stage_holds(&older, Some(&newer), &a, &mut ch, &mut locs);
        for (i, item) in items.iter().enumerate() {
            let h = hash_item(7, item);
            let want = newer.contains(&b, &newer.locate(&h)) || older.contains(&a, &older.locate(&h));
            assert_eq!(ch.found[i], want, "{name}: item {i}");
            assert!(want || (i % 3 != 0 && i % 5 != 0), "{name}: item {i} lost");
        }
    }

    #[test]
    fn stages_walked_in_turn_answer_as_contains() {
        for (same_k, k2) in [(true, 7), (false, 9)] {
            let name = if same_k { "same k" } else { "other k" };
            two_stages_agree(Word64 { k: 7, n: 64 }, Word64 { k: k2, n: 4096 }, (64, 4096), name);
            two_stages_agree(Block128 { k: 7, n: 32 }, Block128 { k: k2, n: 2048 }, (64, 4096), name);
            two_stages_agree(
                Standard {
                    k: 7,
                    mask: 4095,
                    stripes: 64,
                },
                Standard {
                    k: k2,
                    mask: 262_143,
                    stripes: 64,
                },
                (64, 4096),
                name,
            );
        }
    }

    #[test]
    fn a_stage_walk_answers_as_contains() {
        let big = (PIPELINE_MIN_BYTES / 8) as usize;
        for words in [64usize, big] {
            let m = words as u64 * 64;
            walk_agrees(
                Standard {
                    k: 7,
                    mask: m - 1,
                    stripes: 64,
                },
                words,
                "standard",
            );
            walk_agrees(Word64 { k: 7, n: words as u64 }, words, "word64");
            walk_agrees(
                Block128 {
                    k: 10,
                    n: words as u64 / 2,
                },
                words,
                "block128",
            );
        }
    }
}
