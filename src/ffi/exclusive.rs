//! Whole-filter operations: merge, intersect, invert, clear, freeze, and the
//! compatibility check.

use super::boundary::*;
use super::*;

/// Union: OR `other`'s bits into `h` (same geometry and seed required).
///
/// # Safety
/// `h`, `other`: live handles. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_merge(h: *mut BfsFilter, other: *const BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || {
        // SAFETY: per the function's contract.
        let (f, o) = unsafe { (handle(h)?, handle(other)?) };
        let r = f.merge(o);
        o.intact()?;
        checked(f, r)
    })
}

/// Intersection: AND `other`'s bits into `h`.
///
/// # Safety
/// `h`, `other`: live handles. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_intersect(h: *mut BfsFilter, other: *const BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || {
        // SAFETY: per the function's contract.
        let (f, o) = unsafe { (handle(h)?, handle(other)?) };
        let r = f.intersect(o);
        o.intact()?;
        checked(f, r)
    })
}

/// Flip every bit.
///
/// # Safety
/// `h`: live handle. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_invert(h: *mut BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        checked(f, f.invert())
    })
}

/// Reset to empty.
///
/// # Safety
/// `h`: live handle. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_clear(h: *mut BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        checked(f, f.clear())
    })
}

/// Seal for good (and flush a file).
///
/// # Safety
/// `h`: live handle. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_freeze(h: *mut BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        checked(f, f.freeze())
    })
}

/// 1 if the two filters can be merged / intersected.
///
/// # Safety
/// `h`, `other`: live handles.
#[no_mangle]
pub unsafe extern "C" fn bfs_is_compatible(h: *const BfsFilter, other: *const BfsFilter) -> c_int {
    guard_value(0, || {
        // SAFETY: per the function's contract.
        match unsafe { (handle(h), handle(other)) } {
            (Ok(a), Ok(b)) => a.is_compatible(b) as c_int,
            _ => 0,
        }
    })
}
