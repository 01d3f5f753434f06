//! Portable bytes: a versioned, little-endian image of a filter.
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
//! All integers little-endian; filter bit `i` is bit `i % 64` of word `i / 64`.
//! The input of `parse` is hostile: every field
//! and the exact length are checked before anything is allocated, and the
//! largest allocation a valid input can ask for is its own bit array.

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

#[cfg(test)]
use crate::format::HASH_SCHEME;
use crate::geometry::Geometry;
use crate::layout::Scheme;

pub const MAGIC: [u8; 8] = *b"BLOOMSER";
pub const SERIAL_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 56;
pub const TRAILER_LEN: usize = 8;

/// The serialized size of a filter of `m` bits.
pub fn serialized_len(m: u64) -> u64 {
    HEADER_LEN as u64 + m / 8 + TRAILER_LEN as u64
}

/// Write a filter's image into `out` (exactly `serialized_len` bytes).
/// `words` yields the bit words in order.
pub fn write(g: &Geometry, seed: u64, words: impl FnOnce(&mut dyn FnMut(u64)), out: &mut [u8]) {
    assert_eq!(out.len() as u64, serialized_len(g.m));
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&SERIAL_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&g.scheme.id().to_le_bytes());
    out[16..20].copy_from_slice(&g.k.to_le_bytes());
    out[20..24].copy_from_slice(&0u32.to_le_bytes());
    out[24..32].copy_from_slice(&g.m.to_le_bytes());
    out[32..40].copy_from_slice(&g.capacity.to_le_bytes());
    out[40..48].copy_from_slice(&g.fp_rate.to_bits().to_le_bytes());
    out[48..56].copy_from_slice(&seed.to_le_bytes());
    let mut pos = HEADER_LEN;
    words(&mut |w| {
        out[pos..pos + 8].copy_from_slice(&w.to_le_bytes());
        pos += 8;
    });
    debug_assert_eq!(pos, out.len() - TRAILER_LEN);
    let sum = xxh3_64(&out[..pos]);
    out[pos..].copy_from_slice(&sum.to_le_bytes());
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
        }
    }
}

fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
fn le64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// A validated image: geometry, seed, and the bytes of the bit array.
#[derive(Debug)]
pub struct Image<'a> {
    pub geometry: Geometry,
    pub seed: u64,
    bits: &'a [u8],
}

impl Image<'_> {
    /// The bit words in order.
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.bits.chunks_exact(8).map(|c| le64(c, 0))
    }
}

/// Validate `b` completely; allocates nothing.
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
    if version != SERIAL_VERSION {
        return Err(SerialError::Version(version));
    }
    let id = le32(b, 12);
    let Some(scheme) = Scheme::from_id(id) else {
        return Err(SerialError::HashScheme(id));
    };
    if le32(b, 20) != 0 {
        return Err(SerialError::Reserved);
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
    let need = serialized_len(geometry.m);
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
    Ok(Image {
        geometry,
        seed: le64(b, 48),
        bits: &b[HEADER_LEN..body],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(put32(8, 2), SerialError::Version(2));
        assert_eq!(put32(12, 4), SerialError::HashScheme(4));
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
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
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
}
