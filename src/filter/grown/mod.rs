//! A filter that grows (doc/DESIGN.md, §3 growth, C10, §8 N): its stages,
//! each mapped by this handle when it first needs it, and adds, queries
//! and growth over them.
//!
//! Every stage has the layout's probing with a geometry of its own (a
//! standard filter's stages their own probes, `StandardStage`), and every
//! stage hashes an item the same way (`hash_item`): an item is hashed once
//! and located in each stage. A standard filter's add stripe depends on
//! the hash alone (`StandardStage::stripe`, the same in every stage), so
//! adders of one item take the same stripe whatever the number of stages
//! they saw.

mod batch;
mod lanes;

use std::cell::OnceCell;

use super::*;
use crate::math::growth::{self, Growth};
use crate::math::hashing::hash_item;
use crate::shm::format::OFF_FILL;
use crate::shm::serial;
use crate::shm::stages::{self, StageMap};
use lanes::KeptLanes;

/// One stage as every handle derives it from the validated header.
#[derive(Clone, Copy, Debug)]
pub(in crate::filter) struct Stage {
    pub geometry: Geometry,
    pub probing: Probing,
    /// Where its bits are in the file: `(offset, bytes)`.
    range: (u64, u64),
}

/// A grown filter's stages, as this handle sees them.
pub(in crate::filter) struct Stages {
    pub growth: Growth,
    /// Every stage the filter can have (`Growth::limit`), computed once.
    pub all: Vec<Stage>,
    /// This handle's mappings of stages 1 and on (stage 0 is the region's
    /// bit array), each made once and kept while the handle lives: a stage
    /// dropped by a clear and added again lies at the same offset.
    maps: Vec<OnceCell<StageMap>>,
    /// Each stage's bits as this handle maps them, `(first word, words)`:
    /// stage 0's from the start, a later one's once `map_stages` maps it,
    /// none (a dangling pointer, 0 words) before. Looks read a stage's
    /// bits here in one load, not through its `OnceCell`.
    bits: Vec<Cell<(*const AtomicU64, usize)>>,
    /// `kept[n - 1]`: the lanes of the first `n` stages, once a single
    /// call has made them (`Filter::with_lanes`).
    pub kept: Vec<OnceCell<Box<KeptLanes>>>,
    /// This writer's new items not yet in the shared fill word (§8 N9):
    /// `(stage, count, flush at)`.
    own: Cell<(u32, u64, u64)>,
    /// The fork generation (`fork::fork_generation`) `own` was counted in:
    /// a forked child's copy of the handle starts from a count of its own,
    /// since the parent adds its count itself.
    own_gen: Cell<u32>,
}

/// What an add under its stripe or mark found.
pub(in crate::filter) enum Under {
    /// Done: whether the item was new.
    Done(bool),
    /// The newest stage, `n - 1`, is full: a stage must be added first.
    Full(u32),
}

/// This writer's count of new items in a stage with room (`room`), and
/// the count at which it adds it to the stage's fill word.
#[derive(Clone, Copy, Debug)]
pub(in crate::filter) struct Room {
    own: u64,
    at: u64,
}

/// An even epoch and the stage count under which a look at every
/// published stage found an item in none (`add_under`).
#[derive(Clone, Copy, Debug)]
pub(in crate::filter) struct Seen {
    pub epoch: u32,
    pub stages: u32,
}

impl Stages {
    /// The stages of a grown header, or None for one that does not grow;
    /// `first`, stage 0's bits (`(first word, words)`, inside the mapping
    /// the handle owns), or none for stages only sized.
    pub fn of(h: &Header, stripes: u32, first: Option<(*const AtomicU64, usize)>) -> Option<Stages> {
        let growth = h.growth?;
        let limit = growth.limit();
        // Every stage below the limit has a geometry and a range: the
        // header was accepted only if `format::max_size`, which walks them
        // all, is a number.
        let ranges = format::stage_ranges(h, limit).unwrap_or_default();
        let all: Vec<Stage> = ranges
            .iter()
            .enumerate()
            .filter_map(|(i, &range)| {
                let geometry = if i == 0 { h.geometry } else { growth.stage(i as u32)? };
                Some(Stage {
                    geometry,
                    probing: Probing::for_stage(&geometry, stripes, i as u32),
                    range,
                })
            })
            .collect();
        let maps = (0..all.len()).map(|_| OnceCell::new()).collect();
        let none: (*const AtomicU64, usize) = (std::ptr::NonNull::dangling().as_ptr(), 0);
        let bits: Vec<_> = (0..all.len()).map(|_| Cell::new(none)).collect();
        if let (Some(b), Some(first)) = (bits.first(), first) {
            b.set(first);
        }
        Some(Stages {
            growth,
            all,
            maps,
            kept: (0..bits.len()).map(|_| OnceCell::new()).collect(),
            bits,
            own: Cell::new((0, 0, 1)),
            own_gen: Cell::new(fork::fork_generation()),
        })
    }

    /// The most stages this handle knows how to reach (the limit).
    fn limit(&self) -> u32 {
        self.all.len() as u32
    }
}

/// A grown filter's stages as a journaled operation changes them
/// (`sync::StageSet`): mapped through this handle, for the operation's
/// owner and for a process finishing it alike.
impl sync::StageSet for Filter {
    fn stage_words(&self, n: u32) -> Option<Vec<&[AtomicU64]>> {
        let s = self.grown()?;
        if n > s.all.len() as u32 {
            return None;
        }
        // Maps every published stage; one that cannot be is left empty.
        let _ = self.stages_now(s);
        (0..n)
            .map(|i| Some(self.stage_bits(s, i)).filter(|b| !b.is_empty()))
            .collect()
    }

    fn raise_fills(&self, n: u32) {
        let Some(s) = self.grown() else { return };
        for (i, (st, fill)) in s.all.iter().zip(self.fill_words()).take(n as usize).enumerate() {
            // Relaxed: we are exclusive; the epoch/excl release publishes.
            let set: u64 = self
                .stage_bits(s, i as u32)
                .iter()
                .map(|w| w.load(Ordering::Relaxed).count_ones() as u64)
                .sum();
            // Relaxed: the word decides only when to grow (as an adder's
            // count); an RMW, since a handle going away adds its own count
            // to it without any lock.
            fill.fetch_max(st.geometry.count_from_bits_set(set), Ordering::Relaxed);
        }
    }
}

/// How a filter grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrowOptions {
    /// 2 to 16.
    pub factor: u32,
    /// The most items it may take (None: no bound but the stage limit).
    pub max_capacity: Option<u64>,
}

impl GrowOptions {
    /// The options for `factor` and `max_capacity`, the factor checked
    /// (the bound is checked against the capacity when the filter is made).
    pub fn new(factor: u32, max_capacity: Option<u64>) -> Result<GrowOptions> {
        if !(crate::math::growth::MIN_FACTOR..=crate::math::growth::MAX_FACTOR).contains(&factor) {
            return Err(Error::arg(crate::math::growth::GrowthError::Factor(factor).to_string()));
        }
        Ok(GrowOptions { factor, max_capacity })
    }

    /// Whether a filter's growth is the one asked for: the same factor,
    /// and the same bound when one is asked for.
    pub fn matches(&self, have: Option<crate::math::growth::Growth>) -> bool {
        have.is_some_and(|g| {
            g.factor() == self.factor && (self.max_capacity.is_none() || self.max_capacity == g.max_capacity())
        })
    }
}

impl Filter {
    /// The header of a new filter that grows (doc/DESIGN.md, §3 growth):
    /// stage 0's geometry, the filter's `fp_rate`.
    pub(in crate::filter) fn grown_header(
        capacity: u64,
        fp_rate: f64,
        layout: Layout,
        go: GrowOptions,
        opts: &Options,
    ) -> Result<Header> {
        if opts.window.is_some() {
            return Err(Error::arg(
                "grow and window do not go together: a windowed filter forgets old items instead of growing",
            ));
        }
        if opts.size.is_some() {
            return Err(Error::arg("bits and hashes are options of layout 'datasketches' only"));
        }
        let growth = crate::math::growth::Growth::new(capacity, fp_rate, layout, go.factor, go.max_capacity)
            .map_err(|e| Error::arg(e.to_string()))?;
        let mut g = growth
            .stage(0)
            .ok_or_else(|| Error::arg("the first stage cannot be sized"))?;
        // The header keeps the filter's rate; stage 0's is derived from it.
        g.fp_rate = fp_rate;
        Ok(Header {
            growth: Some(growth),
            ..region::new_header(g, opts.seed)
        })
    }

    /// Refuse an explicit growth that differs from this filter's.
    pub(in crate::filter) fn check_growth(self, want: Option<GrowOptions>) -> Result<Filter> {
        let Some(go) = want else { return Ok(self) };
        let have = self.growth();
        if go.matches(have) {
            return Ok(self);
        }
        let shown = |f: u32, max: Option<u64>| match max {
            Some(m) => format!("grows by {f} up to {m} items"),
            None => format!("grows by {f}"),
        };
        Err(Error::new(
            ErrorKind::Mismatch,
            format!(
                "growth mismatch (the filter {}, not {})",
                have.map_or_else(|| "does not grow".to_string(), |g| shown(g.factor(), g.max_capacity())),
                shown(go.factor, go.max_capacity)
            ),
        ))
    }

    /// Map the stages a grown filter has published, so that a file too
    /// short for them is refused when it is opened (§8 N8).
    pub(in crate::filter) fn stages_mapped(self) -> Result<Filter> {
        if let Some(s) = self.grown() {
            self.stages_now(s)?;
        }
        Ok(self)
    }

    /// Stage `i`'s fill word (§6: its own cache lines of the header page).
    #[inline]
    fn fill_word(&self, i: u32) -> &AtomicU64 {
        debug_assert!(i < growth::MAX_STAGES);
        // SAFETY: OFF_FILL + 8 * MAX_STAGES lies inside the header page of
        // every mapping (format's layout), 8-aligned, only ever accessed
        // atomically.
        unsafe { &*self.at::<AtomicU64>(OFF_FILL + 8 * i as u64) }
    }

    /// The fill words of a grown filter (`Shared::fills`), else none.
    pub(in crate::filter) fn fill_words(&self) -> &[AtomicU64] {
        match self.grown() {
            // SAFETY: as fill_word; the filter can have `limit` stages.
            Some(s) => unsafe { std::slice::from_raw_parts(self.at::<AtomicU64>(OFF_FILL), s.limit() as usize) },
            None => &[],
        }
    }

    /// The published stage count (§8 N8): the `stages` word, untrusted
    /// (C6), clamped to 1 and the limit. Acquire: pairs with the Release
    /// store that publishes a stage (`grow`), so that whoever sees a stage
    /// finds its storage reserved and zeroed.
    #[inline]
    fn published(&self, s: &Stages) -> u32 {
        self.control().stages.load(Ordering::Acquire).clamp(1, s.limit())
    }

    /// Map stages `1..n` not yet mapped by this handle (§8 N5, N8).
    fn map_stages(&self, s: &Stages, n: u32) -> Result<()> {
        for i in 1..n as usize {
            if s.maps[i].get().is_some() {
                continue;
            }
            let fd = self
                .region
                .store_fd()
                .ok_or_else(|| Error::new(ErrorKind::Io, "no descriptor to map the filter's stages through"))?;
            let (off, len) = s.all[i].range;
            let m = stages::map_stage(fd, off, len, self.region.readonly, self.region.lost())?;
            s.bits[i].set((m.as_ptr(), m.words()));
            let _ = s.maps[i].set(m);
        }
        Ok(())
    }

    /// The published stages, every one of them mapped.
    #[inline]
    pub(in crate::filter) fn stages_now(&self, s: &Stages) -> Result<u32> {
        let n = self.published(s);
        if n > 1 && s.maps[n as usize - 1].get().is_none() {
            self.map_stages(s, n)?;
        }
        Ok(n)
    }

    /// Stage `i`'s bits; it must be mapped (`stages_now`), else none.
    #[inline(always)]
    pub(in crate::filter) fn stage_bits<'a>(&'a self, s: &'a Stages, i: u32) -> &'a [AtomicU64] {
        let (first, words) = s.bits[i as usize].get();
        // SAFETY: `words` atomics at `first`, aligned: stage 0's bit array
        // in the handle's mapping (`Filter::from_region`) or a stage's own
        // mapping (`map_stages`), each kept while the handle (and so `s`)
        // lives; or 0 words at a dangling, aligned pointer.
        unsafe { std::slice::from_raw_parts(first, words) }
    }

    /// A grown filter's `contains` (§8 N8). A stage that cannot be mapped
    /// (a file shorter than its published stages: damaged) makes the
    /// answer "present": a Bloom filter may say so wrongly, never
    /// "absent" wrongly; the next add fails naming it.
    pub(in crate::filter) fn grown_contains(&self, s: &Stages, item: &[u8]) -> bool {
        let h = hash_item(self.seed, item);
        match self.stages_now(s) {
            Ok(n) => self.some_stage_holds(s, n, &h),
            Err(_) => true,
        }
    }

    /// Add an item a look at the published stages found in none, `at` its
    /// place in the newest stage as the look saw it (`seen`, if the look
    /// stood): under its stripe or the slot mark, straight into that place
    /// while the look still stands and the stage has room (`put_seen`);
    /// otherwise as `add_absent`.
    #[inline(always)]
    pub(in crate::filter) fn add_seen<P: Probe>(
        &self,
        s: &Stages,
        h: &ItemHash,
        at: &P::Loc,
        seen: Option<Seen>,
        c: Claim,
    ) -> Result<bool> {
        let Some(v) = seen else {
            return self.add_absent(s, h, None, c);
        };
        let Some(p) = P::of(&s.all[v.stages as usize - 1].probing) else {
            return self.add_absent(s, h, seen, c);
        };
        let sh = self.shared();
        let stripe = p.stripe(at);
        if !sh.begin_item_add(stripe, c)? {
            return Err(Error::frozen());
        }
        let put = self.put_seen(s, v, p, at);
        sh.end_item_add(stripe, c);
        match put {
            Some(new) => Ok(new),
            None => self.add_absent(s, h, seen, c),
        }
    }

    /// Under the item's stripe or the slot mark, with `excl` seen free: if
    /// the look that found the item in no stage still stands (the stage
    /// count and the epoch as it saw them, `add_under`'s argument) and the
    /// newest stage has room, set the item there at its place `at` and say
    /// whether it was new; None to add it the long way (`add_under`).
    #[inline(always)]
    pub(in crate::filter) fn put_seen<P: Probe>(&self, s: &Stages, v: Seen, p: &P, at: &P::Loc) -> Option<bool> {
        let newest = v.stages - 1;
        // Acquire: as `look_stood`'s first load. The look mapped the
        // stages it saw: the published count alone says whether it stands.
        let stands = self.published(s) == v.stages && self.epoch().load(Ordering::Acquire) == v.epoch;
        let room = self.room(s, newest).filter(|_| stands)?;
        let new = p.set(self.stage_bits(s, newest), at);
        if new {
            self.count_into(s, newest, room);
        }
        Some(new)
    }

    /// Run `look` (loads of bits only) as a seqlock reader (as `held_now`):
    /// the epoch, when it was even before the look and unchanged after it
    /// (no exclusive operation ran meanwhile: what the look found stands),
    /// else None. An odd epoch skips the look.
    #[inline(always)]
    pub(in crate::filter) fn look_stood(&self, look: impl FnOnce()) -> Option<u32> {
        // Acquire: pairs with the Release store that ends an exclusive
        // operation (as `held_now`).
        let epoch = self.epoch().load(Ordering::Acquire);
        if epoch & 1 != 0 {
            return None;
        }
        look();
        // Acquire fence: the bit loads above complete before the epoch
        // re-check (seqlock reader).
        fence(Ordering::Acquire);
        (self.epoch().load(Ordering::Relaxed) == epoch).then_some(epoch)
    }

    /// Add an item no published stage was seen to hold (`seen`, if the
    /// look was made with the epoch even), under its stripe or the slot
    /// mark; a full newest stage is grown and the add made again.
    pub(in crate::filter) fn add_absent(
        &self,
        s: &Stages,
        h: &ItemHash,
        mut seen: Option<Seen>,
        c: Claim,
    ) -> Result<bool> {
        let sh = self.shared();
        // Every stage has the same stripes and stripe rule.
        let stripe = with_probe!(&s.all[0].probing, p => p.stripe(&p.locate(h)));
        loop {
            if !sh.begin_item_add(stripe, c)? {
                return Err(Error::frozen());
            }
            let r = self.add_under(s, h, seen);
            sh.end_item_add(stripe, c);
            match r? {
                Under::Done(new) => return Ok(new),
                Under::Full(n) => {
                    self.grow(s, n, c)?;
                    // The stages changed (or a clear ran): look at them all.
                    seen = None;
                }
            }
        }
    }

    /// The add of N7, under the item's stripe or the slot mark with `excl`
    /// seen free: the published stages cannot change until it ends (a
    /// grower drains first, N2), so every adder of the item decides on the
    /// same newest stage, and the stripe or the one atomic update there
    /// tells at most one of them new.
    ///
    /// The older stages are looked at again unless `seen` says a look at
    /// the same `n` stages found the item in none with the epoch still as
    /// it is now. Adds write only the newest stage; stage `n - 1` became
    /// the newest only after a grower drained every add that wrote the
    /// stages before it, and published it (Release) before that look read
    /// `n` (Acquire): every bit those adds set was visible to the look.
    /// Only an exclusive operation (a growth, a clear, a merge) can change
    /// an older stage after that, and it moves the epoch by two (odd while
    /// it runs, and bits change only then); with `excl` seen free here,
    /// an operation that ended since the look left its epoch visible (its
    /// Release store precedes its release of `excl`, which our `excl`
    /// check saw). So an equal epoch means the older stages are as the
    /// look saw them, and the newest stage, checked and set under the
    /// stripe or in one atomic update, decides alone (N7 as before). The
    /// epoch would have to wrap (2^31 exclusive operations between the
    /// look and this point) to fool the check, as for `held_now`.
    pub(in crate::filter) fn add_under(&self, s: &Stages, h: &ItemHash, seen: Option<Seen>) -> Result<Under> {
        let n = self.stages_now(s)?;
        // Acquire: as `look_stood`'s first load.
        let older_as_seen = seen.is_some_and(|v| v.stages == n && self.epoch().load(Ordering::Acquire) == v.epoch);
        if !older_as_seen && self.some_stage_holds(s, n - 1, h) {
            return Ok(Under::Done(false));
        }
        let newest = n - 1;
        let st = &s.all[newest as usize];
        let bits = self.stage_bits(s, newest);
        // The item's place in the newest stage, worked out once for the
        // look and the update.
        let (new, room) = with_probe!(&st.probing, p => {
            let at = p.locate(h);
            if p.contains(bits, &at) {
                return Ok(Under::Done(false));
            }
            let Some(room) = self.room(s, newest) else {
                return Ok(Under::Full(n));
            };
            (p.set(bits, &at), room)
        });
        if new {
            self.count_into(s, newest, room);
        }
        Ok(Under::Done(new))
    }

    /// Whether stage `i` has room for a new item: its fill word and this
    /// writer's own count below its capacity (§3 growth, when a stage is
    /// full). If so, the count `count_into` goes on from: this writer's
    /// own count for the stage and when it adds that to the word.
    #[inline(always)]
    fn room(&self, s: &Stages, i: u32) -> Option<Room> {
        let cap = s.all[i as usize].geometry.capacity;
        let (st, own, at) = self.own_count(s);
        // Relaxed: the word decides only when to grow; `grow` checks the
        // stage count again under `excl` (N3).
        let fill = self.fill_word(i).load(Ordering::Relaxed);
        let (own, at) = if st == i {
            (own, at)
        } else {
            (0, growth::flush_every(cap, fill))
        };
        (!growth::is_full(cap, fill.saturating_add(own))).then_some(Room { own, at })
    }

    /// This process's own count: `own`, or none in a forked child that has
    /// not counted yet (the parent's count is the parent's to add).
    #[inline]
    fn own_count(&self, s: &Stages) -> (u32, u64, u64) {
        let gen = fork::fork_generation();
        if s.own_gen.get() != gen {
            let (st, _, at) = s.own.get();
            s.own.set((st, 0, at));
            s.own_gen.set(gen);
        }
        s.own.get()
    }

    /// Count one new item into stage `i`, which had `room` (§8 N9): this
    /// writer's own count, added to the fill word every
    /// `Growth::flush_every` items. A count for a stage that is no longer
    /// the newest is dropped (`room` starts a new one).
    #[inline(always)]
    fn count_into(&self, s: &Stages, i: u32, room: Room) {
        let own = room.own + 1;
        if own >= room.at {
            let cap = s.all[i as usize].geometry.capacity;
            // Relaxed: as `room`.
            let seen = self.fill_word(i).fetch_add(own, Ordering::Relaxed).saturating_add(own);
            s.own.set((i, 0, growth::flush_every(cap, seen)));
        } else {
            s.own.set((i, own, room.at));
        }
    }

    /// Add this writer's own count to its stage's fill word (a handle
    /// going away).
    pub(in crate::filter) fn flush_own_count(&self, s: &Stages) {
        let (st, own, at) = self.own_count(s);
        if own > 0 && !self.region.readonly {
            // Relaxed: as `room`.
            self.fill_word(st).fetch_add(own, Ordering::Relaxed);
            s.own.set((st, 0, at));
        }
    }

    /// Why a full filter refuses a new item: the bound it is at.
    fn at_bound(&self, s: &Stages) -> Error {
        let total = s.growth.total_capacity(s.limit());
        let msg = match s.growth.max_capacity() {
            Some(max) => format!("the filter is full: it holds its max_capacity of {max} items; nothing was added"),
            None => format!(
                "the filter is full: its {} stages hold {total} items, the most it can grow to; nothing was added",
                s.limit()
            ),
        };
        Error::new(ErrorKind::Full, msg)
    }

    /// Add stage `n` to a filter whose newest stage, `n - 1`, was found
    /// full (§8 N2–N6). Returns with nothing changed when another process
    /// added it meanwhile (or a clear dropped the stages): the caller
    /// starts its add over either way.
    pub(in crate::filter) fn grow(&self, s: &Stages, n: u32, c: Claim) -> Result<()> {
        if n >= s.limit() {
            return Err(self.at_bound(s));
        }
        let sh = self.shared();
        // N2: the journal word first (order: journal word, then excl),
        // then excl, which drains every add between its reading of the
        // stage count and its update.
        let lock = sh.lock_journal(c)?;
        let g = sh.lock_exclusive(c).map_err(no_fence)?;
        if sh.frozen() {
            return Err(Error::frozen()); // g, then lock, drop: released
        }
        // N3. Relaxed: under excl nobody else writes the word.
        let now = self.control().stages.load(Ordering::Relaxed).clamp(1, s.limit());
        if now != n {
            return Ok(());
        }
        // N4: the storage, zeroed and reserved; N5: mapped here.
        let fd = self
            .region
            .store_fd()
            .ok_or_else(|| Error::new(ErrorKind::Io, "no descriptor to add a stage through"))?;
        let (off, len) = s.all[n as usize].range;
        stages::reserve_stage(fd, off, len, self.region.lost())?;
        self.map_stages(s, n + 1)?;
        // N6. Relaxed: published by the Release store below.
        self.fill_word(n).store(0, Ordering::Relaxed);
        // Release: pairs with the Acquire loads of `published`: whoever
        // sees the stage finds its storage reserved, zeroed and its fill
        // word reset.
        self.control().stages.store(n + 1, Ordering::Release);
        drop(g);
        drop(lock);
        Ok(())
    }

    // ------------------------------------------------------------ bytes

    /// The length of a grown filter's portable bytes with `n` stages.
    pub(in crate::filter) fn grown_serialized_size(&self, s: &Stages, n: u32) -> u64 {
        serial::grown_len((0..n).map(|i| s.all[i as usize].geometry.m))
    }

    /// Write a grown filter's portable bytes: the published stages, each
    /// copied word by word as `serialize` copies a plain filter. `out` is
    /// sized for the stages published when it was made; a stage added
    /// since fails with `ErrorKind::Busy` ("grew while it was copied"), and
    /// the caller sizes it again.
    pub(in crate::filter) fn grown_serialize_into(&self, s: &Stages, out: &mut [u8]) -> Result<()> {
        let n = self.stages_now(s)?;
        if out.len() as u64 != self.grown_serialized_size(s, n) {
            let grew = (1..n).any(|k| out.len() as u64 == self.grown_serialized_size(s, k));
            return Err(if grew {
                Error::new(
                    ErrorKind::Busy,
                    "the filter grew while it was copied; serialize it again",
                )
            } else {
                Error::arg("serialize buffer has the wrong size")
            });
        }
        let st = serial::GrownState {
            growth: s.growth,
            // Relaxed: a statistic, copied as it is.
            fills: (0..n).map(|i| self.fill_word(i).load(Ordering::Relaxed)).collect(),
        };
        serial::write_grown(
            &self.geometry,
            self.seed,
            &st,
            |f| {
                for i in 0..n {
                    for w in self.stage_bits(s, i) {
                        // Relaxed: a per-word snapshot, as a plain filter's.
                        f(w.load(Ordering::Relaxed));
                    }
                }
            },
            out,
        );
        Ok(())
    }

    /// A new grown filter of header `h` at `to` holding the stages of the
    /// grown image `img` (validated), each stage's storage reserved and
    /// written before anyone can see the filter (a file gets its name only
    /// after, a memfd or anonymous filter is this process's alone).
    pub(crate) fn with_grown(h: Header, to: Target<'_>, img: &serial::Image<'_>) -> Result<Filter> {
        let st = img.grown.as_ref().expect("a grown image");
        let stages = Stages::of(&h, h.layout().stripes, None).ok_or_else(|| Error::format("impossible growth"))?;
        let n = st.fills.len();
        if n > stages.all.len() {
            return Err(Error::format("more stages than the filter can have"));
        }
        // Nobody else reaches the new filter's storage yet: a page lost
        // there cannot be this handle's, which does not exist yet.
        let lost = crate::sys::sigbus::Lost::new();
        let put = |base: *mut u8, fd: std::os::fd::RawFd| -> Result<()> {
            let mut words = img.words();
            for (i, stage) in stages.all.iter().enumerate().take(n) {
                let (off, len) = stage.range;
                let map = if i == 0 {
                    None
                } else {
                    stages::reserve_stage(fd, off, len, &lost)?;
                    Some(stages::map_stage(fd, off, len, false, &lost)?)
                };
                let dst = match &map {
                    // SAFETY: stage 0 is the bit array of the new
                    // mapping, at its offset (`range`), `len` bytes.
                    None => (unsafe { base.add(off as usize) }) as *mut u64,
                    Some(m) => m.as_ptr() as *mut u64,
                };
                for (j, w) in words.by_ref().take((len / 8) as usize).enumerate() {
                    // SAFETY: j < len / 8 words of the stage's mapping;
                    // nobody else sees the filter yet.
                    unsafe { dst.add(j).write(w) };
                }
                // SAFETY: the fill words are in the header page of the
                // new mapping, 8-aligned; nobody else sees it yet.
                unsafe { (base.add((OFF_FILL + 8 * i as u64) as usize) as *mut u64).write(st.fills[i]) };
            }
            // SAFETY: OFF_STAGES is in the control line of the new
            // mapping, 4-aligned; nobody else sees it yet.
            unsafe { (base.add(format::OFF_STAGES as usize) as *mut u32).write(n as u32) };
            Ok(())
        };
        let r = match to {
            Target::Anonymous | Target::Memfd(_) => {
                let r = match to {
                    Target::Memfd(name) => region::create_memfd(name, &h)?,
                    _ => region::create_anonymous(&h)?,
                };
                let fd = r.store_fd().ok_or_else(|| Error::new(ErrorKind::Io, "no descriptor"))?;
                put(r.base(), fd)?;
                r
            }
            Target::File(p, mode) => region::create_new_file(path_bytes(p), &h, mode, &put)?,
        };
        Filter::from_region(r).stages_mapped()
    }

    // ------------------------------------------------------------ totals

    /// A grown filter's published stages, each with its set bits.
    fn stage_bits_set(&self, s: &Stages) -> Vec<(Geometry, u64)> {
        let n = self.stages_now(s).unwrap_or(1);
        (0..n)
            .map(|i| {
                let set = self
                    .stage_bits(s, i)
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed).count_ones() as u64)
                    .sum();
                (s.all[i as usize].geometry, set)
            })
            .collect()
    }

    pub(in crate::filter) fn grown_bits_set(&self, s: &Stages) -> u64 {
        self.stage_bits_set(s).iter().map(|&(_, set)| set).sum()
    }

    pub(in crate::filter) fn grown_count(&self, s: &Stages) -> u64 {
        self.stage_bits_set(s)
            .iter()
            .map(|(g, set)| g.count_from_bits_set(*set))
            .sum()
    }

    /// The chance an absent item is reported present: that some stage
    /// reports it.
    pub(in crate::filter) fn grown_fpp(&self, s: &Stages) -> f64 {
        1.0 - self
            .stage_bits_set(s)
            .iter()
            .map(|(g, set)| 1.0 - g.fpp_from_bits_set(*set))
            .product::<f64>()
    }

    /// Each published stage: its capacity, bits, hashes and fill word.
    pub fn stage_stats(&self) -> Vec<StageStats> {
        let Some(s) = self.grown() else { return Vec::new() };
        let n = self.stages_now(s).unwrap_or(1);
        (0..n)
            .map(|i| {
                let g = s.all[i as usize].geometry;
                StageStats {
                    capacity: g.capacity,
                    bits: g.m,
                    hashes: g.k,
                    // Relaxed: a statistic.
                    fill: self.fill_word(i).load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// How a grown filter grows: its factor and bound (None: it does not).
    pub fn growth(&self) -> Option<Growth> {
        self.grown().map(|s| s.growth)
    }

    /// The stages published (1 for a filter that does not grow).
    pub fn stages(&self) -> u32 {
        self.grown().map_or(1, |s| self.published(s))
    }

    /// The items the published stages hold together (the `capacity` of a
    /// filter that does not grow).
    pub fn total_capacity(&self) -> u64 {
        match self.grown() {
            Some(s) => s.growth.total_capacity(self.published(s)),
            None => self.geometry.capacity,
        }
    }

    /// The bits of the published stages together.
    pub fn total_bits(&self) -> u64 {
        match self.grown() {
            Some(s) => (0..self.published(s)).map(|i| s.all[i as usize].geometry.m).sum(),
            None => self.geometry.m,
        }
    }

    /// The bytes the published stages past the first map (each its own
    /// mapping of `m / 8` bytes, made when this handle first needs it),
    /// added to the first stage's mapping by `mmap_size`.
    pub(in crate::filter) fn later_stage_bytes(&self) -> u64 {
        match self.grown() {
            Some(s) => (1..self.published(s)).map(|i| s.all[i as usize].range.1).sum(),
            None => 0,
        }
    }

    /// Refuse an operation a grown filter does not have.
    pub(in crate::filter) fn not_grown(&self, what: &str) -> Result<()> {
        match self.grown() {
            Some(_) => Err(Error::arg(format!("{what} is not supported on a filter that grows"))),
            None => Ok(()),
        }
    }

    /// Flush the mapped stages past the first to the file (`sync`).
    pub(in crate::filter) fn sync_stages(&self) -> Result<()> {
        if let Some(s) = self.grown() {
            for m in s.maps.iter().filter_map(|m| m.get()) {
                m.flush().map_err(|e| Error::io("msync of a stage", e))?;
            }
        }
        Ok(())
    }
}

/// One stage of a grown filter, as `stats` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageStats {
    pub capacity: u64,
    pub bits: u64,
    pub hashes: u32,
    /// New items counted into the stage (§8 N9).
    pub fill: u64,
}
