//! The shared region's layout and its header: encoding and validation over
//! plain bytes (no mapping, no I/O), so every rule is unit-testable.
//!
//! ```text
//! offset 0        header page: immutable fields + checksum (0..128),
//!                 control line (128..192): flags, epoch, exclusive word,
//!                 pending operation and its cursor;
//!                 a windowed filter's window and epoch0 + their checksum
//!                 (192..216), its step protocol's words (256..648);
//!                 a grown filter's growth facts + their checksum (192..216),
//!                 its published stage count (156) and fill words (1024..1280);
//!                 scratch (2048..2560): a resumable operation's saved chunk
//! offset 4096     process slots: SLOTS x 64 bytes, one cache line each
//! offset 69632    add stripes:   64 to 4096 x 64 bytes (`stripes_for`), one
//!                 cache line each
//! bits_off        the bit array, page aligned (2 MiB aligned when large);
//!                 a windowed filter's g + 1 arrays one after the other
//! journal_off     (not part of `total`; `journal`) while a merge or an
//!                 intersect runs: a copy of the operand's bit array, at
//!                 the first page boundary at or after `total`
//! ```
//!
//! A header is untrusted input: it may come from a file another user can
//! write. `decode` checks every field against what this library would have
//! written for the stored geometry, and the caller keeps the decoded copy
//! (doc/DESIGN.md, C6): nothing read later from the mapping decides an address.

use crate::math::geometry::Geometry;
use crate::math::growth::{Growth, MAX_STAGES};
use crate::math::scheme::Scheme;
use crate::math::window::Window;
use xxhash_rust::xxh3::xxh3_64;

pub const MAGIC: [u8; 8] = *b"BLOOMSHM";
/// 2: process slots carry a robust mutex (liveness without `/proc`).
/// 3: process slots carry a robust futex word holding a TID only, never
/// an address (doc/DESIGN.md, C8); `bloomfilter-shared upgrade` converts 2.
pub const FORMAT_VERSION: u32 = 3;
/// The format before this one's slot table, which `upgrade` converts.
pub const FORMAT_VERSION_MUTEX: u32 = 2;
/// 4: a grown filter (doc/DESIGN.md, §6 grown filters): format 3 and the
/// growth fields. Plain and windowed filters keep FORMAT_VERSION, and a
/// library that knows only 3 refuses a grown file by its version.
pub const GROWN_VERSION: u32 = 4;
/// Written in native order; reads back as this value only on a machine of
/// the same byte order.
pub const BYTE_ORDER_MARK: u32 = 0x0102_0304;
/// XXH3-128 + Kirsch–Mitzenmacher probes over a power-of-two table: the
/// standard layout's scheme. The field holds `math::scheme::Scheme::id`: 2 and 3
/// are the blocked layouts (64-bit words, 128-bit blocks).
#[cfg(test)]
pub const HASH_SCHEME: u32 = 1;

pub const PAGE: u64 = 4096;
pub const CACHE_LINE: u64 = 64;
/// Bytes of the immutable header covered by the checksum.
pub const CHECKED_LEN: usize = 112;
/// Bytes of the immutable header including its checksum.
pub const IMMUTABLE_LEN: usize = 120;

pub const OFF_FLAGS: u64 = 128;
pub const OFF_EPOCH: u64 = 132;
// The control line's other words, spelled out with the rest of the header
// (the code reaches them through `sync::Control`'s fields).
#[allow(dead_code)]
pub const OFF_EXCL: u64 = 136;
#[allow(dead_code)]
pub const OFF_PENDING: u64 = 140;
/// The journal owner word (control line, after the 8-byte cursor at 144):
/// the token of the merger or intersecter using the journal, else 0.
#[allow(dead_code)]
pub const OFF_JOURNAL: u64 = 152;
/// A grown filter's published stage count (control line, after the journal
/// word): written only when a stage is added (§8 N6).
pub const OFF_STAGES: u64 = 156;
/// Where a resumable exclusive operation keeps the chunk it is changing:
/// the second half of the header page.
pub const SCRATCH_OFF: u64 = 2048;
pub const SCRATCH_WORDS: usize = 64;

/// A windowed filter's time facts (see `window`): the window in ns (0 for
/// a filter stepped only by `rotate`), `epoch0` in ns, and their checksum.
/// Written once at creation, after the control line; the number of
/// generations is in the checksummed immutable header (bytes 104..108).
pub const WINDOW_OFF: u64 = 192;
pub const WINDOW_LEN: usize = 24;
/// Header bytes a reader copies and validates.
pub const HEADER_READ_LEN: usize = WINDOW_OFF as usize + WINDOW_LEN;
/// A grown filter's growth facts take the window facts' bytes (a grown
/// filter has no window): max_capacity (0 for none), the stage limit, a
/// zero word, their checksum. The growth factor is in the checksummed
/// immutable header (bytes 108..112).
pub const GROWTH_OFF: u64 = WINDOW_OFF;
/// A grown filter's fill words, one per stage (§8 N9), on cache lines of
/// their own (the windowed words end at 648; grown filters have none).
pub const OFF_FILL: u64 = 1024;
/// The shared words of the step protocol (`window` module docs), in the
/// header page: the view, the cleaner's token, the clear cursor (the view
/// mark it is for, and the words done), then `last[]` and `clean[]`, one
/// word per ring slot.
pub const OFF_VIEW: u64 = 256;
pub const OFF_CLEANER: u64 = 264;
pub const OFF_CURSOR_FOR: u64 = 272;
pub const OFF_CURSOR: u64 = 280;
pub const OFF_LAST: u64 = 320;
pub const OFF_CLEAN: u64 = 512;
const _: () = assert!(OFF_LAST + 8 * (Window::MAX_GENERATIONS as u64 + 1) <= OFF_CLEAN);
const _: () = assert!(OFF_CLEAN + 8 * (Window::MAX_GENERATIONS as u64 + 1) <= SCRATCH_OFF);
const _: () = assert!(HEADER_READ_LEN as u64 <= OFF_VIEW);
const _: () = assert!(OFF_FILL >= OFF_CLEAN + 8 * (Window::MAX_GENERATIONS as u64 + 1));
const _: () = assert!(OFF_FILL % CACHE_LINE == 0 && OFF_FILL + 8 * MAX_STAGES as u64 <= SCRATCH_OFF);

/// Flag bit: the filter is sealed; no mutator may run again.
pub const FLAG_FROZEN: u32 = 1;

/// Process slots (one per attached process and thread; the last one is
/// shared, a call at a time, by processes that find the others taken).
pub const SLOTS: u32 = 1024;
/// Add stripes: adders of one item serialize on the stripe of its hash. A
/// filter has between MIN_STRIPES and MAX_STRIPES of them, scaled with its
/// size (`stripes_for`): a small filter has few items to spread adders over,
/// and the memory a large table takes would dwarf its bits.
pub const MIN_STRIPES: u32 = 64;
pub const MAX_STRIPES: u32 = 4096;
pub const SLOTS_OFF: u64 = PAGE;
pub const STRIPES_OFF: u64 = SLOTS_OFF + SLOTS as u64 * CACHE_LINE;
/// End of the smallest control area (MIN_STRIPES stripes): no region is
/// smaller than this.
pub const CONTROL_END: u64 = STRIPES_OFF + MIN_STRIPES as u64 * CACHE_LINE;
/// Bit arrays of at least this many bytes start on a 2 MiB boundary so that
/// the kernel can back them with transparent huge pages.
pub const HUGE_THRESHOLD: u64 = 4 << 20;
pub const HUGE_PAGE: u64 = 2 << 20;

const _: () = assert!(CONTROL_END % PAGE == 0);
const _: () = assert!((MIN_STRIPES as u64 * CACHE_LINE) % PAGE == 0);
const _: () = assert!(STRIPES_OFF + MAX_STRIPES as u64 * CACHE_LINE <= HUGE_PAGE);

/// Stripes of a filter of `m` bits: one per 1024 bits, a power of two
/// between MIN_STRIPES and MAX_STRIPES.
pub fn stripes_for(m: u64) -> u32 {
    (m / 1024)
        .clamp(MIN_STRIPES as u64, MAX_STRIPES as u64)
        .next_power_of_two() as u32
}

/// Where everything lives for a given bit array size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub stripes: u32,
    pub bits_off: u64,
    pub total: u64,
}

/// The one source of truth for offsets (a filter of one bit array).
#[cfg(any(test, feature = "test-hooks"))]
pub fn layout(m: u64) -> Layout {
    ring_layout(m, 1)
}

/// Offsets for `ring` bit arrays of `m` bits each, one after the other (a
/// windowed filter's generations and spare; 1 otherwise).
pub fn ring_layout(m: u64, ring: u32) -> Layout {
    let bytes = m / 8;
    let stripes = stripes_for(m);
    let bits_off = if bytes >= HUGE_THRESHOLD {
        HUGE_PAGE
    } else {
        STRIPES_OFF + stripes as u64 * CACHE_LINE
    };
    Layout {
        stripes,
        bits_off,
        total: bits_off + bytes * ring as u64,
    }
}

/// Where a merge or an intersect keeps its copy of the operand's bits:
/// `(offset, bytes)` in the filter's file or memfd, past the filter itself
/// and page aligned, so it can be mapped on its own (its space is kept
/// once allocated: `shm::journal`). Every process derives it from the
/// validated geometry, so all agree on it. None for a windowed filter
/// (no merge, no intersect).
pub fn journal(h: &Header) -> Option<(u64, u64)> {
    journal_for(h, 1)
}

/// The journal of a filter with `stages` published stages (1 for a filter
/// that does not grow): past the last of them, as long as all of them
/// together (doc/DESIGN.md, §6 grown filters). None for a windowed filter,
/// or a stage count the filter cannot have.
pub fn journal_for(h: &Header, stages: u32) -> Option<(u64, u64)> {
    if h.window.is_some() || stages == 0 {
        return None;
    }
    let ranges = stage_ranges(h, stages)?;
    let mut len = 0u64;
    for &(_, bytes) in &ranges {
        len = len.checked_add(bytes)?;
    }
    let (off, bytes) = *ranges.last()?;
    Some((round_up(off.checked_add(bytes)?, PAGE)?, len))
}

/// `v` rounded up to a multiple of `to` (a power of two), None past u64.
fn round_up(v: u64, to: u64) -> Option<u64> {
    Some(v.checked_add(to - 1)? & !(to - 1))
}

/// Where stages `0..count` are, `(offset, bytes)` each, in one walk (each
/// stage's geometry computed once: a blocked stage's costs a search of its
/// `k`): stage 0 is the bit array at `bits_off`; each later stage starts
/// at the end of the one before, rounded up to a page, or to 2 MiB when it
/// is at least HUGE_THRESHOLD bytes (as `bits_off`). Derived from the
/// validated geometry alone; None when the filter cannot have `count`
/// stages (a filter that does not grow has stage 0 only).
pub fn stage_ranges(h: &Header, count: u32) -> Option<Vec<(u64, u64)>> {
    let l = h.layout();
    let bytes0 = h.geometry.m / 8;
    if h.window.is_some() || count == 0 {
        return None;
    }
    let mut ranges = vec![(l.bits_off, bytes0)];
    if count == 1 {
        return Some(ranges);
    }
    let growth = h.growth?;
    let mut end = l.bits_off + bytes0;
    for j in 1..count {
        let bytes = growth.stage(j)?.m / 8;
        let align = if bytes >= HUGE_THRESHOLD { HUGE_PAGE } else { PAGE };
        let off = round_up(end, align)?;
        end = off.checked_add(bytes)?;
        ranges.push((off, bytes));
    }
    Some(ranges)
}

/// The largest size a filter's file may have: its own bytes plus a whole
/// journal (one left by a process killed in a merge, or one in use); for a
/// grown filter, every stage it can have and their journal.
pub fn max_size(h: &Header) -> u64 {
    let stages = h.growth.map_or(1, |g| g.limit());
    journal_for(h, stages).map_or(h.layout().total, |(off, len)| off + len)
}

/// The immutable facts of a filter, as stored in its header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    pub geometry: Geometry,
    pub seed: u64,
    /// Random at creation, and decides nothing: a copy of the file carries
    /// it along. Whether two handles map the same filter is asked of the
    /// mapped object (`Region::same_object`).
    pub instance: u64,
    /// A windowed filter's generations and time; None for a plain filter.
    pub window: Option<Window>,
    /// A grown filter's stages (its geometry is stage 0's, its `fp_rate`
    /// the whole filter's); None for a filter that does not grow.
    pub growth: Option<Growth>,
}

impl Header {
    /// Bit arrays in the region: the ring of a windowed filter, else 1.
    pub fn arrays(&self) -> u32 {
        self.window.map_or(1, |w| w.ring_len())
    }

    pub fn layout(&self) -> Layout {
        ring_layout(self.geometry.m, self.arrays())
    }
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    TooSmall(u64),
    Magic,
    Version(u32),
    ByteOrder,
    HashScheme(u32),
    Geometry,
    Layout,
    Checksum,
    Window,
    Growth,
    SizeMismatch { header: u64, actual: u64 },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::TooSmall(n) => {
                write!(
                    f,
                    "file too small to be a filter ({n} bytes; truncated or not a filter file)"
                )
            }
            FormatError::Magic => f.write_str("bad magic (not a Data::BloomFilter::Shared file)"),
            FormatError::Version(v) => write!(f, "unsupported format version {v}"),
            FormatError::ByteOrder => {
                f.write_str("byte order mismatch (file written on a machine of different endianness)")
            }
            FormatError::HashScheme(s) => write!(f, "unknown hash scheme {s}"),
            FormatError::Geometry => f.write_str("invalid geometry in header (corrupted file)"),
            FormatError::Layout => f.write_str("invalid layout in header (corrupted file)"),
            FormatError::Checksum => f.write_str("header checksum mismatch (corrupted file)"),
            FormatError::Window => f.write_str("invalid window in header (corrupted file)"),
            FormatError::Growth => f.write_str("invalid growth in header (corrupted file)"),
            FormatError::SizeMismatch { header, actual } => {
                let what = if actual < header { "truncated" } else { "grown" };
                write!(f, "file is {what}: {actual} bytes, header says {header}")
            }
        }
    }
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}
fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}
fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(a)
}
fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(a)
}

/// The immutable header bytes for `h` (and, for a windowed filter, its
/// window facts at WINDOW_OFF; zero otherwise).
pub fn encode(h: &Header) -> [u8; HEADER_READ_LEN] {
    let g = &h.geometry;
    let l = h.layout();
    let mut b = [0u8; HEADER_READ_LEN];
    b[0..8].copy_from_slice(&MAGIC);
    put_u32(
        &mut b,
        8,
        if h.growth.is_some() {
            GROWN_VERSION
        } else {
            FORMAT_VERSION
        },
    );
    put_u32(&mut b, 12, BYTE_ORDER_MARK);
    put_u32(&mut b, 16, g.scheme.id());
    put_u32(&mut b, 20, g.k);
    put_u64(&mut b, 24, g.m);
    put_u64(&mut b, 32, g.capacity);
    put_u64(&mut b, 40, g.fp_rate.to_bits());
    put_u64(&mut b, 48, h.seed);
    put_u64(&mut b, 56, l.total);
    put_u64(&mut b, 64, SLOTS_OFF);
    put_u32(&mut b, 72, SLOTS);
    put_u32(&mut b, 76, l.stripes);
    put_u64(&mut b, 80, STRIPES_OFF);
    put_u64(&mut b, 88, l.bits_off);
    put_u64(&mut b, 96, h.instance);
    // 104..108: generations of a windowed filter, else 0; 108..112 the
    // growth factor of a grown filter, else 0.
    if let Some(w) = h.window {
        put_u32(&mut b, 104, w.generations());
        let o = WINDOW_OFF as usize;
        put_u64(&mut b, o, w.window_ns().unwrap_or(0));
        put_u64(&mut b, o + 8, w.epoch_ns());
        let sum = xxh3_64(&b[o..o + 16]);
        put_u64(&mut b, o + 16, sum);
    }
    if let Some(gr) = h.growth {
        put_u32(&mut b, 108, gr.factor());
        let o = GROWTH_OFF as usize;
        put_u64(&mut b, o, gr.max_capacity().unwrap_or(0));
        put_u32(&mut b, o + 8, gr.limit());
        let sum = xxh3_64(&b[o..o + 16]);
        put_u64(&mut b, o + 16, sum);
    }
    let sum = xxh3_64(&b[..CHECKED_LEN]);
    put_u64(&mut b, CHECKED_LEN, sum);
    b
}

/// The window facts of a header whose immutable part is valid.
fn decode_window(b: &[u8]) -> Result<Option<Window>, FormatError> {
    let g = get_u32(b, 104);
    if g == 0 {
        return Ok(None);
    }
    let o = WINDOW_OFF as usize;
    if b.len() < HEADER_READ_LEN {
        return Err(FormatError::Window);
    }
    if xxh3_64(&b[o..o + 16]) != get_u64(b, o + 16) {
        return Err(FormatError::Checksum);
    }
    let ns = get_u64(b, o);
    let w = Window::new((ns != 0).then_some(ns), g, get_u64(b, o + 8)).map_err(|_| FormatError::Window)?;
    // What this library writes: the window a whole number of periods.
    if w.window_ns().unwrap_or(0) != ns {
        return Err(FormatError::Window);
    }
    Ok(Some(w))
}

/// The growth facts of a grown header whose immutable part is valid: the
/// stages this library computes from the stored arguments, which must give
/// the stored stage 0 and limit.
fn decode_growth(b: &[u8], geometry: &Geometry) -> Result<Growth, FormatError> {
    let o = GROWTH_OFF as usize;
    if b.len() < HEADER_READ_LEN || get_u32(b, 104) != 0 {
        return Err(FormatError::Growth);
    }
    if xxh3_64(&b[o..o + 16]) != get_u64(b, o + 16) {
        return Err(FormatError::Checksum);
    }
    let max = get_u64(b, o);
    let growth = Growth::stored(geometry, get_u32(b, 108), (max != 0).then_some(max)).ok_or(FormatError::Growth)?;
    if get_u32(b, o + 8) != growth.limit() || get_u32(b, o + 12) != 0 {
        return Err(FormatError::Growth);
    }
    Ok(growth)
}

/// Validate header bytes of a region that is `actual_size` bytes long.
pub fn decode(b: &[u8], actual_size: u64) -> Result<Header, FormatError> {
    if b.len() < IMMUTABLE_LEN || actual_size < CONTROL_END {
        return Err(FormatError::TooSmall(actual_size));
    }
    if b[0..8] != MAGIC {
        return Err(FormatError::Magic);
    }
    let version = get_u32(b, 8);
    if version != FORMAT_VERSION && version != GROWN_VERSION {
        return Err(FormatError::Version(version));
    }
    if get_u32(b, 12) != BYTE_ORDER_MARK {
        return Err(FormatError::ByteOrder);
    }
    // The checksum before the field checks: a flipped bit anywhere in the
    // immutable part is reported as corruption rather than as an odd field.
    if xxh3_64(&b[..CHECKED_LEN]) != get_u64(b, CHECKED_LEN) {
        return Err(FormatError::Checksum);
    }
    let id = get_u32(b, 16);
    let Some(scheme) = Scheme::from_id(id) else {
        return Err(FormatError::HashScheme(id));
    };
    let geometry = Geometry {
        k: get_u32(b, 20),
        m: get_u64(b, 24),
        capacity: get_u64(b, 32),
        fp_rate: f64::from_bits(get_u64(b, 40)),
        scheme,
    };
    if !geometry.is_valid() {
        return Err(FormatError::Geometry);
    }
    let grown = version == GROWN_VERSION;
    let h = Header {
        geometry,
        seed: get_u64(b, 48),
        instance: get_u64(b, 96),
        window: if grown { None } else { decode_window(b)? },
        growth: if grown {
            Some(decode_growth(b, &geometry)?)
        } else {
            None
        },
    };
    let l = h.layout();
    if get_u64(b, 56) != l.total
        || get_u64(b, 64) != SLOTS_OFF
        || get_u32(b, 72) != SLOTS
        || get_u32(b, 76) != l.stripes
        || get_u64(b, 80) != STRIPES_OFF
        || get_u64(b, 88) != l.bits_off
        || (!grown && get_u32(b, 108) != 0)
    {
        return Err(FormatError::Layout);
    }
    // Longer is fine up to the end of a journal (a merge under way, or
    // one whose process was killed); the mapping never reaches past total.
    if actual_size < l.total || actual_size > max_size(&h) {
        return Err(FormatError::SizeMismatch {
            header: l.total,
            actual: actual_size,
        });
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            geometry: Geometry::for_capacity(1000, 0.01).unwrap(),
            seed: 0x1234,
            instance: 0xfeed_beef,
            window: None,
            growth: None,
        }
    }

    #[test]
    fn layout_is_page_aligned_and_huge_aligned_when_large() {
        assert_eq!(CONTROL_END, 4096 + 65536 + 4096);
        assert_eq!(
            layout(64),
            Layout {
                stripes: MIN_STRIPES,
                bits_off: CONTROL_END,
                total: CONTROL_END + 8
            }
        );
        let small = layout(1 << 25); // 4 MiB - exactly the threshold
        assert_eq!(small.bits_off, HUGE_PAGE);
        let below = layout(1 << 24);
        assert_eq!(below.bits_off, STRIPES_OFF + MAX_STRIPES as u64 * CACHE_LINE);
        for shift in 6..=38 {
            let l = layout(1u64 << shift);
            assert_eq!(l.bits_off % PAGE, 0);
            assert!(l.bits_off >= CONTROL_END);
            assert!(
                l.bits_off >= STRIPES_OFF + l.stripes as u64 * CACHE_LINE,
                "stripes end before the bits"
            );
            assert_eq!(l.total, l.bits_off + (1u64 << shift) / 8);
        }
    }

    #[test]
    fn the_journal_follows_the_filter_on_a_page_boundary() {
        for g in [
            Geometry::for_capacity(1000, 0.01).unwrap(),
            Geometry::for_capacity(10_000_000, 0.001).unwrap(),
            Geometry::for_layout(12_345, 0.02, crate::math::scheme::Layout::Blocked).unwrap(),
        ] {
            let h = Header {
                geometry: g,
                ..sample()
            };
            let total = h.layout().total;
            let (off, len) = journal(&h).unwrap();
            assert_eq!(off % PAGE, 0);
            assert!(off >= total && off < total + PAGE);
            assert_eq!(len, g.m / 8, "one bit array");
            assert_eq!(len, 8 * g.words() as u64);
            assert_eq!(max_size(&h), off + len);
        }
    }

    #[test]
    fn stripes_scale_with_the_filter() {
        assert_eq!(stripes_for(64), MIN_STRIPES);
        assert_eq!(stripes_for(1 << 14), MIN_STRIPES); // 1 000 items at 1%
        assert_eq!(stripes_for(1 << 17), 128);
        assert_eq!(stripes_for((1 << 17) + 2048), 256, "not a power of two: rounded up");
        assert_eq!(stripes_for(1 << 22), MAX_STRIPES);
        assert_eq!(stripes_for(1 << 38), MAX_STRIPES);
        let mut last = 0;
        for m in (64..1 << 24).step_by(4096 * 64 + 64) {
            let s = stripes_for(m);
            assert!(s.is_power_of_two() && (MIN_STRIPES..=MAX_STRIPES).contains(&s) && s >= last);
            last = s;
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let b = encode(&h);
        let total = layout(h.geometry.m).total;
        assert_eq!(decode(&b, total), Ok(h));
    }

    #[test]
    fn every_single_bit_flip_is_refused() {
        let h = sample();
        let b = encode(&h);
        let total = layout(h.geometry.m).total;
        for byte in 0..IMMUTABLE_LEN {
            for bit in 0..8 {
                let mut c = b;
                c[byte] ^= 1 << bit;
                assert!(decode(&c, total).is_err(), "flip {byte}.{bit} accepted");
            }
        }
    }

    #[test]
    fn specific_errors() {
        let h = sample();
        let b = encode(&h);
        let total = layout(h.geometry.m).total;
        assert_eq!(decode(&b[..50], total), Err(FormatError::TooSmall(total)));
        assert_eq!(decode(&b, 100), Err(FormatError::TooSmall(100)));
        let mut c = b;
        c[0] = b'X';
        assert_eq!(decode(&c, total), Err(FormatError::Magic));
        let mut c = b;
        c[8] = 5;
        assert_eq!(decode(&c, total), Err(FormatError::Version(5)));
        let mut c = b;
        c[8] = 2;
        assert_eq!(decode(&c, total), Err(FormatError::Version(2)));
        let mut c = b;
        c[12..16].copy_from_slice(&BYTE_ORDER_MARK.swap_bytes().to_ne_bytes());
        assert_eq!(decode(&c, total), Err(FormatError::ByteOrder));
        assert_eq!(
            decode(&b, total - 1),
            Err(FormatError::SizeMismatch {
                header: total,
                actual: total - 1
            })
        );
        // Longer by up to a journal: accepted; one byte more: grown.
        let max = max_size(&h);
        assert!(max > total + 2048);
        for ok in [total + 1, total + 8, max - 1, max] {
            assert_eq!(decode(&b, ok), Ok(h), "size {ok}");
        }
        assert_eq!(
            decode(&b, max + 1),
            Err(FormatError::SizeMismatch {
                header: total,
                actual: max + 1
            })
        );
        assert!(FormatError::SizeMismatch { header: 2, actual: 1 }
            .to_string()
            .contains("truncated"));
        assert!(FormatError::SizeMismatch { header: 1, actual: 2 }
            .to_string()
            .contains("grown"));
    }

    /// A header with a valid checksum but a bad field (as a deliberate forger
    /// would write) is still refused by the field checks.
    #[test]
    fn forged_headers_with_valid_checksum() {
        let total = layout(sample().geometry.m).total;
        let reseal = |mut c: [u8; HEADER_READ_LEN]| {
            let sum = xxh3_64(&c[..CHECKED_LEN]);
            c[CHECKED_LEN..IMMUTABLE_LEN].copy_from_slice(&sum.to_ne_bytes());
            c
        };
        let mut c = encode(&sample());
        put_u64(&mut c, 24, 1000); // m not a power of two
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Geometry));
        let mut c = encode(&sample());
        put_u32(&mut c, 20, 0); // k = 0
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Geometry));
        let mut c = encode(&sample());
        put_u64(&mut c, 40, f64::NAN.to_bits());
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Geometry));
        let mut c = encode(&sample());
        put_u64(&mut c, 88, 4096); // bits overlapping the control area
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Layout));
        let mut c = encode(&sample());
        put_u32(&mut c, 16, 9);
        assert_eq!(decode(&reseal(c), total), Err(FormatError::HashScheme(9)));
        let mut c = encode(&sample());
        put_u64(&mut c, 24, 1 << 40); // beyond the cap, total matches nothing
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Geometry));
    }

    fn windowed(window_ns: Option<u64>, g: u32) -> Header {
        Header {
            window: Some(Window::new(window_ns, g, 1_700_000_000_000_000_000).unwrap()),
            ..sample()
        }
    }

    /// A windowed header round-trips; its region holds g + 1 bit arrays; a
    /// flipped bit anywhere in what it stores is refused; a plain header
    /// is as before (zero window bytes).
    #[test]
    fn windowed_headers() {
        let plain = encode(&sample());
        assert!(plain[104..].iter().take(8).all(|&x| x == 0));
        assert!(plain[WINDOW_OFF as usize..].iter().all(|&x| x == 0));
        for h in [
            windowed(Some(2_000_000_000), 4),
            windowed(None, 16),
            windowed(Some(1_000_000), 2),
        ] {
            let b = encode(&h);
            let l = h.layout();
            assert_eq!(
                l.total,
                layout(h.geometry.m).total + h.geometry.m / 8 * h.window.unwrap().generations() as u64
            );
            assert_eq!(decode(&b, l.total), Ok(h));
            assert!(decode(&b[..IMMUTABLE_LEN], l.total).is_err(), "window bytes missing");
            assert!(decode(&b, layout(h.geometry.m).total).is_err(), "one array only");
            assert_eq!(
                journal(&h),
                None,
                "no journal: windowed filters neither merge nor intersect"
            );
            assert!(decode(&b, l.total + 1).is_err(), "grown");
            for byte in (0..IMMUTABLE_LEN).chain(WINDOW_OFF as usize..HEADER_READ_LEN) {
                for bit in 0..8 {
                    let mut c = b;
                    c[byte] ^= 1 << bit;
                    assert!(decode(&c, l.total).is_err(), "flip {byte}.{bit} accepted");
                }
            }
        }
        // A window that is not a whole number of periods, resealed.
        let h = windowed(Some(3_000_000_000), 4);
        let mut c = encode(&h);
        let o = WINDOW_OFF as usize;
        put_u64(&mut c, o, 3_000_000_001);
        let sum = xxh3_64(&c[o..o + 16]);
        put_u64(&mut c, o + 16, sum);
        assert_eq!(decode(&c, h.layout().total), Err(FormatError::Window));
    }

    fn grown(
        capacity: u64,
        fp_rate: f64,
        layout: crate::math::scheme::Layout,
        factor: u32,
        max: Option<u64>,
    ) -> Header {
        let growth = Growth::new(capacity, fp_rate, layout, factor, max).unwrap();
        let mut geometry = growth.stage(0).unwrap();
        geometry.fp_rate = fp_rate;
        Header {
            geometry,
            growth: Some(growth),
            ..sample()
        }
    }

    /// A grown header round-trips under its own version; a plain header
    /// keeps version 2 and zero growth bytes; a flipped bit anywhere in what
    /// a grown header stores is refused.
    #[test]
    fn grown_headers() {
        use crate::math::scheme::Layout as L;
        let plain = encode(&sample());
        assert_eq!(get_u32(&plain, 8), FORMAT_VERSION);
        assert_eq!(get_u32(&plain, 108), 0);
        for h in [
            grown(1000, 0.01, L::Standard, 2, None),
            grown(1000, 0.001, L::Blocked, 4, Some(1_000_000)),
            grown(1, 0.5, L::Standard, 16, None),
        ] {
            let b = encode(&h);
            let total = h.layout().total;
            assert_eq!(get_u32(&b, 8), GROWN_VERSION);
            assert_eq!(get_u32(&b, 108), h.growth.unwrap().factor());
            assert_eq!(decode(&b, total), Ok(h));
            assert_eq!(decode(&b, max_size(&h)), Ok(h), "every stage and its journal");
            assert!(decode(&b, max_size(&h) + 1).is_err());
            assert!(decode(&b[..IMMUTABLE_LEN], total).is_err(), "growth bytes missing");
            for byte in (0..IMMUTABLE_LEN).chain(GROWTH_OFF as usize..HEADER_READ_LEN) {
                for bit in 0..8 {
                    let mut c = b;
                    c[byte] ^= 1 << bit;
                    assert!(decode(&c, total).is_err(), "flip {byte}.{bit} accepted");
                }
            }
        }
    }

    /// How long validating a grown blocked header of 32 possible stages
    /// takes, against a plain one (`cargo test --release --locked --lib
    /// validation_time -- --nocapture`). The first decode of a process also
    /// builds the blocked FP tables; the figure is the median of later ones.
    #[test]
    fn validation_time() {
        use crate::math::scheme::Layout as L;
        use std::time::Instant;
        let time = |h: &Header| {
            let b = encode(h);
            let total = h.layout().total;
            let start = Instant::now();
            assert_eq!(decode(&b, total), Ok(*h));
            let first = start.elapsed();
            let mut runs: Vec<_> = (0..5)
                .map(|_| {
                    let start = Instant::now();
                    assert_eq!(decode(&b, total), Ok(*h));
                    start.elapsed()
                })
                .collect();
            runs.sort();
            (first, runs[2])
        };
        let plain = time(&sample());
        for (rate, layout) in [(0.01, L::Blocked), (1e-6, L::Blocked), (0.01, L::Standard)] {
            let h = grown(1, rate, layout, 2, None);
            let limit = h.growth.unwrap().limit();
            assert!(limit >= 30, "{layout:?} {rate}: {limit}");
            let (first, median) = time(&h);
            eprintln!(
                "decode, {layout:?} fp {rate}, {limit} stages: first {first:?}, then {median:?}; plain: {:?}",
                plain.1
            );
        }
    }

    /// Grown headers whose checksums are right but whose growth is not
    /// what this library computes are refused.
    #[test]
    fn forged_grown_headers() {
        use crate::math::scheme::Layout as L;
        let h = grown(1000, 0.01, L::Standard, 2, None);
        let total = h.layout().total;
        let reseal = |mut c: [u8; HEADER_READ_LEN]| {
            let o = GROWTH_OFF as usize;
            let sum = xxh3_64(&c[o..o + 16]);
            c[o + 16..o + 24].copy_from_slice(&sum.to_ne_bytes());
            let sum = xxh3_64(&c[..CHECKED_LEN]);
            c[CHECKED_LEN..IMMUTABLE_LEN].copy_from_slice(&sum.to_ne_bytes());
            c
        };
        assert_eq!(decode(&reseal(encode(&h)), total), Ok(h), "the resealer itself");
        for factor in [0, 1, 17] {
            let mut c = encode(&h);
            put_u32(&mut c, 108, factor);
            assert_eq!(decode(&reseal(c), total), Err(FormatError::Growth), "factor {factor}");
        }
        let mut c = encode(&h);
        put_u32(&mut c, GROWTH_OFF as usize + 8, h.growth.unwrap().limit() + 1);
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Growth), "limit");
        let mut c = encode(&h);
        put_u32(&mut c, GROWTH_OFF as usize + 12, 1);
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Growth), "reserved word");
        let mut c = encode(&h);
        put_u64(&mut c, GROWTH_OFF as usize, 999);
        assert_eq!(
            decode(&reseal(c), total),
            Err(FormatError::Growth),
            "max below capacity"
        );
        // Stage 0 sized as a plain filter (k by lround) is not a grown stage 0.
        let mut c = encode(&h);
        let plain = Geometry::for_capacity(1000, 0.01).unwrap();
        put_u32(&mut c, 20, plain.k);
        put_u64(&mut c, 24, plain.m);
        let l = ring_layout(plain.m, 1);
        put_u64(&mut c, 56, l.total);
        put_u32(&mut c, 76, l.stripes);
        put_u64(&mut c, 88, l.bits_off);
        assert_eq!(decode(&reseal(c), l.total), Err(FormatError::Growth), "stage 0");
        // A grown filter with a window.
        let mut c = encode(&h);
        put_u32(&mut c, 104, 4);
        assert_eq!(decode(&reseal(c), total), Err(FormatError::Growth), "window");
        // A plain filter with a factor is refused as before.
        let mut c = encode(&sample());
        put_u32(&mut c, 108, 2);
        let sum = xxh3_64(&c[..CHECKED_LEN]);
        c[CHECKED_LEN..IMMUTABLE_LEN].copy_from_slice(&sum.to_ne_bytes());
        assert_eq!(decode(&c, layout(sample().geometry.m).total), Err(FormatError::Layout));
    }

    /// Stage `i`'s range, the last of `stage_ranges` of `0..=i`.
    fn stage_range(h: &Header, i: u32) -> Option<(u64, u64)> {
        stage_ranges(h, i.checked_add(1)?)?.pop()
    }

    /// Stages follow one another, page aligned (2 MiB for large ones),
    /// never overlapping, stage 0 at bits_off; the journal lies past the
    /// published stages and is as long as all of them.
    #[test]
    fn stages_follow_one_another() {
        use crate::math::scheme::Layout as L;
        assert_eq!(
            stage_range(&sample(), 0),
            Some((layout(sample().geometry.m).bits_off, sample().geometry.m / 8))
        );
        assert_eq!(stage_range(&sample(), 1), None, "a plain filter has one stage");
        assert_eq!(stage_range(&windowed(None, 4), 0), None);
        for h in [
            grown(1000, 0.01, L::Standard, 2, None),
            grown(100_000, 0.001, L::Blocked, 4, None),
            grown(1, 0.5, L::Standard, 16, Some(1 << 30)),
        ] {
            let gr = h.growth.unwrap();
            let (off0, bytes0) = stage_range(&h, 0).unwrap();
            assert_eq!((off0, bytes0), (h.layout().bits_off, h.geometry.m / 8));
            assert_eq!(off0 + bytes0, h.layout().total);
            let mut end = off0 + bytes0;
            let mut sum = bytes0;
            for i in 1..gr.limit() {
                let (off, bytes) = stage_range(&h, i).unwrap();
                assert_eq!(bytes, gr.stage(i).unwrap().m / 8);
                assert!(
                    off >= end && off % PAGE == 0,
                    "stage {i} at {off}, previous ends at {end}"
                );
                assert!(off - end < PAGE || bytes >= HUGE_THRESHOLD);
                if bytes >= HUGE_THRESHOLD {
                    assert_eq!(off % HUGE_PAGE, 0);
                }
                end = off + bytes;
                sum += bytes;
                let (joff, jlen) = journal_for(&h, i + 1).unwrap();
                assert!(joff >= end && joff < end + PAGE && joff % PAGE == 0);
                assert_eq!(jlen, sum);
            }
            assert_eq!(stage_range(&h, gr.limit()), None);
            assert_eq!(journal_for(&h, gr.limit() + 1), None);
            let (joff, jlen) = journal_for(&h, gr.limit()).unwrap();
            assert_eq!(max_size(&h), joff + jlen);
            assert_eq!(journal(&h), journal_for(&h, 1));
        }
    }
}
