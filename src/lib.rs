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
//! # Layers
//!
//! The modules are private; each uses only those above it in this list:
//!
//! * `error` — `Error`, `ErrorKind` and the messages every layer returns.
//! * `sys` — syscalls and OS mechanisms behind small functions: the clock,
//!   files, the fork hooks, the futex, `membarrier(2)`, robust futex words
//!   and the keeper thread that holds them (`keeper`).
//! * `math` — pure: the layouts' table, their names and numbers
//!   (`scheme`), sizing (`geometry`, `blocked`), hashing an item
//!   (`hashing`), DataSketches' hashing and sizing (`datasketches`), a
//!   window's generation grid (`window`), a growing filter's stages
//!   (`growth`).
//! * `probe` — where an item's bits are: the standard, blocked and
//!   datasketches layouts and a grown filter's standard stages (`stage`)
//!   behind one trait, `with_probe!` choosing one at run time.
//! * `shm` — what lives in the shared mapping and how it is mapped: the
//!   header (`format`), the lock words (`slots`), the journal's storage
//!   (`journal`), the mapping (`region`), a grown filter's later stages
//!   (`stages`), and the byte formats read and written: the portable bytes
//!   (`serial`) and the original C module's header (`legacy`).
//! * `sync` — the process-shared lock protocol: slots and their claims
//!   (`claims`), stripes, exclusive operations, the journal protocol, and
//!   dead-process recovery.
//! * `filter` — `Filter` and `Options`: open, add, query, batches, exclusive
//!   operations, windows, growth, stats, serialize and deserialize.
//! * `codec` — converting between formats: the original C module's files
//!   upgraded in place (`upgrade`), DataSketches' serialized filter read
//!   and written (`datasketches`).
//! * `remote` — probe offsets for copies kept elsewhere (Redis), and the
//!   RESP reply parser (`resp`).
//! * `ffi` — the C API (`include/bloomfilter_shared.h`): argument checks at
//!   the boundary, calls into the layers below.
//!
//! The design, the shared file's layout and the concurrency and crash
//! contract that comments cite ("C1".."C10", "§4", "§5") are in
//! `doc/DESIGN.md`.

#![deny(unsafe_op_in_unsafe_fn)]

// Every module is private: the API is the `pub use` list below. The C header
// is generated from `ffi` alone (cbindgen skips the modules marked
// `cbindgen:ignore`).
/// cbindgen:ignore
mod codec;
/// cbindgen:ignore
mod error;
mod ffi;
/// cbindgen:ignore
mod filter;
/// cbindgen:ignore
mod math;
/// cbindgen:ignore
mod probe;
/// cbindgen:ignore
mod remote;
/// cbindgen:ignore
mod shm;
/// cbindgen:ignore
mod sync;
/// cbindgen:ignore
mod sys;

pub use error::{Error, ErrorKind, Result};
pub use filter::{Filter, GrowOptions, Options, StageStats, Target, WindowOptions, WindowStats};
pub use math::geometry::{Geometry, GeometryError};
pub use math::scheme::{Layout, Scheme};
pub use math::window::Window;

/// The internals the crate's own tests and fuzz targets reach into, and the
/// crash-test hooks. Only with the `test-hooks` feature, which `cargo test`
/// turns on (a dev-dependency of the crate on itself) and the library's
/// build does not: none of it is API, none of it is in the installed
/// library.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod hooks {
    pub use crate::codec::datasketches;
    pub use crate::filter::testing;
    pub use crate::remote::resp;
    pub use crate::shm::{format, region, serial};
    pub use crate::sync::resumed_chunks;
    pub use crate::sys::clock;
    pub mod ffi {
        pub use crate::ffi::*;
        pub use crate::ffi::{
            exclusive::*, files::*, info::*, items::*, open::*, redis::*, remote::*, serialize::*, window::*,
        };
    }
}
