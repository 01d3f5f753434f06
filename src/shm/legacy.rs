//! The file format of the original C module (`Data::BloomFilter::Shared`
//! 0.04 and earlier): recognising its header, so that such a file is named
//! for what it is, and reading the geometry the converter carries over.
//! Pure: bytes in, a parsed header or the reason it is refused out.
//!
//! Both of its versions begin with the same 256-byte little-endian header
//! (version 1, and version 2 which added a region between the reader slots
//! and the bits):
//!
//! ```text
//! offset  size  field
//! 0       4     magic       0x4D4F4F42 ("BOOM" in file order)
//! 4       4     version     1 or 2 (u32)
//! 8       4     k           probes per item (u32)
//! 16      8     m_bits      bits, a power of two (u64)
//! 32      8     capacity    (u64)
//! 40      8     fp_rate     IEEE-754 double
//! 48      8     total_size  the file's size in bytes (u64)
//! 64      8     bits_off    where the bit array starts (u64)
//! 88      8     stat_ops    operations so far (u64)
//! ```
//!
//! The bit array is `m_bits / 8` bytes at `bits_off`, 64-bit words in the
//! same order as ours: bit `i` is bit `i % 64` of word `i / 64`. Its hashing
//! is ours with seed 0.

use crate::math::geometry::{Geometry, MAX_BITS, MAX_K, MIN_BITS, MIN_K};
use crate::shm::serial::{le32, le64};

/// The header's size, and the least a legacy file can be.
pub const HEADER_LEN: usize = 256;
/// The magic as the file's first four bytes.
pub const MAGIC: [u8; 4] = 0x4D4F_4F42u32.to_le_bytes();
/// The versions 0.04 and its predecessors wrote.
pub const VERSIONS: [u32; 2] = [1, 2];

/// What an original file's header says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LegacyHeader {
    pub version: u32,
    pub geometry: Geometry,
    pub total_size: u64,
    pub bits_off: u64,
    pub ops: u64,
}

/// Why bytes are not a usable file of the original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LegacyError {
    /// Fewer than `HEADER_LEN` bytes.
    Truncated(u64),
    /// Not the original's magic.
    BadMagic,
    UnknownVersion(u32),
    /// k outside 1..=32.
    BadK(u32),
    /// m not a power of two in 64..=2^38.
    BadBits(u64),
    BadCapacity,
    BadFpRate,
    /// total_size is not the file's size.
    SizeMismatch {
        header: u64,
        actual: u64,
    },
    /// The bit array does not lie after the header and inside the file.
    BitsOutOfRange {
        bits_off: u64,
        bytes: u64,
        total: u64,
    },
}

impl std::fmt::Display for LegacyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LegacyError::Truncated(n) => {
                write!(f, "file of the original module is truncated ({n} bytes, header needs {HEADER_LEN})")
            }
            LegacyError::BadMagic => f.write_str("not a file of Data::BloomFilter::Shared 0.04 (bad magic)"),
            LegacyError::UnknownVersion(v) => write!(f, "unknown format version {v} of the original module"),
            LegacyError::BadK(k) => write!(f, "invalid hash count {k} in header (corrupted file)"),
            LegacyError::BadBits(m) => write!(f, "invalid bit count {m} in header (corrupted file)"),
            LegacyError::BadCapacity => f.write_str("invalid capacity in header (corrupted file)"),
            LegacyError::BadFpRate => f.write_str("invalid fp_rate in header (corrupted file)"),
            LegacyError::SizeMismatch { header, actual } => {
                write!(f, "file is {actual} bytes, header says {header} (truncated or grown)")
            }
            LegacyError::BitsOutOfRange { bits_off, bytes, total } => write!(
                f,
                "bit array of {bytes} bytes at offset {bits_off} does not fit in {total} bytes after the header (corrupted file)"
            ),
        }
    }
}

/// Whether `b` begins with the original's magic (however damaged the rest).
pub fn has_magic(b: &[u8]) -> bool {
    b.len() >= MAGIC.len() && b[..MAGIC.len()] == MAGIC
}

/// Parse and validate the header at the start of `b`, for a file of
/// `actual_size` bytes. `b` needs only the header (at least `HEADER_LEN`
/// bytes); every field is checked, in the order of `LegacyError`.
pub fn parse(b: &[u8], actual_size: u64) -> Result<LegacyHeader, LegacyError> {
    if b.len() < HEADER_LEN || actual_size < HEADER_LEN as u64 {
        return Err(LegacyError::Truncated(actual_size.min(b.len() as u64)));
    }
    if !has_magic(b) {
        return Err(LegacyError::BadMagic);
    }
    let version = le32(b, 4);
    if !VERSIONS.contains(&version) {
        return Err(LegacyError::UnknownVersion(version));
    }
    let k = le32(b, 8);
    if !(MIN_K..=MAX_K).contains(&k) {
        return Err(LegacyError::BadK(k));
    }
    let m = le64(b, 16);
    if !m.is_power_of_two() || !(MIN_BITS..=MAX_BITS).contains(&m) {
        return Err(LegacyError::BadBits(m));
    }
    let capacity = le64(b, 32);
    if capacity == 0 {
        return Err(LegacyError::BadCapacity);
    }
    let fp_rate = f64::from_bits(le64(b, 40));
    if !(fp_rate > 0.0 && fp_rate < 1.0) {
        return Err(LegacyError::BadFpRate);
    }
    let total_size = le64(b, 48);
    if total_size != actual_size {
        return Err(LegacyError::SizeMismatch {
            header: total_size,
            actual: actual_size,
        });
    }
    let bits_off = le64(b, 64);
    let bytes = m / 8;
    let fits = bits_off >= HEADER_LEN as u64
        && bits_off % 8 == 0
        && bits_off.checked_add(bytes).is_some_and(|end| end <= total_size);
    if !fits {
        return Err(LegacyError::BitsOutOfRange {
            bits_off,
            bytes,
            total: total_size,
        });
    }
    let geometry = Geometry {
        k,
        m,
        capacity,
        fp_rate,
        // The original knew only bloom.h's layout.
        scheme: crate::math::scheme::Scheme::Standard,
    };
    debug_assert!(geometry.is_valid());
    Ok(LegacyHeader {
        version,
        geometry,
        total_size,
        bits_off,
        ops: le64(b, 88),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rng::xorshift;

    /// A header as the original wrote it, for a file of `bits_off + m/8`
    /// bytes (plus `tail`).
    fn header(version: u32, k: u32, m: u64, capacity: u64, fp: f64, bits_off: u64, tail: u64) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&version.to_le_bytes());
        b[8..12].copy_from_slice(&k.to_le_bytes());
        b[16..24].copy_from_slice(&m.to_le_bytes());
        b[32..40].copy_from_slice(&capacity.to_le_bytes());
        b[40..48].copy_from_slice(&fp.to_le_bytes());
        b[48..56].copy_from_slice(&(bits_off + m / 8 + tail).to_le_bytes());
        b[64..72].copy_from_slice(&bits_off.to_le_bytes());
        b[88..96].copy_from_slice(&12345u64.to_le_bytes());
        b
    }

    fn size_of(b: &[u8]) -> u64 {
        le64(b, 48)
    }

    #[test]
    fn magic_is_boom_in_file_order() {
        assert_eq!(&MAGIC, b"BOOM");
        assert!(has_magic(b"BOOMxyz"));
        assert!(!has_magic(b"BOO"));
        assert!(!has_magic(b"BLOOMSHM"));
    }

    #[test]
    fn both_versions_parse() {
        for (version, off) in [(1u32, 4096u64), (2, 8192), (2, 256)] {
            let b = header(version, 7, 1 << 14, 1000, 0.01, off, 0);
            let h = parse(&b, size_of(&b)).unwrap();
            assert_eq!(h.version, version);
            assert_eq!(
                h.geometry,
                Geometry {
                    k: 7,
                    m: 1 << 14,
                    capacity: 1000,
                    fp_rate: 0.01,
                    scheme: crate::math::scheme::Scheme::Standard,
                }
            );
            assert_eq!((h.bits_off, h.total_size, h.ops), (off, off + 2048, 12345));
        }
    }

    #[test]
    fn the_extremes_of_every_field_parse() {
        for (k, m) in [(MIN_K, MIN_BITS), (MAX_K, MAX_BITS)] {
            let b = header(1, k, m, u64::MAX, f64::MIN_POSITIVE, 256, 0);
            assert!(parse(&b, size_of(&b)).is_ok(), "k {k} m {m}");
        }
        // Room after the bit array is allowed (the size must still match).
        let b = header(2, 3, 64, 1, 0.999, 512, 4096);
        assert!(parse(&b, size_of(&b)).is_ok());
    }

    #[test]
    fn truncated_headers_are_refused() {
        let b = header(1, 7, 1 << 14, 1000, 0.01, 4096, 0);
        for n in [0usize, 3, 4, 100, HEADER_LEN - 1] {
            assert_eq!(parse(&b[..n], n as u64), Err(LegacyError::Truncated(n as u64)));
        }
        // The whole header in hand, but the file is said to be shorter.
        assert_eq!(parse(&b, 10), Err(LegacyError::Truncated(10)));
    }

    #[test]
    fn bad_magic_and_versions_are_refused() {
        let mut b = header(1, 7, 1 << 14, 1000, 0.01, 4096, 0);
        let size = size_of(&b);
        b[0] = b'X';
        assert_eq!(parse(&b, size), Err(LegacyError::BadMagic));
        for v in [0u32, 3, 4, u32::MAX] {
            let b = header(v, 7, 1 << 14, 1000, 0.01, 4096, 0);
            assert_eq!(parse(&b, size), Err(LegacyError::UnknownVersion(v)));
        }
    }

    #[test]
    fn bad_k_is_refused() {
        for k in [0u32, 33, 1000, u32::MAX] {
            let b = header(1, k, 1 << 14, 1000, 0.01, 4096, 0);
            assert_eq!(parse(&b, size_of(&b)), Err(LegacyError::BadK(k)));
        }
    }

    #[test]
    fn bad_bit_counts_are_refused() {
        // Not a power of two, too small, too large.
        for m in [0u64, 1, 32, 100, 1000, (1 << 14) + 64, MAX_BITS * 2, 1 << 63] {
            let b = header(1, 7, m, 1000, 0.01, 4096, 0);
            assert_eq!(parse(&b, size_of(&b)), Err(LegacyError::BadBits(m)), "m {m}");
        }
        // A power of two whose byte count would overflow the size field.
        let mut b = header(1, 7, 64, 1000, 0.01, 4096, 0);
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse(&b, size_of(&b)), Err(LegacyError::BadBits(u64::MAX)));
    }

    #[test]
    fn bad_capacity_and_rates_are_refused() {
        let b = header(1, 7, 1 << 14, 0, 0.01, 4096, 0);
        assert_eq!(parse(&b, size_of(&b)), Err(LegacyError::BadCapacity));
        for fp in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY, -0.0] {
            let b = header(1, 7, 1 << 14, 1000, fp, 4096, 0);
            assert_eq!(parse(&b, size_of(&b)), Err(LegacyError::BadFpRate), "fp {fp}");
        }
    }

    #[test]
    fn a_size_other_than_the_files_is_refused() {
        let b = header(2, 7, 1 << 14, 1000, 0.01, 4096, 0);
        let size = size_of(&b);
        for actual in [size - 1, size + 1, HEADER_LEN as u64, u64::MAX] {
            assert_eq!(
                parse(&b, actual),
                Err(LegacyError::SizeMismatch { header: size, actual })
            );
        }
    }

    #[test]
    fn bits_out_of_range_are_refused() {
        let m = 1u64 << 14;
        // Inside the header, misaligned, past the end, and wrapping around.
        for off in [0u64, 8, 255, 260, 4097] {
            let b = header(2, 7, m, 1000, 0.01, off, 0);
            let e = parse(&b, size_of(&b)).unwrap_err();
            assert!(matches!(e, LegacyError::BitsOutOfRange { .. }), "off {off}: {e}");
        }
        let mut b = header(2, 7, m, 1000, 0.01, 4096, 0);
        let size = size_of(&b);
        b[64..72].copy_from_slice(&(size - m / 8 + 8).to_le_bytes());
        assert!(matches!(parse(&b, size), Err(LegacyError::BitsOutOfRange { .. })));
        b[64..72].copy_from_slice(&(u64::MAX - 7).to_le_bytes());
        assert!(matches!(parse(&b, size), Err(LegacyError::BitsOutOfRange { .. })));
    }

    #[test]
    fn every_message_names_the_problem() {
        let cases = [
            (LegacyError::Truncated(9), "truncated"),
            (LegacyError::BadMagic, "bad magic"),
            (LegacyError::UnknownVersion(9), "version 9"),
            (LegacyError::BadK(99), "hash count 99"),
            (LegacyError::BadBits(100), "bit count 100"),
            (LegacyError::BadCapacity, "capacity"),
            (LegacyError::BadFpRate, "fp_rate"),
            (
                LegacyError::SizeMismatch { header: 5, actual: 6 },
                "6 bytes, header says 5",
            ),
            (
                LegacyError::BitsOutOfRange {
                    bits_off: 7,
                    bytes: 8,
                    total: 9,
                },
                "offset 7",
            ),
        ];
        for (e, want) in cases {
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    /// No input makes `parse` panic: every header of random field values.
    #[test]
    fn random_headers_never_panic() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        let mut x = 0;
        for _ in 0..20_000 {
            let mut b = vec![0u8; HEADER_LEN];
            for chunk in b.chunks_mut(8) {
                x = next();
                chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
            }
            b[0..4].copy_from_slice(&MAGIC);
            b[4] = (x % 3) as u8;
            b[5..8].fill(0);
            let _ = parse(&b, x >> (x % 64));
            let _ = parse(&b, size_of(&b));
        }
    }
}
