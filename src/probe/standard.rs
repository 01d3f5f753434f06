//! `bloom.h`'s layout: k probes spread over the whole table, an add
//! serialized per item on a stripe.

use super::{no_patterns, spread_prefetch, spread_probes, Probe, Probing, SpreadGate};
use crate::math::geometry::Geometry;
use crate::math::hashing::ItemHash;

/// `bloom.h`'s layout: probe `i` at `(h1 + i*h2) mod m`.
#[derive(Clone, Copy, Debug)]
pub struct Standard {
    pub k: u32,
    pub mask: u64,
    /// Stripes in the table (a power of two).
    pub stripes: u32,
}

impl Standard {
    /// Probe `i`'s position: `(h1 + i*h2) mod m`.
    #[inline(always)]
    fn at(&self, h: &ItemHash, i: u32) -> u64 {
        h.probe(i, self.mask)
    }

    spread_prefetch!();
}

impl Probe for Standard {
    type Loc = ItemHash;
    type Gate = SpreadGate;
    const STRIPED: bool = true;

    no_patterns!();

    #[inline(always)]
    fn of(probing: &Probing) -> Option<&Self> {
        match probing {
            Probing::Standard(p) => Some(p),
            _ => None,
        }
    }

    #[inline(always)]
    fn locate(&self, h: &ItemHash) -> ItemHash {
        *h
    }

    fn for_geometry(g: &Geometry, stripes: u32) -> Standard {
        Standard {
            k: g.k,
            mask: g.m - 1,
            stripes,
        }
    }

    spread_probes!();
}
