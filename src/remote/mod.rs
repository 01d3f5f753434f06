//! Where an item's bits are, for a copy of a filter kept outside our own
//! mappings (the Perl module's Redis mode keeps the bits in a Redis string).
//!
//! A remote copy must set exactly the bits a local filter of the same
//! geometry, seed and layout sets, so the probe positions come from here and
//! nowhere else. Remote stores address bits in a byte string whose bit 0 is
//! the most significant bit of byte 0 (Redis `SETBIT`, `BITFIELD` and
//! `BITCOUNT` count that way), while a local filter keeps bit `i` in bit
//! `i % 64` of little-endian word `i / 64`, that is bit `i % 8` (least
//! significant first) of byte `i / 8`. The same byte string serves both when
//! every offset is mapped with [`msb_first`].

pub mod resp;

use crate::error::{Error, ErrorKind, Result};
use crate::math::geometry::Geometry;
use crate::math::growth::Growth;
use crate::math::scheme::{layout_names, Layout, Scheme};
use crate::probe::{with_probe, Probe, Probing, StandardStage};

/// The layout a name (as the Perl option `layout`) stands for.
pub fn layout_named(name: &str) -> Result<Layout> {
    Layout::from_name(name).ok_or_else(|| {
        Error::arg(format!(
            "unknown layout '{}' (this build has: {})",
            name.escape_default(),
            layout_names()
        ))
    })
}

/// The geometry `layout` gives `capacity` and `fp_rate`.
pub fn geometry(layout: Layout, capacity: u64, fp_rate: f64) -> Result<Geometry> {
    Geometry::for_layout(capacity, fp_rate, layout).map_err(|e| Error::arg(e.to_string()))
}

/// The size of the aligned range that holds all of one item's bits: a
/// filter can be cut into pieces of any multiple of this many bits with
/// every item inside one piece. None when an item's bits can fall anywhere
/// (the standard layout spreads its probes over the whole array), except
/// that a single bit (`k` = 1) stays in one word. A blocked item's bits
/// are in one word (64) or block (128): its scheme's block.
pub fn span_bits(g: &Geometry) -> Option<u64> {
    match g.scheme.block_bits() {
        0 if g.k == 1 => Some(64),
        0 => None,
        block => Some(block),
    }
}

/// How a remote query reads an item, as (bits per field, fields per item):
/// a standard item's probes are read one bit each; a blocked item's word
/// or block is read whole, as one or two 64-bit fields tested against
/// masks, so a query sends 1 or 2 fields instead of k.
pub fn query_shape(g: &Geometry) -> (u64, usize) {
    match g.scheme.block_bits() {
        0 => (1, g.k as usize),
        block => (64, (block / 64) as usize),
    }
}

/// Probes `from .. to` of the items `sel` names (all, in order, when
/// None), gathered from `packed`: `k` probe offsets per item, each a 32-bit
/// little-endian number (what `bfs_remote_offsets` gives, packed as the
/// Redis mode packs it for a filter that grows). What a query reads when it
/// reads an item's probes a few at a time, dropping it at its first clear
/// bit.
pub fn gather_probes(packed: &[u8], k: usize, from: usize, to: usize, sel: Option<&[u32]>) -> Result<Vec<u64>> {
    if k == 0 || from >= to || to > k {
        return Err(Error::arg(format!("probes {from} .. {to} of {k}")));
    }
    if packed.len() % (4 * k) != 0 {
        return Err(Error::arg(format!(
            "{} bytes of offsets are not whole items of {k} probes",
            packed.len()
        )));
    }
    let n = packed.len() / (4 * k);
    let probe = |item: usize, j: usize| {
        let at = 4 * (item * k + j);
        u64::from(u32::from_le_bytes([
            packed[at],
            packed[at + 1],
            packed[at + 2],
            packed[at + 3],
        ]))
    };
    let items: Box<dyn Iterator<Item = usize>> = match sel {
        Some(sel) => {
            if let Some(&bad) = sel.iter().find(|&&i| i as usize >= n) {
                return Err(Error::arg(format!("item {bad} of {n}")));
            }
            Box::new(sel.iter().map(|&i| i as usize))
        }
        None => Box::new(0..n),
    };
    Ok(items.flat_map(|i| (from..to).map(move |j| probe(i, j))).collect())
}

/// Append the bit indexes of `item`'s `g.k` probes to `out`, in the local
/// filter's numbering: the local filter's probe (`probe::Probe::positions`)
/// names them. A blocked item's all lie in its one word or block, and two
/// of them may be the same bit (as in the local filter, whose mask then has
/// fewer than k bits).
pub fn positions(seed: u64, probing: &Probing, item: &[u8], out: &mut Vec<u64>) {
    with_probe!(probing, p => p.positions(&p.hash(seed, item), out))
}

/// The geometry of a filter of `layout` from its stored size `m`, `k` and
/// span (as `span_bits` gave it; 0 for none), checked as untrusted values:
/// a layout of several schemes (blocked: 64 or 128) is the one whose block
/// is the span.
pub fn stored_geometry(layout: Layout, m: u64, k: u32, span: u64) -> Result<Geometry> {
    let schemes = layout.schemes();
    let scheme = match schemes {
        [one] => *one,
        _ => schemes
            .iter()
            .copied()
            .find(|s| s.block_bits() == span)
            .ok_or_else(|| {
                let blocks: Vec<String> = schemes.iter().map(|s| s.block_bits().to_string()).collect();
                Error::arg(format!(
                    "span {span} is not a {} filter's ({})",
                    layout.name(),
                    blocks.join(" or ")
                ))
            })?,
    };
    let g = Geometry {
        k,
        m,
        capacity: 1,
        fp_rate: 0.5,
        scheme,
    };
    // The standard layout's sizes are powers of two, except that a remote
    // copy may be of any whole number of words (it is never mapped locally
    // from these values, only addressed).
    let shape_ok = match scheme {
        Scheme::Standard => m % 64 == 0 && (crate::math::geometry::MIN_K..=crate::math::geometry::MAX_K).contains(&k),
        _ => g.is_valid(),
    };
    if !shape_ok || !(crate::math::geometry::MIN_BITS..=crate::math::geometry::MAX_BITS).contains(&m) {
        return Err(Error::arg(format!(
            "bits {m}, hashes {k} are not a {} filter's geometry",
            layout.name()
        )));
    }
    if span_bits(&g).unwrap_or(0) != span {
        return Err(Error::arg(format!(
            "span {span} is not the span of a {}-bit {} filter with {k} hashes",
            m,
            layout.name()
        )));
    }
    Ok(g)
}

/// The byte-string offset (bit 0 = most significant bit of byte 0) of local
/// bit `i`: the same byte, the other end of it.
#[inline]
pub fn msb_first(i: u64) -> u64 {
    i ^ 7
}

/// A filter kept elsewhere, as its items are addressed there: the seed and
/// geometry (its scheme the layout) that place an item's bits, and the size of the pieces
/// (keys) the bit array is cut into; piece `i` is bits `i * piece_bits ..`
/// of the array (the last one may be shorter).
#[derive(Clone, Copy, Debug)]
pub struct Remote {
    pub seed: u64,
    pub g: Geometry,
    pub piece_bits: u64,
    /// Some(s): the bits are stage `s` of a filter that grows (`g` that
    /// stage's geometry); None: a filter that does not grow.
    pub stage: Option<u32>,
}

/// Check the output buffers' lengths: `per` values per item, and one piece
/// number per item when asked.
fn check_lengths(items: usize, per: usize, got: usize, pieces: &Option<&mut [u64]>) -> Result<()> {
    if got != items * per {
        return Err(Error::arg("offset buffer has the wrong length"));
    }
    if matches!(pieces, Some(p) if p.len() != items) {
        return Err(Error::arg("piece buffer has the wrong length"));
    }
    Ok(())
}

impl Remote {
    /// Refuses pieces that cannot hold whole items: `piece_bits` must be a
    /// multiple of the layout's span (or hold the whole array) and of 8
    /// (pieces are whole bytes).
    pub fn new(seed: u64, g: Geometry, piece_bits: u64) -> Result<Remote> {
        let cut_ok = match span_bits(&g) {
            _ if piece_bits >= g.m => true,
            Some(span) => piece_bits % span == 0,
            None => false,
        };
        if piece_bits == 0 || piece_bits % 8 != 0 || !cut_ok {
            return Err(Error::arg(format!(
                "a piece of {piece_bits} bits cannot hold whole items of a {}-bit {} filter",
                g.m,
                g.layout().name()
            )));
        }
        Ok(Remote {
            seed,
            g,
            piece_bits,
            stage: None,
        })
    }

    /// Call `each(n, piece, positions)` with every item's probe positions
    /// (the local numbering) and the number of the piece that holds them,
    /// checking that they are all in that piece: a broken promise of the
    /// layout would send a bit to the wrong key.
    fn each_item(&self, items: &[&[u8]], mut each: impl FnMut(usize, u64, &[u64])) -> Result<()> {
        let mut pos = Vec::with_capacity(self.g.k as usize);
        // One stripe: a stripe is the local adders' lock, and none is taken.
        // A standard stage of a filter that grows probes as a local one's
        // (`StandardStage`); a blocked stage as a plain filter.
        let probing = match self.stage {
            Some(s) if self.g.scheme == Scheme::Standard => {
                Probing::StandardStage(StandardStage::new(self.g.k, self.g.m, s, 1))
            }
            _ => Probing::new(&self.g, 1),
        };
        for (n, item) in items.iter().enumerate() {
            pos.clear();
            positions(self.seed, &probing, item, &mut pos);
            let piece = pos[0] / self.piece_bits;
            if pos.iter().any(|&p| p / self.piece_bits != piece) {
                return Err(Error::new(
                    ErrorKind::Mismatch,
                    "an item's bits span two pieces (a layout bug)",
                ));
            }
            each(n, piece, &pos);
        }
        Ok(())
    }

    /// For each item, the byte-string offsets of its probes within the
    /// piece holding it (what an add sets, one bit each), and that piece's
    /// number.
    pub fn offsets(&self, items: &[&[u8]], offsets: &mut [u64], pieces: Option<&mut [u64]>) -> Result<()> {
        let k = self.g.k as usize;
        check_lengths(items.len(), k, offsets.len(), &pieces)?;
        let mut pieces = pieces;
        self.each_item(items, |n, piece, pos| {
            for (j, &p) in pos.iter().enumerate() {
                offsets[n * k + j] = msb_first(p % self.piece_bits);
            }
            if let Some(pc) = pieces.as_deref_mut() {
                pc[n] = piece;
            }
        })
    }

    /// For each item, the fields a query reads (`query_shape` tells
    /// their width and number per item): their byte-string offsets within
    /// the item's piece, and the bits each must hold for the item to be
    /// present, as the remote store returns the field's value (a 64-bit
    /// field is the word's bytes read most significant first: the local
    /// word byte-swapped). A one-bit field's mask is 1.
    pub fn query_fields(
        &self,
        items: &[&[u8]],
        offsets: &mut [u64],
        masks: &mut [u64],
        pieces: Option<&mut [u64]>,
    ) -> Result<()> {
        let (width, per) = query_shape(&self.g);
        check_lengths(items.len(), per, offsets.len(), &pieces)?;
        check_lengths(items.len(), per, masks.len(), &None)?;
        let mut pieces = pieces;
        self.each_item(items, |n, piece, pos| {
            let (off, mask) = (&mut offsets[n * per..][..per], &mut masks[n * per..][..per]);
            if width == 1 {
                for (j, &p) in pos.iter().enumerate() {
                    off[j] = msb_first(p % self.piece_bits);
                    mask[j] = 1;
                }
            } else {
                // The block's words in order; a 64-bit field starting at a
                // word's first bit covers exactly that word's bytes.
                let first = pos[0] / (per as u64 * 64) * (per as u64 * 64);
                let mut local = [0u64; 2];
                for &p in pos {
                    local[((p - first) / 64) as usize] |= 1 << (p % 64);
                }
                for j in 0..per {
                    off[j] = (first + 64 * j as u64) % self.piece_bits;
                    mask[j] = local[j].swap_bytes();
                }
            }
            if let Some(pc) = pieces.as_deref_mut() {
                pc[n] = piece;
            }
        })
    }
}

/// The count and false-positive estimates of a filter of this layout with
/// `bits_set` of its bits set: what a local filter with those bits reports.
pub fn estimates(layout: Layout, capacity: u64, fp_rate: f64, bits_set: u64) -> Result<(u64, f64)> {
    let g = geometry(layout, capacity, fp_rate)?;
    if bits_set > g.m {
        return Err(Error::arg(format!("{bits_set} bits set in a filter of {} bits", g.m)));
    }
    Ok((g.count_from_bits_set(bits_set), g.fpp_from_bits_set(bits_set)))
}

/// Stage `i` of a filter that grows as a local one of these arguments
/// does (doc/DESIGN.md, §3 growth), and with `bits_set` of its bits set,
/// its estimates (`count`, `fpp`; 0 when past the limit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageShape {
    /// How many stages the filter can have (`Growth::limit`).
    pub limit: u32,
    /// The stage's geometry: None when `i` is at or past the limit.
    pub g: Option<Geometry>,
    pub count: u64,
    pub fpp: f64,
}

/// The shape of stage `i` of a filter of `capacity` and `fp_rate` in
/// `layout` growing by `factor` up to `max_capacity`, or why such a filter
/// cannot be (in `Growth`'s words, as a local filter refuses it).
pub fn stage_shape(
    layout: Layout,
    capacity: u64,
    fp_rate: f64,
    factor: u32,
    max_capacity: Option<u64>,
    i: u32,
    bits_set: u64,
) -> Result<StageShape> {
    let growth = Growth::new(capacity, fp_rate, layout, factor, max_capacity).map_err(|e| Error::arg(e.to_string()))?;
    let g = growth.stage(i);
    let (count, fpp) = match g {
        Some(g) if bits_set > g.m => {
            return Err(Error::arg(format!("{bits_set} bits set in a stage of {} bits", g.m)));
        }
        Some(g) => (g.count_from_bits_set(bits_set), g.fpp_from_bits_set(bits_set)),
        None => (0, 0.0),
    };
    Ok(StageShape {
        limit: growth.limit(),
        g,
        count,
        fpp,
    })
}

/// The portable bytes (version 3, `serial::write_grown`) of a filter that
/// grows as a local one of these arguments does, holding a remote copy's
/// stages: `fills[i]` the new items counted into stage `i`, `bits` the
/// stages' byte strings one after the other (a remote store's bytes are a
/// local filter's: see `msb_first`). What `deserialize` makes of them is
/// the local filter with those stages.
#[allow(clippy::too_many_arguments)]
pub fn grown_image(
    layout: Layout,
    capacity: u64,
    fp_rate: f64,
    factor: u32,
    max_capacity: Option<u64>,
    seed: u64,
    fills: &[u64],
    bits: &[u8],
) -> Result<Vec<u8>> {
    let growth = Growth::new(capacity, fp_rate, layout, factor, max_capacity).map_err(|e| Error::arg(e.to_string()))?;
    let n = fills.len() as u32;
    if n == 0 || n > growth.limit() {
        return Err(Error::arg(format!(
            "{n} stages of a filter that has 1 to {}",
            growth.limit()
        )));
    }
    if bits.len() as u64 != growth.total_bits(n) / 8 {
        return Err(Error::format(format!(
            "{} bytes of bits for {n} stages of {} bits",
            bits.len(),
            growth.total_bits(n)
        )));
    }
    let mut g0 = growth
        .stage(0)
        .ok_or_else(|| Error::arg("the first stage cannot be sized"))?;
    // The bytes keep the filter's rate; stage 0's follows from it.
    g0.fp_rate = fp_rate;
    let st = crate::shm::serial::GrownState {
        growth,
        fills: fills.to_vec(),
    };
    let mut out =
        vec![0u8; crate::shm::serial::grown_len((0..n).filter_map(|i| growth.stage(i)).map(|g| g.m)) as usize];
    crate::shm::serial::write_grown(
        &g0,
        seed,
        &st,
        |put| {
            for w in bits.chunks_exact(8) {
                put(u64::from_le_bytes(w.try_into().expect("chunks of 8")));
            }
        },
        &mut out,
    );
    Ok(out)
}

/// Fold the field values a remote store returned (`per` fields per item)
/// into one flag per item: 1 when every field holds all of its mask's bits.
/// For an add's old bits that means the item was there before; for a
/// query, that it is present. Without masks every field is one bit that
/// must be 1, and a value other than 0 or 1 is refused. Returns how many
/// items were full.
pub fn fold_full(values: &[u64], per: usize, masks: Option<&[u64]>, full: Option<&mut [u8]>) -> Result<u64> {
    if per == 0 || values.len() % per != 0 {
        return Err(Error::arg(format!(
            "{} fields are not a whole number of items of {per}",
            values.len()
        )));
    }
    if matches!(masks, Some(m) if m.len() != values.len()) {
        return Err(Error::arg("mask buffer has the wrong length"));
    }
    if matches!(&full, Some(f) if f.len() != values.len() / per) {
        return Err(Error::arg("result buffer has the wrong length"));
    }
    let mut full = full;
    let mut count = 0;
    for (n, fields) in values.chunks_exact(per).enumerate() {
        let mut all = true;
        for (j, &v) in fields.iter().enumerate() {
            let m = match masks {
                Some(m) => m[n * per + j],
                None if v <= 1 => 1,
                None => {
                    return Err(Error::format(format!("probe bit {v} of item {n} is not 0 or 1")));
                }
            };
            all &= v & m == m;
        }
        count += all as u64;
        if let Some(f) = full.as_deref_mut() {
            f[n] = all as u8;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Filter;
    use crate::filter::Options;
    use crate::math::scheme::Scheme;

    fn offsets(
        _layout: Layout,
        seed: u64,
        g: &Geometry,
        piece: u64,
        items: &[&[u8]],
        off: &mut [u64],
        pieces: Option<&mut [u64]>,
    ) -> Result<()> {
        Remote::new(seed, *g, piece)?.offsets(items, off, pieces)
    }

    #[allow(clippy::too_many_arguments)]
    fn query_fields(
        _layout: Layout,
        seed: u64,
        g: &Geometry,
        piece: u64,
        items: &[&[u8]],
        off: &mut [u64],
        masks: &mut [u64],
        pieces: Option<&mut [u64]>,
    ) -> Result<()> {
        Remote::new(seed, *g, piece)?.query_fields(items, off, masks, pieces)
    }

    fn bit_of(bytes: &[u8], msb_offset: u64) -> bool {
        bytes[(msb_offset / 8) as usize] & (0x80 >> (msb_offset % 8)) != 0
    }

    fn local(cap: u64, rate: f64, seed: u64, layout: Layout) -> Filter {
        let layout = Some(layout);
        Filter::new_anonymous(
            cap,
            rate,
            Options {
                mode: 0o600,
                seed,
                layout,
                ..Options::default()
            },
        )
        .unwrap()
    }

    fn bit_bytes(f: &Filter) -> Vec<u8> {
        let m = f.geometry().m;
        f.serialize().unwrap()[crate::shm::serial::HEADER_LEN..crate::shm::serial::HEADER_LEN + (m / 8) as usize]
            .to_vec()
    }

    /// The offsets address, in the MSB-first view of the local filter's own
    /// bytes, exactly the bits the local filter set: for the standard layout,
    /// and for blocked filters of 64-bit words and of 128-bit blocks.
    #[test]
    fn offsets_address_the_local_bits() {
        let mut schemes = Vec::new();
        for (layout, cap, rate, seed) in [
            (Layout::Standard, 1000u64, 0.01, 0u64),
            (Layout::Standard, 50, 0.3, 7),
            (Layout::Standard, 20_000, 0.001, u64::MAX),
            (Layout::Blocked, 1000, 0.01, 0),
            (Layout::Blocked, 50, 0.3, 7),
            (Layout::Blocked, 3000, 0.0001, u64::MAX),
        ] {
            let f = local(cap, rate, seed, layout);
            let g = f.geometry();
            assert_eq!(g, geometry(layout, cap, rate).unwrap(), "the same geometry");
            schemes.push(g.scheme);
            let items: Vec<Vec<u8>> = (0..300u32).map(|i| format!("item-{i}").into_bytes()).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            f.add_many(&refs, None).unwrap();
            let bytes = bit_bytes(&f);
            let mut off = vec![0u64; refs.len() * g.k as usize];
            offsets(layout, seed, &g, g.m, &refs, &mut off, None).unwrap();
            let mut union = vec![0u8; bytes.len()];
            for &o in &off {
                assert!(bit_of(&bytes, o), "{layout:?} {rate}: offset {o} not set locally");
                union[(o / 8) as usize] |= 0x80 >> (o % 8);
            }
            assert_eq!(
                union, bytes,
                "{layout:?} {rate}: the local filter has bits no offset names"
            );
            // Each item alone: its offsets are exactly the bits a local
            // filter sets for it, all in its one word or block.
            if let Some(span) = span_bits(&g) {
                for item in &refs[..20] {
                    let one = local(cap, rate, seed, layout);
                    one.add(item).unwrap();
                    let b = bit_bytes(&one);
                    let mut o = vec![0u64; g.k as usize];
                    offsets(layout, seed, &g, g.m, &[item], &mut o, None).unwrap();
                    let mut u = vec![0u8; b.len()];
                    for &x in &o {
                        u[(x / 8) as usize] |= 0x80 >> (x % 8);
                    }
                    assert_eq!(u, b, "{layout:?} {rate}: one item's bits");
                    assert!(o.iter().all(|&x| x / span == o[0] / span), "one span");
                }
            }
        }
        assert!(schemes.contains(&Scheme::Word64), "{schemes:?}");
        assert!(schemes.contains(&Scheme::Block128), "{schemes:?}");
    }

    /// A field read as a remote store reads it from `bytes`: `width` bits
    /// from byte-string bit `off`, the first one most significant.
    fn field_of(bytes: &[u8], off: u64, width: u64) -> u64 {
        (0..width).fold(0, |v, i| v << 1 | bit_of(bytes, off + i) as u64)
    }

    /// A query's fields, read from the local filter's bytes as a remote
    /// store reads them and folded with their masks, answer exactly what the
    /// local `contains` answers, for items added and items not, whole and
    /// cut into pieces.
    #[test]
    fn query_fields_answer_as_contains_does() {
        for (layout, cap, rate, seed) in [
            (Layout::Standard, 1000u64, 0.01, 0u64),
            (Layout::Blocked, 1000, 0.01, 3),
            (Layout::Blocked, 3000, 0.0001, u64::MAX),
        ] {
            let f = local(cap, rate, seed, layout);
            let g = f.geometry();
            let (width, per) = query_shape(&g);
            let added: Vec<Vec<u8>> = (0..cap as u32).map(|i| format!("in-{i}").into_bytes()).collect();
            let refs: Vec<&[u8]> = added.iter().map(|v| v.as_slice()).collect();
            f.add_many(&refs, None).unwrap();
            let bytes = bit_bytes(&f);
            let probe: Vec<Vec<u8>> = (0..4000u32).map(|i| format!("in-{}", i * 3).into_bytes()).collect();
            let probe: Vec<&[u8]> = probe.iter().map(|v| v.as_slice()).collect();
            let piece_sizes = match span_bits(&g) {
                Some(span) => vec![g.m, span * 8],
                None => vec![g.m],
            };
            let mut hits = 0;
            for piece in piece_sizes {
                let mut off = vec![0u64; probe.len() * per];
                let mut masks = vec![0u64; off.len()];
                let mut pc = vec![0u64; probe.len()];
                query_fields(layout, seed, &g, piece, &probe, &mut off, &mut masks, Some(&mut pc)).unwrap();
                let values: Vec<u64> = (0..off.len())
                    .map(|i| field_of(&bytes, pc[i / per] * piece + off[i], width))
                    .collect();
                let mut full = vec![0u8; probe.len()];
                let n = fold_full(&values, per, Some(&masks), Some(&mut full)).unwrap();
                for (i, item) in probe.iter().enumerate() {
                    assert_eq!(
                        full[i] == 1,
                        f.contains(item),
                        "{layout:?} {rate} piece {piece}: item {i}"
                    );
                }
                assert!(n > 0 && n < probe.len() as u64, "{layout:?}: both answers occur ({n})");
                hits = n;
            }
            assert!(hits >= cap / 3, "{layout:?}: the added third is found ({hits})");
            let e = query_fields(layout, seed, &g, g.m, &probe, &mut [0; 1], &mut [0; 1], None);
            assert!(e.unwrap_err().msg.contains("wrong length"));
        }
    }

    /// Blocked filters cut into pieces of whole spans: every item in one
    /// piece, and piece `i`, offset `o` is byte-string bit `i * piece + o`.
    #[test]
    fn blocked_filters_cut_into_pieces() {
        for rate in [0.01, 0.0001] {
            let l = Layout::Blocked;
            let g = geometry(l, 5000, rate).unwrap();
            let span = span_bits(&g).unwrap();
            assert_eq!(span, g.scheme.block_bits());
            let items: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_le_bytes().to_vec()).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            let k = g.k as usize;
            let mut whole = vec![0u64; refs.len() * k];
            offsets(l, 3, &g, g.m, &refs, &mut whole, None).unwrap();
            for piece in [span, 3 * span, (g.m / span).div_ceil(4) * span] {
                let mut off = vec![0u64; refs.len() * k];
                let mut pc = vec![0u64; refs.len()];
                offsets(l, 3, &g, piece, &refs, &mut off, Some(&mut pc)).unwrap();
                for n in 0..refs.len() {
                    for j in 0..k {
                        assert!(off[n * k + j] < piece);
                        assert_eq!(
                            pc[n] * piece + off[n * k + j],
                            whole[n * k + j],
                            "piece {piece}, item {n}"
                        );
                    }
                }
            }
            let e = offsets(l, 3, &g, span / 2, &refs, &mut whole, None).unwrap_err();
            assert!(e.msg.contains("cannot hold whole items"), "{}", e.msg);
        }
    }

    #[test]
    fn stored_geometry_checks_its_values() {
        for rate in [0.01, 0.0001] {
            let g = geometry(Layout::Blocked, 5000, rate).unwrap();
            let span = g.scheme.block_bits();
            let s = stored_geometry(Layout::Blocked, g.m, g.k, span).unwrap();
            assert_eq!((s.m, s.k, s.scheme), (g.m, g.k, g.scheme));
            for bad in [0, 32, 256, 192] {
                let e = stored_geometry(Layout::Blocked, g.m, g.k, bad).unwrap_err();
                assert!(e.msg.contains("span"), "{}", e.msg);
            }
            assert!(stored_geometry(Layout::Blocked, g.m / 128 * 128 + 64, g.k, 128).is_err());
            assert!(stored_geometry(Layout::Blocked, g.m, 17, span).is_err());
        }
        let g = geometry(Layout::Standard, 1000, 0.01).unwrap();
        assert_eq!(stored_geometry(Layout::Standard, g.m, g.k, 0).unwrap().m, g.m);
        let e = stored_geometry(Layout::Standard, g.m, g.k, 64).unwrap_err();
        assert!(e.msg.contains("span"), "{}", e.msg);
        assert!(stored_geometry(Layout::Standard, g.m + 1, g.k, 0).is_err());
        assert!(stored_geometry(Layout::Standard, g.m, 0, 0).is_err());
    }

    #[test]
    fn msb_first_mirrors_within_the_byte() {
        assert_eq!(msb_first(0), 7);
        assert_eq!(msb_first(7), 0);
        assert_eq!(msb_first(8), 15);
        assert_eq!(msb_first(63), 56);
        for i in 0..1000 {
            assert_eq!(msb_first(msb_first(i)), i);
            assert_eq!(msb_first(i) / 8, i / 8);
        }
    }

    #[test]
    fn pieces_and_bad_piece_sizes() {
        let g = geometry(Layout::Standard, 1000, 0.01).unwrap();
        let items: [&[u8]; 2] = [b"a", b"b"];
        let mut off = vec![0u64; 2 * g.k as usize];
        let mut pc = vec![9u64; 2];
        offsets(Layout::Standard, 0, &g, g.m, &items, &mut off, Some(&mut pc)).unwrap();
        assert_eq!(pc, [0, 0]);
        // Standard spreads an item over the whole array: no smaller piece.
        for bad in [g.m / 2, 64, 3, 0] {
            let e = offsets(Layout::Standard, 0, &g, bad, &items, &mut off, None).unwrap_err();
            assert!(e.msg.contains("cannot hold whole items"), "{}", e.msg);
        }
        offsets(Layout::Standard, 0, &g, g.m * 2, &items, &mut off, Some(&mut pc)).unwrap();
        assert_eq!(pc, [0, 0], "a piece larger than the array holds it all");
        let e = offsets(Layout::Standard, 0, &g, g.m, &items, &mut off[1..], None).unwrap_err();
        assert!(e.msg.contains("wrong length"));
    }

    /// One probe per item: any cut into whole words keeps items whole, and
    /// piece `i`, offset `o` is byte-string bit `i * piece + o` of the array.
    #[test]
    fn single_probe_filters_cut_into_pieces() {
        let g = geometry(Layout::Standard, 1000, 0.5).unwrap();
        assert_eq!(g.k, 1);
        assert_eq!(span_bits(&g), Some(64));
        let g7 = geometry(Layout::Standard, 1000, 0.01).unwrap();
        assert_eq!(span_bits(&g7), None);
        let items: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_le_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let mut whole = vec![0u64; refs.len()];
        offsets(Layout::Standard, 3, &g, g.m, &refs, &mut whole, None).unwrap();
        // pieces of 3 words: not a power of two, the last one shorter
        for piece in [64, 192, g.m / 4] {
            let mut off = vec![0u64; refs.len()];
            let mut pc = vec![0u64; refs.len()];
            offsets(Layout::Standard, 3, &g, piece, &refs, &mut off, Some(&mut pc)).unwrap();
            for n in 0..refs.len() {
                assert!(off[n] < piece);
                assert_eq!(pc[n] * piece + off[n], whole[n], "piece {piece}, item {n}");
            }
        }
        let e = offsets(Layout::Standard, 3, &g, 32, &refs, &mut whole, None).unwrap_err();
        assert!(e.msg.contains("cannot hold whole items"), "{}", e.msg);
    }

    #[test]
    fn fold_counts_items_with_every_bit() {
        let mut w = [9u8; 3];
        assert_eq!(
            fold_full(&[1, 1, 1, 0, 1, 1, 1, 1, 1], 3, None, Some(&mut w)).unwrap(),
            2
        );
        assert_eq!(w, [1, 0, 1]);
        assert_eq!(fold_full(&[0, 0, 1, 1], 2, None, None).unwrap(), 1);
        assert_eq!(fold_full(&[], 4, None, None).unwrap(), 0);
        assert!(fold_full(&[1, 1, 0, 1], 3, None, None)
            .unwrap_err()
            .msg
            .contains("whole number"));
        assert!(fold_full(&[1, 2], 2, None, None)
            .unwrap_err()
            .msg
            .contains("not 0 or 1"));
        assert!(fold_full(&[1, 1], 0, None, None).is_err());
        // Masked fields: every mask bit must be set, other bits do not count.
        let masks = [0b1010, 0x8000_0000_0000_0001, 0b1010, 0x8000_0000_0000_0001];
        let vals = [0b1110, u64::MAX, 0b0011, 0x8000_0000_0000_0001];
        assert_eq!(fold_full(&vals, 2, Some(&masks), Some(&mut w[..2])).unwrap(), 1);
        assert_eq!(w[..2], [1, 0]);
        assert!(fold_full(&vals, 2, Some(&masks[..2]), None)
            .unwrap_err()
            .msg
            .contains("mask"));
    }

    #[test]
    fn estimates_are_the_local_filters() {
        for (layout, rate) in [
            (Layout::Standard, 0.01),
            (Layout::Blocked, 0.01),
            (Layout::Blocked, 0.0001),
        ] {
            let f = local(3000, rate, 0, layout);
            for i in 0..2500u32 {
                f.add(&i.to_le_bytes()).unwrap();
                if i % 500 == 0 {
                    let (c, p) = estimates(layout, 3000, rate, f.bits_set()).unwrap();
                    assert_eq!(c, f.count(), "{layout:?} {rate}");
                    assert_eq!(p, f.estimated_fpp(), "{layout:?} {rate}");
                }
            }
            let m = f.geometry().m;
            assert_eq!(estimates(layout, 3000, rate, m).unwrap().0, 3000, "saturated: capacity");
            assert!(estimates(layout, 3000, rate, m + 1).is_err());
        }
    }

    #[test]
    fn layout_names() {
        assert_eq!(layout_named("standard").unwrap().name(), "standard");
        assert_eq!(layout_named("blocked").unwrap().name(), "blocked");
        assert!(layout_named("Standard").unwrap_err().msg.contains("unknown layout"));
    }

    /// A blocked remote copy's bytes give a local filter of the same
    /// scheme, bits and answers.
    #[test]
    fn from_bit_bytes_keeps_the_blocked_scheme() {
        for rate in [0.01, 0.0001] {
            let f = local(500, rate, 5, Layout::Blocked);
            for i in 0..200u32 {
                f.add(&i.to_le_bytes()).unwrap();
            }
            let bits = bit_bytes(&f);
            let c = Filter::from_bit_bytes(500, rate, 5, Layout::Blocked, &bits, None, 0o600).unwrap();
            assert_eq!(c.geometry(), f.geometry());
            assert_eq!(c.layout(), Layout::Blocked);
            assert_eq!(c.serialize().unwrap(), f.serialize().unwrap());
            for i in 0..400u32 {
                assert_eq!(c.contains(&i.to_le_bytes()), f.contains(&i.to_le_bytes()));
            }
            assert!(!c.add(&7u32.to_le_bytes()).unwrap(), "already there");
        }
    }

    #[test]
    fn from_bit_bytes_round_trips_and_checks_length() {
        let f = Filter::new_anonymous(
            500,
            0.01,
            Options {
                mode: 0o600,
                seed: 5,
                ..Options::default()
            },
        )
        .unwrap();
        for i in 0..200u32 {
            f.add(&i.to_le_bytes()).unwrap();
        }
        let g = f.geometry();
        let ser = f.serialize().unwrap();
        let bits = &ser[crate::shm::serial::HEADER_LEN..crate::shm::serial::HEADER_LEN + (g.m / 8) as usize];
        let c = Filter::from_bit_bytes(500, 0.01, 5, Layout::Standard, bits, None, 0o600).unwrap();
        assert_eq!(c.serialize().unwrap(), ser);
        let e = Filter::from_bit_bytes(500, 0.01, 5, Layout::Standard, &bits[1..], None, 0o600)
            .err()
            .unwrap();
        assert!(e.msg.contains("bytes of bits"), "{}", e.msg);
    }

    /// A grown filter kept remotely, stage by stage as the Redis mode's
    /// script keeps it (an item found in no stage is set in the newest; the
    /// next stage is added when the newest has taken its capacity of new
    /// items), from the positions `stage_shape` and `Remote` give: its
    /// bytes (`grown_image`) are a local grown filter's of the same items,
    /// header and every stage's bits, and both tell the same items new.
    #[test]
    fn grown_stages_are_the_local_filters() {
        use crate::filter::GrowOptions;
        for layout in [Layout::Standard, Layout::Blocked] {
            let (cap, rate, seed, factor) = (50u64, 0.01, 7u64, 2u32);
            let l = Filter::new_anonymous(
                cap,
                rate,
                Options {
                    mode: 0o600,
                    seed,
                    layout: Some(layout),
                    grow: Some(GrowOptions {
                        factor,
                        max_capacity: None,
                    }),
                    ..Options::default()
                },
            )
            .unwrap();
            let shape = |i| stage_shape(layout, cap, rate, factor, None, i, 0).unwrap();
            let mut stages: Vec<(Remote, Vec<u8>, u64)> = Vec::new();
            let add_stage = |stages: &mut Vec<(Remote, Vec<u8>, u64)>| {
                let g = shape(stages.len() as u32).g.unwrap();
                let mut r = Remote::new(seed, g, g.m).unwrap();
                r.stage = Some(stages.len() as u32);
                stages.push((r, vec![0u8; (g.m / 8) as usize], 0));
            };
            add_stage(&mut stages);
            let bit = |b: &[u8], off: u64| b[(off / 8) as usize] & (0x80 >> (off % 8)) != 0;
            for n in 0..1000u32 {
                let item = format!("item-{}", n % 700);
                let offs = |r: &Remote| {
                    let mut o = vec![0u64; r.g.k as usize];
                    r.offsets(&[item.as_bytes()], &mut o, None).unwrap();
                    o
                };
                let found = stages.iter().any(|(r, b, _)| offs(r).iter().all(|&o| bit(b, o)));
                let new = if found {
                    false
                } else {
                    if stages.last().unwrap().2 >= stages.last().unwrap().0.g.capacity {
                        add_stage(&mut stages);
                    }
                    let (r, b, fill) = stages.last_mut().unwrap();
                    let mut new = false;
                    for o in offs(r) {
                        new |= !bit(b, o);
                        b[(o / 8) as usize] |= 0x80 >> (o % 8);
                    }
                    *fill += new as u64;
                    new
                };
                assert_eq!(l.add(item.as_bytes()).unwrap(), new, "{layout:?} {item}");
            }
            assert!(stages.len() >= 4, "{layout:?}: {} stages", stages.len());
            let fills: Vec<u64> = stages.iter().map(|s| s.2).collect();
            let bits: Vec<u8> = stages.iter().flat_map(|s| s.1.iter().copied()).collect();
            let img = grown_image(layout, cap, rate, factor, None, seed, &fills, &bits).unwrap();
            let want = l.serialize().unwrap();
            let fills_end = 72 + 8 * stages.len();
            assert_eq!(img.len(), want.len(), "{layout:?}");
            assert_eq!(img[..72], want[..72], "{layout:?}: the header");
            assert_eq!(
                img[fills_end..img.len() - 8],
                want[fills_end..want.len() - 8],
                "{layout:?}: the stages' bits"
            );
            assert_eq!(
                shape(0).limit,
                Growth::new(cap, rate, layout, factor, None).unwrap().limit()
            );
            assert!(grown_image(layout, cap, rate, factor, None, seed, &fills, &bits[1..]).is_err());
        }
    }

    /// `gather_probes` against a spelled-out reading of the packed
    /// offsets, for every range and a few selections; and what it refuses.
    #[test]
    fn gather_probes_reads_the_ranges_asked() {
        for k in 1..=5usize {
            for n in 0..=4usize {
                let offs: Vec<u32> = (0..n * k).map(|i| (i as u32).wrapping_mul(2_654_435_761)).collect();
                let packed: Vec<u8> = offs.iter().flat_map(|o| o.to_le_bytes()).collect();
                let sels: Vec<Option<Vec<u32>>> = vec![
                    None,
                    Some(vec![]),
                    Some((0..n as u32).rev().collect()),
                    Some(vec![0; n.min(1)]),
                ];
                for from in 0..k {
                    for to in from + 1..=k {
                        for sel in &sels {
                            let items: Vec<usize> = match sel {
                                Some(s) => s.iter().map(|&i| i as usize).collect(),
                                None => (0..n).collect(),
                            };
                            let mut want = Vec::new();
                            for &i in &items {
                                for j in from..to {
                                    want.push(u64::from(offs[i * k + j]));
                                }
                            }
                            let got = gather_probes(&packed, k, from, to, sel.as_deref()).unwrap();
                            assert_eq!(got, want, "k {k} n {n} {from}..{to} {sel:?}");
                        }
                    }
                }
            }
        }
        let packed = [0u8; 24]; // 2 items of 3 probes
        assert!(gather_probes(&packed, 3, 0, 3, None).is_ok());
        for (k, from, to) in [(0, 0, 1), (3, 2, 2), (3, 2, 1), (3, 0, 4), (4, 0, 1), (5, 0, 1)] {
            assert!(gather_probes(&packed, k, from, to, None).is_err(), "k {k} {from}..{to}");
        }
        assert!(
            gather_probes(&packed, 3, 0, 1, Some(&[1, 2])).is_err(),
            "an item past the last"
        );
        assert!(gather_probes(&packed[..5], 1, 0, 1, None).is_err(), "a partial offset");
    }
}
