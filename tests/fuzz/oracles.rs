//! What must hold for any input, whoever feeds it: libFuzzer (`fuzz/`, see
//! `xt/fuzz.sh`) or the bounded mutation run and corpus replay of
//! `tests/hardening/fuzz_replay.rs`. Each function takes raw fuzz bytes, never panics on
//! hostile input, and panics (a finding) when the library breaks a promise.
//!
//! Every input starts with a flags byte. Bit 0 set: the checksum is made
//! right before the bytes are checked, so that mutations reach the field
//! checks behind it (a fuzzer would almost never forge an XXH3 by chance).

#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use bloomfilter_shared::hooks::datasketches;
use bloomfilter_shared::hooks::format::{self, CHECKED_LEN, HEADER_READ_LEN, IMMUTABLE_LEN, WINDOW_OFF};
use bloomfilter_shared::hooks::resp;
use bloomfilter_shared::hooks::serial;
use bloomfilter_shared::{ErrorKind, Filter, Target as To};

/// Largest file the `open` target builds (bigger ones are skipped: clearing
/// their bits would only slow the fuzzer down).
const OPEN_MAX: u64 = 8 << 20;

const RESEAL: u8 = 1;

/// Make the header checksums right: the immutable part's and, where the
/// bytes reach that far, the window facts'.
fn reseal_header(b: &mut [u8]) {
    if b.len() >= IMMUTABLE_LEN {
        let sum = xxhash_rust::xxh3::xxh3_64(&b[..CHECKED_LEN]);
        b[CHECKED_LEN..IMMUTABLE_LEN].copy_from_slice(&sum.to_ne_bytes());
    }
    let o = WINDOW_OFF as usize;
    if b.len() >= HEADER_READ_LEN {
        let sum = xxhash_rust::xxh3::xxh3_64(&b[o..o + 16]);
        b[o + 16..HEADER_READ_LEN].copy_from_slice(&sum.to_ne_bytes());
    }
}

/// Make the trailing checksum of portable bytes right.
fn reseal_serial(b: &mut [u8]) {
    if b.len() >= serial::TRAILER_LEN {
        let body = b.len() - serial::TRAILER_LEN;
        let sum = xxhash_rust::xxh3::xxh3_64(&b[..body]);
        b[body..].copy_from_slice(&sum.to_le_bytes());
    }
}

/// Header validation. Input: flags, the region's size (u64 LE), then header
/// bytes. `decode` accepts exactly what `encode` writes for a valid geometry
/// and a region of the matching size (or longer by at most a journal): the
/// immutable part, and a windowed filter's window facts or a grown filter's
/// growth facts.
pub fn decode(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let size = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let mut bytes = data[9..].to_vec();
    if data[0] & RESEAL != 0 {
        reseal_header(&mut bytes);
    }
    let bytes = &bytes[..];
    match format::decode(bytes, size) {
        Ok(h) => {
            assert!(h.geometry.is_valid(), "accepted an invalid geometry {:?}", h.geometry);
            // The filter's size, or longer by up to a journal's end.
            assert!(
                (h.layout().total..=format::max_size(&h)).contains(&size),
                "accepted a wrong size"
            );
            let want = format::encode(&h);
            assert_eq!(
                &want[..IMMUTABLE_LEN],
                &bytes[..IMMUTABLE_LEN],
                "accepted bytes encode would not write"
            );
            // A grown filter's growth facts share the window facts' bytes.
            if h.window.is_some() || h.growth.is_some() {
                let o = WINDOW_OFF as usize;
                assert_eq!(
                    &want[o..],
                    &bytes[o..HEADER_READ_LEN],
                    "accepted window or growth facts encode would not write"
                );
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Portable bytes. Input: flags, then the bytes. `parse` accepts exactly what
/// `write` produces, and `Filter::deserialize` agrees with it and round-trips.
pub fn serial(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if flags & RESEAL != 0 {
        reseal_serial(&mut bytes);
    }
    let data = &bytes[..];
    match serial::parse(data) {
        Ok(img) => {
            assert!(img.geometry.is_valid());
            assert_eq!(img.to_bytes(), data, "parse accepted bytes write would not produce");
            let f = Filter::deserialize(data, None, 0o600).expect("parse accepted, deserialize refused");
            assert_eq!(f.window(), img.window.as_ref().map(|st| st.window));
            assert_eq!(f.serialize().unwrap(), data, "deserialize does not round-trip");
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            let err = Filter::deserialize(data, None, 0o600).err();
            assert_eq!(
                err.map(|e| e.kind),
                Some(ErrorKind::Format),
                "parse refused, deserialize did not"
            );
        }
    }
}

/// A hostile file behind a descriptor. Input: flags, a selector byte, then
/// up to a page of header (magic, fields, checksum, the control line). The
/// file is that page, cut or padded with zeros to a size the selector picks:
/// the header's own `total` field plus a small delta (odd selectors), or the
/// page's length. Whatever opens must work on the geometry it validated.
pub fn open(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let (flags, sel) = (data[0], data[1]);
    let mut page = data[2..data.len().min(2 + format::PAGE as usize)].to_vec();
    if flags & RESEAL != 0 {
        reseal_header(&mut page);
    }
    let page = &page[..];
    let size = if sel & 1 == 1 && page.len() >= 64 {
        let total = u64::from_ne_bytes(page[56..64].try_into().unwrap());
        total.wrapping_add((sel >> 1) as u64).wrapping_sub(64)
    } else {
        page.len() as u64
    };
    if size > OPEN_MAX {
        return;
    }
    let fd = memfd_with(page, size);
    match Filter::from_fd(fd.as_raw_fd()) {
        Ok(f) => {
            let mut head = [0u8; HEADER_READ_LEN];
            let n = page.len().min(HEADER_READ_LEN);
            head[..n].copy_from_slice(&page[..n]);
            let h = format::decode(&head, size).expect("opened a file decode refuses");
            assert_eq!(f.geometry(), h.geometry);
            assert_eq!(
                f.mmap_size(),
                h.layout().total,
                "mapped from the header, not the file's size"
            );
            let _ = f.contains(b"probe");
            if f.readonly() {
                assert_eq!(f.add(b"x").unwrap_err().kind, ErrorKind::ReadOnly);
                assert_eq!(f.clear().unwrap_err().kind, ErrorKind::ReadOnly);
            } else {
                f.add(b"x").expect("add on an opened filter");
                assert!(f.contains(b"x"));
                f.clear().expect("clear on an opened filter");
                assert_eq!(f.bits_set(), 0);
            }
            let bytes = f.serialize().expect("serialize an opened filter");
            assert_eq!(bytes.len() as u64, f.serialized_size());
            serial::parse(&bytes).expect("an opened filter's bytes parse");
        }
        Err(e) => {
            assert!(!e.msg.is_empty());
            assert!(
                matches!(e.kind, ErrorKind::Format | ErrorKind::Io),
                "unexpected error kind {:?}: {}",
                e.kind,
                e.msg
            );
        }
    }
}

/// A memfd holding `page`, cut or zero-padded to `size` bytes.
fn memfd_with(page: &[u8], size: u64) -> OwnedFd {
    // SAFETY: a NUL-terminated name; flags are plain constants.
    let fd = unsafe { libc::memfd_create(b"fuzz\0".as_ptr().cast(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let n = page.len().min(size as usize);
    // SAFETY: `page` is valid for n bytes; plain syscalls on our descriptor.
    unsafe {
        assert_eq!(libc::pwrite(fd.as_raw_fd(), page.as_ptr().cast(), n, 0), n as isize);
        assert_eq!(libc::ftruncate(fd.as_raw_fd(), size as libc::off_t), 0);
    }
    fd
}

/// What a server sends back to a remote copy's own socket. Input: the
/// bytes, as they arrive. `resp::parse_reply` never takes more than there
/// is, waits (None) on every strict prefix of a reply it takes, takes the
/// same reply from just its own bytes, and otherwise refuses with a
/// message.
pub fn reply(data: &[u8]) {
    match resp::parse_reply(data) {
        Ok(Some((len, r))) => {
            assert!(len > 0 && len <= data.len(), "took {len} of {} bytes", data.len());
            assert_eq!(
                resp::parse_reply(&data[..len]).unwrap(),
                Some((len, r)),
                "the same reply from its own bytes"
            );
            for cut in [0, len / 2, len - 1] {
                assert_eq!(
                    resp::parse_reply(&data[..cut]).unwrap(),
                    None,
                    "a prefix of {cut} bytes"
                );
            }
        }
        Ok(None) => {}
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Apache DataSketches' serialized Bloom filter. Input: flags (unused),
/// then the image. `datasketches::parse` accepts exactly what `write`
/// produces, but for two forms DataSketches also writes and reads: an
/// uncounted num_bits_set (2^64 - 1), and a non-empty preamble over words
/// all 0 (`write` gives their counted, or empty, form); the filter made
/// from an image gives its bits back; a refused image is refused by the
/// filter's constructor with a format error.
pub fn image(data: &[u8]) {
    let Some((_, data)) = data.split_first() else {
        return;
    };
    match datasketches::parse(data) {
        Ok(img) => {
            assert!(
                img.geometry.is_valid(),
                "accepted an invalid geometry {:?}",
                img.geometry
            );
            if img.geometry.bytes() > OPEN_MAX {
                // An empty image of many words: valid, but too large to
                // build here (see OPEN_MAX).
                return;
            }
            let f = datasketches::deserialize_to(data, To::Anonymous, None, None)
                .unwrap_or_else(|e| panic!("parse accepted, deserialize refused: {e}"));
            let words: Vec<u64> = img.words().collect();
            let set: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
            assert_eq!(f.bits_set(), set);
            let mut want = data.to_vec();
            if set == 0 {
                want.truncate(datasketches::EMPTY_LEN);
                want[0] = 3;
                want[3] = datasketches::EMPTY_FLAG;
            } else {
                want[24..32].copy_from_slice(&set.to_le_bytes());
            }
            assert_eq!(
                datasketches::write(&f).unwrap(),
                want,
                "deserialize does not round-trip"
            );
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            let err = datasketches::deserialize_to(data, To::Anonymous, None, None).err();
            assert_eq!(
                err.map(|e| e.kind),
                Some(ErrorKind::Format),
                "parse refused, deserialize did not"
            );
        }
    }
}

/// A fuzz target: raw bytes in, a panic on a broken promise.
pub type Target = fn(&[u8]);

/// The targets by name, for the replay and mutation runs.
pub const TARGETS: [(&str, Target); 5] = [
    ("decode", decode),
    ("serial", serial),
    ("open", open),
    ("reply", reply),
    ("image", image),
];
