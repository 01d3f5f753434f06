//! What a filter is and holds: its facts, counts and path, and `sync`.

use super::boundary::*;
use super::*;

/// Fill `*out` with the filter's facts.
///
/// # Safety
/// `h`: live handle. `out`: valid.
#[no_mangle]
pub unsafe extern "C" fn bfs_info(h: *const BfsFilter, out: *mut BfsInfo) {
    guard_value((), || {
        // SAFETY: per the function's contract.
        if let (Ok(f), Some(o)) = unsafe { (handle(h), out.as_mut()) } {
            let g = f.geometry();
            *o = BfsInfo {
                capacity: f.total_capacity(),
                fp_rate: g.fp_rate,
                bits: f.total_bits(),
                hashes: g.k,
                seed: f.seed(),
                mmap_size: f.mmap_size(),
                memfd: f.memfd(),
                frozen: f.frozen() as u8,
                readonly: f.readonly() as u8,
                layout: layout_code(f.layout()),
                generations: 0,
                window_ns: 0,
                generation: 0,
                generation_start_ns: 0,
                grow: f.growth().map_or(0, |g| g.factor()),
                stages: f.stages(),
                max_capacity: f.growth().and_then(|g| g.max_capacity()).unwrap_or(0),
            };
            if let Some(w) = f.window_stats() {
                o.generations = w.generations;
                o.window_ns = w.window_ns.unwrap_or(0);
                o.generation = w.current;
                o.generation_start_ns = w.current_start_ns.unwrap_or(0);
            }
        }
    })
}

/// Fill `*out` with published stage `i` of a grown filter (stage 0 of
/// any other). Returns 1, or 0 (and leaves `*out` alone) past the
/// published stages.
///
/// # Safety
/// `h`: live handle. `out`: valid.
#[no_mangle]
pub unsafe extern "C" fn bfs_stage(h: *const BfsFilter, i: u32, out: *mut BfsStage) -> u8 {
    guard_value(0, || {
        // SAFETY: per the function's contract.
        let (Ok(f), Some(o)) = (unsafe { handle(h) }, unsafe { out.as_mut() }) else {
            return 0;
        };
        let s = match f.stage_stats().get(i as usize) {
            Some(s) => *s,
            None if i == 0 && f.growth().is_none() => {
                let g = f.geometry();
                crate::filter::StageStats {
                    capacity: g.capacity,
                    bits: g.m,
                    hashes: g.k,
                    fill: f.count(),
                }
            }
            None => return 0,
        };
        *o = BfsStage {
            capacity: s.capacity,
            bits: s.bits,
            hashes: s.hashes,
            fill: s.fill,
        };
        1
    })
}

/// The chance a random absent item is reported present when `set` bits
/// are set (pass `bfs_bits_set`'s answer): `(set/m)^k` for the standard
/// layout, the layout's own estimate for a blocked one.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_fpp_for_bits_set(h: *const BfsFilter, set: u64) -> f64 {
    // SAFETY: per the function's contract.
    guard_value(0.0, || unsafe { handle(h) }.map_or(0.0, |f| f.fpp_from_bits_set(set)))
}

/// Number of set bits.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_bits_set(h: *const BfsFilter) -> u64 {
    // SAFETY: per the function's contract.
    guard_value(0, || unsafe { handle(h) }.map_or(0, |f| f.bits_set()))
}

/// 1 when `contains` is false for every item: no bit set; for a windowed
/// filter, none in a generation visible now. 0 otherwise.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_is_empty(h: *const BfsFilter) -> u8 {
    // SAFETY: per the function's contract.
    guard_value(1, || unsafe { handle(h) }.map_or(1, |f| f.is_empty() as u8))
}

/// Estimated number of distinct items added.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_count(h: *const BfsFilter) -> u64 {
    // SAFETY: per the function's contract.
    guard_value(0, || unsafe { handle(h) }.map_or(0, |f| f.count()))
}

/// Write calls made on the filter (add, add_many, merge, intersect, invert, clear, freeze), summed over all processes.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_ops(h: *const BfsFilter) -> u64 {
    // SAFETY: per the function's contract.
    guard_value(0, || unsafe { handle(h) }.map_or(0, |f| f.ops()))
}

/// The backing file's path (NUL-terminated), or NULL for anonymous, memfd
/// and descriptor handles. Valid until `bfs_free`.
///
/// # Safety
/// `h`: live handle.
#[no_mangle]
pub unsafe extern "C" fn bfs_path(h: *const BfsFilter) -> *const c_char {
    guard_value(std::ptr::null(), || {
        // SAFETY: per the function's contract.
        unsafe { handle(h) }
            .ok()
            .and_then(|f| f.path())
            .map_or(std::ptr::null(), |p| p.as_ptr())
    })
}

/// Flush a file-backed filter to disk (no-op otherwise).
///
/// # Safety
/// `h`: live handle. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_sync(h: *const BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || {
        // SAFETY: per the function's contract.
        let f = unsafe { handle(h) }?;
        checked(f, f.sync())
    })
}

/// `BFS_OK`, or the error every call on `h` gives once a page of its
/// mappings was lost (another process truncated the file, or removed its
/// pages): the functions that answer with a value (`bfs_info`,
/// `bfs_count`, `bfs_contains_many`, ...) are asked it after them, and
/// their answer is void when it fails.
///
/// # Safety
/// `h`: live handle. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_check(h: *const BfsFilter, err: *mut c_char) -> BfsStatus {
    // SAFETY: per the function's contract.
    guard(err, || unsafe { handle(h) }.map(|_| ()))
}

/// Layout `i` of this build, the default first (`i` = 0): its name
/// (NUL-terminated, static) in `*name` and its code (`BFS_LAYOUT_*`, what
/// `BfsOptions::layout` takes and `bfs_info` reports) in `*code`, and 1;
/// 0 past the last, writing nothing.
///
/// # Safety
/// `name`, `code`: NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn bfs_layout_at(i: u32, name: *mut *const c_char, code: *mut u32) -> u8 {
    let Some(&l) = Layout::ALL.get(i as usize) else {
        return 0;
    };
    // SAFETY: NULL or valid, per the contract.
    if let Some(n) = unsafe { name.as_mut() } {
        *n = l.name_nul().as_ptr() as *const c_char;
    }
    // SAFETY: NULL or valid, per the contract.
    if let Some(c) = unsafe { code.as_mut() } {
        *c = l.code();
    }
    1
}
