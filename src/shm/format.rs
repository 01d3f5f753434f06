//! The shared region's layout and its header: encoding and validation over
//! plain bytes (no mapping, no I/O), so every rule is unit-testable.
//!
//! ```text
//! offset 0        header page: immutable fields + checksum (0..128),
//!                 control line (128..192): flags, epoch, exclusive word,
//!                 pending operation and its cursor;
//!                 a windowed filter's window and epoch0 + their checksum
//!                 (192..216), its step protocol's words (256..648);
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
/// and page aligned, so it can be mapped on its own and given back with
/// `ftruncate` or a punched hole. Every process derives it from the
/// validated geometry, so all agree on it. None for a windowed filter
/// (no merge, no intersect).
pub fn journal(h: &Header) -> Option<(u64, u64)> {
    if h.window.is_some() {
        return None;
    }
    let total = h.layout().total;
    Some(((total + PAGE - 1) / PAGE * PAGE, h.geometry.m / 8))
}

/// The largest size a filter's file may have: its own bytes plus a whole
/// journal (one left by a process killed in a merge, or one in use).
pub fn max_size(h: &Header) -> u64 {
    journal(h).map_or(h.layout().total, |(off, len)| off + len)
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
    put_u32(&mut b, 8, FORMAT_VERSION);
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
    // 104..108: generations of a windowed filter, else 0; 108..112 zero.
    if let Some(w) = h.window {
        put_u32(&mut b, 104, w.generations());
        let o = WINDOW_OFF as usize;
        put_u64(&mut b, o, w.window_ns().unwrap_or(0));
        put_u64(&mut b, o + 8, w.epoch_ns());
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

/// Validate header bytes of a region that is `actual_size` bytes long.
pub fn decode(b: &[u8], actual_size: u64) -> Result<Header, FormatError> {
    if b.len() < IMMUTABLE_LEN || actual_size < CONTROL_END {
        return Err(FormatError::TooSmall(actual_size));
    }
    if b[0..8] != MAGIC {
        return Err(FormatError::Magic);
    }
    let version = get_u32(b, 8);
    if version != FORMAT_VERSION {
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
    let h = Header {
        geometry,
        seed: get_u64(b, 48),
        instance: get_u64(b, 96),
        window: decode_window(b)?,
    };
    let l = h.layout();
    if get_u64(b, 56) != l.total
        || get_u64(b, 64) != SLOTS_OFF
        || get_u32(b, 72) != SLOTS
        || get_u32(b, 76) != l.stripes
        || get_u64(b, 80) != STRIPES_OFF
        || get_u64(b, 88) != l.bits_off
        || get_u32(b, 108) != 0
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
        c[8] = 4;
        assert_eq!(decode(&c, total), Err(FormatError::Version(4)));
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
}
