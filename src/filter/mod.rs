//! The filter operations over a mapped region.
//!
//! A `Filter` is one process's handle. It keeps its own copy of the geometry
//! and of every address it derives from it (doc/DESIGN.md, C6); the shared memory is
//! touched only through atomics, and the lock protocol is `sync`'s.

mod add;
mod exclusive;
mod grown;
mod plain;
mod serialize;
mod stats;
#[cfg(feature = "test-hooks")]
pub mod testing;
#[cfg(test)]
mod tests;
mod window;

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::math::geometry::Geometry;
use crate::math::hashing::ItemHash;
use crate::math::scheme::Layout;
use crate::math::window::{View, Window};
use crate::probe::{prefetch_line, with_probe, Probe, Probing};
use crate::shm::format::{self, Header, OFF_EPOCH, OFF_FLAGS, SLOTS, SLOTS_OFF, STRIPES_OFF};
use crate::shm::region::{self, Region};
use crate::sync::claims;
use crate::sync::{
    self, Claim, Control, Shared, Slot, Stripe, Taken, OVERFLOW, PENDING_CLEAR, PENDING_INTERSECT, PENDING_INVERT,
    PENDING_MERGE,
};
use crate::sys::clock::now_ns;
use crate::sys::keeper::{self, Lease};
use crate::sys::sigbus::Lost;
use crate::sys::{fork, membarrier};

pub use grown::{GrowOptions, StageStats};
pub(crate) use serialize::within_ceiling;
pub use window::{WindowOptions, WindowStats};

/// Pipeline stage distance, in items (see `Filter::pipelined`). Measured on a
/// 256 MiB filter, mostly absent items, 2-core AMD EPYC VM: with huge pages,
/// distances 4, 8 and 16 all made batches about 1.27x faster than single
/// calls, where prefetching every word of an item at once was no faster at
/// all; with 4 KiB pages each probe is a TLB miss and no scheme helped much.
const DISTANCE: usize = 8;
/// How far ahead a batch on a cache-sized filter prefetches item bytes.
const ITEM_AHEAD: usize = 8;
/// Bit arrays smaller than this are taken to stay in the caches: batches
/// on them run item by item (prefetching would only add instructions), and
/// an add prefetches its stripe line (see `add_at`). Measured on the
/// machine above, half-full filters, batches of 1000: at 2 MiB pipelining
/// made queries about 10% slower, at 4 MiB it made them 10-30% faster and
/// adds of present items 25-50% faster.
const PIPELINE_MIN_BYTES: u64 = 4 << 20;

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

/// The prefetch-ahead walk of every pipelined batch (a plain filter's,
/// a windowed filter's query, a grown filter's look over its stages):
/// `body(i)` for each item `i` of `range`, in order, in a batch of `n`;
/// before it, `rest(i + DISTANCE)` and then `first(i + 2 * DISTANCE)`
/// (those below `n`). A walk from item 0 starts with `first` of the first
/// `2 * DISTANCE` items and `rest` of the first `DISTANCE`. `first` is the
/// early stage (hash and locate an item, prefetch its first word), `rest`
/// the late one (its other words): in one bit array, in each visible
/// generation, or in each stage beyond the caches, as the caller's
/// closures say. `state` is lent to each in turn (`first` keeps an item's
/// hash there for `body`). An error of `body` ends the walk.
///
/// One loop of steps, each closure called in one place (so that each is
/// inlined): step `t` is `rest` of item `t - DISTANCE`, `first` of item
/// `t`, the body of item `t - 2 * DISTANCE`, those that exist.
#[inline(always)]
fn prefetch_ahead<S: ?Sized, E>(
    state: &mut S,
    range: std::ops::Range<usize>,
    n: usize,
    mut first: impl FnMut(&mut S, usize),
    mut rest: impl FnMut(&mut S, usize),
    mut body: impl FnMut(&mut S, usize) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    // A walk from item 0 starts with the first items' early stages; a
    // later one at the step of its first body (the stages before it were
    // the walk before's).
    let from = if range.start == 0 {
        0
    } else {
        range.start + 2 * DISTANCE
    };
    for t in from..range.end + 2 * DISTANCE {
        if t >= DISTANCE && t - DISTANCE < n {
            rest(state, t - DISTANCE);
        }
        if t < n {
            first(state, t);
        }
        if t >= 2 * DISTANCE {
            body(state, t - 2 * DISTANCE)?;
        }
    }
    Ok(())
}

/// A handle on a shared filter. Not `Sync`: one thread uses a handle (it
/// lazily claims a process slot, see `claim`); open another handle per thread.
pub struct Filter {
    region: Region,
    /// Set when a page of one of this handle's mappings was lost (another
    /// process truncated the file): every call answers with
    /// `lost_error` from then on (`sys::sigbus`).
    lost: Arc<Lost>,
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
    /// What this kind of filter has of its own.
    kind: Kind,
}

/// The kinds of filter: each one's state, and its code in a module of its
/// own (`plain`, `window`, `grown`), which the calls on items and the
/// whole-filter operations dispatch to once per call.
// A windowed filter's state stays inline, where it was a field of the
// handle, so that its adds and queries chase no pointer: a handle is one
// per filter and thread, its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Kind {
    /// One bit array, kept for good.
    Plain,
    /// Generations that a clock steps (doc/DESIGN.md, §3 windows).
    Windowed(window::Win),
    /// Stages added as it fills (doc/DESIGN.md, §3 growth).
    Grown(Box<grown::Stages>),
}

/// The bits set in `words` (loads only, Relaxed: a count).
fn bits_in(words: &[AtomicU64]) -> u64 {
    words
        .iter()
        .map(|w| w.load(Ordering::Relaxed).count_ones() as u64)
        .sum()
}

/// Whether a back-off deadline is set and still ahead.
#[inline(always)]
fn not_yet(until: Option<std::time::Instant>) -> bool {
    until.is_some_and(|t| std::time::Instant::now() < t)
}

/// The next handle's serial number (`Filter::serial`).
static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The slot a call runs under: the thread's slot for the filter, or one
/// held for this call only (any slot while the thread ends), which is given
/// back when the call ends (also on an early return).
struct Held<'a> {
    f: &'a Filter,
    c: Claim,
    /// The key the slot's word was taken under when it is given back as
    /// the call ends, else 0 (`keeper::new_key` never returns 0).
    once: u64,
    /// The overflow slot's lease, in use for this call (`Lease::enter`):
    /// one strong count of its `Arc` (`Arc::into_raw`), or null. A raw
    /// pointer rather than an `Option<Arc>`, so that the drop of every
    /// other call is one test inline with `once`, not a call to drop glue.
    lease: *const Lease,
}

impl<'a> Held<'a> {
    /// A call under the thread's recorded slot `c`.
    #[inline(always)]
    fn kept(f: &'a Filter, c: Claim, lease: Option<Arc<Lease>>) -> Held<'a> {
        Held {
            f,
            c,
            once: 0,
            lease: lease.map_or(std::ptr::null(), Arc::into_raw),
        }
    }

    /// A call under slot `t`, given back when the call ends.
    fn once(f: &'a Filter, t: Taken, lease: Option<Arc<Lease>>) -> Held<'a> {
        debug_assert!(t.key != 0);
        Held {
            once: t.key,
            ..Held::kept(f, t.claim(), lease)
        }
    }

    #[cold]
    #[inline(never)]
    fn drop_slow(&mut self) {
        // Given back while the lease is still entered: its keeper cannot
        // give the word away while the generation changes.
        if self.once != 0 {
            self.f.shared().release_slot(Taken {
                idx: self.c.idx,
                token: self.c.token,
                key: self.once,
            });
        }
        if !self.lease.is_null() {
            // SAFETY: the count Held::kept took with Arc::into_raw, given
            // back once, here.
            let l = unsafe { Arc::from_raw(self.lease) };
            l.leave();
        }
    }
}

impl Drop for Held<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // One test: both are zero in every call but the overflow slot's
        // and those of a thread that is ending.
        if self.once | self.lease as usize as u64 != 0 {
            self.drop_slow();
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
/// `rotate` that cannot fence lock-free adds): a wait that reached
/// `sync::wait_limit` says so itself.
fn no_fence(e: sync::SyncError) -> Error {
    if let sync::SyncError::Stuck(e) = e {
        return e;
    }
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
    /// A new `datasketches` filter's bits and hashes, given rather than
    /// sized from capacity and fp_rate (`Geometry::datasketches_of_size`).
    pub size: Option<(u64, u32)>,
    /// Make a new filter grow (doc/DESIGN.md, §3 growth). On an existing
    /// file the stored growth wins, and an explicit different one is
    /// refused.
    pub grow: Option<GrowOptions>,
}

impl Filter {
    /// A windowed filter's state (None: another kind).
    #[inline(always)]
    fn win(&self) -> Option<&window::Win> {
        match &self.kind {
            Kind::Windowed(win) => Some(win),
            _ => None,
        }
    }

    /// A grown filter's stages (None: another kind).
    #[inline(always)]
    fn grown(&self) -> Option<&grown::Stages> {
        match &self.kind {
            Kind::Grown(s) => Some(s),
            _ => None,
        }
    }

    /// Whether a page of this handle's mappings was lost (another process
    /// truncated the file, or removed its pages): read after the accesses
    /// a call answers for, one load.
    #[inline(always)]
    pub fn lost(&self) -> bool {
        self.lost.is_set()
    }

    /// Ok, or the error every call of a handle that lost pages gives.
    #[inline(always)]
    pub fn intact(&self) -> Result<()> {
        if self.lost() {
            return Err(self.lost_error());
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn lost_error(&self) -> Error {
        let what = "the filter file was truncated or its pages were removed by another process";
        Error::new(
            ErrorKind::Io,
            match self.region.path() {
                Some(p) => format!("{}: {what}", crate::sys::file::shown(p.to_bytes())),
                None => what.to_string(),
            },
        )
    }

    fn from_region(region: Region) -> Filter {
        let h = region.header;
        let l = region.layout();
        debug_assert!(region.len() as u64 == l.total);
        let base = region.base() as *const u8;
        // SAFETY: decode validated that the mapping is exactly l.total bytes,
        // and bits_off + m/8 == l.total, so the words are inside it.
        let bits = unsafe { base.add(l.bits_off as usize) } as *const AtomicU64;
        // A header is never both windowed and grown (`format` refuses it).
        let kind = match h.window {
            Some(w) => Kind::Windowed(window::Win::new(w, h.geometry.words(), bits)),
            None => match grown::Stages::of(&h, l.stripes, Some((bits, h.geometry.words()))) {
                Some(s) => Kind::Grown(Box::new(s)),
                None => Kind::Plain,
            },
        };
        Filter {
            lost: Arc::clone(region.lost()),
            geometry: h.geometry,
            seed: h.seed,
            probing: Probing::new(&h.geometry, l.stripes),
            words: h.geometry.words() * h.arrays() as usize,
            kind,
            stripes: l.stripes,
            base,
            bits,
            region,
            claim: Cell::new(None),
            // Relaxed: only uniqueness matters.
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Check what an existing region's header cannot vouch for: the slot
    /// table other processes wrote (the file may be anyone's). A table
    /// of junk is refused here rather than waited on at the first write.
    fn attached(self) -> Result<Filter> {
        if self.region.readonly || self.frozen() {
            return Ok(self); // takes no slot, ever
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
        let h = match opts.grow {
            Some(go) => Self::grown_header(capacity, fp_rate, layout, go, opts)?,
            None => Self::plain_header(capacity, fp_rate, layout, opts)?,
        };
        if h.geometry.scheme == crate::math::scheme::Scheme::Block128 && !crate::probe::cas128_available() {
            return Err(Error::arg(
                "this fp_rate needs 128-bit blocks, which need a 16-byte compare-and-swap this machine lacks",
            ));
        }
        Ok(h)
    }

    /// The header of a new filter that does not grow, windowed or not.
    fn plain_header(capacity: u64, fp_rate: f64, layout: Layout, opts: &Options) -> Result<Header> {
        let g = match opts.size {
            None => Geometry::for_layout(capacity, fp_rate, layout).map_err(|e| Error::arg(e.to_string()))?,
            Some(_) if layout != Layout::DataSketches => {
                return Err(Error::arg("bits and hashes are options of layout 'datasketches' only"));
            }
            Some((bits, k)) => Geometry::datasketches_of_size(bits, k, capacity, fp_rate).map_err(Error::arg)?,
        };
        let mut h = region::new_header(g, opts.seed);
        if let Some(wo) = opts.window {
            h.window = Some(window::new_window(wo)?);
        }
        Ok(h)
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
        Self::from_region(region::create_anonymous(&h)?).stages_mapped()
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
            .check_growth(opts.grow)?
            .runnable()?
            .stages_mapped()?
            .attached()
    }

    /// A filter in a new memfd. `name` is only a label: any bytes but NUL,
    /// cut to the kernel's 249; empty gives a default name.
    pub fn new_memfd(name: impl AsRef<[u8]>, capacity: u64, fp_rate: f64, opts: Options) -> Result<Filter> {
        let h = Self::header_for(capacity, fp_rate, &opts)?;
        Self::from_region(region::create_memfd(name.as_ref(), &h)?).stages_mapped()
    }

    /// Attach through a descriptor (duplicated; the caller keeps its own).
    /// A read-only descriptor, or a frozen filter, gives a query-only handle
    /// (`readonly()`: mapped `PROT_READ`, no slot, every mutator fails with
    /// `ErrorKind::ReadOnly`), also of a live filter others still change.
    pub fn from_fd(fd: i32) -> Result<Filter> {
        Self::from_region(region::open_fd(fd)?)
            .runnable()?
            .stages_mapped()?
            .attached()
    }

    /// Map a frozen filter file read-only.
    pub fn open_readonly(path: impl AsRef<std::path::Path>) -> Result<Filter> {
        Self::from_region(region::open_readonly(path_bytes(path.as_ref()))?)
            .runnable()?
            .stages_mapped()
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
        let (view, header_words) = match (h.window, state) {
            (Some(w), Some(st)) => {
                let (v, words) = window::state_words(w, st);
                (Some((w, v)), words)
            }
            _ => (None, Vec::new()),
        };
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
                let r = region::create_new_file(path_bytes(p), &h, mode, &|base, _| {
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
                    Ok(())
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
                fills: self.fill_words(),
                stages: self.grown().map(|_| self as &dyn sync::StageSet),
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
        self.held_now(|| p.contains(bits, loc))
    }

    /// Whether `holds` (loads of bits only) answers true with no exclusive
    /// operation running or run meanwhile, read as a seqlock reader.
    #[inline(always)]
    fn held_now(&self, holds: impl FnOnce() -> bool) -> bool {
        // Acquire: pairs with the Release store that ends an exclusive op.
        let e = self.epoch().load(Ordering::Acquire);
        e & 1 == 0 && holds() && {
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
            // Never the overflow slot, whose calls go through its lease
            // (claim_slow).
            Some(c) => Ok(Held {
                f: self,
                c,
                once: 0,
                lease: std::ptr::null(),
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
        let (c, lease) = match claims::lookup(id, gen) {
            Some((c, Some(l))) if !l.enter() => {
                // The keeper gave the overflow slot to a waiter between two
                // calls: give the claim back, claim anew.
                claims::drop_claim(id, c);
                self.claim_new(id, gen)?
            }
            Some((c, l)) => (Ok(c), l),
            None => self.claim_new(id, gen)?,
        };
        let (c, lease) = match c {
            Ok(c) => (c, lease),
            Err(t) => return Ok(Held::once(self, t, lease)),
        };
        // Cached after the lookup (its pruning may have taken a new
        // stamp). The overflow slot is cached with no valid ticket, so
        // that every call of it comes here and enters its lease, and the
        // handle's drop still forgets it.
        let ticket = if c.idx == OVERFLOW {
            claims::Ticket::NONE
        } else {
            claims::ticket()
        };
        self.claim.set(Some((c, ticket)));
        Ok(Held::kept(self, c, lease))
    }

    /// Claim a slot for this thread and record it in the thread's table,
    /// with the overflow slot's lease, entered for this call. A slot
    /// claimed while the thread ends is not recorded: `Err` with it, held
    /// for this call only.
    #[allow(clippy::type_complexity)]
    fn claim_new(&self, id: claims::Id, gen: u32) -> Result<(std::result::Result<Claim, Taken>, Option<Arc<Lease>>)> {
        let sh = self.shared();
        if let Err(e) = keeper::available() {
            return Err(Error::new(ErrorKind::Busy, e.to_string()));
        }
        // A full table stays full for a while: look again at most every
        // FULL_RETRY rather than look at every slot's word on every claim.
        let full = FULL_UNTIL.with(|u| not_yet(u.get()));
        let mut got = None;
        if !full {
            // Light marks for lock-free adds where every exclusive
            // operation can fence them (sync::begin_lockfree_add).
            let light = self.lockfree_adds() && membarrier::light_fences();
            match sh.claim_slot(std::process::id(), light) {
                Ok(c) => got = Some((c, None)),
                Err(_) => FULL_UNTIL.with(|u| u.set(Some(std::time::Instant::now() + FULL_RETRY))),
            }
        }
        let (c, lease) = match got {
            Some(g) => g,
            None => {
                let (c, l) = sh.claim_overflow().map_err(|e| match e {
                    sync::SyncError::Refused => Error::new(
                        ErrorKind::Busy,
                        "this process holds slots of too many filters at once (at most 2047)",
                    ),
                    sync::SyncError::Stuck(e) => e,
                    _ => Error::new(ErrorKind::Busy, "the slot table is corrupt: no slot can be taken"),
                })?;
                (c, Some(l)) // entered for this call
            }
        };
        // Not recorded when the thread is ending: held for this call only.
        if claims::insert(id, gen, c, self.serial, self.region.mapping(), lease.clone()) {
            Ok((Ok(c.claim()), lease))
        } else {
            Ok((Err(c), lease))
        }
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
}

impl Drop for Filter {
    fn drop(&mut self) {
        // Only the handle whose mapping holds the slot's mutex gives it back,
        // in the thread and process that claimed it (a forked child must not
        // free its parent's slot, and only the mutex's owner may unlock it).
        // A holder dropped in another thread leaves its slot in the claiming
        // thread's table, which keeps the mapping and gives the slot back
        // there (see `claims`).
        if let Kind::Grown(s) = &self.kind {
            self.flush_own_count(s);
        }
        if self.claim.get().is_some() {
            claims::forget(self.region.id(), fork::fork_generation(), self.serial);
        }
    }
}
