//! Portable bytes out.

use super::boundary::*;
use super::*;
use crate::codec::datasketches;

/// Size in bytes of the filter's portable image.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_serialized_size(h: *const BfsFilter) -> u64 {
    guard_value(0, || {
        // SAFETY: per the function's contract.
        unsafe { handle(h) }.map_or(0, |f| f.serialized_size())
    })
}

/// Write the portable image into `buf`, which must be exactly
/// `bfs_serialized_size` bytes. A windowed filter's copy is consistent
/// across generation steps (see `Filter::copy_window`); `BFS_ERR_BUSY` when
/// it stepped more than once during each of several copies.
///
/// # Safety
/// `h`: live handle. `buf`: valid for `len` bytes. `err`: NULL or
/// BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_serialize(h: *const BfsFilter, buf: *mut u8, len: usize, err: *mut c_char) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        if len as u64 != f.serialized_size() || buf.is_null() {
            return Err(Error::arg("serialize buffer has the wrong size"));
        }
        // SAFETY: buf is valid for len bytes per contract.
        checked(f, f.serialize_into(unsafe { std::slice::from_raw_parts_mut(buf, len) }))
    })
}

/// The most bytes `bfs_serialize_datasketches` writes for this filter: an
/// image of all its words (an empty filter's image is 24 bytes).
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_datasketches_max_size(h: *const BfsFilter) -> u64 {
    guard_value(0, || {
        // SAFETY: per the function's contract.
        unsafe { handle(h) }.map_or(0, |f| datasketches::max_len(f.geometry().m))
    })
}

/// Write Apache DataSketches' serialized image of a plain filter of the
/// `datasketches` layout into `buf` (`len` at least
/// `bfs_datasketches_max_size`) and its length into `*written`. Any other
/// filter: `BFS_ERR_ARG`, saying which layout to create.
///
/// # Safety
/// `h`: live handle. `buf`: valid for `len` bytes. `written`: valid.
/// `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_serialize_datasketches(
    h: *const BfsFilter,
    buf: *mut u8,
    len: usize,
    written: *mut usize,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        let img = checked(f, datasketches::write(f))?;
        if img.len() > len || buf.is_null() || written.is_null() {
            return Err(Error::arg("serialize buffer has the wrong size"));
        }
        // SAFETY: buf is valid for len >= img.len() bytes and written for
        // one usize, per contract.
        unsafe {
            std::ptr::copy_nonoverlapping(img.as_ptr(), buf, img.len());
            *written = img.len();
        }
        Ok(())
    })
}

/// Whether `size` more bytes of address space can be had now: a caller
/// about to `malloc` a large block asks first (see
/// `keeper::address_space_has_room` for why a failed `malloc` is not free).
#[no_mangle]
pub extern "C" fn bfs_address_space_has_room(size: u64) -> bool {
    usize::try_from(size).is_ok_and(crate::sys::keeper::address_space_has_room)
}
