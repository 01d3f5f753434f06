//! Filter files by path: unlink, and the upgrade of an original C module
//! file.

use super::boundary::*;
use super::*;

/// Remove a filter file by path. `*removed` (if not NULL) = 1 when a file
/// was removed, 0 when there was none (not an error).
///
/// # Safety
/// `path`: NUL-terminated. `removed`: NULL or valid. `err`: NULL or
/// BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_unlink_path(path: *const c_char, removed: *mut u8, err: *mut c_char) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let p = unsafe { opt_path(path) }.ok_or_else(|| Error::arg("path is required"))?;
        let r = crate::shm::region::unlink(path_bytes(p))?;
        if !removed.is_null() {
            // SAFETY: valid per contract.
            unsafe { *removed = r as u8 };
        }
        Ok(())
    })
}

/// What `bfs_upgrade` converted.
#[repr(C)]
pub struct BfsUpgraded {
    /// The original's format version (1 or 2), or this module's (2).
    pub from_version: u32,
    /// 1 when the file was the original C module's (0.04), 0 when it was
    /// this module's format 2.
    pub from_original: u32,
    /// m, the number of bits.
    pub bits: u64,
    /// k, the number of probes per item.
    pub hashes: u32,
    pub capacity: u64,
    pub fp_rate: f64,
    /// Bits set, the same before and after.
    pub bits_set: u64,
}

/// Convert the file of the original C module (0.04 and earlier), or a
/// filter of this module's format 2, at `path` into a filter of this version, in place (a temporary file renamed over
/// it); refuses a file in use when that can be told. `out` (if not NULL)
/// receives what was converted.
///
/// # Safety
/// `path`: NUL-terminated. `out`: NULL or valid. `err`: NULL or
/// BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_upgrade(path: *const c_char, out: *mut BfsUpgraded, err: *mut c_char) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let p = unsafe { opt_path(path) }.ok_or_else(|| Error::arg("path is required"))?;
        let u = crate::codec::upgrade::upgrade(path_bytes(p))?;
        // SAFETY: NULL or valid per contract.
        if let Some(o) = unsafe { out.as_mut() } {
            let g = u.header.geometry;
            *o = BfsUpgraded {
                from_version: u.from_version,
                from_original: u32::from(u.from_original),
                bits: g.m,
                hashes: g.k,
                capacity: g.capacity,
                fp_rate: g.fp_rate,
                bits_set: u.bits_set,
            };
        }
        Ok(())
    })
}
