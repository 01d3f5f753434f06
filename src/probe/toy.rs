//! A layout of the tests only (its row in `math::scheme::layout_table!` is
//! built with the `test-hooks` feature): it shows that a module and a row
//! are all a layout takes. k probes spread over the whole table as the
//! standard layout's, with the hash's halves the other way round (probe `i`
//! at `(h2 + i*h1) mod m`), sized as the standard layout, an add serialized
//! per item on a stripe. Its tests are in `tests/hardening/layouts.rs`,
//! through the crate's API and the C API: a filter of it is made, added to,
//! asked, serialized, reopened and addressed remotely.

use super::{no_patterns, spread_prefetch, spread_probes, Probe, Probing, SpreadGate};
use crate::math::geometry::Geometry;
use crate::math::hashing::ItemHash;

/// Probe `i` at `(h2 + i*h1) mod m`.
#[derive(Clone, Copy, Debug)]
pub struct Toy {
    pub k: u32,
    pub mask: u64,
    /// Stripes in the table (a power of two).
    pub stripes: u32,
}

impl Toy {
    /// Probe `i`'s position, below `m` (a power of two).
    #[inline(always)]
    fn at(&self, h: &ItemHash, i: u32) -> u64 {
        h.h2.wrapping_add((i as u64).wrapping_mul(h.h1)) & self.mask
    }

    spread_prefetch!();
}

impl Probe for Toy {
    type Loc = ItemHash;
    type Gate = SpreadGate;
    const STRIPED: bool = true;

    no_patterns!();

    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::Toy(p) => Some(p),
            _ => None,
        }
    }

    fn locate(&self, h: &ItemHash) -> ItemHash {
        *h
    }

    fn for_geometry(g: &Geometry, stripes: u32) -> Toy {
        Toy {
            k: g.k,
            mask: g.m - 1,
            stripes,
        }
    }

    spread_probes!();
}
