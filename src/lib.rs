//! A Bloom filter in shared memory for many processes.
//!
//! The core of the Perl module `Data::BloomFilter::Shared`, usable as a Rust
//! crate on its own. Hashing and sizing are bit-compatible with the earlier
//! C `bloom.h`: the same items, capacity and rate set exactly the same bits.
//!
//! ```
//! use bloomfilter_shared::{Filter, Options};
//! let f = Filter::new_anonymous(10_000, 0.01, Options::default()).unwrap();
//! assert!(f.add(b"alice").unwrap());     // probably new
//! assert!(!f.add(b"alice").unwrap());    // seen
//! assert!(f.contains(b"alice"));
//! ```
//!
//! Modules, one idea each: `geometry` (sizing math), `hashing` (item to
//! probes), `format` (the shared header), `region` (mapping), `sync` (the
//! process-shared lock protocol), `filter` (operations), `serial` (portable
//! bytes), `ffi` (the C API, no logic).

#![deny(unsafe_op_in_unsafe_fn)]

pub mod error;
pub mod ffi;
pub mod filter;
pub mod format;
pub mod geometry;
pub mod hashing;
pub mod region;
pub mod serial;
pub mod sync;

pub use error::{Error, ErrorKind, Result};
pub use filter::{Filter, Options};
pub use geometry::Geometry;

impl Filter {
    /// The filter's portable bytes (see `serial`).
    pub fn serialize(&self) -> Vec<u8> {
        let g = self.geometry();
        let mut out = vec![0u8; serial::serialized_len(g.m) as usize];
        self.serialize_into(&mut out);
        out
    }

    /// Write the portable bytes into `out`, exactly `serial::serialized_len`
    /// bytes long.
    pub fn serialize_into(&self, out: &mut [u8]) {
        let g = self.geometry();
        serial::write(&g, self.seed(), |f| self.for_each_word(f), out);
    }

    /// A new filter from portable bytes: anonymous, or a new file at `path`
    /// (created with `mode`; an existing path is refused).
    pub fn deserialize(bytes: &[u8], path: Option<&std::path::Path>, mode: u32) -> Result<Filter> {
        let img = serial::parse(bytes).map_err(|e| Error::format(e.to_string()))?;
        if mode & !0o7777 != 0 {
            return Err(Error::arg(format!("mode {mode:#o} is not a file mode")));
        }
        let h = region::new_header(img.geometry, img.seed);
        Filter::with_bits(h, path, mode, &|put| {
            for (i, w) in img.words().enumerate() {
                put(i, w);
            }
        })
    }
}
