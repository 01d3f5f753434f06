//! Portable bytes: a versioned, little-endian image of a filter.
//!
//! A plain filter (version 1):
//!
//! ```text
//! 0   magic "BLOOMSER"            8 bytes
//! 8   version (1)                 u32
//! 12  hash scheme (1 standard,    u32
//!     2 blocked 64-bit words,
//!     3 blocked 128-bit blocks)
//! 16  k                           u32
//! 20  reserved (0)                u32
//! 24  m (bits)                    u64
//! 32  capacity                    u64
//! 40  fp_rate (IEEE-754 bits)     u64
//! 48  seed                        u64
//! 56  the bit array, m/64 words   u64 each
//! end checksum: XXH3-64 of all the bytes before it
//! ```
//!
//! A windowed filter (version 2; see `window`): the same first 56 bytes
//! but for the version and the word at 20, then its time facts and its
//! `g` generations, *normalised*: the current generation first, then the
//! one before it, and so on to the oldest. The ring slot each occupied,
//! the spare and the `clean` words are the source's own business and do
//! not travel: the destination puts the current generation in a slot of
//! its own choosing, with a clean (all-zero) spare ready for the next step.
//!
//! ```text
//! 0   magic "BLOOMSER"            8 bytes
//! 8   version (2)                 u32
//! 12  hash scheme                 u32
//! 16  k                           u32
//! 20  generations g (2 to 16)     u32
//! 24  m (bits of one generation)  u64
//! 32  capacity (per window)       u64
//! 40  fp_rate (IEEE-754 bits)     u64
//! 48  seed                        u64
//! 56  window in ns (0: stepped    u64
//!     only by rotate), a multiple
//!     of g - 1
//! 64  epoch0: ns since the Unix   u64
//!     epoch (grid 0 starts here)
//! 72  current generation's start  u64
//!     (its grid number, or the
//!     steps taken), < 2^59
//! 80  last words, g of them       u64 each
//!     (current first): one more
//!     than the grid of the latest
//!     add to that generation, 0
//!     for none; at most 2^59
//! 80 + 8g  the g bit arrays       m/64 words each
//!     (current first)
//! end checksum: XXH3-64 of all the bytes before it
//! ```
//!
//! A filter that grows (version 3; doc/DESIGN.md, §3 growth): the same
//! first 56 bytes, stage 0's geometry with the filter's `fp_rate`, and at
//! 20 the stages it carries; then its growth and the stages, stage 0
//! first. Every stage's geometry follows from the growth, so none is
//! stored but stage 0's, which must be the one the growth gives.
//!
//! ```text
//! 0   magic "BLOOMSER"            8 bytes
//! 8   version (3)                 u32
//! 12  hash scheme (stage 0's)     u32
//! 16  k (stage 0's)               u32
//! 20  stages s (1 to the limit)   u32
//! 24  m (stage 0's)               u64
//! 32  capacity (stage 0's)        u64
//! 40  fp_rate (the filter's)      u64
//! 48  seed                        u64
//! 56  growth factor (2 to 16)     u32
//! 60  reserved (0)                u32
//! 64  max_capacity (0: none)      u64
//! 72  fill words, s of them       u64 each (new items counted into
//!                                 each stage, §8 N9)
//! 72 + 8s  the s bit arrays       m_i/64 words each (stage 0 first)
//! end checksum: XXH3-64 of all the bytes before it
//! ```
//!
//! Time travels as wall-clock nanoseconds since the Unix epoch, which all
//! hosts share: grid numbers count periods from `epoch0`, so an item is
//! seen on every host until the same instant and forgotten by the same
//! bound.
//!
//! All integers little-endian; filter bit `i` is bit `i % 64` of word `i / 64`.
//! The input of `parse` is hostile: every field
//! and the exact length are checked before anything is allocated, and the
//! largest allocation a valid input can ask for is its own bit arrays (one
//! more generation for a windowed filter: the spare).

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::math::geometry::Geometry;
use crate::math::growth::Growth;
use crate::math::scheme::Scheme;
use crate::math::window::{View, Window};
#[cfg(test)]
use crate::shm::format::HASH_SCHEME;

pub const MAGIC: [u8; 8] = *b"BLOOMSER";
/// The version of a plain filter's bytes.
pub const SERIAL_VERSION: u32 = 1;
/// The version of a windowed filter's bytes.
pub const WINDOWED_VERSION: u32 = 2;
pub const HEADER_LEN: usize = 56;
/// Fixed header of a windowed filter's bytes, before its `last` words.
pub const WINDOWED_HEADER_LEN: usize = 80;
/// The version of a grown filter's bytes.
pub const GROWN_VERSION: u32 = 3;
/// Fixed header of a grown filter's bytes, before its fill words.
pub const GROWN_HEADER_LEN: usize = 72;
pub const TRAILER_LEN: usize = 8;
/// The largest `last` word (and, less one, generation start) bytes may carry.
pub const MAX_LAST: u64 = View::MAX_START + 1;

/// The serialized size of a filter of `m` bits.
pub fn serialized_len(m: u64) -> u64 {
    HEADER_LEN as u64 + m / 8 + TRAILER_LEN as u64
}

/// The serialized size of a windowed filter of `g` generations of `m`
/// bits each.
pub fn windowed_len(m: u64, g: u32) -> u64 {
    WINDOWED_HEADER_LEN as u64 + 8 * g as u64 + g as u64 * (m / 8) + TRAILER_LEN as u64
}

/// The serialized size of a grown filter whose stages have `bits` bits
/// each (stage 0 first).
pub fn grown_len(bits: impl Iterator<Item = u64>) -> u64 {
    let (mut n, mut words) = (0u64, 0u64);
    for m in bits {
        n += 1;
        words += m / 8;
    }
    GROWN_HEADER_LEN as u64 + 8 * n + words + TRAILER_LEN as u64
}

/// A grown filter's growth and stages, as its bytes carry them.
#[derive(Clone, Debug, PartialEq)]
pub struct GrownState {
    pub growth: Growth,
    /// Each stage's fill word (stage 0 first); as many as stages carried.
    pub fills: Vec<u64>,
}

/// Write a grown filter's image into `out` (exactly `grown_len` bytes of
/// its `st.fills.len()` stages): `g` is stage 0's geometry with the
/// filter's `fp_rate`, `words` yields the stages' bit words in order.
pub fn write_grown(g: &Geometry, seed: u64, st: &GrownState, words: impl FnOnce(&mut dyn FnMut(u64)), out: &mut [u8]) {
    let s = st.fills.len();
    put_common(g, seed, GROWN_VERSION, s as u32, out);
    out[56..60].copy_from_slice(&st.growth.factor().to_le_bytes());
    out[60..64].copy_from_slice(&0u32.to_le_bytes());
    out[64..72].copy_from_slice(&st.growth.max_capacity().unwrap_or(0).to_le_bytes());
    for (i, f) in st.fills.iter().enumerate() {
        let o = GROWN_HEADER_LEN + 8 * i;
        out[o..o + 8].copy_from_slice(&f.to_le_bytes());
    }
    let mut pos = GROWN_HEADER_LEN + 8 * s;
    words(&mut |w| {
        out[pos..pos + 8].copy_from_slice(&w.to_le_bytes());
        pos += 8;
    });
    assert_eq!(pos, out.len() - TRAILER_LEN, "the stages' words fill the image");
    seal(out);
}

/// A windowed filter's time state, as its bytes carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowState {
    /// Window, generations and epoch0.
    pub window: Window,
    /// The current generation's start (`View::m`).
    pub current: u64,
    /// Each generation's `last` word, current first (`g` of them).
    pub last: Vec<u64>,
}

fn put_common(g: &Geometry, seed: u64, version: u32, word20: u32, out: &mut [u8]) {
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&version.to_le_bytes());
    out[12..16].copy_from_slice(&g.scheme.id().to_le_bytes());
    out[16..20].copy_from_slice(&g.k.to_le_bytes());
    out[20..24].copy_from_slice(&word20.to_le_bytes());
    out[24..32].copy_from_slice(&g.m.to_le_bytes());
    out[32..40].copy_from_slice(&g.capacity.to_le_bytes());
    out[40..48].copy_from_slice(&g.fp_rate.to_bits().to_le_bytes());
    out[48..56].copy_from_slice(&seed.to_le_bytes());
}

fn seal(out: &mut [u8]) {
    let body = out.len() - TRAILER_LEN;
    let sum = xxh3_64(&out[..body]);
    out[body..].copy_from_slice(&sum.to_le_bytes());
}

/// Write a filter's image into `out` (exactly `serialized_len` bytes).
/// `words` yields the bit words in order.
pub fn write(g: &Geometry, seed: u64, words: impl FnOnce(&mut dyn FnMut(u64)), out: &mut [u8]) {
    assert_eq!(out.len() as u64, serialized_len(g.m));
    put_common(g, seed, SERIAL_VERSION, 0, out);
    let mut pos = HEADER_LEN;
    words(&mut |w| {
        out[pos..pos + 8].copy_from_slice(&w.to_le_bytes());
        pos += 8;
    });
    debug_assert_eq!(pos, out.len() - TRAILER_LEN);
    seal(out);
}

/// Write the header of a windowed filter's image into `out` (exactly
/// `windowed_len` bytes); the caller has put the bit arrays (current
/// first) at `windowed_bits_off`, and `seal_windowed` finishes.
pub fn write_windowed_header(g: &Geometry, seed: u64, st: &WindowState, out: &mut [u8]) {
    let gens = st.window.generations();
    assert_eq!(out.len() as u64, windowed_len(g.m, gens));
    assert_eq!(st.last.len(), gens as usize);
    put_common(g, seed, WINDOWED_VERSION, gens, out);
    out[56..64].copy_from_slice(&st.window.window_ns().unwrap_or(0).to_le_bytes());
    out[64..72].copy_from_slice(&st.window.epoch_ns().to_le_bytes());
    out[72..80].copy_from_slice(&st.current.to_le_bytes());
    for (d, last) in st.last.iter().enumerate() {
        let o = WINDOWED_HEADER_LEN + 8 * d;
        out[o..o + 8].copy_from_slice(&last.to_le_bytes());
    }
}

/// Where a windowed image's bit arrays start.
pub fn windowed_bits_off(g: u32) -> usize {
    WINDOWED_HEADER_LEN + 8 * g as usize
}

/// Put the checksum at the end of a windowed filter's image.
pub fn seal_windowed(out: &mut [u8]) {
    seal(out);
}

/// Why bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SerialError {
    Truncated { len: usize, need: u64 },
    Extended { len: usize, need: u64 },
    Magic,
    Version(u32),
    HashScheme(u32),
    Reserved,
    Geometry,
    Checksum,
    Generations(u32),
    Window,
    Current(u64),
    Last { generation: u32, value: u64 },
    Growth,
    Stages(u32),
}

impl std::fmt::Display for SerialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SerialError::Truncated { len, need } => write!(f, "truncated input ({len} bytes, need {need})"),
            SerialError::Extended { len, need } => write!(f, "extended input ({len} bytes, expected {need})"),
            SerialError::Magic => f.write_str("bad magic (not a serialized Data::BloomFilter::Shared filter)"),
            SerialError::Version(v) => write!(f, "unsupported serialization version {v}"),
            SerialError::HashScheme(s) => write!(f, "unknown hash scheme {s}"),
            SerialError::Reserved => f.write_str("reserved field is not zero"),
            SerialError::Geometry => f.write_str("impossible geometry"),
            SerialError::Checksum => f.write_str("bad checksum (corrupted input)"),
            SerialError::Generations(g) => write!(f, "windowed bytes with {g} generations (2 to 16)"),
            SerialError::Window => f.write_str("impossible window in windowed bytes"),
            SerialError::Current(m) => write!(f, "generation number {m} out of range in windowed bytes"),
            SerialError::Last { generation, value } => write!(
                f,
                "last word {value} of generation {generation} out of range in windowed bytes"
            ),
            SerialError::Growth => f.write_str("impossible growth in the bytes of a filter that grows"),
            SerialError::Stages(s) => write!(f, "bytes of a filter that grows with {s} stages, more than it can have"),
        }
    }
}

pub(crate) fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
pub(crate) fn le64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// A validated image: geometry, seed, the window state of a windowed
/// filter, and the bytes of the bit arrays.
#[derive(Debug)]
pub struct Image<'a> {
    pub geometry: Geometry,
    pub seed: u64,
    /// None: a plain filter.
    pub window: Option<WindowState>,
    /// None: a filter that does not grow.
    pub grown: Option<GrownState>,
    bits: &'a [u8],
}

impl Image<'_> {
    /// The bit words in order (a windowed filter's generations one after
    /// the other, current first).
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.bits.chunks_exact(8).map(|c| le64(c, 0))
    }

    /// Stage `i`'s geometry (stage 0: `geometry`; of a grown image only
    /// below its stage count).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn stage(&self, i: u32) -> Geometry {
        match (&self.grown, i) {
            (Some(st), i) if i > 0 => st.growth.stage(i).unwrap_or(self.geometry),
            _ => self.geometry,
        }
    }

    /// The image's bytes, as `write` (or the windowed or grown writer)
    /// makes them.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn to_bytes(&self) -> Vec<u8> {
        if let Some(st) = &self.grown {
            let bits = (0..st.fills.len() as u32).map(|i| self.stage(i).m);
            let mut out = vec![0u8; grown_len(bits) as usize];
            write_grown(&self.geometry, self.seed, st, |f| self.words().for_each(f), &mut out);
            return out;
        }
        match &self.window {
            None => {
                let mut out = vec![0u8; serialized_len(self.geometry.m) as usize];
                write(&self.geometry, self.seed, |f| self.words().for_each(f), &mut out);
                out
            }
            Some(st) => {
                let g = st.window.generations();
                let mut out = vec![0u8; windowed_len(self.geometry.m, g) as usize];
                write_windowed_header(&self.geometry, self.seed, st, &mut out);
                let off = windowed_bits_off(g);
                out[off..off + self.bits.len()].copy_from_slice(self.bits);
                seal_windowed(&mut out);
                out
            }
        }
    }
}

/// Validate `b` completely; allocates nothing (but the `last` words of a
/// windowed image, at most 16).
pub fn parse(b: &[u8]) -> Result<Image<'_>, SerialError> {
    let min = (HEADER_LEN + TRAILER_LEN) as u64;
    if b.len() < 8 {
        return Err(SerialError::Truncated {
            len: b.len(),
            need: min,
        });
    }
    if b[0..8] != MAGIC {
        return Err(SerialError::Magic);
    }
    if (b.len() as u64) < min {
        return Err(SerialError::Truncated {
            len: b.len(),
            need: min,
        });
    }
    let version = le32(b, 8);
    if version != SERIAL_VERSION && version != WINDOWED_VERSION && version != GROWN_VERSION {
        return Err(SerialError::Version(version));
    }
    let windowed = version == WINDOWED_VERSION;
    let grown = version == GROWN_VERSION;
    let id = le32(b, 12);
    let Some(scheme) = Scheme::from_id(id) else {
        return Err(SerialError::HashScheme(id));
    };
    let gens = le32(b, 20);
    if !windowed && !grown && gens != 0 {
        return Err(SerialError::Reserved);
    }
    if windowed && !(Window::MIN_GENERATIONS..=Window::MAX_GENERATIONS).contains(&gens) {
        return Err(SerialError::Generations(gens));
    }
    let geometry = Geometry {
        k: le32(b, 16),
        m: le64(b, 24),
        capacity: le64(b, 32),
        fp_rate: f64::from_bits(le64(b, 40)),
        scheme,
    };
    if !geometry.is_valid() {
        return Err(SerialError::Geometry);
    }
    let mut state = None;
    let mut grown_state = None;
    let (need, bits_off) = if grown {
        let (st, need) = parse_growth(b, &geometry, gens)?;
        grown_state = Some(st);
        (need, GROWN_HEADER_LEN + 8 * gens as usize)
    } else if windowed {
        let wmin = (WINDOWED_HEADER_LEN + TRAILER_LEN) as u64;
        if (b.len() as u64) < wmin {
            return Err(SerialError::Truncated {
                len: b.len(),
                need: wmin,
            });
        }
        let ns = le64(b, 56);
        let window = Window::new((ns != 0).then_some(ns), gens, le64(b, 64)).map_err(|_| SerialError::Window)?;
        // What this library writes: a window of a whole number of periods.
        if window.window_ns().unwrap_or(0) != ns {
            return Err(SerialError::Window);
        }
        let current = le64(b, 72);
        if current > View::MAX_START {
            return Err(SerialError::Current(current));
        }
        state = Some(WindowState {
            window,
            current,
            last: Vec::new(),
        });
        (windowed_len(geometry.m, gens), windowed_bits_off(gens))
    } else {
        (serialized_len(geometry.m), HEADER_LEN)
    };
    if (b.len() as u64) < need {
        return Err(SerialError::Truncated { len: b.len(), need });
    }
    if (b.len() as u64) > need {
        return Err(SerialError::Extended { len: b.len(), need });
    }
    let body = b.len() - TRAILER_LEN;
    let mut h = Xxh3::new();
    h.update(&b[..body]);
    if h.digest() != le64(b, body) {
        return Err(SerialError::Checksum);
    }
    if let Some(st) = grown_state.as_mut() {
        st.fills = (0..gens as usize).map(|i| le64(b, GROWN_HEADER_LEN + 8 * i)).collect();
    }
    if let Some(st) = state.as_mut() {
        for d in 0..gens {
            let value = le64(b, WINDOWED_HEADER_LEN + 8 * d as usize);
            if value > MAX_LAST {
                return Err(SerialError::Last { generation: d, value });
            }
            st.last.push(value);
        }
    }
    Ok(Image {
        geometry,
        seed: le64(b, 48),
        window: state,
        grown: grown_state,
        bits: &b[bits_off..body],
    })
}

/// A grown image's growth (its fill words left for after the checksum)
/// and the length its `stages` stages need: the growth this library
/// computes from the stored arguments must give the stored stage 0, and
/// the stage count must be one the filter can have.
fn parse_growth(b: &[u8], geometry: &Geometry, stages: u32) -> Result<(GrownState, u64), SerialError> {
    let min = (GROWN_HEADER_LEN + TRAILER_LEN) as u64;
    if (b.len() as u64) < min {
        return Err(SerialError::Truncated {
            len: b.len(),
            need: min,
        });
    }
    if le32(b, 60) != 0 {
        return Err(SerialError::Reserved);
    }
    let max = le64(b, 64);
    let growth = Growth::stored(geometry, le32(b, 56), (max != 0).then_some(max)).ok_or(SerialError::Growth)?;
    if stages == 0 || stages > growth.limit() {
        return Err(SerialError::Stages(stages));
    }
    let bits = (0..stages).map(|i| {
        if i == 0 {
            geometry.m
        } else {
            growth.stage(i).map_or(0, |g| g.m)
        }
    });
    let need = grown_len(bits);
    Ok((
        GrownState {
            growth,
            fills: Vec::new(),
        },
        need,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rng::xorshift;

    fn image(cap: u64, rate: f64, seed: u64, fill: impl Fn(usize) -> u64) -> Vec<u8> {
        let g = Geometry::for_capacity(cap, rate).unwrap();
        let mut out = vec![0u8; serialized_len(g.m) as usize];
        let words = g.words();
        write(&g, seed, |f| (0..words).for_each(|i| f(fill(i))), &mut out);
        out
    }

    #[test]
    fn round_trip() {
        let b = image(100, 0.01, 99, |i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let img = parse(&b).unwrap();
        assert_eq!(img.seed, 99);
        assert_eq!(img.geometry, Geometry::for_capacity(100, 0.01).unwrap());
        let words: Vec<u64> = img.words().collect();
        assert_eq!(words.len(), img.geometry.words());
        for (i, w) in words.iter().enumerate() {
            assert_eq!(*w, (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        assert_eq!(b.len() as u64, serialized_len(img.geometry.m));
        assert_eq!(&b[0..8], b"BLOOMSER");
        // Little-endian on every host.
        assert_eq!(&b[24..32], &img.geometry.m.to_le_bytes());
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let b = image(20, 0.1, 5, |i| i as u64 * 3);
        for byte in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[byte] ^= 1 << bit;
                assert!(parse(&c).is_err(), "flip {byte}.{bit}");
            }
        }
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let b = image(20, 0.1, 0, |i| i as u64);
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_err(), "truncated to {n}");
        }
        let mut c = b.clone();
        c.push(0);
        assert!(matches!(parse(&c), Err(SerialError::Extended { .. })));
        assert!(matches!(parse(&b[..b.len() - 1]), Err(SerialError::Truncated { .. })));
    }

    #[test]
    fn huge_declared_geometry_allocates_nothing() {
        let mut b = image(20, 0.1, 0, |_| 0);
        b[24..32].copy_from_slice(&(1u64 << 38).to_le_bytes());
        assert!(matches!(parse(&b), Err(SerialError::Truncated { .. })));
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse(&b).unwrap_err(), SerialError::Geometry);
    }

    /// Recompute the checksum after editing `b`, so that the field under test,
    /// not the checksum, is what gets refused.
    fn reseal(mut b: Vec<u8>) -> Vec<u8> {
        let body = b.len() - TRAILER_LEN;
        let sum = xxh3_64(&b[..body]);
        b[body..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    #[test]
    fn documented_layout() {
        let b = image(10, 0.5, 0x0123_4567_89ab_cdef, |_| 0x8000_0000_0000_0001);
        // capacity 10 at 0.5: k = 1, m = 64 (one word), so 56 + 8 + 8 bytes.
        assert_eq!(b.len(), 72);
        assert_eq!(&b[0..8], b"BLOOMSER");
        assert_eq!(&b[8..12], &[1, 0, 0, 0]);
        assert_eq!(&b[12..16], &HASH_SCHEME.to_le_bytes());
        assert_eq!(&b[16..20], &[1, 0, 0, 0]);
        assert_eq!(&b[20..24], &[0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[64, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[32..40], &[10, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[40..48], &0.5f64.to_bits().to_le_bytes());
        assert_eq!(&b[48..56], &[0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01]);
        // Bit 0 is the lowest bit of the first byte, bit 63 the highest of the eighth.
        assert_eq!(&b[56..64], &[1, 0, 0, 0, 0, 0, 0, 0x80]);
        assert_eq!(&b[64..72], &xxh3_64(&b[..64]).to_le_bytes());
    }

    #[test]
    fn sealed_bad_fields_are_refused_by_name() {
        let good = image(20, 0.1, 5, |i| i as u64);
        let put32 = |off: usize, v: u32| {
            let mut c = good.clone();
            c[off..off + 4].copy_from_slice(&v.to_le_bytes());
            parse(&reseal(c)).unwrap_err()
        };
        assert_eq!(put32(8, 0), SerialError::Version(0));
        // Version 2 is a windowed image: this one's word at 20 (0) is then
        // its number of generations.
        assert_eq!(put32(8, 2), SerialError::Generations(0));
        // Version 3 is a grown image: this one's word at 20 (0) is then its
        // number of stages, and a plain filter's geometry no stage 0 of
        // any growth (nor is its word at 56 a factor).
        assert!(matches!(
            put32(8, 3),
            SerialError::Growth | SerialError::Stages(0) | SerialError::Reserved
        ));
        assert_eq!(put32(8, 4), SerialError::Version(4));
        assert_eq!(put32(12, 5), SerialError::HashScheme(5));
        assert_eq!(put32(20, 1), SerialError::Reserved);
        for k in [0, 33, u32::MAX] {
            assert_eq!(put32(16, k), SerialError::Geometry, "k = {k}");
        }
        let put64 = |off: usize, v: u64| {
            let mut c = good.clone();
            c[off..off + 8].copy_from_slice(&v.to_le_bytes());
            parse(&reseal(c)).unwrap_err()
        };
        for m in [0, 32, 100, 192, (1 << 38) + 64, 1 << 39, u64::MAX] {
            assert_eq!(put64(24, m), SerialError::Geometry, "m = {m}");
        }
        assert_eq!(put64(32, 0), SerialError::Geometry, "capacity 0");
        for r in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert_eq!(put64(40, r.to_bits()), SerialError::Geometry, "fp_rate {r}");
        }
        // A valid but different m (this image has 128 bits): the length no
        // longer matches, so it is refused before the bit array is read.
        assert_eq!(good.len(), 80);
        assert!(matches!(put64(24, 256), SerialError::Truncated { need: 96, .. }));
        assert!(matches!(put64(24, 64), SerialError::Extended { need: 72, .. }));
        assert!(matches!(put64(24, 1 << 38), SerialError::Truncated { need, .. } if need == (1 << 35) + 64));
        // Any seed is valid; it is covered by the checksum only.
        let mut c = good.clone();
        c[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse(&reseal(c)).unwrap().seed, u64::MAX);
    }

    /// Random and mutated inputs never panic (a small deterministic fuzz).
    #[test]
    fn random_inputs_never_panic() {
        let base = image(50, 0.05, 3, |i| i as u64 ^ 0xabcdef);
        let mut next = xorshift(0x1234_5678_9abc_def0);
        for _ in 0..20_000 {
            let mut c = base.clone();
            match next() % 4 {
                0 => {
                    let n = (next() % 8 + 1) as usize;
                    for _ in 0..n {
                        let i = (next() as usize) % c.len();
                        c[i] = next() as u8;
                    }
                }
                1 => c.truncate((next() as usize) % (base.len() + 1)),
                2 => c.extend((0..next() % 16).map(|_| next() as u8)),
                _ => c = (0..next() % 200).map(|_| next() as u8).collect(),
            }
            let _ = parse(&c);
        }
    }

    /// A windowed image of `g` generations of a 128-bit filter, generation
    /// `d`'s words `d * 100 + i`.
    fn windowed_image(g: u32, window_ns: Option<u64>) -> Vec<u8> {
        let geom = Geometry::for_capacity(20, 0.1).unwrap();
        let st = WindowState {
            window: Window::new(window_ns, g, 1_700_000_000_000_000_000).unwrap(),
            current: 41,
            last: (0..g as u64).map(|d| 42 - d).collect(),
        };
        let mut out = vec![0u8; windowed_len(geom.m, g) as usize];
        write_windowed_header(&geom, 7, &st, &mut out);
        let off = windowed_bits_off(g);
        let words = geom.words();
        for d in 0..g as usize {
            for i in 0..words {
                let o = off + 8 * (d * words + i);
                out[o..o + 8].copy_from_slice(&((d * 100 + i) as u64).to_le_bytes());
            }
        }
        seal_windowed(&mut out);
        out
    }

    #[test]
    fn windowed_round_trip_and_layout() {
        for g in [2u32, 4, 16] {
            for w in [None, Some(3_000_000_000)] {
                let b = windowed_image(g, w);
                let img = parse(&b).unwrap();
                let st = img.window.as_ref().unwrap();
                assert_eq!((st.window.generations(), st.window.window_ns()), (g, w));
                assert_eq!(st.window.epoch_ns(), 1_700_000_000_000_000_000);
                assert_eq!(st.current, 41);
                assert_eq!(st.last, (0..g as u64).map(|d| 42 - d).collect::<Vec<_>>());
                let words: Vec<u64> = img.words().collect();
                assert_eq!(words.len(), 2 * g as usize);
                assert_eq!(words[2 * (g as usize - 1) + 1], (g as u64 - 1) * 100 + 1);
                assert_eq!(img.to_bytes(), b);
                // The documented offsets.
                assert_eq!(b.len(), 80 + 8 * g as usize + 16 * g as usize + 8);
                assert_eq!(&b[8..12], &[2, 0, 0, 0]);
                assert_eq!(&b[20..24], &g.to_le_bytes());
                assert_eq!(&b[56..64], &w.unwrap_or(0).to_le_bytes());
                assert_eq!(&b[64..72], &1_700_000_000_000_000_000u64.to_le_bytes());
                assert_eq!(&b[72..80], &41u64.to_le_bytes());
                assert_eq!(&b[80..88], &42u64.to_le_bytes());
                let bits = 80 + 8 * g as usize;
                assert_eq!(&b[bits + 16..bits + 24], &100u64.to_le_bytes(), "generation 1 word 0");
            }
        }
    }

    #[test]
    fn windowed_flips_truncations_and_extensions_are_refused() {
        let b = windowed_image(3, Some(2_000_000_000));
        for byte in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[byte] ^= 1 << bit;
                assert!(parse(&c).is_err(), "flip {byte}.{bit}");
            }
        }
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_err(), "truncated to {n}");
        }
        let mut c = b.clone();
        c.extend([0; 8]);
        assert!(matches!(parse(&reseal(c)), Err(SerialError::Extended { .. })));
    }

    #[test]
    fn windowed_sealed_bad_fields_are_refused_by_name() {
        let good = windowed_image(4, Some(3_000_000_000));
        let put = |off: usize, v: &[u8]| {
            let mut c = good.clone();
            c[off..off + v.len()].copy_from_slice(v);
            parse(&reseal(c)).unwrap_err()
        };
        for g in [0u32, 1, 17, u32::MAX] {
            assert_eq!(put(20, &g.to_le_bytes()), SerialError::Generations(g), "g {g}");
        }
        // Another valid g: the generations no longer match the length.
        assert!(matches!(put(20, &3u32.to_le_bytes()), SerialError::Extended { .. }));
        assert!(matches!(put(20, &5u32.to_le_bytes()), SerialError::Truncated { .. }));
        assert!(matches!(put(20, &16u32.to_le_bytes()), SerialError::Truncated { .. }));
        // Windows out of range, or not a whole number of periods.
        for w in [
            1u64,
            Window::MIN_WINDOW_NS - 1,
            Window::MAX_WINDOW_NS + 3,
            3_000_000_001,
            u64::MAX,
        ] {
            assert_eq!(put(56, &w.to_le_bytes()), SerialError::Window, "window {w}");
        }
        // The generation number: the view word's range.
        assert_eq!(
            put(72, &(View::MAX_START + 1).to_le_bytes()),
            SerialError::Current(View::MAX_START + 1)
        );
        assert_eq!(put(72, &u64::MAX.to_le_bytes()), SerialError::Current(u64::MAX));
        for d in 0..4u32 {
            let off = WINDOWED_HEADER_LEN + 8 * d as usize;
            assert_eq!(
                put(off, &(MAX_LAST + 1).to_le_bytes()),
                SerialError::Last {
                    generation: d,
                    value: MAX_LAST + 1
                }
            );
        }
        // At the limits: accepted.
        let mut c = good.clone();
        c[72..80].copy_from_slice(&View::MAX_START.to_le_bytes());
        c[80..88].copy_from_slice(&MAX_LAST.to_le_bytes());
        c[56..64].copy_from_slice(&0u64.to_le_bytes());
        let c = reseal(c);
        let img = parse(&c).unwrap();
        assert_eq!(img.window.unwrap().window.window_ns(), None);
        // A windowed header on too few bytes for its fixed part.
        let mut short = good[..72].to_vec();
        short.extend([0; 8]);
        assert!(matches!(parse(&short), Err(SerialError::Truncated { need: 88, .. })));
        // Plain bytes with a non-zero word at 20 stay refused as before.
        let plain = image(20, 0.1, 5, |i| i as u64);
        let mut c = plain.clone();
        c[20..24].copy_from_slice(&4u32.to_le_bytes());
        assert_eq!(parse(&reseal(c)).unwrap_err(), SerialError::Reserved);
    }

    /// Random and mutated windowed inputs never panic.
    #[test]
    fn windowed_random_inputs_never_panic() {
        let base = windowed_image(5, None);
        let mut next = xorshift(0x0fed_cba9_8765_4321);
        for _ in 0..20_000 {
            let mut c = base.clone();
            match next() % 3 {
                0 => {
                    for _ in 0..(next() % 4 + 1) {
                        let i = (next() as usize) % c.len();
                        c[i] = next() as u8;
                    }
                }
                1 => c.truncate((next() as usize) % (base.len() + 1)),
                _ => c.extend((0..next() % 24).map(|_| next() as u8)),
            }
            let c = if next() % 2 == 0 && c.len() >= TRAILER_LEN {
                reseal(c)
            } else {
                c
            };
            if let Ok(img) = parse(&c) {
                assert_eq!(img.to_bytes(), c);
            }
        }
    }
    /// A grown image of 3 stages: its words numbered in order.
    fn grown_image(layout: crate::math::scheme::Layout) -> Vec<u8> {
        let growth = Growth::new(200, 0.01, layout, 2, None).unwrap();
        let mut g = growth.stage(0).unwrap();
        g.fp_rate = 0.01;
        let st = GrownState {
            growth,
            fills: vec![200, 400, 17],
        };
        let bits: Vec<u64> = (0..3).map(|i| growth.stage(i).unwrap().m).collect();
        let words: u64 = bits.iter().map(|m| m / 64).sum();
        let mut out = vec![0u8; grown_len(bits.into_iter()) as usize];
        write_grown(
            &g,
            5,
            &st,
            |f| (0..words).for_each(|i| f(i.wrapping_mul(0x9e37_79b9))),
            &mut out,
        );
        out
    }

    #[test]
    fn grown_round_trip_every_flip_truncation_and_bad_field() {
        use crate::math::scheme::Layout;
        for layout in [Layout::Standard, Layout::Blocked] {
            let b = grown_image(layout);
            let img = parse(&b).unwrap();
            let st = img.grown.as_ref().unwrap();
            assert_eq!(st.fills, [200, 400, 17]);
            assert_eq!(st.growth.factor(), 2);
            assert_eq!(img.seed, 5);
            let n = img.words().count() as u64;
            assert!(img
                .words()
                .enumerate()
                .all(|(i, w)| w == (i as u64).wrapping_mul(0x9e37_79b9)));
            assert_eq!(n, (0..3).map(|i| img.stage(i).m / 64).sum::<u64>());
            assert_eq!(img.to_bytes(), b);
            for byte in 0..b.len() {
                let mut c = b.clone();
                c[byte] ^= 0x10;
                assert!(parse(&c).is_err(), "{layout:?}: flip at {byte}");
            }
            for k in 0..b.len() {
                assert!(parse(&b[..k]).is_err(), "{layout:?}: truncated to {k}");
            }
            // Sealed again with a bad field: refused by name.
            let spoil = |off: usize, v: &[u8]| {
                let mut c = b.clone();
                c[off..off + v.len()].copy_from_slice(v);
                seal(&mut c);
                parse(&c).unwrap_err()
            };
            assert_eq!(spoil(56, &1u32.to_le_bytes()), SerialError::Growth);
            assert_eq!(spoil(56, &17u32.to_le_bytes()), SerialError::Growth);
            assert_eq!(spoil(60, &1u32.to_le_bytes()), SerialError::Reserved);
            assert_eq!(spoil(64, &100u64.to_le_bytes()), SerialError::Growth);
            assert_eq!(spoil(20, &0u32.to_le_bytes()), SerialError::Stages(0));
            assert_eq!(spoil(20, &33u32.to_le_bytes()), SerialError::Stages(33));
            assert!(matches!(spoil(20, &4u32.to_le_bytes()), SerialError::Truncated { .. }));
            assert!(matches!(spoil(20, &2u32.to_le_bytes()), SerialError::Extended { .. }));
            assert_eq!(spoil(16, &(img.geometry.k + 1).to_le_bytes()), SerialError::Growth);
        }
    }
}
