//! Adding and querying items, one at a time and in batches.

use super::boundary::*;
use super::*;

use std::cell::RefCell;

thread_local! {
    /// The error of this thread's last `bfs_try_add` whose wait reached
    /// its bound (`crate::error::Error::waited`), with its handle: the
    /// `bfs_add` that follows to say why reports it rather than wait as
    /// long again.
    static WAITED: RefCell<Option<(usize, crate::error::Error)>> = const { RefCell::new(None) };
}

/// Add an item; `*was_new` = 1 when it was probably new, else 0.
///
/// # Safety
/// `h`: live handle. `item`: valid for `len` bytes. `was_new`: valid.
/// `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_add(
    h: *mut BfsFilter,
    item: *const u8,
    len: usize,
    was_new: *mut u8,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        if let Some(e) = WAITED
            .with(|w| w.borrow_mut().take())
            .and_then(|(wh, e)| (wh == h as usize).then_some(e))
        {
            return Err(e);
        }
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        // SAFETY: per the function's contract.
        let n = checked(f, f.add(unsafe { bytes(item, len) }))?;
        if !was_new.is_null() {
            // SAFETY: valid per contract.
            unsafe { *was_new = n as u8 };
        }
        Ok(())
    })
}

/// `bfs_add` without the error buffer and the out parameter, for callers
/// that add one item at a time in a hot loop (it waits where `bfs_add`
/// waits): 1 if the item was probably new, 0 if it was present, and -1,
/// with nothing added, when `bfs_add`
/// would have failed (a NULL handle, a frozen or read-only filter, no free
/// slot, lost pages): `bfs_add` then says why, or adds the item if what
/// failed has passed (a slot given back meanwhile).
///
/// # Safety
/// `h`: NULL or a live handle. `item`: valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_try_add(h: *mut BfsFilter, item: *const u8, len: usize) -> c_int {
    guard_value(-1, || {
        // SAFETY: per the function's contract.
        match unsafe { handle_unchecked(h) } {
            Ok(f) => {
                // SAFETY: per the function's contract.
                let r = match f.add(unsafe { bytes(item, len) }) {
                    Ok(n) => c_int::from(n),
                    Err(e) => {
                        if e.waited() {
                            WAITED.with(|w| *w.borrow_mut() = Some((h as usize, e)));
                        }
                        -1
                    }
                };
                // Checked once, after the work (one load on the hot path).
                if f.lost() {
                    -1
                } else {
                    r
                }
            }
            Err(_) => -1,
        }
    })
}

/// Add `n` items. `results`, if not NULL, receives one 0/1 per item;
/// `*new_count` how many were new.
///
/// # Safety
/// `items`: `n` valid slices. `results`: NULL or `n` bytes. `new_count`:
/// valid. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_add_many(
    h: *mut BfsFilter,
    items: *const BfsSlice,
    n: usize,
    results: *mut u8,
    new_count: *mut u64,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract (all three).
        let (f, items, res) = unsafe { (handle(h)?, slices(items, n), out_bytes(results, n)) };
        let c = checked(f, f.add_many(&items, res))?;
        if !new_count.is_null() {
            // SAFETY: valid per contract.
            unsafe { *new_count = c };
        }
        Ok(())
    })
}

/// 1 if the item is probably present, 0 if certainly absent; -1 when a
/// page of the handle's mappings was lost, now or before (`bfs_check` says
/// why). Takes no lock and writes no shared memory.
///
/// # Safety
/// `h`: live handle. `item`: valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_contains(h: *const BfsFilter, item: *const u8, len: usize) -> c_int {
    guard_value(0, || {
        // SAFETY: per the function's contract.
        match unsafe { handle_unchecked(h) } {
            Ok(f) => {
                // SAFETY: per the function's contract.
                let r = f.contains(unsafe { bytes(item, len) }) as c_int;
                // Checked once, after the work (one load on the hot path).
                if f.lost() {
                    -1
                } else {
                    r
                }
            }
            Err(_) => 0,
        }
    })
}

/// Query `n` items; `results`, if not NULL, gets one 0/1 per item. Returns
/// how many are present. Ask `bfs_check` after it: the answer is void when
/// the handle lost pages.
///
/// # Safety
/// `h`: live handle. `items`: `n` valid slices. `results`: NULL or `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_contains_many(
    h: *const BfsFilter,
    items: *const BfsSlice,
    n: usize,
    results: *mut u8,
) -> u64 {
    guard_value(0, || {
        // SAFETY: per the function's contract (all three).
        let (f, items, res) = unsafe { (handle(h), slices(items, n), out_bytes(results, n)) };
        match f {
            Ok(f) => f.contains_many(&items, res),
            Err(_) => 0,
        }
    })
}
