//! Copies kept elsewhere (Redis): geometry, probe offsets, estimates,
//! queries, folding replies, and a local filter from a copy's bits.

use super::boundary::*;
use super::*;
use crate::remote;
use crate::remote::resp;

//
// A filter kept elsewhere (Redis) is addressed through these: the geometry
// a layout gives, each item's probe offsets in the byte-string bit order
// remote stores use, the fold of the old bits they return, and a local
// filter built from a remote copy's bytes. See `remote`.

/// The geometry of a filter kept outside our mappings.
#[repr(C)]
pub struct BfsRemoteGeometry {
    /// m, the number of bits.
    pub bits: u64,
    /// k, the number of probes per item.
    pub hashes: u32,
    /// The aligned range (in bits) that holds all of one item's bits: a
    /// filter can be cut into pieces of any multiple of it. 0 when an item's
    /// bits can fall anywhere in the array (it cannot be cut).
    pub span_bits: u64,
}

/// # Safety
/// `p` must be a NUL-terminated string.
pub(super) unsafe fn layout_arg(p: *const c_char) -> Result<crate::math::scheme::Layout, Error> {
    // SAFETY: per the contract above.
    let name = unsafe { opt_cbytes(p) }.ok_or_else(|| Error::arg("layout is required"))?;
    let name = std::str::from_utf8(name).map_err(|_| Error::arg("layout is not valid UTF-8"))?;
    remote::layout_named(name)
}

/// The geometry `layout` ("standard", "blocked" or "datasketches") gives `capacity` and `fp_rate`.
///
/// # Safety
/// `layout`: NUL-terminated. `out`: valid. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_remote_geometry(
    layout: *const c_char,
    capacity: u64,
    fp_rate: f64,
    out: *mut BfsRemoteGeometry,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let l = unsafe { layout_arg(layout) }?;
        let g = remote::geometry(l, capacity, fp_rate)?;
        // SAFETY: out is valid per contract.
        let o = unsafe { out.as_mut() }.ok_or_else(|| Error::arg("null output pointer"))?;
        *o = BfsRemoteGeometry {
            bits: g.m,
            hashes: g.k,
            span_bits: remote::span_bits(&g).unwrap_or(0),
        };
        Ok(())
    })
}

/// A filter kept elsewhere, as its items are addressed there: its layout
/// ("standard", "blocked" or "datasketches"), seed, `bits`, `hashes` and `span_bits` (as
/// `bfs_remote_geometry` gave them), and the size of the pieces (keys) its
/// bit array is cut into: piece `i` is bits `i * piece_bits ..`. `stage`:
/// 0 for a filter that does not grow; `s + 1` when the bits are stage `s`
/// of a filter that grows (`bits`, `hashes`, `span_bits` as
/// `bfs_remote_stage` gave them), whose standard stages probe otherwise.
#[repr(C)]
pub struct BfsRemote {
    pub layout: *const c_char,
    pub seed: u64,
    pub bits: u64,
    pub hashes: u32,
    pub span_bits: u64,
    pub piece_bits: u64,
    pub stage: u32,
}

/// # Safety
/// `r`: NULL or valid, its `layout` NUL-terminated.
pub(super) unsafe fn remote_arg(r: *const BfsRemote) -> Result<remote::Remote, Error> {
    // SAFETY: per the contract above.
    let r = unsafe { r.as_ref() }.ok_or_else(|| Error::arg("null filter description"))?;
    // SAFETY: per the contract above.
    let l = unsafe { layout_arg(r.layout) }?;
    let g = remote::stored_geometry(l, r.bits, r.hashes, r.span_bits)?;
    let mut rm = remote::Remote::new(r.seed, g, r.piece_bits)?;
    rm.stage = r.stage.checked_sub(1);
    Ok(rm)
}

/// One stage of a filter kept elsewhere that grows (`bfs_remote_stage`).
#[repr(C)]
pub struct BfsRemoteStage {
    /// How many stages the filter can have (1 to 32).
    pub limit: u32,
    /// The stage's m, k and span, as `BfsRemoteGeometry`'s; all 0 when the
    /// stage is at or past the limit.
    pub bits: u64,
    pub hashes: u32,
    pub span_bits: u64,
    /// The new items the stage holds before the next is added.
    pub capacity: u64,
    /// A local stage's count and false-positive estimates with the
    /// `bits_set` given.
    pub count: u64,
    pub fpp: f64,
}

/// Stage `stage` of a filter of `layout`, `capacity` and `fp_rate` that
/// grows by `grow` up to `max_capacity` items (0: no bound), with the
/// geometry a local filter of those arguments gives that stage, and its
/// estimates with `bits_set` bits set; an error (in the local filter's
/// words) when such a filter cannot be.
///
/// # Safety
/// `layout`: NUL-terminated. `out`: valid. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bfs_remote_stage(
    layout: *const c_char,
    capacity: u64,
    fp_rate: f64,
    grow: u32,
    max_capacity: u64,
    stage: u32,
    bits_set: u64,
    out: *mut BfsRemoteStage,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let l = unsafe { layout_arg(layout) }?;
        let max = (max_capacity != 0).then_some(max_capacity);
        let s = remote::stage_shape(l, capacity, fp_rate, grow, max, stage, bits_set)?;
        // SAFETY: out is valid per contract.
        let o = unsafe { out.as_mut() }.ok_or_else(|| Error::arg("null output pointer"))?;
        *o = BfsRemoteStage {
            limit: s.limit,
            bits: s.g.map_or(0, |g| g.m),
            hashes: s.g.map_or(0, |g| g.k),
            span_bits: s.g.and_then(|g| remote::span_bits(&g)).unwrap_or(0),
            capacity: s.g.map_or(0, |g| g.capacity),
            count: s.count,
            fpp: s.fpp,
        };
        Ok(())
    })
}

/// For each of the `n` items of filter `r`, the offsets of its probe bits
/// within the piece that holds it (`offsets`: `n * hashes` values), counted
/// as remote stores count (bit 0 is the most significant bit of byte 0),
/// and the piece's number (`pieces`: `n` values, or NULL).
///
/// # Safety
/// `r`: valid (see `BfsRemote`). `items`: `n` valid slices. `offsets`: valid
/// for `n * hashes` values; `pieces`: NULL or valid for `n`. `err`: NULL or
/// BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_remote_offsets(
    r: *const BfsRemote,
    items: *const BfsSlice,
    n: usize,
    offsets: *mut u64,
    pieces: *mut u64,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let rm = unsafe { remote_arg(r) }?;
        let total = n
            .checked_mul(rm.g.k as usize)
            .ok_or_else(|| Error::arg("too many items"))?;
        // SAFETY: per the function's contract.
        let it = unsafe { slices(items, n) };
        // SAFETY: offsets is valid for n * hashes values, pieces for n.
        let (off, pc) = unsafe { (out_words(offsets, total)?, opt_words(pieces, n)) };
        rm.offsets(&it, off, pc)
    })
}

/// The count and estimated false-positive rate a filter of `layout`,
/// `capacity` and `fp_rate` reports with `bits_set` bits set.
///
/// # Safety
/// `layout`: NUL-terminated. `count`, `fpp`: valid. `err`: NULL or
/// BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_remote_estimates(
    layout: *const c_char,
    capacity: u64,
    fp_rate: f64,
    bits_set: u64,
    count: *mut u64,
    fpp: *mut f64,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let l = unsafe { layout_arg(layout) }?;
        let (c, p) = remote::estimates(l, capacity, fp_rate, bits_set)?;
        // SAFETY: count and fpp are valid per contract.
        unsafe { put_pair(count, c, fpp, p) }
    })
}

/// How a query of filter `r` reads each item: `*per_item` fields of
/// `*field_bits` bits (1: one per probe; 64: a blocked item's word or
/// block, tested against masks).
///
/// # Safety
/// `r`: valid (see `BfsRemote`). `field_bits`, `per_item`: valid. `err`:
/// NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_remote_query_shape(
    r: *const BfsRemote,
    field_bits: *mut u32,
    per_item: *mut u32,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let rm = unsafe { remote_arg(r) }?;
        let (width, per) = remote::query_shape(&rm.g);
        // SAFETY: both are valid per contract.
        unsafe { put_pair(field_bits, width as u32, per_item, per as u32) }
    })
}

/// For each of the `n` items of filter `r`, the fields a query reads
/// (`per_item` of them, as `bfs_remote_query_shape` gave it): their offsets
/// within the item's piece (`offsets`, `n * per_item` values, counted as for
/// `bfs_remote_offsets`), the bits each must hold as the store returns it
/// (`masks`, as many), and each item's piece number (`pieces`: `n` values,
/// or NULL).
///
/// # Safety
/// `r`: valid (see `BfsRemote`). `items`: `n` valid slices. `offsets`,
/// `masks`: valid for `n * per_item` values; `pieces`: NULL or valid for
/// `n`. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_remote_queries(
    r: *const BfsRemote,
    items: *const BfsSlice,
    n: usize,
    offsets: *mut u64,
    masks: *mut u64,
    pieces: *mut u64,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let rm = unsafe { remote_arg(r) }?;
        let total = n
            .checked_mul(remote::query_shape(&rm.g).1)
            .ok_or_else(|| Error::arg("too many items"))?;
        // SAFETY: per the function's contract.
        let it = unsafe { slices(items, n) };
        // SAFETY: offsets and masks are valid for total values, pieces for n.
        let (off, m, pc) = unsafe {
            (
                out_words(offsets, total)?,
                out_words(masks, total)?,
                opt_words(pieces, n),
            )
        };
        rm.query_fields(&it, off, m, pc)
    })
}

/// # Safety
/// `p` must be NULL or valid for `n` values.
pub(super) unsafe fn in_words<'a>(p: *const u64, n: usize) -> Option<&'a [u64]> {
    match (p.is_null(), n) {
        (true, _) => None,
        (false, 0) => Some(&[]),
        // SAFETY: per the contract above.
        (false, _) => Some(unsafe { std::slice::from_raw_parts(p, n) }),
    }
}

/// A reply's decimal integer (an optional '-', then digits) that fits in 64
/// signed bits, as its two's-complement pattern in `*out`; 0 for anything
/// else (the Perl client Redis.pm gives integers as such strings).
///
/// # Safety
/// `p`: valid for `len` bytes. `out`: valid.
#[no_mangle]
pub unsafe extern "C" fn bfs_decimal_i64(p: *const u8, len: usize, out: *mut u64) -> c_int {
    guard_value(0, || {
        // SAFETY: per the function's contract.
        match (resp::integer(unsafe { bytes(p, len) }), unsafe { out.as_mut() }) {
            (Ok(v), Some(o)) => {
                *o = v as u64;
                1
            }
            _ => 0,
        }
    })
}

/// Write two results; a NULL pointer for either is refused.
///
/// # Safety
/// `a` and `b` must each be NULL or valid to write.
pub(super) unsafe fn put_pair<A, B>(a: *mut A, va: A, b: *mut B, vb: B) -> Result<(), Error> {
    // SAFETY: per the contract above.
    match unsafe { (a.as_mut(), b.as_mut()) } {
        (Some(x), Some(y)) => {
            *x = va;
            *y = vb;
            Ok(())
        }
        _ => Err(Error::arg("null output pointer")),
    }
}

/// # Safety
/// `out` must be NULL or valid for `n` values; NULL is refused unless `n`
/// is 0.
pub(super) unsafe fn out_words<'a>(out: *mut u64, n: usize) -> Result<&'a mut [u64], Error> {
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: per the contract above.
    unsafe { opt_words(out, n) }.ok_or_else(|| Error::arg("null output pointer"))
}

/// # Safety
/// `out` must be NULL or valid for `n` values.
pub(super) unsafe fn opt_words<'a>(out: *mut u64, n: usize) -> Option<&'a mut [u64]> {
    match out.is_null() {
        true => None,
        false if n == 0 => Some(&mut []),
        // SAFETY: per the contract above.
        false => Some(unsafe { std::slice::from_raw_parts_mut(out, n) }),
    }
}

/// Fold `len` field values a remote store returned (`per_item` per item)
/// into one 0/1 per item in `full` (NULL: not wanted; else `len / per_item`
/// bytes): 1 when each field holds every bit of its mask (`masks`: `len`
/// values, or NULL for one-bit fields, which must then be 0 or 1). For an
/// add's old bits, 1 means the item was there before; for a query, that it
/// is present. `*count` = how many items were full.
///
/// # Safety
/// `values`: valid for `len` values; `masks`: NULL or as many. `full`: NULL
/// or valid for `len / per_item` bytes. `count`: valid. `err`: NULL or
/// BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_remote_fold(
    values: *const u64,
    len: usize,
    per_item: u32,
    masks: *const u64,
    full: *mut u8,
    count: *mut u64,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: values and masks are NULL or valid for len values per contract.
        let (v, m) = unsafe { (in_words(values, len).unwrap_or(&[]), in_words(masks, len)) };
        let per = if per_item == 0 { 0 } else { len / per_item as usize };
        // SAFETY: full is NULL or valid for len / per_item bytes.
        let f = unsafe { out_bytes(full, per) };
        let c = remote::fold_full(v, per_item as usize, m, f)?;
        // SAFETY: count is valid per contract.
        let out = unsafe { count.as_mut() }.ok_or_else(|| Error::arg("null output pointer"))?;
        *out = c;
        Ok(())
    })
}
