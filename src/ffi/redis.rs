//! The Redis mode's own calls: RESP commands built and replies parsed, and
//! a local filter made from a Redis copy's bits.

use super::boundary::*;
use super::remote::*;
use super::*;
use crate::remote;
use crate::remote::resp;

/// A kind of reply (`bfs_remote_reply`): not all of it has arrived yet;
/// nothing was taken.
pub const BFS_REPLY_INCOMPLETE: u32 = 0;
/// A kind of reply: an array of integers, folded.
pub const BFS_REPLY_INTS: u32 = 1;
/// A kind of reply: an error; the server did not run the command. Its
/// text is in `msg`.
pub const BFS_REPLY_ERROR: u32 = 2;
/// A kind of reply: a status (`+OK`); its text is in `msg`.
pub const BFS_REPLY_STATUS: u32 = 3;
/// A kind of reply: any other, taken whole.
pub const BFS_REPLY_OTHER: u32 = 4;

/// One `BITFIELD` command, in the Redis protocol, for the `n` items of
/// filter `r`, all in the piece stored at `key` (`key_len` bytes): for an
/// add (`add` nonzero) a `SET u1` per probe, for a query a `BITFIELD_RO` of
/// the fields `bfs_remote_queries` names, whose masks go to `masks`
/// (`n * per_item` values, as `bfs_remote_query_shape` gave `per_item`;
/// NULL for an add). The command goes to `out` (`cap` bytes) and its length
/// to `*out_len`. With `out` NULL, `*out_len` is the most it can take.
/// Items of different pieces are refused.
///
/// # Safety
/// `r`: valid (see `BfsRemote`). `key`: valid for `key_len` bytes. `items`:
/// `n` valid slices. `masks`: NULL or as above. `out`: NULL or valid for
/// `cap` bytes. `out_len`: valid. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bfs_remote_command(
    r: *const BfsRemote,
    add: c_int,
    key: *const u8,
    key_len: usize,
    items: *const BfsSlice,
    n: usize,
    masks: *mut u64,
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let rm = unsafe { remote_arg(r) }?;
        let (width, per) = if add != 0 {
            (1, rm.g.k as usize)
        } else {
            remote::query_shape(&rm.g)
        };
        let fields = n.checked_mul(per).ok_or_else(|| Error::arg("too many items"))?;
        // SAFETY: out_len is valid per contract.
        let len_out = unsafe { out_len.as_mut() }.ok_or_else(|| Error::arg("null output pointer"))?;
        if out.is_null() {
            *len_out = resp::max_command_len(key_len, fields);
            return Ok(());
        }
        // SAFETY: per the function's contract.
        let (k, it) = unsafe { (bytes(key, key_len), slices(items, n)) };
        let mut offsets = vec![0u64; fields];
        let mut pieces = vec![0u64; n];
        if add != 0 {
            rm.offsets(&it, &mut offsets, Some(&mut pieces))?;
        } else {
            // SAFETY: masks is valid for n * per_item values per contract.
            let m = unsafe { out_words(masks, fields) }?;
            rm.query_fields(&it, &mut offsets, m, Some(&mut pieces))?;
        }
        if pieces.iter().any(|&p| p != pieces[0]) {
            return Err(Error::arg("the items of one command are in different pieces"));
        }
        // SAFETY: out is valid for cap bytes per contract.
        unsafe { put_bitfield(k, add != 0, width, &offsets, out, cap, len_out) }
    })
}

/// Encode a `BITFIELD` command (`resp::encode_bitfield`) into the caller's
/// buffer `out` of `cap` bytes, its length to `*len_out`; a command longer
/// than `cap` is refused.
///
/// # Safety
/// `out`: valid for `cap` bytes.
unsafe fn put_bitfield(
    key: &[u8],
    set: bool,
    width: u64,
    offsets: &[u64],
    out: *mut u8,
    cap: usize,
    len_out: &mut usize,
) -> Result<(), Error> {
    let mut cmd = Vec::new();
    resp::encode_bitfield(&mut cmd, key, set, width, offsets)?;
    if cmd.len() > cap {
        return Err(Error::arg(format!(
            "a command of {} bytes for a buffer of {cap}",
            cmd.len()
        )));
    }
    // SAFETY: out is valid for cap >= cmd.len() bytes per the contract.
    unsafe { std::ptr::copy_nonoverlapping(cmd.as_ptr(), out, cmd.len()) };
    *len_out = cmd.len();
    Ok(())
}

/// One `BITFIELD_RO` command, in the Redis protocol, on the stage stored at
/// `key` (`key_len` bytes): a `GET u1` of probes `from .. to` of each of
/// the `n_sel` items `sel` names (NULL: all), from `packed` (`len` bytes:
/// `k` 32-bit little-endian probe offsets per item, `gather_probes`). The
/// command goes to `out` (`cap` bytes) and its length to `*out_len`; with
/// `out` NULL, `*out_len` is the most it can take.
///
/// # Safety
/// `key`: valid for `key_len` bytes. `packed`: valid for `len` bytes.
/// `sel`: NULL or valid for `n_sel` values. `out`: NULL or valid for `cap`
/// bytes. `out_len`: valid. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bfs_remote_probe_command(
    key: *const u8,
    key_len: usize,
    packed: *const u8,
    len: usize,
    k: u32,
    from: u32,
    to: u32,
    sel: *const u32,
    n_sel: usize,
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: out_len is valid per contract.
        let len_out = unsafe { out_len.as_mut() }.ok_or_else(|| Error::arg("null output pointer"))?;
        let items = if sel.is_null() {
            len / 4 / (k.max(1) as usize)
        } else {
            n_sel
        };
        let fields = items
            .checked_mul(to.saturating_sub(from) as usize)
            .ok_or_else(|| Error::arg("too many items"))?;
        if out.is_null() {
            *len_out = resp::max_command_len(key_len, fields);
            return Ok(());
        }
        // SAFETY: per the function's contract (sel NULL or n_sel values).
        let (key, packed, sel) = unsafe {
            (
                bytes(key, key_len),
                bytes(packed, len),
                (!sel.is_null()).then(|| std::slice::from_raw_parts(sel, n_sel)),
            )
        };
        let offsets = remote::gather_probes(packed, k as usize, from as usize, to as usize, sel)?;
        // SAFETY: out is valid for cap bytes per contract.
        unsafe { put_bitfield(key, false, 1, &offsets, out, cap, len_out) }
    })
}

/// Take one reply off the front of `buf` (`len` bytes read so far from a
/// connection): `*consumed` bytes, of kind `*kind` (a BFS_REPLY_* value; 0
/// and nothing consumed until all of it has arrived). An array of integers
/// is the reply to a `bfs_remote_command`: it is folded as
/// `bfs_remote_fold` folds (`per_item` fields per item, `masks` NULL or
/// `n_masks` values, which must then be as many as the fields), into
/// `full` (NULL, or `full_cap` bytes: one 0/1 per item), `*count` (items
/// full) and `*items`. An error or status reply's text goes to `msg`
/// (BFS_ERRBUF_LEN bytes). Bytes that are no reply are an error.
///
/// # Safety
/// `buf`: valid for `len` bytes. `masks`: NULL or valid for `n_masks`
/// values. `full`: NULL or valid for `full_cap` bytes. `consumed`, `kind`,
/// `count`, `items`: valid. `msg`, `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bfs_remote_reply(
    buf: *const u8,
    len: usize,
    per_item: u32,
    masks: *const u64,
    n_masks: usize,
    full: *mut u8,
    full_cap: usize,
    consumed: *mut usize,
    kind: *mut u32,
    count: *mut u64,
    items: *mut usize,
    msg: *mut c_char,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let b = unsafe { bytes(buf, len) };
        // SAFETY: all four are valid per contract.
        let (Some(used), Some(k), Some(c), Some(n)) =
            (unsafe { (consumed.as_mut(), kind.as_mut(), count.as_mut(), items.as_mut()) })
        else {
            return Err(Error::arg("null output pointer"));
        };
        (*used, *k, *c, *n) = (0, BFS_REPLY_INCOMPLETE, 0, 0);
        let Some((taken, reply)) = resp::parse_reply(b)? else {
            return Ok(());
        };
        match reply {
            resp::Reply::Ints(values) => {
                // SAFETY: masks is NULL or valid for n_masks values per contract.
                let m = unsafe { in_words(masks, n_masks) };
                if m.is_some_and(|m| m.len() != values.len()) {
                    return Err(Error::format(format!(
                        "the reply has {} fields where {} were asked",
                        values.len(),
                        n_masks
                    )));
                }
                let per = per_item.max(1) as usize;
                let got = values.len() / per;
                // SAFETY: full is NULL or valid for full_cap bytes.
                let f = unsafe { out_bytes(full, full_cap) }.map(|f| &mut f[..got.min(full_cap)]);
                if f.as_ref().is_some_and(|f| f.len() != got) {
                    return Err(Error::arg("result buffer is too short"));
                }
                *c = remote::fold_full(&values, per_item as usize, m, f)?;
                (*n, *k) = (got, BFS_REPLY_INTS);
            }
            resp::Reply::Error(t) => {
                write_err(msg, &t);
                *k = BFS_REPLY_ERROR;
            }
            resp::Reply::Status(t) => {
                write_err(msg, &t);
                *k = BFS_REPLY_STATUS;
            }
            resp::Reply::Other => *k = BFS_REPLY_OTHER,
        }
        *used = taken;
        Ok(())
    })
}

/// A new local filter (anonymous when `path` is NULL, else a new file at
/// `path`, created with `opts->mode`; an existing path is refused) with the
/// geometry `layout` gives `capacity` and `fp_rate`, `opts->seed`, and the
/// bit array `bits` (`len` must be bits / 8: a remote copy's bytes).
///
/// # Safety
/// `layout`: NUL-terminated. `bits`: valid for `len` bytes. Others as
/// `bfs_new`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bfs_new_from_bits(
    path: *const c_char,
    capacity: u64,
    fp_rate: f64,
    opts: *const BfsOptions,
    layout: *const c_char,
    bits: *const u8,
    len: usize,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let l = unsafe { layout_arg(layout) }?;
        // SAFETY: per the function's contract.
        let b = unsafe { bytes(bits, len) };
        // SAFETY: per the function's contract.
        let p = unsafe { opt_path(path) };
        let o = options(opts)?;
        publish(out, Filter::from_bit_bytes(capacity, fp_rate, o.seed, l, b, p, o.mode)?)
    })
}

/// The portable bytes (`bfs_serialize`'s, version 3) of a filter that grows
/// (`layout`, `capacity`, `fp_rate`, `grow`, `max_capacity` 0 for none,
/// `seed`) with `n` stages: `fills` the new items counted into each,
/// `bits` (`len` bytes) their bit strings, stage 0 first, as a remote copy
/// keeps them. The bytes go to `out` (`cap` bytes) and their length to
/// `*out_len`; with `out` NULL, `*out_len` is the length they need.
///
/// # Safety
/// `layout`: NUL-terminated. `fills`: valid for `n` values. `bits`: valid
/// for `len` bytes. `out`: NULL or valid for `cap` bytes. `out_len`: valid.
/// `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bfs_remote_grown_image(
    layout: *const c_char,
    capacity: u64,
    fp_rate: f64,
    grow: u32,
    max_capacity: u64,
    seed: u64,
    fills: *const u64,
    n: usize,
    bits: *const u8,
    len: usize,
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let l = unsafe { layout_arg(layout) }?;
        // SAFETY: per the function's contract.
        let (f, b) = unsafe { (in_words(fills, n).unwrap_or(&[]), bytes(bits, len)) };
        let max = (max_capacity != 0).then_some(max_capacity);
        let img = remote::grown_image(l, capacity, fp_rate, grow, max, seed, f, b)?;
        // SAFETY: out_len is valid per contract.
        let len_out = unsafe { out_len.as_mut() }.ok_or_else(|| Error::arg("null output pointer"))?;
        *len_out = img.len();
        if out.is_null() {
            return Ok(());
        }
        if img.len() > cap {
            return Err(Error::arg(format!("{} bytes for a buffer of {cap}", img.len())));
        }
        // SAFETY: out is valid for cap >= img.len() bytes per contract.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), out, img.len()) };
        Ok(())
    })
}
