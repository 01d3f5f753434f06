//! The filter operations over a mapped region.
//!
//! A `Filter` is one process's handle. It keeps its own copy of the geometry
//! and of every address it derives from it (DESIGN C6); the shared memory is
//! touched only through atomics, and the lock protocol is `sync`'s.

mod serialize;

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use crate::error::{Error, ErrorKind, Result};
use crate::math::geometry::Geometry;
use crate::math::hashing::{hash_item, ItemHash};
use crate::math::scheme::Layout;
use crate::math::window::{View, Window};
use crate::probe::{prefetch_line, with_probe, Probe, Probing};
use crate::shm::format::{self, Header, OFF_EPOCH, OFF_FLAGS, SLOTS, SLOTS_OFF, STRIPES_OFF};
use crate::shm::region::{self, Region};
use crate::sync::claims;
use crate::sync::{
    self, Claim, Control, Shared, Slot, Stripe, PENDING_CLEAR, PENDING_INTERSECT, PENDING_INVERT, PENDING_MERGE,
};
use crate::sys::clock::now_ns;
use crate::sys::{fork, membarrier, robust};

/// Pipeline stage distance, in items (see `Filter::pipelined`). Measured on a
/// 256 MiB filter, mostly absent items, 2-core AMD EPYC VM: with huge pages,
/// distances 4, 8 and 16 all made batches about 1.27x faster than single
/// calls, where prefetching every word of an item at once was no faster at
/// all; with 4 KiB pages each probe is a TLB miss and no scheme helped much.
const DISTANCE: usize = 8;
/// Adds of a batch under one slot mark, in a lock-free layout: an exclusive
/// operation waits for at most this many (a few microseconds).
const MARK_ITEMS: usize = 256;
/// How far ahead a batch on a cache-sized filter prefetches item bytes.
const ITEM_AHEAD: usize = 8;
/// Bit arrays smaller than this are taken to stay in the caches: batches
/// on them run item by item (prefetching would only add instructions), and
/// an add prefetches its stripe line (see `add_at`). Measured on the
/// machine above, half-full filters, batches of 1000: at 2 MiB pipelining
/// made queries about 10% slower, at 4 MiB it made them 10-30% faster and
/// adds of present items 25-50% faster.
const PIPELINE_MIN_BYTES: u64 = 4 << 20;

/// How long a windowed filter's cleaner waits for adds in flight before it
/// leaves the clear to a later writer: far longer than an add takes, so
/// mostly a stopped adder makes it give up (steps wait meanwhile, and
/// items live longer, never shorter).
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_millis(20);
/// After a drain that gave up, how long this handle's adds leave the
/// spare alone: an adder pays DRAIN_LIMIT at most once in this long.
const DRAIN_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);
/// How much of the spare a windowed add call clears (64 KiB: a few
/// microseconds). Right after a step the spare is clean again after
/// generation bytes / 64 KiB writing calls, long before the next step is
/// due; a step that finds it not clean yet waits for more writes (items
/// only live longer meanwhile).
const SPARE_SLICE_WORDS: usize = 8192;
/// Items of a windowed `contains_many` that share one reading of the clock
/// and the view, and of an `add_many` that share one reading of the clock
/// (and one look for a due step): few enough that the clock is read every
/// few microseconds.
const WINDOW_QUERY_GROUP: usize = 64;
/// Items of a windowed `contains_many` hashed at a time (ahead of their
/// looks, which then prefetch ahead within the chunk).
const WINDOW_HASH_CHUNK: usize = 1024;
/// The most ring slots a windowed filter has (generations and the spare).
const MAX_RING: usize = Window::MAX_GENERATIONS as usize + 1;

/// Attempts of a windowed copy that cannot hold the cleaner word (a
/// read-only handle) before it gives up: each fails only when two steps
/// land during one copy of the generations.
const SNAPSHOT_TRIES: u32 = 16;

/// The cleaner word held by a windowed copy, released when it ends.
struct CleanerHold<'a>(&'a AtomicU32);

impl Drop for CleanerHold<'_> {
    fn drop(&mut self) {
        // Release: pairs with the next cleaner's Acquire (take_cleaner).
        self.0.store(0, Ordering::Release);
    }
}

/// Ask for the bytes of the item `ITEM_AHEAD` places after item `i` (they
/// are wherever the caller's strings are) while item `i` is hashed.
#[inline(always)]
fn prefetch_item_ahead(items: &[&[u8]], i: usize) {
    if let Some(next) = items.get(i + ITEM_AHEAD) {
        prefetch_line(next.as_ptr());
    }
}

/// Whether batches hash ahead and prefetch: unless the environment variable
/// `BLOOMFILTER_SHARED_NO_PIPELINE` is set. It is read on every batch that
/// could be pipelined (well under a microsecond, on a batch whose work takes
/// microseconds), so that `bench/` can measure what pipelining buys by
/// setting it between two batches of one process.
fn pipelining() -> bool {
    std::env::var_os("BLOOMFILTER_SHARED_NO_PIPELINE").is_none()
}

/// A handle on a shared filter. Not `Sync`: one thread uses a handle (it
/// lazily claims a process slot, see `claim`); open another handle per thread.
pub struct Filter {
    region: Region,
    geometry: Geometry,
    seed: u64,
    /// Where items' bits are (the layout's strategy).
    probing: Probing,
    /// The mapping's first byte (`region.base()`, kept here so that a
    /// shared word is one load from the handle, not a walk through the
    /// region's `Arc` after every atomic access).
    base: *const u8,
    bits: *const AtomicU64,
    words: usize,
    /// Add stripes in the control area (`format::stripes_for`).
    stripes: u32,
    /// This thread's slot for the filter, with the ticket it was looked up
    /// under (see `claims`).
    claim: Cell<Option<(Claim, claims::Ticket)>>,
    /// Unique among this process's handles: names the slot's holder.
    serial: u64,
    /// A windowed filter's generations (None: a plain filter).
    win: Option<Win>,
    /// Until when this handle's adds leave the spare alone: its last clear
    /// found a stopped adder in the drain (see `DRAIN_LIMIT`).
    clean_after: Cell<Option<std::time::Instant>>,
    /// Until when this handle leaves closing and opening the filter to
    /// lock-free adds alone, having found a stopped adder in a drain (see
    /// `DRAIN_LIMIT`).
    step_after: Cell<Option<std::time::Instant>>,
    /// The clock's last grid number and the instants `[from, to)` it holds
    /// for (`Window::grid_span`): most calls find the clock still inside.
    grid_cache: Cell<(u64, u64, u64)>,
}

/// A windowed filter's facts, copied from the validated header.
#[derive(Clone, Copy, Debug)]
struct Win {
    w: Window,
    /// Words of one generation's bit array.
    gen_words: usize,
    /// Where each ring slot's bit array starts, in the mapping; the
    /// entries past the ring point at slot 0's, so that every entry is a
    /// generation's start (`Filter::generation`).
    gens: [*const AtomicU64; MAX_RING],
}

/// What `stats` reports of a windowed filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowStats {
    /// The window in ns (None: stepped only by `rotate`).
    pub window_ns: Option<u64>,
    pub generations: u32,
    /// The current generation's number: the grid period it started in
    /// (for a filter stepped only by `rotate`, the steps taken).
    pub current: u64,
    /// When the current generation's period started, in ns since the Unix
    /// epoch (None for a filter stepped only by `rotate`).
    pub current_start_ns: Option<u64>,
}

/// Whether a back-off deadline is set and still ahead.
#[inline(always)]
fn not_yet(until: Option<std::time::Instant>) -> bool {
    until.is_some_and(|t| std::time::Instant::now() < t)
}

/// What `Filter::step_state` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepState {
    /// This call stepped.
    Stepped,
    /// No step due, or another process took it.
    NoStep,
    /// A step is due, but the spare is not clear yet; `expired`: nor is
    /// the current generation visible any more.
    SpareDirty { expired: bool },
}

/// Wall-clock time in ns since the Unix epoch (0 before it), from
static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The slot a call runs under: the thread's slot for the filter, or one
/// held for this call only (the overflow slot, or any slot while the thread
/// ends), which is given back when the call ends (also on an early return).
struct Held<'a> {
    f: &'a Filter,
    c: Claim,
    /// Given back when the call ends.
    once: bool,
}

impl Drop for Held<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.once {
            self.f.shared().release_slot(self.c);
        }
    }
}

/// How long a thread that found the slot table full writes through the
/// overflow slot before it looks for a slot of its own again.
const FULL_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

thread_local! {
    static FULL_UNTIL: Cell<Option<std::time::Instant>> = const { Cell::new(None) };
}

// SAFETY: the handle owns its mapping; moving it to another thread moves the
// whole handle. (It is deliberately not Sync: `claim` is a Cell.)
unsafe impl Send for Filter {}

/// The error of an exclusive operation `lock_exclusive` refused (and of a
/// `rotate` that cannot fence lock-free adds).
fn no_fence(_: sync::SyncError) -> Error {
    Error::new(
        ErrorKind::Busy,
        "another process adds to this filter with membarrier(2) fences, which this process cannot use \
         (a seccomp filter, or a kernel before 4.16): run this in a process that can, or when no such \
         process has the filter open",
    )
}

fn path_bytes(p: &std::path::Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

/// Receives `(index, word)` pairs when a filter is built from bytes.
pub type WordSink<'a> = &'a mut dyn FnMut(usize, u64);

/// Where a filter built from bytes goes.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// Shared anonymous memory.
    Anonymous,
    /// A new file at the path, created with the mode.
    File(&'a std::path::Path, u32),
    /// A new memfd of that name (a label: any bytes but NUL).
    Memfd(&'a [u8]),
}

/// Creation options.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub mode: u32,
    pub seed: u64,
    /// The layout of a new filter (None: standard). On an existing file the
    /// stored layout wins, and an explicit different one is refused.
    pub layout: Option<Layout>,
    /// Make a new filter windowed (see `window`). On an existing file the
    /// stored window wins, and an explicit different one is refused.
    pub window: Option<WindowOptions>,
}

/// A windowed filter's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowOptions {
    /// The window in ns (`window::window_from_secs`); None: the filter
    /// steps only when told (`rotate`).
    pub window_ns: Option<u64>,
    /// 2 to 16; 0 when not given: `Window::DEFAULT_GENERATIONS` for a new
    /// filter, an existing one's (or windowed bytes') own otherwise.
    pub generations: u32,
}

impl WindowOptions {
    /// The generations asked for, `existing` when not given.
    pub fn generations_or(&self, existing: u32) -> u32 {
        if self.generations == 0 {
            existing
        } else {
            self.generations
        }
    }
}

impl Filter {
    fn from_region(region: Region) -> Filter {
        let h = region.header;
        let l = region.layout();
        debug_assert!(region.len() as u64 == l.total);
        let base = region.base() as *const u8;
        // SAFETY: decode validated that the mapping is exactly l.total bytes,
        // and bits_off + m/8 == l.total, so the words are inside it.
        let bits = unsafe { base.add(l.bits_off as usize) } as *const AtomicU64;
        let win = h.window.map(|w| {
            let gen_words = h.geometry.words();
            let mut gens = [bits; MAX_RING];
            for (slot, g) in gens.iter_mut().enumerate().take(w.ring_len() as usize) {
                // SAFETY: the bit array is `ring_len` generations of
                // `gen_words` words (words = gen_words * arrays, and a
                // windowed header's arrays are its ring), so each slot's
                // start lies inside it.
                *g = unsafe { bits.add(slot * gen_words) };
            }
            Win { w, gen_words, gens }
        });
        Filter {
            geometry: h.geometry,
            seed: h.seed,
            probing: Probing::new(&h.geometry, l.stripes),
            words: h.geometry.words() * h.arrays() as usize,
            win,
            stripes: l.stripes,
            base,
            bits,
            region,
            claim: Cell::new(None),
            clean_after: Cell::new(None),
            step_after: Cell::new(None),
            grid_cache: Cell::new((0, 0, 0)),
            // Relaxed: only uniqueness matters.
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Check what an existing region's header cannot vouch for: the slot
    /// mutexes another process initialised (the file may be anyone's).
    fn attached(self) -> Result<Filter> {
        if self.region.readonly || self.frozen() {
            return Ok(self); // takes no slot, ever
        }
        if !robust::robust_mutexes_available() {
            // Nothing to check against: queries work, and a write croaks
            // saying why (claim_new).
            return Ok(self);
        }
        if let Some(i) = self.shared().slots.iter().position(|s| !s.well_formed()) {
            let what = self
                .region
                .path()
                .map_or_else(|| "descriptor".into(), |p| p.to_string_lossy().into_owned());
            return Err(Error::new(
                ErrorKind::Format,
                format!("{what}: the process slot table is corrupt (slot {i})"),
            ));
        }
        Ok(self)
    }

    fn header_for(capacity: u64, fp_rate: f64, opts: &Options) -> Result<Header> {
        let layout = opts.layout.unwrap_or(Layout::Standard);
        let g = Geometry::for_layout(capacity, fp_rate, layout).map_err(|e| Error::arg(e.to_string()))?;
        if g.scheme == crate::math::scheme::Scheme::Block128 && !crate::probe::cas128_available() {
            return Err(Error::arg(
                "this fp_rate needs 128-bit blocks, which need a 16-byte compare-and-swap this machine lacks",
            ));
        }
        let mut h = region::new_header(g, opts.seed);
        if let Some(wo) = opts.window {
            let g = wo.generations_or(Window::DEFAULT_GENERATIONS);
            let w = Window::new(wo.window_ns, g, now_ns()).map_err(Error::arg)?;
            h.window = Some(w);
        }
        Ok(h)
    }

    /// Refuse an explicit window that differs from this filter's (the
    /// generations, when not given, are the filter's).
    fn check_window(self, want: Option<WindowOptions>) -> Result<Filter> {
        let Some(wo) = want else { return Ok(self) };
        let g = wo.generations_or(self.win.map_or(Window::DEFAULT_GENERATIONS, |s| s.w.generations()));
        let asked = Window::new(wo.window_ns, g, 0);
        let ok = self.win.is_some_and(|s| {
            s.w.generations() == g && asked.as_ref().ok().map(|w| w.window_ns()) == Some(s.w.window_ns())
        });
        if ok {
            return Ok(self);
        }
        Err(Error::new(
            ErrorKind::Mismatch,
            format!(
                "window mismatch (the filter has {}, not {})",
                self.win.map_or_else(|| "no window".to_string(), |s| s.w.to_string()),
                asked.map_or_else(|e| e, |w| w.to_string())
            ),
        ))
    }

    /// Refuse an explicit layout that differs from this filter's.
    fn check_layout(self, want: Option<Layout>) -> Result<Filter> {
        match want {
            Some(l) if l != self.layout() => Err(Error::new(
                ErrorKind::Mismatch,
                format!(
                    "layout mismatch (the filter is {}, not {})",
                    self.layout().name(),
                    l.name()
                ),
            )),
            _ => Ok(self),
        }
    }

    /// Refuse what this machine cannot run: 128-bit blocks need a 16-byte
    /// compare-and-swap.
    fn runnable(self) -> Result<Filter> {
        if matches!(self.probing, Probing::Block128(_)) && !crate::probe::cas128_available() {
            return Err(Error::new(
                ErrorKind::Format,
                "this filter's 128-bit blocks need a 16-byte compare-and-swap, which this machine lacks",
            ));
        }
        Ok(self)
    }

    /// A filter in shared anonymous memory (shared with children after fork).
    pub fn new_anonymous(capacity: u64, fp_rate: f64, opts: Options) -> Result<Filter> {
        let h = Self::header_for(capacity, fp_rate, &opts)?;
        Ok(Self::from_region(region::create_anonymous(&h)?))
    }

    /// Open the filter file at `path`, creating it if absent. On an existing
    /// file the stored geometry and seed win; the arguments are still checked.
    pub fn open_file(path: impl AsRef<std::path::Path>, capacity: u64, fp_rate: f64, opts: Options) -> Result<Filter> {
        let h = Self::header_for(capacity, fp_rate, &opts)?;
        if opts.mode & !0o7777 != 0 {
            return Err(Error::arg(format!("mode {:#o} is not a file mode", opts.mode)));
        }
        Self::from_region(region::open_or_create_file(path_bytes(path.as_ref()), &h, opts.mode)?)
            .check_layout(opts.layout)?
            .check_window(opts.window)?
            .runnable()?
            .attached()
    }

    /// A filter in a new memfd. `name` is only a label: any bytes but NUL,
    /// cut to the kernel's 249; empty gives a default name.
    pub fn new_memfd(name: impl AsRef<[u8]>, capacity: u64, fp_rate: f64, opts: Options) -> Result<Filter> {
        let h = Self::header_for(capacity, fp_rate, &opts)?;
        Ok(Self::from_region(region::create_memfd(name.as_ref(), &h)?))
    }

    /// Attach through a descriptor (duplicated; the caller keeps its own).
    /// A read-only descriptor, or a frozen filter, gives a query-only handle
    /// (`readonly()`: mapped `PROT_READ`, no slot, every mutator fails with
    /// `ErrorKind::ReadOnly`), also of a live filter others still change.
    pub fn from_fd(fd: i32) -> Result<Filter> {
        Self::from_region(region::open_fd(fd)?).runnable()?.attached()
    }

    /// Map a frozen filter file read-only.
    pub fn open_readonly(path: impl AsRef<std::path::Path>) -> Result<Filter> {
        Self::from_region(region::open_readonly(path_bytes(path.as_ref()))?).runnable()
    }

    /// A new filter holding `bits` (validated by the caller), anonymous or at
    /// a new file `path`.
    pub(crate) fn with_bits(
        h: Header,
        path: Option<&std::path::Path>,
        mode: u32,
        fill: &dyn Fn(WordSink),
    ) -> Result<Filter> {
        let to = match path {
            None => Target::Anonymous,
            Some(p) => Target::File(p, mode),
        };
        Self::with_state(h, to, None, fill)
    }

    /// A new filter of header `h` at `to`, holding the words `fill` gives
    /// (validated by the caller). A windowed header takes `state` (the
    /// window, start and `last` words of its generations, current first)
    /// and `fill` gives its generations' words in that order; the current
    /// generation goes in ring slot 0 and the spare, slot 1, is clean for
    /// the next step.
    pub(crate) fn with_state(
        h: Header,
        to: Target<'_>,
        state: Option<&crate::shm::serial::WindowState>,
        fill: &dyn Fn(WordSink),
    ) -> Result<Filter> {
        let gen_words = h.geometry.words();
        let words = gen_words * h.arrays() as usize;
        let bits_off = h.layout().bits_off as usize;
        // Where the state goes: a view, and `(header offset, word)` pairs.
        let mut view = None;
        let mut header_words = Vec::new();
        if let (Some(w), Some(st)) = (h.window, state) {
            debug_assert_eq!(st.window, w);
            debug_assert_eq!(st.last.len(), w.generations() as usize);
            let v = View { m: st.current, pos: 0 };
            header_words.push((format::OFF_VIEW, v.pack()));
            for (d, last) in st.last.iter().enumerate() {
                header_words.push((format::OFF_LAST + 8 * w.slot_at(v, d as u32) as u64, *last));
            }
            // write_header marked slot 1 clean for the initial view's step;
            // mark it for this view's.
            header_words.push((format::OFF_CLEAN + 8 * w.spare(v) as u64, v.clean_mark()));
            view = Some((w, v));
        }
        // The ring word of the image's word `i`.
        let place = |i: usize| -> usize {
            match view {
                None => i,
                Some((w, v)) => w.slot_at(v, (i / gen_words) as u32) as usize * gen_words + i % gen_words,
            }
        };
        let in_memory = |r: Region| -> Filter {
            let f = Self::from_region(r);
            // Relaxed: nobody else can see the new region yet (an
            // anonymous one until a fork, a memfd until its descriptor is
            // passed on: both order these stores).
            for &(off, word) in &header_words {
                f.win_word(off).store(word, Ordering::Relaxed);
            }
            fill(&mut |i, w| {
                if i < words {
                    f.word(place(i)).store(w, Ordering::Relaxed);
                }
            });
            f
        };
        match to {
            Target::Anonymous => Ok(in_memory(region::create_anonymous(&h)?)),
            Target::Memfd(name) => Ok(in_memory(region::create_memfd(name, &h)?)),
            Target::File(p, mode) => {
                let r = region::create_new_file(path_bytes(p), &h, mode, &|base| {
                    for &(off, word) in &header_words {
                        // SAFETY: the window words are at fixed 8-aligned
                        // offsets of the header page, inside every mapping;
                        // the file is not yet visible to any other process.
                        unsafe { (base.add(off as usize) as *mut u64).write(word) };
                    }
                    // SAFETY: base is the new file's mapping (layout total
                    // bytes), bits at bits_off, `words` words long.
                    let bits = unsafe { base.add(bits_off) } as *mut u64;
                    fill(&mut |i, w| {
                        if i < words {
                            // SAFETY: in bounds (place maps below `words`
                            // what is below it); the file is not yet visible
                            // to any other process.
                            unsafe { bits.add(place(i)).write(w) };
                        }
                    });
                })?;
                Ok(Self::from_region(r))
            }
        }
    }

    // ------------------------------------------------------------ views

    #[inline(always)]
    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.words);
        // SAFETY: i < words (every caller masks a bit index with `mask`, or
        // loops below `words`), and the words lie inside our mapping.
        unsafe { &*self.bits.add(i) }
    }

    fn words_slice(&self) -> &[AtomicU64] {
        // SAFETY: `words` atomics at `bits`, inside the mapping, aligned.
        unsafe { std::slice::from_raw_parts(self.bits, self.words) }
    }

    #[inline(always)]
    fn at<T>(&self, off: u64) -> *const T {
        // SAFETY: callers pass offsets of the control area, which decode
        // guarantees is inside the mapping (size >= CONTROL_END); `base`
        // is the mapping's, which lives (unmoved) as long as `self`.
        unsafe { self.base.add(off as usize) as *const T }
    }

    fn shared(&self) -> Shared<'_> {
        // SAFETY: control line, slots and stripes are at fixed, validated
        // offsets inside the mapping, 64-byte aligned, and only ever accessed
        // through these atomic types.
        unsafe {
            Shared {
                ctl: self.control(),
                slots: self.slots(),
                stripes: std::slice::from_raw_parts(self.at::<Stripe>(STRIPES_OFF), self.stripes as usize),
                bits: self.words_slice(),
                scratch: std::slice::from_raw_parts(self.at::<AtomicU64>(format::SCRATCH_OFF), format::SCRATCH_WORDS),
                journal: Some(&self.region),
            }
        }
    }

    #[inline(always)]
    fn control(&self) -> &Control {
        // SAFETY: the control line is at a fixed, validated offset inside
        // the mapping, 64-byte aligned, only ever accessed atomically.
        unsafe { &*self.at::<Control>(OFF_FLAGS) }
    }

    #[inline(always)]
    fn slots(&self) -> &[Slot] {
        // SAFETY: as control(); SLOTS slots at SLOTS_OFF.
        unsafe { std::slice::from_raw_parts(self.at::<Slot>(SLOTS_OFF), SLOTS as usize) }
    }

    /// The control line and slot `c`, without the rest of `shared()`.
    #[inline(always)]
    fn control_and_slot(&self, c: Claim) -> Option<sync::Owned<'_>> {
        Some(sync::Owned {
            ctl: self.control(),
            slot: self.slots().get(c.idx as usize)?,
            token: c.token,
        })
    }

    /// Whether every bit of the item at `loc` is set, read as a seqlock
    /// reader (false while an exclusive operation runs, or if one ran
    /// meanwhile): an add can then answer "not new" without writing.
    #[inline(always)]
    fn present_now<P: Probe>(&self, p: &P, bits: &[AtomicU64], loc: &P::Loc) -> bool {
        // Acquire: pairs with the Release store that ends an exclusive op.
        let e = self.epoch().load(Ordering::Acquire);
        e & 1 == 0 && p.contains(bits, loc) && {
            // Acquire fence: the bit loads above complete before the epoch
            // re-check (seqlock reader).
            fence(Ordering::Acquire);
            self.epoch().load(Ordering::Relaxed) == e
        }
    }

    #[inline(always)]
    fn epoch(&self) -> &AtomicU32 {
        // SAFETY: OFF_EPOCH is inside the validated control area, 4-aligned.
        unsafe { &*self.at::<AtomicU32>(OFF_EPOCH) }
    }

    #[inline(always)]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as epoch.
        unsafe { &*self.at::<AtomicU32>(OFF_FLAGS) }
    }

    /// This thread's slot for the filter, claimed on the first write in each
    /// process and thread and shared by all its handles of the filter; when
    /// the table is full, the overflow slot for this one call.
    #[inline]
    fn claim(&self) -> Result<Held<'_>> {
        match self.cached_claim() {
            Some(c) => Ok(Held {
                f: self,
                c,
                once: false,
            }),
            None => self.claim_slow(),
        }
    }

    /// This thread's cached slot, if its ticket is still current.
    #[inline(always)]
    fn cached_claim(&self) -> Option<Claim> {
        self.claim.get().filter(|&(_, t)| t == claims::ticket()).map(|(c, _)| c)
    }

    #[cold]
    #[inline(never)]
    fn claim_slow(&self) -> Result<Held<'_>> {
        // Registers the fork handler (before any claim is cached, so every
        // fork invalidates them).
        let gen = fork::fork_generation();
        let id = self.region.id();
        let c = match claims::lookup(id, gen) {
            Some(c) => c,
            None => match self.claim_new(id, gen)? {
                (c, false) => c,
                (c, true) => return Ok(Held { f: self, c, once: true }),
            },
        };
        // After the lookup: its pruning may have taken a new stamp.
        self.claim.set(Some((c, claims::ticket())));
        Ok(Held {
            f: self,
            c,
            once: false,
        })
    }

    /// Claim a slot for this thread and record it in the thread's table;
    /// true with it when it is held for this call only (the overflow slot,
    /// or any slot while the thread ends).
    fn claim_new(&self, id: claims::Id, gen: u32) -> Result<(Claim, bool)> {
        let sh = self.shared();
        if !robust::robust_mutexes_available() {
            return Err(Error::new(
                ErrorKind::Busy,
                "this system has no robust process-shared mutexes (glibc and robust futexes are needed to write)",
            ));
        }
        // A full table stays full for a while: look again at most every
        // FULL_RETRY rather than try every slot's mutex on every call.
        let full = FULL_UNTIL.with(|u| not_yet(u.get()));
        if !full {
            // Light marks for lock-free adds where every exclusive
            // operation can fence them (sync::begin_lockfree_add).
            let light = self.lockfree_adds() && membarrier::light_fences();
            match sh.claim_slot(std::process::id(), light) {
                // Not recorded when the thread is ending.
                Ok(c) => return Ok((c, !claims::insert(id, gen, c, self.serial, self.region.mapping()))),
                Err(_) => FULL_UNTIL.with(|u| u.set(Some(std::time::Instant::now() + FULL_RETRY))),
            }
        }
        let c = sh
            .claim_overflow()
            .map_err(|_| Error::new(ErrorKind::Busy, "the slot table is corrupt: no slot can be taken"))?;
        Ok((c, true))
    }

    #[inline]
    fn writable(&self) -> Result<()> {
        if self.region.readonly {
            return Err(Error::readonly());
        }
        if self.control().frozen() {
            return Err(Error::frozen());
        }
        Ok(())
    }

    // ------------------------------------------------------------ items
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
            // Adders of this item serialize on its stripe (DESIGN C2).
            Some(s) => {
                if !sh.begin_add(s, c) {
                    return Err(Error::frozen());
                }
                let new = p.set(bits, loc);
                sh.end_add(s);
                Ok(new)
            }
            // One atomic update decides among adders of this item; the
            // slot mark only keeps exclusive operations out (DESIGN C9).
            None => {
                if !sh.begin_lockfree_add(c) {
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
            Probing::Standard(_) => None,
        }
    }

    #[inline(always)]
    fn try_add_lockfree_with<P: Probe>(&self, p: &P, item: &[u8]) -> Option<bool> {
        debug_assert!(!P::STRIPED);
        if let Some(win) = &self.win {
            return self.try_window_add_lockfree(win, p, item);
        }
        if self.region.readonly {
            return None;
        }
        let sh = self.control_and_slot(self.cached_claim()?)?;
        // As writable (a present item is answered below without the slot
        // mark, which checks again).
        if !sh.light() || sh.ctl.frozen() {
            return None;
        }
        let h = hash_item(self.seed, item);
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
        let h = hash_item(self.seed, item);
        let r = with_probe!(&self.probing, p => self.add_at(p, &p.locate(&h), c));
        self.shared().count_ops(c, 1);
        r
    }

    /// Whether the bit array (each generation, for a windowed filter) has
    /// `PIPELINE_MIN_BYTES` or more: larger than the caches, where items are
    /// worth prefetching.
    #[inline(always)]
    fn beyond_caches(&self) -> bool {
        self.geometry.bytes() >= PIPELINE_MIN_BYTES
    }

    /// Whether adds of this filter mark the slot for a lock-free update
    /// rather than take a stripe (a blocked layout, windowed or not: a
    /// windowed one's adds take a stripe only while it steps).
    #[inline(always)]
    fn lockfree_adds(&self) -> bool {
        fn striped<P: Probe>(_: &P) -> bool {
            P::STRIPED
        }
        !with_probe!(&self.probing, p => striped(p))
    }

    /// Whether a batch of `n` items goes through `pipelined`'s prefetching.
    #[inline(always)]
    fn pipelines(&self, n: usize) -> bool {
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
    fn pipelined<P: Probe, F>(&self, p: &P, items: &[&[u8]], piped: bool, all_words: bool, f: F) -> Result<()>
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
    fn pipelined_by<P: Probe, A, B, F>(
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
                let h = hash_item(self.seed, item);
                f(i, &h, &p.locate(&h))?;
            }
            return Ok(());
        }
        let blank = ItemHash { h1: 0, h2: 1 };
        let mut ring = [(blank, p.locate(&blank)); 2 * DISTANCE];
        for (slot, item) in ring.iter_mut().zip(items) {
            let h = hash_item(self.seed, item);
            *slot = (h, p.locate(&h));
            first(&slot.0, &slot.1);
        }
        for (h, l) in &ring[..DISTANCE.min(n)] {
            rest(h, l);
        }
        for i in 0..n {
            let cur = ring[i % (2 * DISTANCE)];
            if i + DISTANCE < n {
                let (h, l) = &ring[(i + DISTANCE) % (2 * DISTANCE)];
                rest(h, l);
            }
            if i + 2 * DISTANCE < n {
                let h = hash_item(self.seed, items[i + 2 * DISTANCE]);
                let l = p.locate(&h);
                first(&h, &l);
                ring[i % (2 * DISTANCE)] = (h, l);
            }
            f(i, &cur.0, &cur.1)?;
        }
        Ok(())
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
                    if !sh.begin_lockfree_add(c) {
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

    /// Whether the item is probably present. Loads only (DESIGN C1).
    #[inline]
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = hash_item(self.seed, item);
        if let Some(win) = &self.win {
            return self.window_contains(win, &h);
        }
        with_probe!(&self.probing, p => p.contains(self.words_slice(), &p.locate(&h)))
    }

    /// Query many items; returns how many are present.
    pub fn contains_many(&self, items: &[&[u8]], results: Option<&mut [u8]>) -> u64 {
        if let Some(win) = &self.win {
            return with_probe!(&self.probing, p => self.window_contains_many(win, p, items, results));
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

    // ------------------------------------------------------------ windows
    //
    // The step protocol of the `window` module docs; the decisions are its
    // functions, this only reads and writes the shared words.

    /// The shared word at header offset `off`.
    fn win_word(&self, off: u64) -> &AtomicU64 {
        // SAFETY: the window words are at fixed 8-aligned offsets of the
        // header page (format's static asserts), inside every mapping.
        unsafe { &*self.at::<AtomicU64>(off) }
    }

    fn view_word(&self) -> &AtomicU64 {
        self.win_word(format::OFF_VIEW)
    }

    fn last_word(&self, slot: u32) -> &AtomicU64 {
        self.win_word(format::OFF_LAST + 8 * slot as u64)
    }

    fn clean_word(&self, slot: u32) -> &AtomicU64 {
        self.win_word(format::OFF_CLEAN + 8 * slot as u64)
    }

    fn cleaner_word(&self) -> &AtomicU32 {
        // SAFETY: as win_word; 4-aligned.
        unsafe { &*self.at::<AtomicU32>(format::OFF_CLEANER) }
    }

    /// The current view. A word no step could have written (the mapping is
    /// another process's to corrupt) reads as slot 0: wrong answers, never
    /// an address outside the ring.
    fn load_view(&self, w: &Window) -> View {
        self.load_view_word(w).0
    }

    /// The current view and the word it was read from (a step's CAS
    /// expects the word: a corrupt one is then replaced, not kept).
    fn load_view_word(&self, w: &Window) -> (View, u64) {
        // SeqCst: an adder reads the view after taking its stripe, the
        // cleaner reads it before reading the stripes (the drain's Dekker
        // pair); it pairs with the stepping CAS.
        let word = self.view_word().load(Ordering::SeqCst);
        let v = View::unpack(word, w.ring_len()).unwrap_or(View {
            m: (word & !View::CLOSED) >> 5,
            pos: 0,
        });
        (v, word)
    }

    /// Generation `slot`'s bit array.
    #[inline(always)]
    fn generation(&self, win: &Win, slot: u32) -> &[AtomicU64] {
        // Slots come from a view (`View::unpack` checks them) or the ring
        // arithmetic, so they are below the ring's length; the index check
        // (against MAX_RING) is the one check left.
        let start = win.gens[slot as usize];
        // SAFETY: every entry of `gens` is the start of a generation of
        // `gen_words` words inside the mapping (`from_region`), which
        // lives as long as `self`.
        unsafe { std::slice::from_raw_parts(start, win.gen_words) }
    }

    /// The grid a reader or writer of view `v` goes by now.
    fn grid_now(&self, w: &Window, v: View, now: u64) -> u64 {
        self.grid_and_last(w, v, now).0
    }

    /// `grid_now`, and the current generation's `last` it went by.
    fn grid_and_last(&self, w: &Window, v: View, now: u64) -> (u64, u64) {
        // Acquire: pairs with an adder's fetch_max (its grid is seen).
        let cur_last = self.last_word(v.pos).load(Ordering::Acquire);
        (
            Window::reader_grid_of(self.clock_grid(w, now), cur_last).max(v.m),
            cur_last,
        )
    }

    /// `w.grid(now)`, without a division while `now` stays in the span of
    /// the last one worked out.
    #[inline]
    fn clock_grid(&self, w: &Window, now: u64) -> u64 {
        let (n, from, to) = self.grid_cache.get();
        if from <= now && now < to {
            return n;
        }
        let span = w.grid_span(now);
        self.grid_cache.set(span);
        span.0
    }

    /// Take a step if one is due (or `forced`) and the spare is clean.
    /// True when this call stepped. `c` is this handle's slot: a blocked
    /// filter's steps go through `step_lockfree`.
    fn try_step(&self, w: &Window, now: u64, forced: bool, c: Claim) -> bool {
        self.step_state(w, now, forced, c) == StepState::Stepped
    }

    /// `try_step`, telling a step that is due but waits for the spare's
    /// clear apart from no step at all.
    fn step_state(&self, w: &Window, now: u64, forced: bool, c: Claim) -> StepState {
        let (v, word) = self.load_view_word(w);
        let q = self.grid_now(w, v, now);
        if !w.step_possible(v, q, forced) {
            if View::closed(word) {
                self.step_lockfree(w, now, forced, c);
            }
            return StepState::NoStep; // the common case: nothing more to read
        }
        // Acquire: pairs with the cleaner's Release of clean[] (the zeroed
        // words are seen before the slot is published) and the adders'
        // fetch_max of last[].
        let oldest_last = self.last_word(w.oldest(v)).load(Ordering::Acquire);
        let spare_clean = self.clean_word(w.spare(v)).load(Ordering::Acquire);
        match w.decide_step(v, q, oldest_last, spare_clean, forced) {
            // A blocked filter's step: under the cleaner word, which
            // decides again.
            Some(_) if self.lockfree_adds() => match self.step_lockfree(w, now, forced, c) {
                true => StepState::Stepped,
                false => StepState::NoStep,
            },
            // SeqCst: the step is the one write every reader and the drain
            // order themselves by. A failed CAS: someone else stepped.
            Some(n) => match self
                .view_word()
                .compare_exchange(word, n.pack(), Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => StepState::Stepped,
                Err(_) => StepState::NoStep,
            },
            None if !forced && spare_clean != v.clean_mark() && w.step_due(v, q, oldest_last) => {
                // Acquire: as oldest_last's.
                let cur_last = self.last_word(v.pos).load(Ordering::Acquire);
                StepState::SpareDirty {
                    expired: w.expired(cur_last, q),
                }
            }
            None => {
                if View::closed(word) {
                    self.step_lockfree(w, now, forced, c); // only opens it
                }
                StepState::NoStep
            }
        }
    }

    /// A step is due and the spare not clear yet (the writing calls since
    /// the last step were too few to clear it a slice each): clear the rest
    /// of it now, then step. Called before an add takes its stripe.
    ///
    /// When the current generation has `expired` (nobody wrote for a
    /// window), the add must not write it: raising its `last` would bring
    /// its expired items back. Then this waits for another process that is
    /// clearing the spare or stepping, for as long as that advances; one
    /// that stops advancing for four times DRAIN_LIMIT (longer than its
    /// drains may wait: a stopped process), or a drain that cannot finish,
    /// leaves the add to write the old generation, and its items live
    /// longer, as with any step deferred by a stopped process.
    #[cold]
    #[inline(never)]
    fn clear_spare_and_step(&self, win: &Win, c: Claim, now: u64, expired: bool) {
        let w = &win.w;
        let cursor = self.win_word(format::OFF_CURSOR);
        // Relaxed, both: progress hints only.
        let progress = || (cursor.load(Ordering::Relaxed), self.view_word().load(Ordering::Relaxed));
        let mut seen = progress();
        let mut until = std::time::Instant::now() + 4 * DRAIN_LIMIT;
        loop {
            if not_yet(self.clean_after.get()) {
                return; // a drain failed lately: a stopped adder holds a stripe
            }
            self.clean_spare(win, c, None);
            if self.step_state(w, now, false, c) == StepState::Stepped || !expired {
                return;
            }
            // Another process may hold the cleaner word, clearing or
            // stepping (a blocked filter's step takes it too): go on once
            // the current generation is one that has not expired.
            let (v, _) = self.load_view_word(w);
            let (q, cur_last) = self.grid_and_last(w, v, now);
            if !w.expired(cur_last, q) {
                return;
            }
            let at = progress();
            if at != seen {
                seen = at;
                until = std::time::Instant::now() + 4 * DRAIN_LIMIT;
            } else if std::time::Instant::now() >= until {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// A blocked filter's step, under the cleaner word (`window` module
    /// docs): close the filter to lock-free adds, wait for those in
    /// flight and then for the striped ones, step, wait for the striped
    /// adds that may have read the earlier view, open it again. Without a
    /// step due (or `forced`), only the opening, of a filter a stepper
    /// left closed. Nobody else waits:
    /// with the word held by a live process this returns at once, and adds
    /// go on, through their stripes while the filter is closed. A stopped
    /// adder that keeps a drain waiting past `DRAIN_LIMIT` leaves the
    /// filter closed (and the step not taken, for a lock-free one) for a
    /// later writer; this handle then leaves it alone for `DRAIN_BACKOFF`.
    #[cold]
    #[inline(never)]
    fn step_lockfree(&self, w: &Window, now: u64, forced: bool, c: Claim) -> bool {
        if not_yet(self.step_after.get()) {
            return false;
        }
        if !self.take_cleaner(c) {
            return false;
        }
        let (stepped, drained) = self.step_closed(w, now, forced, c);
        if !drained {
            self.step_after.set(Some(std::time::Instant::now() + DRAIN_BACKOFF));
        }
        // Release: pairs with the next cleaner's Acquire.
        self.cleaner_word().store(0, Ordering::Release);
        stepped
    }

    /// `step_lockfree`'s work, holding the cleaner word: whether it
    /// stepped, and whether its drains ended (false: a stopped adder).
    /// Only the holder of the cleaner word changes a blocked filter's view
    /// word, so the CASes below fail only on a corrupt word.
    fn step_closed(&self, w: &Window, now: u64, forced: bool, c: Claim) -> (bool, bool) {
        let sh = self.shared();
        let (v, mut word) = self.load_view_word(w);
        let q = self.grid_now(w, v, now);
        let mut stepped = false;
        // Acquire: as try_step.
        let oldest_last = self.last_word(w.oldest(v)).load(Ordering::Acquire);
        let spare_clean = self.clean_word(w.spare(v)).load(Ordering::Acquire);
        if let Some(n) = w.decide_step(v, q, oldest_last, spare_clean, forced) {
            // A process that cannot fence light marks leaves the step to
            // one that can while another has them (not closing meanwhile).
            if !membarrier::light_fences() && !sh.fence_light_adders(c) {
                return (false, false);
            }
            if !View::closed(word) {
                // SeqCst: the Dekker pair with a lock-free adder's mark,
                // then its view load (drain_marks reads the marks after).
                let closed = word | View::CLOSED;
                if self
                    .view_word()
                    .compare_exchange(word, closed, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
                {
                    return (false, true);
                }
                word = closed;
            }
            // Then the striped adds in flight: one begun while the filter
            // was open may have written a bit a lock-free add found; it
            // must not answer for the next view (`window` module docs).
            if !sh.drain_marks(c, DRAIN_LIMIT) || !sh.drain_stripes(DRAIN_LIMIT) {
                return (false, false);
            }
            // SeqCst: as try_step's; the filter stays closed.
            let next = n.pack() | View::CLOSED;
            if self
                .view_word()
                .compare_exchange(word, next, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                return (false, true);
            }
            (word, stepped) = (next, true);
        }
        if View::closed(word) {
            // Every stripe adder that read an earlier view is done once the
            // stripes held after our view load were released (the drain's
            // Dekker pair with begin_add, then view load).
            if !sh.drain_stripes(DRAIN_LIMIT) {
                return (stepped, false);
            }
            // SeqCst: lock-free adders read the view after their mark.
            let _ = self
                .view_word()
                .compare_exchange(word, word & !View::CLOSED, Ordering::SeqCst, Ordering::Relaxed);
        }
        (stepped, true)
    }

    /// Whether the spare of the current view still needs clearing.
    fn spare_dirty(&self, w: &Window) -> bool {
        self.spare_dirty_in(w, self.load_view(w))
    }

    /// Whether view `v`'s spare still needs clearing.
    #[inline(always)]
    fn spare_dirty_in(&self, w: &Window, v: View) -> bool {
        // Relaxed: a hint; clean_spare decides under the cleaner claim.
        self.clean_word(w.spare(v)).load(Ordering::Relaxed) != v.clean_mark()
    }

    /// Claim the cleaner word for `c`; a dead owner's claim is taken over.
    /// False when a live process (or this slot, reentering) holds it. The
    /// first look is a load: no CAS on the shared line while a live
    /// process is at it.
    fn take_cleaner(&self, c: Claim) -> bool {
        let sh = self.shared();
        let cw = self.cleaner_word();
        // Relaxed: only a guess at what the CAS expects.
        let mut cur = cw.load(Ordering::Relaxed);
        loop {
            if cur == c.token {
                return false; // ours already (reentry)
            }
            if cur != 0 && !sh.owner_dead(cur) {
                return false;
            }
            // AcqRel: Acquire pairs with the previous cleaner's Release (its
            // cursor and zeroed words are seen); Release is not needed to
            // take.
            match cw.compare_exchange(cur, c.token, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(held) => cur = held,
            }
        }
    }

    /// The cleaner word for a copy (`copy_window`): taken as soon as the
    /// live cleaner lets go of it (it holds it for one slice at a time), or
    /// None after DRAIN_LIMIT.
    fn hold_cleaner(&self, c: Claim) -> Option<CleanerHold<'_>> {
        let until = std::time::Instant::now() + DRAIN_LIMIT;
        loop {
            if self.take_cleaner(c) {
                return Some(CleanerHold(self.cleaner_word()));
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            for _ in 0..1000 {
                // Relaxed: a hint; take_cleaner's CAS decides.
                if self.cleaner_word().load(Ordering::Relaxed) == 0 {
                    break;
                }
                std::hint::spin_loop();
            }
            std::thread::yield_now();
        }
    }

    /// Clear the spare, unless another live process is at it: all of it,
    /// or (`slice`) at most that many words of it, going on from where the
    /// last cleaner stopped. Adds clear a slice each, so that no add pays
    /// for a whole generation; `rotate` clears all. Never called holding a
    /// stripe.
    fn clean_spare(&self, win: &Win, c: Claim, slice: Option<usize>) {
        let w = &win.w;
        let sh = self.shared();
        let cw = self.cleaner_word();
        if !self.take_cleaner(c) {
            return;
        }
        let v = self.load_view(w);
        let spare = w.spare(v);
        let mark = v.clean_mark();
        // Acquire: pairs with our predecessors' Release of clean[].
        if self.clean_word(spare).load(Ordering::Acquire) != mark {
            let bits = self.generation(win, spare);
            let for_word = self.win_word(format::OFF_CURSOR_FOR);
            let cursor = self.win_word(format::OFF_CURSOR);
            // Acquire: pairs with the Release below, so that a cleaner
            // taking over from a dead one sees the cursor reset with the
            // mark (and the zeros up to a cursor with its value).
            let mut done = if for_word.load(Ordering::Acquire) == mark {
                (cursor.load(Ordering::Acquire) as usize).min(bits.len())
            } else {
                // The first slice of this spare. Every adder that read a
                // view older than `v` must be done first (an adder reads
                // the view after taking its stripe); or a stopped one holds
                // its stripe, and a later writer retries. Later slices need
                // no drain: every adder since read `v` or a later view.
                if !sh.drain_stripes(DRAIN_LIMIT) {
                    self.clean_after.set(Some(std::time::Instant::now() + DRAIN_BACKOFF));
                    // Release: pairs with the next cleaner's Acquire.
                    cw.store(0, Ordering::Release);
                    return;
                }
                // Relaxed, then Release: the cursor is 0 before the mark
                // says it is this spare's (a cleaner killed between the two
                // leaves the old mark, and its successor starts over).
                cursor.store(0, Ordering::Relaxed);
                for_word.store(mark, Ordering::Release);
                0
            };
            let stop = slice.map_or(bits.len(), |n| done.saturating_add(n).min(bits.len()));
            while done < stop {
                let end = (done + sync::CHUNK * 64).min(stop);
                for b in &bits[done..end] {
                    // Relaxed: nobody reads or writes the spare; the Release
                    // of clean[] below publishes the zeros.
                    b.store(0, Ordering::Relaxed);
                }
                done = end;
                // Release: the zeros before the cursor that covers them
                // (pairs with the Acquire above, in the next cleaner).
                cursor.store(done as u64, Ordering::Release);
            }
            if done == bits.len() {
                // Relaxed: published with clean[] below.
                self.last_word(spare).store(0, Ordering::Relaxed);
                // Release: pairs with try_step's Acquire: zeros and last first.
                self.clean_word(spare).store(mark, Ordering::Release);
            }
        }
        // Release: pairs with the next cleaner's Acquire.
        cw.store(0, Ordering::Release);
    }

    /// A windowed add of one item (stripe `s`), under slot `c`.
    #[inline(always)]
    fn window_add_at<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, s: usize, c: Claim, now: u64) -> Result<bool> {
        let w = &win.w;
        let sh = self.shared();
        if !sh.begin_add(s, c) {
            return Err(Error::frozen());
        }
        let write = |v: View| self.window_write(win, p, loc, v, now);
        let v = self.load_view(w);
        let (q1, new1) = write(v);
        let v2 = self.load_view(w);
        // The current generation's bits decide (`window_write`).
        let (q, had) = if v2 == v {
            (q1, !new1)
        } else {
            // A step landed meanwhile (one at most: the next one's drain
            // waits for our stripe). Answer for the later view; the slot
            // first written counts with what it held before us.
            let (q2, new2) = write(v2);
            (q2, !new1 || !new2)
        };
        // The older generations of the later view (without the slot first
        // written: with an unchanged view it is not among them anyway).
        let had = had || self.held_in_older(win, p, loc, v2.pos, v.pos, q);
        sh.end_add(s);
        Ok(!had)
    }

    /// Whether a generation older than the one at ring slot `pos` holds the
    /// item and is visible at grid `q`, slot `skip` left out (a slot the
    /// add wrote; pass `pos` for none). Walked down the ring by hand
    /// (`slots_newest_first` with a `skip` stays out of line in the
    /// standard layout's build).
    #[inline(always)]
    fn held_in_older<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, pos: u32, skip: u32, q: u64) -> bool {
        let gate = p.gate(loc);
        let mut slot = pos;
        for _ in 1..win.w.generations() {
            slot = win.w.slot_before(slot);
            if slot != skip && self.held_visible(win, p, loc, &gate, slot, q) {
                return true;
            }
        }
        false
    }

    /// A windowed add without the stripe, for a blocked layout (one atomic
    /// update decides among adders of a generation) while the filter is
    /// open: the slot marked as for a plain lock-free add, then the view
    /// word read open. A step first closes the filter and then waits for
    /// every such mark, so the whole add sees one view (`window` module
    /// docs). None, with nothing written, when the filter is
    /// closed, frozen, or under an exclusive operation: the striped add
    /// answers then.
    #[inline(always)]
    fn window_add_lockfree<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, c: Claim, now: u64) -> Option<bool> {
        let o = self.control_and_slot(c)?;
        let v = self.mark_open(&win.w, &o)?;
        let (q, new) = self.window_write(win, p, loc, v, now);
        let had = !new || self.held_in_older(win, p, loc, v.pos, v.pos, q);
        o.unmark();
        Some(!had)
    }

    /// Mark slot `o` and read the view word: the view, if it is open (the
    /// mark then stays set until the caller's `unmark`). None, with the
    /// mark cleared, when the filter is closed, frozen, or under an
    /// exclusive operation (or the word is corrupt).
    #[inline(always)]
    fn mark_open(&self, w: &Window, o: &sync::Owned<'_>) -> Option<View> {
        if o.mark() {
            // SeqCst: the other half of the mark's Dekker pair with a step's
            // close (then drain_marks); it also pairs with the stepping CAS
            // (the published generation's zeros are seen).
            let word = self.view_word().load(Ordering::SeqCst);
            if let Some(v) = View::unpack(word, w.ring_len()).filter(|_| !View::closed(word)) {
                return Some(v);
            }
        }
        o.unmark();
        None
    }

    /// `add` of a windowed blocked filter in its common case, all of it
    /// under the slot's mark (as `window_add_lockfree`): this thread's
    /// cached light slot, the filter open, no step possible at the clock's
    /// grid, nothing exclusive under way. While the mark is set and the
    /// view word was read open, no step and no exclusive operation can
    /// begin (each waits for the mark), so one reading of the view and of
    /// the current generation's `last` serves the whole add, the check for
    /// an item already there included. None, with nothing written, in every
    /// other case: `add` then goes the whole way (`window_add_item`).
    #[inline(always)]
    fn try_window_add_lockfree<P: Probe>(&self, win: &Win, p: &P, item: &[u8]) -> Option<bool> {
        let w = &win.w;
        if self.region.readonly {
            return None;
        }
        let c = self.cached_claim()?;
        let o = self.control_and_slot(c)?;
        if !o.light() {
            return None;
        }
        let h = hash_item(self.seed, item);
        let loc = p.locate(&h);
        let now = now_ns();
        let v = self.mark_open(w, &o)?;
        let (q, last) = self.grid_and_last(w, v, now);
        if w.step_possible(v, q, false) {
            o.unmark();
            return None;
        }
        if self.beyond_caches() {
            // The older generations' words, asked for before the update's
            // locked instruction holds later loads back.
            let mut buf = [&[][..]; MAX_RING];
            for g in self.gens_newest_first(win, v, |_| true, &mut buf) {
                p.prefetch_gated(g, &loc);
            }
        }
        // An item the current generation holds, with a `last` that covers
        // the grid, needs no write: the answer is "not new".
        let held = p.contains_gated(self.generation(win, v.pos), &loc) && Window::raised_last(last, q) == last;
        let had = held
            || !self.window_write_at(win, p, &loc, v, q, last)
            || self.held_in_older(win, p, &loc, v.pos, v.pos, q);
        o.count_ops(1);
        o.unmark();
        self.clean_slice(win, c, v);
        Some(!had)
    }

    /// Write an item into view `v`'s current generation (under its stripe,
    /// or marked in an open view): the grid, and whether the item was new
    /// there.
    ///
    /// That answer alone, one atomic update, decides for the current
    /// generation, whatever its `last` was: bits there were set by adds
    /// of this generation's life, each after its `last` covered them, and
    /// the generation is visible now (an add never writes an expired one,
    /// as `clear_spare_and_step` has it, but where a stopped process left
    /// it no choice, and then its items are seen again anyway). Deciding
    /// from two updates (`last`'s old value, then the bits) would tell two
    /// adders "new" where one raises a fresh generation's `last` and
    /// another sets the bits in between; the stripe keeps that out only
    /// among striped adders.
    #[inline(always)]
    fn window_write<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, v: View, now: u64) -> (u64, bool) {
        // `last` as grid_and_last read it (Acquire: pairs with the Release
        // of the fetch_max in window_write_at, in whichever adder raised it).
        let (q, seen) = self.grid_and_last(&win.w, v, now);
        (q, self.window_write_at(win, p, loc, v, q, seen))
    }

    /// `window_write` at grid `q`, with the current generation's `last`
    /// read as `seen` (Acquire) at or after the view `v`.
    #[inline(always)]
    fn window_write_at<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, v: View, q: u64, seen: u64) -> bool {
        if seen < q.saturating_add(1) {
            // Written once a period, not on every add: the word's cache
            // line is read by every adder and query (DESIGN C5). Release:
            // pairs with readers' Acquire of last[] (the generation is
            // visible to them from our grid).
            self.last_word(v.pos).fetch_max(q.saturating_add(1), Ordering::Release);
            #[cfg(test)]
            tests::between_last_and_bits();
        }
        // Release fence: `last` as we saw or raised it comes before our
        // bits, for a reader that sees the bits first (`held_visible`'s
        // Acquire fence).
        fence(Ordering::Release);
        p.set(self.generation(win, v.pos), loc)
    }

    /// The fast path of a windowed add: whether the current generation
    /// holds every bit of the item and its `last` already covers the grid
    /// an add would raise it to. Such an add changes nothing and is told
    /// "not new" under the stripe too, so it needs neither the stripe nor a
    /// write. While the view stays the same its current generation only
    /// gains bits (only the spare is ever cleared), so bits seen set at
    /// the last load are all set then; the epoch check keeps a concurrent
    /// `clear` out, as in the plain add's fast path.
    #[inline(always)]
    fn window_held_now<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, now: u64) -> bool {
        let w = &win.w;
        // Acquire: pairs with the Release store that ends an exclusive op.
        let e = self.epoch().load(Ordering::Acquire);
        if e & 1 != 0 {
            return false;
        }
        let v = self.load_view(w);
        // The bits first: an item the generation lacks needs no grid.
        if !p.contains_gated(self.generation(win, v.pos), loc) {
            return false;
        }
        // Acquire fence: pairs with the adders' Release fence before their
        // bits (`last` is at least what the adder of the bits seen went
        // by), and the bit loads complete before the view and epoch are
        // read again (seqlock reader).
        fence(Ordering::Acquire);
        let (q, last) = self.grid_and_last(w, v, now);
        if Window::raised_last(last, q) != last {
            return false;
        }
        self.load_view(w) == v && self.epoch().load(Ordering::Relaxed) == e
    }

    /// Whether generation `slot` holds the item and is visible at grid
    /// `q`. The bits first: most generations lack an item looked for, and
    /// then `last` need not be read.
    #[inline]
    fn held_visible<P: Probe>(&self, win: &Win, p: &P, loc: &P::Loc, gate: &P::Gate, slot: u32, q: u64) -> bool {
        p.contains_gated_by(self.generation(win, slot), loc, gate) && {
            // Acquire fence: pairs with the adders' Release fence before
            // their bits, so that the `last` read below is at least the one
            // the adder of the bits we saw went by.
            fence(Ordering::Acquire);
            self.last_visible(&win.w, slot, q)
        }
    }

    /// The add stripe of an item in a windowed filter: adders of one item
    /// serialize on it in every layout.
    fn window_stripe(&self, h: &crate::math::hashing::ItemHash) -> usize {
        (h.h1 ^ h.h2.rotate_left(32)) as usize & (self.stripes as usize - 1)
    }

    /// Windowed adds: each item as `add` does; the spare cleared after.
    fn window_add_many<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        items: &[&[u8]],
        mut results: Option<&mut [u8]>,
        c: Claim,
    ) -> Result<u64> {
        let mut new = 0u64;
        // Item `i`'s answer, counted and given back.
        let mut record = |i: usize, n: bool| {
            new += n as u64;
            if let Some(r) = results.as_deref_mut() {
                r[i] = n as u8;
            }
        };
        let r = if self.beyond_caches() {
            self.window_adds_ahead(win, p, items, c, record)
        } else {
            let mut now = 0;
            items.iter().enumerate().try_for_each(|(i, item)| {
                prefetch_item_ahead(items, i);
                let h = hash_item(self.seed, item);
                record(
                    i,
                    self.window_add_item(win, p, i, &h, &p.locate(&h), c, &mut now, || {})?,
                );
                Ok(())
            })
        }
        .map(|_| new);
        self.window_add_done(win, c);
        r
    }

    /// A windowed `add`: `window_add_many`'s work for one item, without a
    /// batch's loop and answers (a large filter's item still has its words
    /// prefetched in every generation before the stripe is taken).
    #[inline(always)]
    fn window_add_one<P: Probe>(&self, win: &Win, p: &P, item: &[u8], c: Claim) -> Result<bool> {
        let h = hash_item(self.seed, item);
        let loc = p.locate(&h);
        // The view to prefetch in, read once (a hint: a step meanwhile
        // makes some prefetches useless, never an answer wrong).
        let large = self.beyond_caches().then(|| self.load_view(&win.w));
        if let Some(v) = large {
            // Every word of the item in the current generation: a present
            // item's look reads them all, a new item's write too (only
            // its first two would be on their way when the write's locked
            // instructions hold later loads back).
            let cur = self.generation(win, v.pos);
            p.prefetch_first(cur, &loc);
            p.prefetch_rest(cur, &loc);
        }
        let mut now = 0;
        let r = self.window_add_item(win, p, 0, &h, &loc, c, &mut now, || {
            if let Some(v) = large {
                let mut buf = [&[][..]; MAX_RING];
                let gens = self.gens_newest_first(win, v, |_| true, &mut buf);
                self.prefetch_item_gens(p, gens, &h, &loc);
            }
        });
        self.window_add_done(win, c);
        r
    }

    /// The end of a windowed add call: a slice of the spare cleared if it
    /// needs it, and the call counted.
    #[inline(always)]
    fn window_add_done(&self, win: &Win, c: Claim) {
        self.clean_slice(win, c, self.load_view(&win.w));
        self.shared().count_ops(c, 1);
    }

    /// A slice of view `v`'s spare cleared, if it needs it and this
    /// handle's clears are not backing off (`v` a hint: `clean_spare`
    /// decides again).
    #[inline(always)]
    fn clean_slice(&self, win: &Win, c: Claim, v: View) {
        if !not_yet(self.clean_after.get()) && self.spare_dirty_in(&win.w, v) {
            self.clean_spare(win, c, Some(SPARE_SLICE_WORDS));
        }
    }

    /// Prefetch what a windowed add of an item reads first: its gated words
    /// in each of `gens`, and its stripe.
    #[inline(always)]
    fn prefetch_item_gens<P: Probe>(&self, p: &P, gens: &[&[AtomicU64]], h: &ItemHash, l: &P::Loc) {
        for g in gens {
            p.prefetch_gated(g, l);
        }
        prefetch_line(&self.shared().stripes[self.window_stripe(h)]);
    }

    /// Item `i` of a windowed add call; `ahead` runs before the stripe is
    /// taken, when the current generation does not hold the item. The
    /// clock (a timer tick's resolution anyway) and a due step, once per
    /// group of items.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn window_add_item<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        i: usize,
        h: &ItemHash,
        loc: &P::Loc,
        c: Claim,
        now: &mut u64,
        ahead: impl Fn(),
    ) -> Result<bool> {
        if i % WINDOW_QUERY_GROUP == 0 {
            *now = now_ns();
            if let StepState::SpareDirty { expired } = self.step_state(&win.w, *now, false, c) {
                self.clear_spare_and_step(win, c, *now, expired);
            }
        }
        if self.window_held_now(win, p, loc, *now) {
            return Ok(false);
        }
        ahead();
        if !P::STRIPED {
            if let Some(new) = self.window_add_lockfree(win, p, loc, c, *now) {
                return Ok(new);
            }
        }
        self.window_add_at(win, p, loc, self.window_stripe(h), c, *now)
    }

    /// `window_add_many`'s items on generations larger than the caches: a
    /// batch goes through `pipelined_by`, prefetching the item's words in
    /// every generation of the view the batch started in (a step meanwhile
    /// makes some of them useless, never wrong) and its stripe; a call of
    /// fewer items asks for them all at once for each item the current
    /// generation does not hold, before the stripe's locked instruction
    /// holds the reads back. Each item's answer goes to `record`.
    fn window_adds_ahead<P: Probe>(
        &self,
        win: &Win,
        p: &P,
        items: &[&[u8]],
        c: Claim,
        mut record: impl FnMut(usize, bool),
    ) -> Result<()> {
        let mut now = 0;
        let piped = self.pipelines(items.len());
        let mut buf = [&[][..]; MAX_RING];
        let gens = self.gens_newest_first(win, self.load_view(&win.w), |_| true, &mut buf);
        let first = |h: &ItemHash, l: &P::Loc| self.prefetch_item_gens(p, gens, h, l);
        let rest = |_: &ItemHash, l: &P::Loc| {
            // The current generation is written (all its words), the others
            // only read, past their first word if it is set.
            for (i, g) in gens.iter().enumerate() {
                if i == 0 || p.first_set(g, l) {
                    p.prefetch_rest(g, l);
                }
            }
        };
        self.pipelined_by(p, items, piped, first, rest, |i, h, loc| {
            let n = self.window_add_item(win, p, i, h, loc, c, &mut now, || {
                if !piped {
                    first(h, loc);
                }
            })?;
            record(i, n);
            Ok(())
        })
    }

    /// The bit arrays of view `v`'s generations that `keep` keeps, newest
    /// first, in `buf`: where a batch prefetches.
    fn gens_newest_first<'a>(
        &'a self,
        win: &Win,
        v: View,
        keep: impl Fn(u32) -> bool,
        buf: &'a mut [&'a [AtomicU64]; MAX_RING],
    ) -> &'a [&'a [AtomicU64]] {
        let mut n = 0;
        for slot in win.w.slots_newest_first(v).filter(|&slot| keep(slot)) {
            buf[n] = self.generation(win, slot);
            n += 1;
        }
        &buf[..n]
    }

    /// Whether a windowed filter holds the item in a visible generation.
    fn window_contains(&self, win: &Win, h: &crate::math::hashing::ItemHash) -> bool {
        with_probe!(&self.probing, p => self.window_contains_one(win, p, &p.locate(h)))
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
            let q = self.grid_now(w, v, now_ns());
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
    fn window_contains_many<P: Probe>(&self, win: &Win, p: &P, items: &[&[u8]], mut results: Option<&mut [u8]>) -> u64 {
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
                p.locate(&hash_item(self.seed, item))
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
            let q = self.grid_now(w, v, now_ns());
            // The generations visible at `q`, by their `last` read once for
            // the group: the answers stand at this instant (a generation
            // made visible later only adds items concurrent with the call;
            // bits only appear while the view stands).
            let mut buf = [&[][..]; MAX_RING];
            let gens = self.gens_newest_first(win, v, |slot| self.last_visible(w, slot, q), &mut buf);
            if first_look {
                let first = |j: usize| {
                    if let Some(l) = locs.get(j) {
                        for g in gens {
                            p.prefetch_first(g, l);
                        }
                    }
                };
                let rest = |j: usize| {
                    if let Some(l) = locs.get(j) {
                        for g in gens {
                            if p.first_set(g, l) {
                                p.prefetch_rest(g, l);
                            }
                        }
                    }
                };
                if start == 0 {
                    (0..2 * DISTANCE).for_each(first);
                    (0..DISTANCE).for_each(rest);
                }
                for (i, (f, loc)) in found.iter_mut().zip(group).enumerate() {
                    rest(start + i + DISTANCE);
                    first(start + i + 2 * DISTANCE);
                    *f = gens.iter().any(|g| p.contains_early(g, loc));
                }
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
    fn last_visible(&self, w: &Window, slot: u32, q: u64) -> bool {
        // Acquire: pairs with the adders' fetch_max.
        w.visible(self.last_word(slot).load(Ordering::Acquire), q)
    }

    /// The window's facts and the current generation (None: not windowed).
    pub fn window_stats(&self) -> Option<WindowStats> {
        let win = self.win?;
        let v = self.load_view(&win.w);
        Some(WindowStats {
            window_ns: win.w.window_ns(),
            generations: win.w.generations(),
            current: v.m,
            current_start_ns: win.w.grid_start_ns(v.m),
        })
    }

    /// The window configuration (None: not windowed).
    pub fn window(&self) -> Option<Window> {
        self.win.map(|w| w.w)
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
    pub fn copy_window(&self, out: &mut [u8]) -> Result<crate::shm::serial::WindowState> {
        let Some(win) = self.win else {
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
            for (word, bytes) in self.generation(&win, slot).iter().zip(to.chunks_exact_mut(8)) {
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

    /// Take a generation step now, due or not: the oldest generation is
    /// discarded. Clears the spare first if it is not clean yet (waiting
    /// for another process clearing it). Errors on a plain filter.
    pub fn rotate(&self) -> Result<()> {
        let Some(win) = self.win else {
            return Err(Error::arg("rotate needs a windowed filter"));
        };
        self.writable()?;
        let held = self.claim()?;
        let c = held.c;
        loop {
            if self.spare_dirty(&win.w) {
                self.clean_spare(&win, c, None);
            }
            if self.shared().frozen() {
                return Err(Error::frozen());
            }
            let v = self.load_view(&win.w);
            // A rotate tries the drains again at once.
            self.step_after.set(None);
            if self.try_step(&win.w, now_ns(), true, c) {
                break;
            }
            if self.load_view(&win.w) == v {
                // A blocked filter's step fences the light marks of
                // lock-free adds; where this process cannot, it would wait
                // for as long as such a process has the filter open.
                if self.lockfree_adds() && !self.shared().fence_light_adders(c) {
                    return Err(no_fence(sync::SyncError::NoFence));
                }
                let q = self.grid_now(&win.w, v, now_ns());
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
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        // Ready the next step at once.
        self.clean_spare(&win, c, None);
        self.shared().count_ops(c, 1);
        Ok(())
    }

    /// Refuse operations a windowed filter does not have.
    fn not_windowed(&self, what: &str) -> Result<()> {
        match self.win {
            Some(_) => Err(Error::arg(format!("{what} is not supported on a windowed filter"))),
            None => Ok(()),
        }
    }

    // ------------------------------------------------------------ whole filter

    /// Same layout, bit array shape and hash: their bits mean the same items.
    pub fn is_compatible(&self, other: &Filter) -> bool {
        self.geometry.scheme == other.geometry.scheme
            && self.geometry.m == other.geometry.m
            && self.geometry.k == other.geometry.k
            && self.seed == other.seed
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
        self.region.sync()?;
        self.region.sync_header()
    }

    // ------------------------------------------------------------ facts

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Whether nothing can change the filter through this handle: a
    /// read-only mapping, or a frozen filter (the freezing handle too).
    pub fn readonly(&self) -> bool {
        self.region.readonly || self.region.frozen()
    }
    pub fn frozen(&self) -> bool {
        self.region.frozen()
    }
    pub fn memfd(&self) -> i32 {
        self.region.memfd()
    }
    pub fn mmap_size(&self) -> u64 {
        self.region.len() as u64
    }
    pub fn path(&self) -> Option<&std::ffi::CStr> {
        self.region.path()
    }
    pub fn sync(&self) -> Result<()> {
        self.region.sync()
    }

    /// Number of set bits (loads only); of the current generation for a
    /// windowed filter.
    pub fn bits_set(&self) -> u64 {
        // A windowed filter: its current generation's.
        let words = match &self.win {
            Some(win) => self.generation(win, self.load_view(&win.w).pos),
            None => self.words_slice(),
        };
        words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as u64)
            .sum()
    }

    /// Estimated number of distinct items added.
    pub fn count(&self) -> u64 {
        self.geometry.count_from_bits_set(self.bits_set())
    }

    /// The chance a random absent item is reported present now.
    pub fn estimated_fpp(&self) -> f64 {
        self.geometry.fpp_from_bits_set(self.bits_set())
    }

    /// The layout the filter was created with.
    pub fn layout(&self) -> Layout {
        self.geometry.layout()
    }

    /// Write calls (add, add_many, merge, intersect, invert, clear, freeze)
    /// over all processes.
    pub fn ops(&self) -> u64 {
        self.shared().total_ops()
    }

    /// Visit the bit words in order (serialization).
    pub fn for_each_word(&self, mut f: impl FnMut(u64)) {
        for w in self.words_slice() {
            f(w.load(Ordering::Relaxed));
        }
    }
}

/// Crash-test hooks: leave a lock held as a process killed inside an
/// operation would. For the project's own multi-process tests only: built
/// with the `test-hooks` feature (cargo test's), never into the library.
#[cfg(feature = "test-hooks")]
pub mod testing {
    use super::*;

    /// Take the stripe `item` hashes to and never release it.
    pub fn hold_stripe(f: &Filter, item: &[u8]) {
        let c = f.claim().expect("slot").c;
        let h = hash_item(f.seed, item);
        let Probing::Standard(p) = f.probing else {
            panic!("only the standard layout has stripes");
        };
        assert!(f.shared().begin_add(p.stripe(&h).unwrap(), c));
    }

    /// Take the exclusive lock, run `op` (`PENDING_CLEAR`, `PENDING_INVERT`)
    /// over half the words and into the middle of the next chunk, and never
    /// release it (an operation killed midway).
    fn hold_half_transform(f: &Filter, op: u32) {
        let c = f.claim().expect("slot").c;
        let g = f.shared().lock_exclusive(c).expect("fenced");
        g.transform_partly(op, (f.words + sync::CHUNK - 1) / sync::CHUNK / 2);
        std::mem::forget(g);
    }

    /// A `clear` killed midway (see hold_half_transform).
    pub fn hold_half_clear(f: &Filter) {
        hold_half_transform(f, PENDING_CLEAR);
    }

    /// An `invert` killed midway (see hold_half_transform).
    pub fn hold_half_invert(f: &Filter) {
        hold_half_transform(f, PENDING_INVERT);
    }

    /// The index of the slot this handle writes under.
    pub fn slot_of(f: &Filter) -> u32 {
        f.claim().expect("slot").c.idx
    }

    /// Whether the slot this handle's next write goes under is this
    /// thread's, claimed and not given back since (its token's generation
    /// is the slot's): a claim cached by a thread that has ended fails it.
    pub fn writes_under_a_current_slot(f: &Filter) -> bool {
        let c = f.claim().expect("slot").c;
        let gen = f.shared().slots[c.idx as usize].gen.load(Ordering::Acquire);
        sync::untoken(c.token) == Some((c.idx, gen))
    }

    /// The value that tells this thread from every other live thread of
    /// the process (see `claims`).
    pub fn thread_pointer() -> usize {
        claims::thread_pointer()
    }

    /// Start a lock-free add of a blocked filter and never finish it (an
    /// adder stopped or killed between its slot mark and its update).
    pub fn hold_lockfree_add(f: &Filter) {
        let c = f.claim().expect("slot").c;
        assert!(f.shared().begin_lockfree_add(c));
    }

    thread_local! {
        /// Set by `stop_journaled`: where this thread's next journaled
        /// operation stops as if killed: None after the copy, before it
        /// takes the exclusive lock; Some(c) after applying c chunks.
        pub(super) static STOP: Cell<Option<Option<usize>>> = const { Cell::new(None) };
    }

    /// Hold everything taken so far (the journal word, the exclusive lock
    /// `g` and pending when given) as a process killed there would: stop
    /// this process (SIGSTOP) until it is killed.
    pub(super) fn stop_here(g: Option<sync::Exclusive<'_>>) -> ! {
        std::mem::forget(g);
        loop {
            // SAFETY: raising a signal at ourselves.
            unsafe { libc::raise(libc::SIGSTOP) };
        }
    }

    /// Make this thread's next merge or intersect stop after copying the
    /// operand to the journal (`chunks` None) or after applying `chunks`
    /// chunks of it, holding what it holds, and stop the process there
    /// (SIGSTOP): the caller's parent sees it stopped and kills it.
    pub fn stop_journaled(chunks: Option<usize>) {
        STOP.with(|s| s.set(Some(chunks)));
    }

    /// Where the journal is in the file or memfd: (offset, bytes).
    pub fn journal_range(f: &Filter) -> Option<(u64, u64)> {
        format::journal(&f.region.header)
    }

    /// Mark this handle's slot busy (a merge killed midway).
    pub fn hold_merge(f: &Filter) {
        let c = f.claim().expect("slot").c;
        assert!(f.shared().begin_merge(c));
    }

    /// Run `during` holding the exclusive lock, then release it as an
    /// exclusive operation does (waking whoever waits).
    pub fn while_exclusive(f: &Filter, during: impl FnOnce()) {
        let c = f.claim().expect("slot").c;
        let g = f.shared().lock_exclusive(c).expect("fenced");
        during();
        drop(g);
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        // Only the handle whose mapping holds the slot's mutex gives it back,
        // in the thread and process that claimed it (a forked child must not
        // free its parent's slot, and only the mutex's owner may unlock it).
        // A holder dropped in another thread leaves its slot in the claiming
        // thread's table, which keeps the mapping and gives the slot back
        // there (see `claims`).
        if self.claim.get().is_some() {
            claims::forget(self.region.id(), fork::fork_generation(), self.serial);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Run by this thread's windowed adds between raising a
        /// generation's `last` and setting the item's bits.
        static BETWEEN: std::cell::RefCell<Option<Box<dyn FnMut()>>> = const { std::cell::RefCell::new(None) };
    }

    pub(super) fn between_last_and_bits() {
        if let Some(mut f) = BETWEEN.with(|b| b.borrow_mut().take()) {
            f();
        }
    }

    /// Two adders of an item in a fresh generation of a windowed blocked
    /// filter (no stripe): A raises the generation's `last` from 0, then
    /// B runs its whole add before A sets the bits. B finds no bits and
    /// is told new; A finds B's, and must be told "not new" (an answer
    /// from `last`'s old value, 0, would tell it new as well).
    #[test]
    fn a_fresh_generation_tells_one_of_two_lockfree_adders_new() {
        for rotate in [false, true] {
            let opts = Options {
                layout: Some(crate::math::scheme::Layout::Blocked),
                window: Some(WindowOptions {
                    window_ns: Some(3600 * 1_000_000_000),
                    generations: 4,
                }),
                ..Options::default()
            };
            let f = Filter::new_memfd("fresh", 10_000, 0.01, opts).unwrap();
            let fd = f.memfd();
            if rotate {
                f.add(b"warm").unwrap();
                f.rotate().unwrap(); // a generation a step has just published
            }
            let w = &f.win.as_ref().unwrap().w;
            assert_eq!(f.last_word(f.load_view(w).pos).load(Ordering::Relaxed), 0);
            let b_new = std::sync::Arc::new(std::sync::Mutex::new(None));
            let b = b_new.clone();
            BETWEEN.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    // Another thread, so another slot: B's add is lock-free too.
                    let r = std::thread::spawn(move || Filter::from_fd(fd).unwrap().add(b"item").unwrap())
                        .join()
                        .unwrap();
                    *b.lock().unwrap() = Some(r);
                }))
            });
            let a_new = f.add(b"item").unwrap();
            let b_new = b_new.lock().unwrap().expect("B ran between A's two updates");
            assert!(b_new, "rotate {rotate}: B, first to set the bits, is new");
            assert!(!a_new, "rotate {rotate}: A told new beside B");
        }
    }

    /// The indexes of the set bits, in order.
    fn set_positions(f: &Filter) -> Vec<u64> {
        let mut set = vec![];
        let mut i = 0u64;
        f.for_each_word(|w| {
            set.extend((0..64).filter(|b| w >> b & 1 == 1).map(|b| i * 64 + b));
            i += 1;
        });
        set
    }

    fn anon(cap: u64, rate: f64) -> Filter {
        Filter::new_anonymous(cap, rate, Options::default()).unwrap()
    }

    #[test]
    fn add_contains_and_known_bits() {
        let f = anon(1000, 0.01);
        assert_eq!((f.geometry().k, f.geometry().m), (7, 16384));
        assert!(!f.contains(b"hello"));
        assert!(f.add(b"hello").unwrap());
        assert!(!f.add(b"hello").unwrap());
        assert!(f.contains(b"hello"));
        // The exact positions computed independently in hashing's tests.
        assert_eq!(set_positions(&f), [12050, 12435, 12820, 13205, 13590, 13975, 14360]);
        assert_eq!(f.bits_set(), 7);
        assert_eq!(f.count(), 1);
        assert_eq!(f.ops(), 2);
    }

    /// `n` items `prefix-0`, `prefix-1`, ... cycling over `distinct` names.
    fn keys(prefix: &str, n: u32, distinct: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{prefix}-{}", i % distinct).into_bytes())
            .collect()
    }

    /// Adds `added` items (`distinct` different ones) one by one to a filter
    /// and as one batch to another of capacity `cap`, and checks they answer
    /// alike; then checks `contains_many` against `contains` on the batch
    /// filter for the first `n` of `probed` items, for each `n` of `lens`.
    /// Returns the batch filter and its probe items.
    fn check_batches(
        cap: u64,
        prefix: &str,
        added: u32,
        distinct: u32,
        probed: u32,
        lens: &[usize],
    ) -> (Filter, Vec<Vec<u8>>) {
        let a = anon(cap, 0.01);
        let b = anon(cap, 0.01);
        let items = keys(prefix, added, distinct);
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let single: Vec<u8> = refs.iter().map(|i| a.add(i).unwrap() as u8).collect();
        let mut batch = vec![9u8; refs.len()];
        let n = b.add_many(&refs, Some(&mut batch)).unwrap();
        assert_eq!(single, batch);
        assert_eq!(n, single.iter().map(|&x| x as u64).sum::<u64>());
        let probe = keys(prefix, probed, probed);
        let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
        for &n in lens {
            let mut res = vec![9u8; n];
            let present = b.contains_many(&prefs[..n], Some(&mut res));
            let expect: Vec<u8> = prefs[..n].iter().map(|p| b.contains(p) as u8).collect();
            assert_eq!(res, expect, "batch of {n}");
            assert_eq!(present, expect.iter().map(|&x| x as u64).sum::<u64>());
        }
        (b, probe)
    }

    #[test]
    fn batches_match_single_calls() {
        // Every length below the lookahead, and the whole probe list.
        let lens: Vec<usize> = (0..10).chain([4000]).collect();
        let (b, probe) = check_batches(5000, "item", 3000, 2000, 4000, &lens);
        let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
        let mut res = vec![9u8; prefs.len()];
        b.contains_many(&prefs, Some(&mut res));
        assert!(res[..2000].iter().all(|&x| x == 1));
        // Batches shorter than the lookahead.
        for n in 0..10 {
            let mut r = vec![9u8; n];
            assert_eq!(b.contains_many(&prefs[..n], Some(&mut r)), n as u64);
        }
    }

    /// Both ways through `pipelined` see the same items, in the same order,
    /// with the same hashes, and the early-exit test agrees with the full one.
    #[test]
    fn piped_and_item_by_item_runs_agree() {
        let f = anon(12_000_000, 0.01);
        let items = keys("p", 5_000, 5_000);
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        f.add_many(&refs[..2_500], None).unwrap();
        for all_words in [false, true] {
            let mut seen = [Vec::new(), Vec::new()];
            for (run, piped) in [false, true].into_iter().enumerate() {
                let Probing::Standard(p) = f.probing else {
                    unreachable!()
                };
                let bits = f.words_slice();
                f.pipelined(&p, &refs, piped, all_words, |i, h, l| {
                    seen[run].push((i, *h, p.contains_early(bits, l), p.contains(bits, l)));
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(seen[0].len(), refs.len());
            assert_eq!(seen[0], seen[1], "all_words {all_words}");
            assert!(seen[0].iter().all(|&(_, _, early, full)| early == full));
            // The filter is nearly empty: no false positive among the absent half.
            assert_eq!(seen[0].iter().filter(|s| s.3).count(), 2_500);
        }
    }

    /// The pipelined path (bit arrays of PIPELINE_MIN_BYTES and more) gives
    /// exactly the results of single calls.
    #[test]
    fn pipelined_batches_match_single_calls() {
        assert!(anon(12_000_000, 0.01).geometry().bytes() >= PIPELINE_MIN_BYTES);
        let lens = [0, 1, 2 * DISTANCE - 1, 2 * DISTANCE, 2 * DISTANCE + 1, 40_000];
        check_batches(12_000_000, "big", 30_000, 20_000, 40_000, &lens);
    }

    #[test]
    fn set_operations() {
        let a = anon(1000, 0.01);
        let b = anon(1000, 0.01);
        a.add(b"x").unwrap();
        b.add(b"y").unwrap();
        a.merge(&b).unwrap();
        assert!(a.contains(b"x") && a.contains(b"y"));
        let c = anon(1000, 0.01);
        c.add(b"y").unwrap();
        a.intersect(&c).unwrap();
        assert!(a.contains(b"y") && !a.contains(b"x"));
        a.merge(&a).unwrap();
        a.intersect(&a).unwrap();
        assert!(a.contains(b"y"));
        let d = anon(10, 0.01);
        let e = a.merge(&d).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Mismatch);
        assert!(
            e.msg.starts_with("geometry mismatch (bits 16384 vs 128, hashes 7 vs 7"),
            "{}",
            e.msg
        );
        let s = Filter::new_anonymous(
            1000,
            0.01,
            Options {
                mode: 0,
                seed: 7,
                layout: None,
                window: None,
            },
        )
        .unwrap();
        assert!(!a.is_compatible(&s));
        let e = a.intersect(&s).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Mismatch);
        assert!(e.msg.starts_with("seed mismatch"), "{}", e.msg);
        a.invert().unwrap();
        assert_eq!(a.bits_set(), a.geometry().m - 7);
        a.clear().unwrap();
        assert_eq!(a.bits_set(), 0);
        a.freeze().unwrap();
        assert!(a.frozen());
        assert_eq!(a.add(b"z").unwrap_err().kind, ErrorKind::Frozen);
        assert_eq!(a.clear().unwrap_err().kind, ErrorKind::Frozen);
        assert_eq!(a.merge(&b).unwrap_err().kind, ErrorKind::Frozen);
    }

    /// A filter in a memfd of `len` bytes holding `image`, sealed as given.
    fn sealed_memfd(image: &[u8], len: u64, seals: libc::c_int) -> std::fs::File {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::fs::FileExt;
        // SAFETY: a NUL-terminated name; the descriptor is ours.
        let f = unsafe {
            std::fs::File::from_raw_fd(libc::memfd_create(
                b"sealed\0".as_ptr().cast(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            ))
        };
        f.write_all_at(image, 0).unwrap();
        f.set_len(len).unwrap();
        // SAFETY: plain fcntl on our descriptor.
        assert_eq!(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_ADD_SEALS, seals) }, 0);
        f
    }

    fn image(f: &Filter) -> Vec<u8> {
        // SAFETY: the handle's mapping, mmap_size bytes, read while nothing
        // writes it.
        unsafe { std::slice::from_raw_parts(f.region.base(), f.mmap_size() as usize) }.to_vec()
    }

    fn all_words(f: &Filter) -> Vec<u64> {
        let mut v = Vec::new();
        f.for_each_word(|w| v.push(w));
        v
    }

    /// A memfd sealed against growing (as earlier versions sealed them, or
    /// as another program may) cannot hold a journal: merge and intersect
    /// still work, in place, and the memfd is not grown.
    #[test]
    fn a_memfd_sealed_against_growing_merges_in_place() {
        use std::os::fd::AsRawFd;
        let a = anon(100_000, 0.01);
        let b = anon(100_000, 0.01);
        for i in 0..3000 {
            a.add(format!("a{i}").as_bytes()).unwrap();
            b.add(format!("b{i}").as_bytes()).unwrap();
        }
        let total = a.mmap_size();
        let fd = sealed_memfd(&image(&a), total, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW);
        let m = Filter::from_fd(fd.as_raw_fd()).unwrap();
        let or: Vec<u64> = all_words(&a).iter().zip(all_words(&b)).map(|(x, y)| x | y).collect();
        m.merge(&b).unwrap();
        assert_eq!(all_words(&m), or);
        assert_eq!(fd.metadata().unwrap().len(), total, "not grown");
        let c = anon(100_000, 0.01);
        c.add(b"a1").unwrap();
        m.intersect(&c).unwrap();
        assert!(m.contains(b"a1") && !m.contains(b"b1"));
        assert_eq!(all_words(&m), all_words(&c));
        assert_eq!(fd.metadata().unwrap().len(), total);
        assert_eq!(m.ops(), a.ops() + 2);
    }

    /// A memfd of this version is sealed against shrinking only: the
    /// journal grows it; its pages are freed after, its size stays.
    #[test]
    fn a_memfd_grows_for_the_journal_and_frees_it() {
        use std::os::unix::fs::MetadataExt;
        let a = Filter::new_memfd("grow", 1_000_000, 0.01, Options::default()).unwrap();
        let b = anon(1_000_000, 0.01);
        b.add(b"b").unwrap();
        let fd = a.memfd();
        let md = || {
            // SAFETY: borrowing the handle's descriptor for one fstat.
            let f = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
            f.metadata().unwrap()
        };
        let total = a.mmap_size();
        assert_eq!(md().len(), total);
        a.merge(&b).unwrap();
        assert!(a.contains(b"b"));
        let (off, len) = format::journal(&a.region.header).unwrap();
        assert_eq!(md().len(), off + len, "grown to hold the journal");
        assert!(md().blocks() * 512 < total + len / 2, "the journal's pages are freed");
        // SAFETY: plain fcntl on the handle's descriptor.
        let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
        assert_eq!(seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW), libc::F_SEAL_SHRINK);
        // Another handle through the descriptor maps only the filter.
        let again = Filter::from_fd(fd).unwrap();
        assert_eq!(again.mmap_size(), total);
        assert!(again.contains(b"b"));
    }

    #[test]
    fn seeded_filter_uses_other_positions() {
        let a = Filter::new_anonymous(
            1000,
            0.01,
            Options {
                mode: 0,
                seed: 42,
                layout: None,
                window: None,
            },
        )
        .unwrap();
        a.add(b"hello").unwrap();
        assert_eq!(set_positions(&a), [6220, 6714, 7208, 7702, 14659, 15153, 15647]);
    }

    fn blocked(cap: u64, rate: f64) -> Filter {
        let opts = Options {
            layout: Some(Layout::Blocked),
            ..Options::default()
        };
        Filter::new_anonymous(cap, rate, opts).unwrap()
    }

    /// The FP rate of a blocked filter filled to capacity, measured over
    /// 10^6 absent items, is at most the requested one within 3 standard
    /// errors, for the rates the README's table lists (both widths).
    #[test]
    fn blocked_fp_at_capacity_is_at_most_the_requested_rate() {
        for (rate, seed) in [(0.05, 0u64), (0.01, 1), (0.001, 2), (0.0001, 3)] {
            let cap = 100_000u64;
            let opts = Options {
                seed,
                layout: Some(Layout::Blocked),
                ..Options::default()
            };
            let f = Filter::new_anonymous(cap, rate, opts).unwrap();
            for i in 0..cap {
                f.add(&i.to_le_bytes()).unwrap();
            }
            let probes = 1_000_000u64;
            let fp = (cap..cap + probes).filter(|i| f.contains(&i.to_le_bytes())).count() as f64 / probes as f64;
            let se = (rate * (1.0 - rate) / probes as f64).sqrt();
            assert!(fp <= rate + 3.0 * se, "rate {rate}: measured {fp} ({:?})", f.geometry());
            // And not absurdly below it: the sizing is not wasting bits.
            assert!(fp >= rate * 0.5, "rate {rate}: measured {fp} ({:?})", f.geometry());
        }
    }

    /// Blocked filters: every item in one word (or block), a repeat add is
    /// not new, the count estimate is close, and batches agree with single
    /// calls on both the item-by-item and the pipelined path.
    #[test]
    fn blocked_items_batches_and_count() {
        for (cap, rate) in [(5000u64, 0.01), (5000, 0.001), (12_000_000, 0.01)] {
            let a = blocked(cap, rate);
            let b = blocked(cap, rate);
            assert_eq!(a.layout(), Layout::Blocked);
            let items = keys("blk", 30_000, 20_000);
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            let single: Vec<u8> = refs.iter().map(|i| a.add(i).unwrap() as u8).collect();
            let mut batch = vec![9u8; refs.len()];
            let n = b.add_many(&refs, Some(&mut batch)).unwrap();
            assert_eq!(single, batch, "cap {cap} rate {rate}");
            assert_eq!(n, batch.iter().map(|&x| x as u64).sum::<u64>());
            assert!(a.contains_many(&refs, None) == refs.len() as u64, "a false negative");
            let probe = keys("other", 40_000, 40_000);
            let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
            let mut res = vec![9u8; prefs.len()];
            b.contains_many(&prefs, Some(&mut res));
            let expect: Vec<u8> = prefs.iter().map(|p| b.contains(p) as u8).collect();
            assert_eq!(res, expect);
            assert_eq!(a.serialize().unwrap(), b.serialize().unwrap());
            if cap == 5000 {
                continue;
            }
            // 20 000 distinct items in a large filter: the estimate is close.
            let c = a.count() as f64;
            assert!((c - 20_000.0).abs() < 200.0, "count {c}");
        }
        let f = blocked(1000, 0.01);
        f.add(b"hello").unwrap();
        let set = set_positions(&f);
        assert!(!set.is_empty() && set.len() <= f.geometry().k as usize);
        assert_eq!(set[0] / 64, set[set.len() - 1] / 64, "bits in one word: {set:?}");
        let f = blocked(1000, 0.0001);
        assert_eq!(f.geometry().scheme, crate::math::scheme::Scheme::Block128);
        f.add(b"hello").unwrap();
        let set = set_positions(&f);
        assert_eq!(set[0] / 128, set[set.len() - 1] / 128, "bits in one block: {set:?}");
        assert_eq!(f.count(), 1);
    }

    #[test]
    fn blocked_set_operations_and_layout_mismatch() {
        let a = blocked(1000, 0.01);
        let b = blocked(1000, 0.01);
        a.add(b"x").unwrap();
        b.add(b"y").unwrap();
        a.merge(&b).unwrap();
        assert!(a.contains(b"x") && a.contains(b"y"));
        let c = blocked(1000, 0.01);
        c.add(b"y").unwrap();
        a.intersect(&c).unwrap();
        assert!(a.contains(b"y") && !a.contains(b"x"));
        let before = a.bits_set();
        a.invert().unwrap();
        assert_eq!(a.bits_set(), a.geometry().m - before);
        a.invert().unwrap();
        assert!(a.contains(b"y"));
        let s = anon(1000, 0.01);
        assert!(!a.is_compatible(&s) && !s.is_compatible(&a));
        for e in [a.merge(&s).unwrap_err(), s.intersect(&a).unwrap_err()] {
            assert_eq!(e.kind, ErrorKind::Mismatch);
            assert!(e.msg.starts_with("layout mismatch ("), "{}", e.msg);
        }
        a.clear().unwrap();
        assert_eq!(a.bits_set(), 0);
        assert!(a.add(b"z").unwrap());
        a.freeze().unwrap();
        assert_eq!(a.add(b"q").unwrap_err().kind, ErrorKind::Frozen);
        assert!(a.contains(b"z"));
    }
    fn windowed(window_ns: Option<u64>, g: u32, layout: Option<Layout>) -> Filter {
        let opts = Options {
            layout,
            window: Some(WindowOptions {
                window_ns,
                generations: g,
            }),
            ..Options::default()
        };
        Filter::new_anonymous(1000, 0.01, opts).unwrap()
    }

    /// Stepped by `rotate` only: an item added between two rotations is
    /// seen through `g - 1` more and forgotten at the `g`th; re-adding it
    /// starts its life over; one add per life is new. Both layouts.
    #[test]
    fn windowed_rotate_retention_is_exact() {
        for layout in [None, Some(Layout::Blocked)] {
            for g in [2u32, 4, 16] {
                let f = windowed(None, g, layout);
                assert_eq!(f.mmap_size(), format::ring_layout(f.geometry().m, g + 1).total);
                assert!(f.add(b"a").unwrap());
                assert!(!f.add(b"a").unwrap());
                for k in 1..=3 * g {
                    f.rotate().unwrap();
                    let alive = k % g != 0;
                    assert_eq!(f.contains(b"a"), alive, "g {g} after {k} rotations");
                    if !alive {
                        assert!(f.add(b"a").unwrap(), "g {g}: forgotten, so new again");
                    }
                }
                // Re-adding extends: added, then re-added after g - 1 steps.
                let f = windowed(None, g, layout);
                f.add(b"b").unwrap();
                for _ in 0..g - 1 {
                    f.rotate().unwrap();
                }
                assert!(!f.add(b"b").unwrap());
                for k in 1..g {
                    f.rotate().unwrap();
                    assert!(f.contains(b"b"), "g {g}: re-added, gone after {k}");
                }
                f.rotate().unwrap();
                assert!(!f.contains(b"b"), "g {g}: kept past g steps of its re-add");
                let w = f.window_stats().unwrap();
                assert_eq!((w.window_ns, w.generations, w.current_start_ns), (None, g, None));
                assert_eq!(w.current, 2 * g as u64 - 1, "one count per step");
            }
        }
    }

    /// With real time: a 200 ms window, g = 2 and 4: seen within the window,
    /// forgotten by window * g / (g - 1) plus one period.
    #[test]
    fn windowed_real_time() {
        for g in [2u32, 4] {
            let f = windowed(Some(200_000_000), g, None);
            let (lower, upper) = f.window().unwrap().retention_bounds_ns().unwrap();
            let period = f.window().unwrap().period_ns().unwrap();
            let t0 = std::time::Instant::now();
            assert!(f.add(b"x").unwrap());
            while (t0.elapsed().as_nanos() as u64) < lower * 9 / 10 {
                assert!(f.contains(b"x"), "g {g}: gone at {:?}", t0.elapsed());
                f.add(b"other").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            std::thread::sleep(std::time::Duration::from_nanos(upper + period - lower * 9 / 10));
            f.add(b"noise").unwrap();
            assert!(!f.contains(b"x"), "g {g}: kept past {:?}", t0.elapsed());
            assert!(f.add(b"x").unwrap(), "g {g}: forgotten, so new again");
            let w = f.window_stats().unwrap();
            assert!(w.current >= g as u64, "g {g}: steps taken {}", w.current);
        }
    }

    /// A file keeps its window when reopened; another window is refused;
    /// a plain filter's operations on all bits are refused.
    #[test]
    fn windowed_file_reopens_and_refuses() {
        let dir = region::scratch_dir("win");
        let path = dir.join("w.bf");
        let wo = WindowOptions {
            window_ns: Some(3_000_000_000),
            generations: 4,
        };
        let opts = Options {
            mode: 0o600,
            window: Some(wo),
            ..Options::default()
        };
        let a = Filter::open_file(&path, 1000, 0.01, opts).unwrap();
        assert!(a.add(b"kept").unwrap());
        let w = a.window().unwrap();
        drop(a);
        let b = Filter::open_file(&path, 1000, 0.01, Options::default()).unwrap();
        assert_eq!(b.window(), Some(w));
        assert!(b.contains(b"kept"));
        for other in [
            WindowOptions {
                window_ns: Some(2_000_000_000),
                generations: 4,
            },
            WindowOptions {
                window_ns: Some(3_000_000_000),
                generations: 3,
            },
        ] {
            let o = Options {
                window: Some(other),
                ..Options::default()
            };
            let e = Filter::open_file(&path, 1000, 0.01, o).err().unwrap();
            assert_eq!(e.kind, ErrorKind::Mismatch);
            assert!(
                e.msg
                    .starts_with("window mismatch (the filter has window 3s, 4 generations"),
                "{}",
                e.msg
            );
        }
        let plain = anon(1000, 0.01);
        let e = plain.rotate().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Arg);
        for e in [
            b.merge(&plain).unwrap_err(),
            plain.merge(&b).unwrap_err(),
            b.invert().unwrap_err(),
        ] {
            assert!(e.msg.ends_with("is not supported on a windowed filter"), "{}", e.msg);
        }
        b.clear().unwrap();
        assert!(!b.contains(b"kept"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A single `add` (its common case under the slot mark alone) and an
    /// item of `add_many` (the batch's path) answer alike, step after step,
    /// in both blocked layouts and the standard one.
    #[test]
    fn windowed_single_adds_answer_as_batches() {
        use crate::math::scheme::Scheme;
        for (layout, rate, scheme) in [
            (Layout::Standard, 0.01, Scheme::Standard),
            (Layout::Blocked, 0.01, Scheme::Word64),
            (Layout::Blocked, 0.001, Scheme::Block128),
        ] {
            let make = || {
                let window = Some(WindowOptions {
                    window_ns: None,
                    generations: 3,
                });
                let opts = Options {
                    layout: Some(layout),
                    window,
                    ..Options::default()
                };
                Filter::new_anonymous(1000, rate, opts).unwrap()
            };
            let (one, many) = (make(), make());
            assert_eq!(one.geometry().scheme, scheme);
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for round in 0..40 {
                // Items drawn from a small pool: some new, some in older
                // generations, some in the current one.
                let items: Vec<Vec<u8>> = (0..50)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        format!("item-{}", x % 120).into_bytes()
                    })
                    .collect();
                let refs: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
                let mut got = vec![0u8; refs.len()];
                many.add_many(&refs, Some(&mut got)).unwrap();
                let singles: Vec<u8> = refs.iter().map(|i| one.add(i).unwrap() as u8).collect();
                assert_eq!(singles, got, "{scheme:?}, round {round}");
                if round % 3 == 2 {
                    one.rotate().unwrap();
                    many.rotate().unwrap();
                }
            }
            assert_eq!(all_words(&one), all_words(&many), "{scheme:?}: the same bits");
        }
    }

    /// 128-bit blocks in a windowed filter: every generation's blocks are
    /// 16-byte aligned and the compare-and-swap lands where it should.
    #[test]
    fn windowed_block128() {
        let opts = Options {
            layout: Some(Layout::Blocked),
            window: Some(WindowOptions {
                window_ns: None,
                generations: 4,
            }),
            ..Options::default()
        };
        let f = Filter::new_anonymous(1000, 0.001, opts).unwrap();
        assert_eq!(f.geometry().scheme, crate::math::scheme::Scheme::Block128);
        for round in 0..6u32 {
            let new = (0..500u32)
                .filter(|i| f.add(&(round * 1000 + i).to_le_bytes()).unwrap())
                .count();
            // At most a few false positives among 500 at 0.001.
            assert!(new >= 495, "round {round}: {new} new");
            f.rotate().unwrap();
        }
        assert!(
            (5000..5500u32).all(|i| f.contains(&i.to_le_bytes())),
            "no false negative"
        );
        let kept = (1000..1500u32).filter(|i| f.contains(&i.to_le_bytes())).count();
        assert!(kept <= 5, "round 1 forgotten after 5 rotations: {kept} left");
    }

    /// A blocked windowed filter is open to lock-free adds between steps;
    /// a step closes it, steps, and opens it again. Left closed (as by a
    /// stepper killed in between), the next add opens it, unless a stripe
    /// held as by a stopped adder keeps the opening waiting: adds then go
    /// through their stripes and answer as ever.
    #[test]
    fn windowed_blocked_steps_close_and_open_the_view_word() {
        let f = windowed(None, 3, Some(Layout::Blocked));
        let closed = || View::closed(f.view_word().load(Ordering::SeqCst));
        assert!(f.add(b"a").unwrap());
        assert!(!closed(), "open after an add");
        f.rotate().unwrap();
        assert!(!closed(), "open after a step");
        assert_eq!(f.window_stats().unwrap().current, 1);
        f.view_word().fetch_or(View::CLOSED, Ordering::SeqCst);
        assert_eq!(f.window_stats().unwrap().current, 1, "the flag is not part of the view");
        assert!(f.contains(b"a"));
        assert!(f.add(b"b").unwrap());
        assert!(!closed(), "opened by the next add");
        // Closed again, with a stripe held: the opening gives up after
        // DRAIN_LIMIT, and adds answer through their stripes.
        f.view_word().fetch_or(View::CLOSED, Ordering::SeqCst);
        let c = f.claim().unwrap().c;
        let s = f.window_stripe(&hash_item(f.seed, b"held"));
        assert!(f.shared().begin_add(s, c));
        assert!(!f.add(b"a").unwrap(), "present");
        assert!(closed(), "still closed");
        for i in 0..100u32 {
            let b = i.to_le_bytes();
            if f.window_stripe(&hash_item(f.seed, &b)) != s {
                assert!(f.add(&b).unwrap() || f.contains(&b));
                assert!(!f.add(&b).unwrap(), "{i} added once");
            }
        }
        assert!(closed(), "left alone for DRAIN_BACKOFF");
        f.shared().end_add(s);
        f.step_after.set(None);
        assert!(f.add(b"c").unwrap());
        assert!(!closed(), "opened once the stripe is free");
    }

    /// A lock-free add in flight (its slot's mark, held as by a stopped
    /// process) keeps a blocked filter's step from landing: the step
    /// closes the filter, gives up after DRAIN_LIMIT and leaves it closed
    /// with the view unchanged; adds go on through their stripes. Once the
    /// mark is gone the step lands and the filter opens.
    #[test]
    fn windowed_blocked_step_waits_for_lockfree_adds() {
        let f = windowed(None, 3, Some(Layout::Blocked));
        assert!(f.add(b"a").unwrap());
        let sh = f.shared();
        let other = sh.claim_slot(7, false).unwrap();
        let o = f.control_and_slot(other).unwrap();
        assert!(o.mark(), "a mark as a lock-free adder sets it");
        let c = f.claim().unwrap().c;
        let w = f.win.unwrap().w;
        let t = std::time::Instant::now();
        assert!(!f.try_step(&w, now_ns(), true, c), "no step past a lock-free add");
        assert!(t.elapsed() >= DRAIN_LIMIT, "it waited {:?}", t.elapsed());
        assert!(View::closed(f.view_word().load(Ordering::SeqCst)));
        assert_eq!(f.window_stats().unwrap().current, 0);
        assert!(f.add(b"b").unwrap());
        assert!(!f.add(b"a").unwrap());
        o.unmark();
        f.step_after.set(None);
        assert!(f.try_step(&w, now_ns(), true, c));
        assert_eq!(f.window_stats().unwrap().current, 1);
        assert!(!View::closed(f.view_word().load(Ordering::SeqCst)));
        assert!(!f.add(b"b").unwrap(), "b in the previous generation");
        sh.release_slot(other);
    }

    /// An adder stopped holding its stripe: the cleaner gives up after
    /// DRAIN_LIMIT, adds go on (paying that once per DRAIN_BACKOFF), steps
    /// wait for the spare; once the stripe is free the next clear and step
    /// happen.
    #[test]
    fn windowed_stopped_adder_holds_up_no_adder() {
        let f = windowed(None, 3, None);
        let c = f.claim().unwrap().c;
        let s = f.window_stripe(&hash_item(f.seed, b"held"));
        assert!(f.shared().begin_add(s, c), "a stripe held as by a stopped adder");
        // The first step publishes the clean spare at once; clearing the
        // next one gives up on the held stripe.
        let t = std::time::Instant::now();
        f.rotate().unwrap();
        assert!(t.elapsed() < DRAIN_LIMIT * 10, "rotate took {:?}", t.elapsed());
        assert!(f.spare_dirty(&f.win.unwrap().w), "the spare is left dirty");
        let t = std::time::Instant::now();
        // Items of other stripes (the held one is this thread's own).
        let items: Vec<[u8; 4]> = (0..2000u32)
            .map(|i| i.to_le_bytes())
            .filter(|b| f.window_stripe(&hash_item(f.seed, b)) != s)
            .take(1000)
            .collect();
        for b in &items {
            f.add(b).unwrap();
        }
        assert!(t.elapsed() < DRAIN_LIMIT * 10, "1000 adds took {:?}", t.elapsed());
        f.shared().end_add(s);
        f.clean_after.set(None);
        f.add(b"held").unwrap();
        assert!(!f.spare_dirty(&f.win.unwrap().w), "cleared once the stripe is free");
        f.rotate().unwrap();
        assert_eq!(f.window_stats().unwrap().current, 2);
    }

    /// After a step, each add clears one slice of the spare, going on from
    /// where the last stopped, and the spare is clean (every word 0) after
    /// as many adds as it has slices. A generation of 4 MiB: 64 slices.
    #[test]
    fn windowed_adds_clear_the_spare_a_slice_each() {
        let opts = Options {
            window: Some(WindowOptions {
                window_ns: None,
                generations: 2,
            }),
            ..Options::default()
        };
        let f = Filter::new_anonymous(3_000_000, 0.01, opts).unwrap();
        let win = f.win.unwrap();
        let slices = win.gen_words.div_ceil(SPARE_SLICE_WORDS);
        assert!(slices >= 32, "{} words: {slices} slices", win.gen_words);
        let old: Vec<[u8; 8]> = (0..200_000u64).map(|i| i.to_le_bytes()).collect();
        f.rotate().unwrap();
        for b in &old {
            f.add(b).unwrap();
        }
        f.rotate().unwrap(); // `old` in the older generation
        for b in &old[..1000] {
            f.add(b).unwrap(); // and these in the current one too
        }
        // Step as a timed filter's add does: `old`'s generation becomes
        // the spare, and nothing is cleared yet.
        assert!(f.try_step(&win.w, now_ns(), true, f.claim().unwrap().c));
        let w = &win.w;
        let spare = w.spare(f.load_view(w));
        let dirty = |f: &Filter| {
            f.generation(&win, spare)
                .iter()
                .filter(|x| x.load(Ordering::Relaxed) != 0)
                .count()
        };
        assert!(dirty(&f) > 0);
        let cursor = f.win_word(format::OFF_CURSOR);
        for n in 1..slices {
            f.add(format!("new-{n}").as_bytes()).unwrap();
            assert!(f.spare_dirty(w), "after {n} adds of {slices}");
            assert_eq!(
                cursor.load(Ordering::Relaxed) as usize,
                n * SPARE_SLICE_WORDS,
                "add {n}"
            );
        }
        f.add(b"last").unwrap();
        assert!(!f.spare_dirty(w), "clean after {slices} adds");
        assert_eq!(dirty(&f), 0);
        assert!(f.contains(&old[0]), "added again: in the older generation");
        assert!(!f.contains(&old[1000]), "forgotten");
    }

    /// A write that finds a step due and the spare not clear yet (too few
    /// writes since the last step to clear it a slice each) clears the
    /// rest and steps before it adds: an idle filter's expired current
    /// generation is never written again (its items would come back), and
    /// items are forgotten on time however few the writes.
    #[test]
    fn a_due_step_clears_the_rest_of_the_spare_first() {
        let period = 200_000_000u64; // ns
        let opts = Options {
            window: Some(WindowOptions {
                window_ns: Some(period),
                generations: 2,
            }),
            ..Options::default()
        };
        let sleep_to = |t: u64| {
            let now = now_ns();
            if t > now {
                std::thread::sleep(std::time::Duration::from_nanos(t - now));
            }
        };
        // The current generation expired: written at grid q0, nothing since.
        let f = Filter::new_anonymous(300_000, 0.01, opts).unwrap();
        let win = f.win.as_ref().unwrap();
        assert!(win.gen_words > 2 * SPARE_SLICE_WORDS);
        let w = &win.w;
        f.add(b"x").unwrap();
        sleep_to(w.epoch_ns() + period + period / 4);
        f.add(b"z").unwrap(); // steps; one slice of the new spare cleared
        assert!(f.spare_dirty(w));
        let z_at = now_ns();
        // Forgotten by z's time plus g periods (plus a tick of the clock).
        sleep_to(z_at + 2 * period + period / 2);
        assert!(!f.contains(b"z"), "expired");
        let before = f.load_view(w);
        assert!(f.add(b"y").unwrap());
        assert!(!f.contains(b"z"), "brought back by another item's add");
        assert_ne!(f.load_view(w), before, "no step");
        assert!(f.add(b"z").unwrap(), "z new again");

        // A due step, the current generation still visible: g = 3.
        let opts = Options {
            window: Some(WindowOptions {
                window_ns: Some(2 * period),
                generations: 3,
            }),
            ..Options::default()
        };
        let f = Filter::new_anonymous(300_000, 0.01, opts).unwrap();
        let w = &f.win.as_ref().unwrap().w;
        let e = w.epoch_ns();
        f.add(b"z").unwrap(); // grid 0
        sleep_to(e + period + period / 4);
        f.add(b"a").unwrap(); // steps; the spare left dirty
        assert!(f.spare_dirty(w));
        for k in 2..6u64 {
            // One write per period, too few to clear the spare by slices.
            sleep_to(e + k * period + period / 4);
            let before = f.load_view(w);
            f.add(format!("w{k}").as_bytes()).unwrap();
            assert_ne!(f.load_view(w), before, "period {k}: the step was deferred");
            assert_eq!(f.contains(b"z"), k < 3, "period {k}");
        }
    }

    /// An add of an item the current generation holds takes no stripe: it
    /// answers while another adder (stopped, as it were) holds the item's
    /// stripe. A `rotate` that needs the spare cleared waits for that
    /// adder, and goes on once it is released.
    #[test]
    fn windowed_present_add_takes_no_stripe_and_rotate_waits_for_a_stopped_adder() {
        let dir = region::scratch_dir("win-stripe");
        let path = dir.join("w.bf");
        let opts = Options {
            mode: 0o600,
            window: Some(WindowOptions {
                window_ns: None,
                generations: 3,
            }),
            ..Options::default()
        };
        let f = Filter::open_file(&path, 1000, 0.01, opts).unwrap();
        // Another thread's own handle of the same filter.
        let other = |what: fn(&Filter) -> Result<bool>| {
            let path = path.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let g = Filter::open_file(&path, 1000, 0.01, Options::default()).unwrap();
                let _ = tx.send(what(&g).map_err(|e| e.to_string()));
            });
            rx
        };
        f.add(b"held").unwrap();
        let c = f.claim().unwrap().c;
        let s = f.window_stripe(&hash_item(f.seed, b"held"));
        assert!(f.shared().begin_add(s, c), "the stripe held as by a stopped adder");
        let r = other(|g| g.add(b"held")).recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(r, Ok(Ok(false)), "answered, not new, with the stripe held");
        // Make the spare dirty, as an add's step does.
        let w = f.win.unwrap().w;
        assert!(f.try_step(&w, now_ns(), true, f.claim().unwrap().c));
        assert!(f.spare_dirty(&w));
        let rx = other(|g| g.rotate().map(|_| true));
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300)).is_err(),
            "rotate waits for the stopped adder"
        );
        f.shared().end_add(s);
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)),
            Ok(Ok(true)),
            "and goes on after"
        );
        assert_eq!(f.window_stats().unwrap().current, 2);
        drop(f);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn win_items(step: u32, n: u32) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("step {step} item {i}").into_bytes()).collect()
    }

    /// What a windowed filter answers for every item of `steps` steps.
    fn answers(f: &Filter, steps: u32, n: u32) -> Vec<bool> {
        (0..steps)
            .flat_map(|s| win_items(s, n))
            .map(|i| f.contains(&i))
            .collect()
    }

    /// Round trips of windowed filters (g = 2, 4, 16; both layouts; stepped
    /// by rotate only and timed; anonymous, file and memfd): the copy has
    /// the same window, epoch, view and stats and answers the same for
    /// every item; stepped alike, the two forget every item after exactly
    /// the same number of steps; the copy serializes to the same bytes.
    #[test]
    fn windowed_round_trip_keeps_answers_and_retention() {
        let dir = region::scratch_dir("winser");
        let mut case = 0;
        for layout in [None, Some(Layout::Blocked)] {
            for g in [2u32, 4, 16] {
                for window_ns in [None, Some(3600 * 1_000_000_000)] {
                    case += 1;
                    let f = windowed(window_ns, g, layout);
                    let steps = g + 2;
                    for s in 0..steps {
                        for i in win_items(s, 20) {
                            f.add(&i).unwrap();
                        }
                        if s + 1 < steps {
                            f.rotate().unwrap();
                        }
                    }
                    let bytes = f.serialize().unwrap();
                    assert_eq!(bytes.len() as u64, crate::shm::serial::windowed_len(f.geometry().m, g));
                    let path = dir.join(format!("c{case}"));
                    let to = match case % 3 {
                        0 => Target::Anonymous,
                        1 => Target::File(&path, 0o600),
                        _ => Target::Memfd(b"copy"),
                    };
                    let d = Filter::deserialize_to(&bytes, to, None, None).unwrap();
                    assert_eq!(d.window(), f.window(), "case {case}: window and epoch");
                    assert_eq!(d.window_stats(), f.window_stats(), "case {case}");
                    assert_eq!(d.window_stats().unwrap().current, steps as u64 - 1);
                    assert_eq!((d.geometry(), d.seed()), (f.geometry(), f.seed()));
                    assert_eq!(d.bits_set(), f.bits_set(), "case {case}");
                    let before = answers(&f, steps, 20);
                    assert_eq!(answers(&d, steps, 20), before, "case {case}");
                    // Only the last g steps' items are there.
                    let alive = before.iter().filter(|&&b| b).count();
                    assert!(
                        alive >= 20 * g as usize && alive < 20 * (g as usize + 1),
                        "case {case}: {alive}"
                    );
                    assert_eq!(d.serialize().unwrap(), bytes, "case {case}: a second round trip");
                    for k in 1..=g {
                        f.rotate().unwrap();
                        d.rotate().unwrap();
                        let a = answers(&f, steps, 20);
                        assert_eq!(answers(&d, steps, 20), a, "case {case}: after {k} more steps");
                        let left = a.iter().filter(|&&b| b).count();
                        assert!(left <= 20 * (g - k) as usize + 2, "case {case}: {left} left after {k}");
                    }
                    // Both take new items the same way afterwards.
                    for i in win_items(100, 20) {
                        assert_eq!(d.add(&i).unwrap(), f.add(&i).unwrap());
                    }
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The options against windowed bytes: the same window (or rotate-only
    /// with the same generations) is accepted; another is a window
    /// mismatch; plain bytes with a window give a windowed filter whose
    /// current generation holds their items, forgotten after g steps.
    #[test]
    fn windowed_deserialize_options() {
        let timed = windowed(Some(3_000_000_000), 4, None);
        timed.add(b"t").unwrap();
        let manual = windowed(None, 3, None);
        manual.add(b"m").unwrap();
        let wo = |window_ns, generations| Some(WindowOptions { window_ns, generations });
        let (tb, mb) = (timed.serialize().unwrap(), manual.serialize().unwrap());
        let ok = Filter::deserialize_to(&tb, Target::Anonymous, None, wo(Some(3_000_000_000), 4)).unwrap();
        assert!(ok.contains(b"t"));
        let ok = Filter::deserialize_to(&mb, Target::Anonymous, None, wo(None, 3)).unwrap();
        assert!(ok.contains(b"m"));
        for (bytes, other, has) in [
            (&tb, wo(Some(2_000_000_000), 4), "window 3s, 4 generations"),
            (&tb, wo(Some(3_000_000_000), 3), "window 3s, 4 generations"),
            (&tb, wo(None, 4), "window 3s, 4 generations"),
            (&mb, wo(None, 4), "manual steps, 3 generations"),
            (&mb, wo(Some(3_000_000_000), 3), "manual steps, 3 generations"),
        ] {
            let e = Filter::deserialize_to(bytes, Target::Anonymous, None, other)
                .err()
                .unwrap();
            assert_eq!(e.kind, ErrorKind::Mismatch);
            assert!(
                e.msg
                    .starts_with(&format!("window mismatch (the bytes have {has}, not ")),
                "{}",
                e.msg
            );
        }
        let e = Filter::deserialize_to(&tb, Target::Anonymous, Some(Layout::Blocked), None)
            .err()
            .unwrap();
        assert!(e.msg.starts_with("layout mismatch"), "{}", e.msg);

        let plain = anon(1000, 0.01);
        plain.add(b"p").unwrap();
        let pb = plain.serialize().unwrap();
        for g in [2u32, 4] {
            let d = Filter::deserialize_to(&pb, Target::Anonymous, None, wo(None, g)).unwrap();
            assert_eq!(d.window().unwrap().generations(), g);
            assert_eq!(d.geometry(), plain.geometry());
            assert_eq!(d.bits_set(), plain.bits_set(), "the bits are the current generation's");
            assert!(!d.add(b"p").unwrap(), "seen");
            for k in 1..g {
                d.rotate().unwrap();
                assert!(d.contains(b"p"), "g {g}: gone after {k} steps");
            }
            d.rotate().unwrap();
            assert!(!d.contains(b"p"), "g {g}: kept past {g} steps");
        }
        let d = Filter::deserialize_to(&pb, Target::Anonymous, None, wo(Some(3_000_000_000), 4)).unwrap();
        let w = d.window().unwrap();
        assert_eq!(w.window_ns(), Some(3_000_000_000));
        let now = now_ns();
        assert!(
            w.epoch_ns() <= now && now - w.epoch_ns() < 60_000_000_000,
            "epoch0 is now"
        );
        assert!(d.contains(b"p"));
        // Plain bytes, no window: a plain filter as before.
        assert!(Filter::deserialize_to(&pb, Target::Anonymous, None, None)
            .unwrap()
            .window()
            .is_none());
    }

    /// A copy taken while another handle steps the filter as fast as it
    /// can is always of one view: with items of step `j` added right after
    /// the step to `j`, the copy at start `m` holds those of steps
    /// `m - g + 1 .. m - 1` complete (step 0 has none) and none of step
    /// `m - g`. A writable
    /// handle (which holds the cleaner) always copies; a read-only one
    /// (which retries) may give up on a filter stepping this fast.
    #[test]
    fn windowed_copy_is_consistent_while_stepping() {
        use std::os::fd::AsRawFd;
        let g = 3u32;
        let opts = Options {
            window: Some(WindowOptions {
                window_ns: None,
                generations: g,
            }),
            ..Options::default()
        };
        // 2 MiB generations: a copy takes long enough for steps to land.
        let f = Filter::new_memfd("steps", 1_000_000, 0.001, opts).unwrap();
        let ro_file = std::fs::File::open(format!("/proc/self/fd/{}", f.memfd())).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        // Stops the stepping thread however the checks end (a failed one
        // panics inside the scope, which then waits for it).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let fd = f.memfd();
        std::thread::scope(|sc| {
            let _stop = Stop(&stop);
            sc.spawn(|| {
                let w = Filter::from_fd(fd).unwrap();
                let mut j = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    w.rotate().unwrap();
                    j += 1;
                    for i in win_items(j, 10) {
                        w.add(&i).unwrap();
                    }
                    // A step every fraction of a copy's time: steps land
                    // during copies, yet the copier is not starved.
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            });
            let ro = Filter::from_fd(ro_file.as_raw_fd()).unwrap();
            assert!(ro.readonly());
            let mut checked = 0;
            let mut busy = 0;
            for round in 0..100 {
                let h = if round % 2 == 0 { &f } else { &ro };
                let bytes = match h.serialize() {
                    Ok(b) => b,
                    Err(e) => {
                        // A read-only handle cannot hold the cleaner word;
                        // a writable one that did not get it within its
                        // wait (a loaded machine, this thread stepping
                        // non-stop) copies as a read-only one does. Either
                        // may give up, saying so.
                        assert_eq!(e.kind, ErrorKind::Busy, "round {round}: {}", e.msg);
                        busy += 1;
                        continue;
                    }
                };
                let d = Filter::deserialize(&bytes, None, 0o600).unwrap();
                let m = d.window_stats().unwrap().current as u32;
                for s in m.saturating_sub(g - 1).max(1)..m {
                    for i in win_items(s, 10) {
                        assert!(d.contains(&i), "round {round}: start {m}, step {s} incomplete");
                    }
                }
                if m >= g {
                    let gone = win_items(m - g, 10).iter().filter(|i| d.contains(i)).count();
                    assert!(gone <= 1, "round {round}: start {m}: step {} kept", m - g);
                }
                checked += 1;
            }
            // Most copies are checked (on an idle machine, every one
            // through the writable handle).
            assert!(checked >= 25, "{checked} copies checked, {busy} busy");
        });
    }

    /// Generations larger than the caches: batches go through the
    /// prefetching pipeline (adds and queries), and answer item by item as
    /// single calls do, across rotations, in both layouts and both block
    /// widths, for lengths around the pipeline's stages and hash chunks.
    #[test]
    fn windowed_pipelined_batches_match_single_calls() {
        for (layout, rate) in [
            (None, 0.01),
            (Some(Layout::Blocked), 0.01),
            (Some(Layout::Blocked), 0.0001),
        ] {
            let make = || {
                let opts = Options {
                    layout,
                    window: Some(WindowOptions {
                        window_ns: None,
                        generations: 3,
                    }),
                    ..Options::default()
                };
                Filter::new_anonymous(4_000_000, rate, opts).unwrap()
            };
            let (one, many) = (make(), make());
            assert!(one.geometry().bytes() >= PIPELINE_MIN_BYTES && one.pipelines(2 * DISTANCE));
            // Four rounds of 6000 adds (half of them repeats of the round
            // before), a rotation after each: the oldest round is forgotten.
            let mut probe: Vec<Vec<u8>> = Vec::new();
            for round in 0..4u32 {
                let items: Vec<Vec<u8>> = (0..6000u32)
                    .map(|i| format!("r{} {}", round - (i % 2 == 1 && round > 0) as u32, i / 2).into_bytes())
                    .collect();
                let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
                let single: Vec<u8> = refs.iter().map(|i| one.add(i).unwrap() as u8).collect();
                let mut batch = vec![9u8; refs.len()];
                let n = many.add_many(&refs, Some(&mut batch)).unwrap();
                assert_eq!(batch, single, "{layout:?} {rate} round {round}");
                assert_eq!(n, single.iter().map(|&x| x as u64).sum::<u64>());
                assert!(n > 2000 && n < 6000, "{layout:?} round {round}: {n} new");
                one.rotate().unwrap();
                many.rotate().unwrap();
                probe.extend(items);
                probe.extend((0..500u32).map(|i| format!("never {round} {i}").into_bytes()));
            }
            let prefs: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
            let expect: Vec<u8> = prefs.iter().map(|p| one.contains(p) as u8).collect();
            let present = expect.iter().filter(|&&x| x == 1).count();
            assert!(
                present > 5000 && present < prefs.len() - 5000,
                "{layout:?}: {present} present"
            );
            for len in [
                0,
                1,
                2 * DISTANCE - 1,
                2 * DISTANCE,
                2 * DISTANCE + 1,
                1023,
                1024,
                1025,
                prefs.len(),
            ] {
                let mut res = vec![9u8; len];
                let n = many.contains_many(&prefs[..len], Some(&mut res));
                assert_eq!(res, expect[..len], "{layout:?} {rate}: batch of {len}");
                assert_eq!(n, expect[..len].iter().map(|&x| x as u64).sum::<u64>());
            }
        }
    }

    /// A windowed `contains_many` answers as `contains` item by item, in
    /// groups and across group ends, both layouts, with generations of
    /// different ages (and items of none).
    #[test]
    fn windowed_contains_many_answers_as_contains() {
        for layout in [None, Some(Layout::Blocked)] {
            let f = windowed(None, 4, layout);
            let items: Vec<Vec<u8>> = (0..1000u32).map(|i| format!("item {i}").into_bytes()).collect();
            for (round, chunk) in items.chunks(200).enumerate() {
                for it in chunk.iter().step_by(2) {
                    f.add(it).unwrap();
                }
                if round < 4 {
                    f.rotate().unwrap();
                }
            }
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            let one: Vec<u8> = refs.iter().map(|it| f.contains(it) as u8).collect();
            let mut many = vec![9u8; refs.len()];
            let n = f.contains_many(&refs, Some(&mut many));
            assert_eq!(many, one, "{layout:?}");
            assert_eq!(n, one.iter().map(|&x| x as u64).sum::<u64>());
            assert!(n > 300 && n < 700, "{layout:?}: {n} present: some forgotten, some not");
            for len in [0, 1, 63, 64, 65, 129] {
                assert_eq!(
                    f.contains_many(&refs[..len], None),
                    one[..len].iter().map(|&x| x as u64).sum::<u64>()
                );
            }
        }
    }

    /// A windowed `contains_many` of a timed filter whose older generations
    /// are expired by the clock (not yet stepped out: only writes step)
    /// answers as `contains`: an expired generation's items are absent, a
    /// live older one's present. Window 3 s, g = 4: a period of 1 s, so
    /// items added in period 0 are forgotten from 4 s on, those of period 1
    /// seen until 5 s.
    #[test]
    fn windowed_contains_many_skips_generations_the_clock_expired() {
        let items = |tag: &str| -> Vec<Vec<u8>> { (0..200u32).map(|i| format!("{tag} {i}").into_bytes()).collect() };
        let (old, live, none) = (items("old"), items("live"), items("none"));
        // A run whose checks come too late for period 4 (a loaded machine)
        // proves nothing: it is run again, three times at most.
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            let until = |secs: f64| {
                let d = std::time::Duration::from_secs_f64(secs).saturating_sub(t0.elapsed());
                std::thread::sleep(d);
            };
            let fs: Vec<Filter> = [None, Some(Layout::Blocked)]
                .into_iter()
                .map(|l| windowed(Some(3_000_000_000), 4, l))
                .collect();
            for f in &fs {
                for it in &old {
                    f.add(it).unwrap();
                }
            }
            until(1.5);
            for f in &fs {
                for it in &live {
                    f.add(it).unwrap();
                }
            }
            if t0.elapsed().as_secs_f64() >= 1.9 {
                continue; // the live items missed period 1
            }
            until(4.3);
            let all: Vec<&[u8]> = old.iter().chain(&live).chain(&none).map(|v| v.as_slice()).collect();
            let answers: Vec<(Vec<u8>, Vec<u8>, u64)> = fs
                .iter()
                .map(|f| {
                    let one: Vec<u8> = all.iter().map(|it| f.contains(it) as u8).collect();
                    let mut many = vec![9u8; all.len()];
                    let n = f.contains_many(&all, Some(&mut many));
                    (one, many, n)
                })
                .collect();
            if t0.elapsed().as_secs_f64() >= 4.9 {
                continue; // the looks ran into period 5
            }
            for (f, (one, many, n)) in fs.iter().zip(&answers) {
                assert_eq!(many, one, "{:?}", f.layout());
                let count = |r: &[u8]| r.iter().filter(|&&x| x == 1).count();
                assert!(count(&many[..200]) < 10, "{:?}: expired items seen", f.layout());
                assert_eq!(count(&many[200..400]), 200, "{:?}: live items missed", f.layout());
                assert!(count(&many[400..]) < 10, "{:?}: items never added", f.layout());
                assert_eq!(*n as usize, count(many));
            }
            return;
        }
        panic!("three runs too late for their periods");
    }
}
