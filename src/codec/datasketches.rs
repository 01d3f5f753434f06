//! Apache DataSketches' serialized Bloom filter ("image"), in and out: the
//! bytes its Java, C++ and Rust versions write and read (family 21, serial
//! version 1), for a filter of the `datasketches` layout.
//!
//! ```text
//! 0   preamble longs: 3 empty, 4 otherwise   u8
//! 1   serial version (1)                     u8
//! 2   family (21, Bloom filter)              u8
//! 3   flags: bit 2 (4) empty, no other       u8
//! 4   num_hashes k, 1 to 32767               u16
//! 6   unused (0)                             u16
//! 8   seed                                   u64
//! 16  num_longs: words, 1 to 2^31 - 5        i32
//! 20  unused (0)                             u32
//!     -- only when not empty --
//! 24  num_bits_set (or 2^64 - 1: unknown)    u64
//! 32  the bit array, num_longs words         u64 each
//! ```
//!
//! All integers little-endian; filter bit `i` is bit `i % 64` of word
//! `i / 64`, as in our own bytes and files. An empty image (no bit set) is
//! the 24 bytes of its preamble. The input of `parse` is hostile: every
//! field and the exact length are checked before anything is allocated.
//! An image stores neither a capacity nor a rate: a filter made from one
//! has those `Geometry::datasketches_implied` gives its m and k.

use crate::error::{Error, ErrorKind, Result};
use crate::filter::{within_ceiling, Filter, Target, WindowOptions};
use crate::math::datasketches::{MAX_BITS, MAX_K};
use crate::math::geometry::Geometry;
use crate::math::scheme::{Layout, Scheme};
use crate::shm::region;

/// The DataSketches family of a Bloom filter.
pub const FAMILY: u8 = 21;
/// The serial version written and read.
pub const SERIAL_VERSION: u8 = 1;
/// The flag of an empty image.
pub const EMPTY_FLAG: u8 = 1 << 2;
/// The preamble of an empty image, in bytes.
pub const EMPTY_LEN: usize = 24;
/// Where the words start in a non-empty image.
pub const WORDS_OFF: usize = 32;

/// Whether `b` is meant as a DataSketches image (its family byte says so):
/// our own bytes begin with "BLOOMSER", whose third byte is 'O'.
pub fn is_image(b: &[u8]) -> bool {
    b.len() >= 3 && b[2] == FAMILY
}

/// What is wrong with an image, naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    Truncated {
        len: usize,
        need: u64,
    },
    Extended {
        len: usize,
        need: u64,
    },
    Field {
        field: &'static str,
        value: u64,
        want: &'static str,
    },
}

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageError::Truncated { len, need } => {
                write!(f, "truncated DataSketches image ({len} bytes, need {need})")
            }
            ImageError::Extended { len, need } => {
                write!(f, "extended DataSketches image ({len} bytes, expected {need})")
            }
            ImageError::Field { field, value, want } => {
                write!(f, "bad {field} {value} in DataSketches image ({want})")
            }
        }
    }
}

/// A validated image.
#[derive(Debug)]
pub struct Image<'a> {
    pub geometry: Geometry,
    pub seed: u64,
    /// The words' bytes; empty for an empty image.
    bits: &'a [u8],
}

impl Image<'_> {
    /// The bit array's words (none for an empty image: all 0).
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.bits
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("chunks of 8")))
    }
}

fn field(field: &'static str, value: u64, want: &'static str) -> ImageError {
    ImageError::Field { field, value, want }
}

fn le(b: &[u8], off: usize, n: usize) -> u64 {
    b[off..off + n].iter().rev().fold(0, |a, &x| a << 8 | x as u64)
}

/// Check every field of `b` (see the module documentation).
pub fn parse(b: &[u8]) -> std::result::Result<Image<'_>, ImageError> {
    if b.len() < EMPTY_LEN {
        return Err(ImageError::Truncated {
            len: b.len(),
            need: EMPTY_LEN as u64,
        });
    }
    if b[2] != FAMILY {
        return Err(field("family", b[2] as u64, "21, a Bloom filter"));
    }
    if b[1] != SERIAL_VERSION {
        return Err(field("serial_version", b[1] as u64, "1"));
    }
    let flags = b[3];
    if flags & !EMPTY_FLAG != 0 {
        return Err(field("flags", flags as u64, "only the empty flag, 4"));
    }
    let empty = flags & EMPTY_FLAG != 0;
    let pre = b[0];
    if pre != if empty { 3 } else { 4 } {
        return Err(field("preamble_longs", pre as u64, "3 when empty, 4 otherwise"));
    }
    let k = le(b, 4, 2) as u32;
    if !(1..=MAX_K).contains(&k) {
        return Err(field("num_hashes", k as u64, "1 to 32767"));
    }
    if le(b, 6, 2) != 0 {
        return Err(field("unused bytes 6-7", le(b, 6, 2), "0"));
    }
    let seed = le(b, 8, 8);
    let longs = le(b, 16, 4) as u32 as i32;
    if longs < 1 || longs as u64 * 64 > MAX_BITS {
        return Err(field("num_longs", longs as i64 as u64, "1 to 2^31 - 5"));
    }
    if le(b, 20, 4) != 0 {
        return Err(field("unused bytes 20-23", le(b, 20, 4), "0"));
    }
    let words = longs as u64;
    let need = if empty {
        EMPTY_LEN as u64
    } else {
        WORDS_OFF as u64 + 8 * words
    };
    if (b.len() as u64) < need {
        return Err(ImageError::Truncated { len: b.len(), need });
    }
    if b.len() as u64 > need {
        return Err(ImageError::Extended { len: b.len(), need });
    }
    let bits = if empty { &b[..0] } else { &b[WORDS_OFF..] };
    if !empty {
        let stored = le(b, 24, 8);
        let set: u64 = bits
            .chunks_exact(8)
            .map(|w| w.iter().map(|x| x.count_ones() as u64).sum::<u64>())
            .sum();
        if stored != u64::MAX && stored != set {
            return Err(field("num_bits_set", stored, "the bits set in the array, or 2^64 - 1"));
        }
    }
    let geometry = Geometry::datasketches_implied(words * 64, k);
    debug_assert!(geometry.is_valid());
    Ok(Image { geometry, seed, bits })
}

/// The most bytes `write` gives a filter of `m` bits.
pub fn max_len(m: u64) -> u64 {
    WORDS_OFF as u64 + m / 8
}

/// The image of `f`, a plain filter of the `datasketches` layout.
pub fn write(f: &Filter) -> Result<Vec<u8>> {
    let g = f.geometry();
    if g.scheme != Scheme::DataSketches {
        return Err(Error::arg(format!(
            "format 'datasketches' needs a filter of layout 'datasketches' (this one is {}): create it with layout => 'datasketches'",
            g.layout().name()
        )));
    }
    if f.window().is_some() {
        return Err(Error::arg(
            "format 'datasketches' holds one bit array, not a windowed filter's generations",
        ));
    }
    let mut words = Vec::with_capacity(g.words());
    f.for_each_word(|w| words.push(w));
    let set: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
    let empty = set == 0;
    let mut out = Vec::with_capacity(if empty { EMPTY_LEN } else { WORDS_OFF + 8 * words.len() });
    out.extend_from_slice(&[
        if empty { 3 } else { 4 },
        SERIAL_VERSION,
        FAMILY,
        if empty { EMPTY_FLAG } else { 0 },
    ]);
    out.extend_from_slice(&(g.k as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&f.seed().to_le_bytes());
    out.extend_from_slice(&(words.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    if !empty {
        out.extend_from_slice(&set.to_le_bytes());
        for w in &words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    Ok(out)
}

/// A new filter of the `datasketches` layout at `to` from an image. An
/// explicit `layout` other than it is refused ("layout mismatch"), as is a
/// `window` (an image is one bit array).
// The C API calls `deserialize_limited`; the tests and fuzz oracles this.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub fn deserialize_to(
    bytes: &[u8],
    to: Target<'_>,
    layout: Option<Layout>,
    window: Option<WindowOptions>,
) -> Result<Filter> {
    deserialize_limited(bytes, to, layout, window, None)
}

/// `deserialize_to`, the filter's memory at most `max_bytes` (None: the
/// default ceiling, `Filter::deserialize_limited`'s): an empty image
/// declares up to 16 GiB in 24 bytes, refused here before anything is
/// allocated.
pub fn deserialize_limited(
    bytes: &[u8],
    to: Target<'_>,
    layout: Option<Layout>,
    window: Option<WindowOptions>,
    max_bytes: Option<u64>,
) -> Result<Filter> {
    let img = parse(bytes).map_err(|e| Error::format(e.to_string()))?;
    if let Some(l) = layout {
        if l != Layout::DataSketches {
            return Err(Error::new(
                ErrorKind::Mismatch,
                format!(
                    "layout mismatch (the bytes are of a datasketches filter, not {})",
                    l.name()
                ),
            ));
        }
    }
    if window.is_some() {
        return Err(Error::arg(
            "a DataSketches image makes a plain filter: the window options do not apply to it",
        ));
    }
    let h = region::new_header(img.geometry, img.seed);
    within_ceiling(h.layout().total, bytes.len(), max_bytes)?;
    Filter::with_state(h, to, None, &|put| {
        for (i, w) in img.words().enumerate() {
            put(i, w);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Options;

    fn ds(cap: u64, rate: f64, seed: u64) -> Filter {
        let o = Options {
            seed,
            layout: Some(Layout::DataSketches),
            ..Options::default()
        };
        Filter::new_anonymous(cap, rate, o).unwrap()
    }

    /// Property: an image read back is the same filter (geometry, seed,
    /// bits, answers), empty or not; its bytes are the same again.
    #[test]
    fn round_trip() {
        for (cap, rate, seed) in [(100u64, 0.01, 9001u64), (1, 0.5, 0), (5000, 0.001, u64::MAX)] {
            let f = ds(cap, rate, seed);
            let empty = write(&f).unwrap();
            assert_eq!(empty.len(), EMPTY_LEN);
            assert_eq!(&empty[..4], &[3, 1, 21, 4]);
            for i in 0..cap / 2 + 1 {
                f.add(&i.to_le_bytes()).unwrap();
            }
            let b = write(&f).unwrap();
            assert_eq!(b.len(), WORDS_OFF + f.geometry().bytes() as usize);
            assert_eq!(&b[..4], &[4, 1, 21, 0]);
            let d = deserialize_to(&b, Target::Anonymous, None, None).unwrap();
            assert_eq!(
                (d.geometry().m, d.geometry().k, d.seed()),
                (f.geometry().m, f.geometry().k, seed)
            );
            for i in 0..cap {
                assert_eq!(d.contains(&i.to_le_bytes()), f.contains(&i.to_le_bytes()));
            }
            assert_eq!(write(&d).unwrap(), b);
            let e = deserialize_to(&empty, Target::Anonymous, None, None).unwrap();
            assert_eq!(e.bits_set(), 0);
            assert_eq!(write(&e).unwrap(), empty);
        }
    }

    /// Each field spoiled alone is refused, naming it; never a panic.
    #[test]
    fn hostile_fields() {
        let f = ds(100, 0.01, 7);
        f.add(b"x").unwrap();
        let good = write(&f).unwrap();
        assert!(parse(&good).is_ok());
        let spoil = |at: usize, v: u8| {
            let mut b = good.clone();
            b[at] = v;
            parse(&b).unwrap_err().to_string()
        };
        assert!(spoil(0, 3).contains("preamble_longs"));
        assert!(spoil(1, 2).contains("serial_version"));
        assert!(spoil(2, 22).contains("family"));
        assert!(spoil(3, 1).contains("flags"));
        assert!(spoil(3, 4).contains("preamble_longs"));
        assert!(spoil(6, 1).contains("unused bytes 6-7"));
        assert!(spoil(21, 1).contains("unused bytes 20-23"));
        assert!(spoil(24, 0xff).contains("num_bits_set"));
        assert!(spoil(40, !good[40]).contains("num_bits_set"));
        let mut b = good.clone();
        b[4..6].copy_from_slice(&0u16.to_le_bytes());
        assert!(parse(&b).unwrap_err().to_string().contains("num_hashes 0"));
        b[4..6].copy_from_slice(&32768u16.to_le_bytes());
        assert!(parse(&b).unwrap_err().to_string().contains("num_hashes 32768"));
        for longs in [0i32, -1, i32::MIN, i32::MAX] {
            let mut b = good.clone();
            b[16..20].copy_from_slice(&longs.to_le_bytes());
            assert!(parse(&b).unwrap_err().to_string().contains("num_longs"), "{longs}");
        }
        // A word count past the bytes given: truncated, nothing allocated.
        let mut b = good.clone();
        b[16..20].copy_from_slice(&(i32::MAX - 4).to_le_bytes());
        assert!(parse(&b).unwrap_err().to_string().contains("truncated"));
        for n in 0..good.len() {
            assert!(parse(&good[..n]).unwrap_err().to_string().contains("truncated"), "{n}");
        }
        let mut b = good.clone();
        b.push(0);
        assert!(parse(&b).unwrap_err().to_string().contains("extended"));
        // Not counted (2^64 - 1) is accepted, as DataSketches does.
        let mut b = good.clone();
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&b).is_ok());
    }

    /// An empty image declares its size without its words: past the
    /// ceiling (64 times its 24 bytes, at least 16 MiB) it is refused
    /// before anything is allocated, unless `max_bytes` allows it.
    #[test]
    fn an_empty_image_is_held_to_the_ceiling() {
        let empty = |longs: i32| {
            let mut b = write(&ds(100, 0.01, 9001)).unwrap();
            b[16..20].copy_from_slice(&longs.to_le_bytes());
            b
        };
        let huge = empty(1 << 28);
        assert!(parse(&huge).is_ok(), "a valid image");
        let e = deserialize_limited(&huge, Target::Anonymous, None, None, None)
            .err()
            .unwrap();
        assert_eq!(e.kind, ErrorKind::Arg);
        assert!(e.msg.contains("(2 GiB), more than the 16777216 bytes"), "{}", e.msg);
        let fits = empty(1 << 20); // 8 MiB of words
        let f = deserialize_limited(&fits, Target::Anonymous, None, None, None).unwrap();
        assert_eq!(f.geometry().m, 1 << 26);
        let e = deserialize_limited(&fits, Target::Anonymous, None, None, Some(8 << 20))
            .err()
            .unwrap();
        assert!(
            e.msg.contains("more than max_bytes allows (8388608 bytes)"),
            "{}",
            e.msg
        );
    }

    #[test]
    fn other_layouts_and_windows_are_refused() {
        let f = Filter::new_anonymous(100, 0.01, Options::default()).unwrap();
        let e = write(&f).unwrap_err().to_string();
        assert!(e.contains("layout => 'datasketches'") && e.contains("standard"), "{e}");
        let g = ds(100, 0.01, 1);
        let b = write(&g).unwrap();
        let e = deserialize_to(&b, Target::Anonymous, Some(Layout::Blocked), None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("layout mismatch"), "{e}");
        let w = WindowOptions::from_secs(0.0, Some(3)).unwrap();
        assert!(deserialize_to(&b, Target::Anonymous, None, Some(w)).is_err());
        assert!(is_image(&b) && !is_image(b"BLOOMSER") && !is_image(b"ab"));
    }
}
