//! Windowed filters: durations as the command line takes them, and `rotate`.

use super::boundary::*;
use super::*;
use crate::math::window;

/// Parse a duration as the command line takes it (`24h`, `90m`, `3600`,
/// `1.5d`, `2s`: see `window::parse_duration`) into `*ns`, within the
/// window's limits.
///
/// # Safety
/// `text`: NUL-terminated. `ns`: valid. `err`: NULL or BFS_ERRBUF_LEN
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_parse_duration(text: *const c_char, ns: *mut u64, err: *mut c_char) -> BfsStatus {
    guard(err, || {
        if text.is_null() || ns.is_null() {
            return Err(Error::arg("duration is missing"));
        }
        // SAFETY: per the function's contract.
        let t = unsafe { CStr::from_ptr(text) }.to_bytes();
        let t = std::str::from_utf8(t).map_err(|_| Error::arg("duration is not text"))?;
        let v = window::parse_duration(t).map_err(Error::arg)?;
        // SAFETY: per the function's contract.
        unsafe { *ns = v };
        Ok(())
    })
}

/// Take a generation step of a windowed filter now, due or not: the oldest
/// generation is discarded.
///
/// # Safety
/// `h`: live handle. `err`: NULL or BFS_ERRBUF_LEN writable bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_rotate(h: *mut BfsFilter, err: *mut c_char) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        checked(f, f.rotate())
    })
}
