//! The boundary every C function goes through: the panic guard, the error
//! buffer and status codes, and the casts of C pointers to Rust values
//! (each `unsafe fn` says what the caller promises).

use super::*;

fn status(kind: ErrorKind) -> BfsStatus {
    match kind {
        ErrorKind::Arg => BFS_ERR_ARG,
        ErrorKind::Io => BFS_ERR_IO,
        ErrorKind::Format => BFS_ERR_FORMAT,
        ErrorKind::Frozen => BFS_ERR_FROZEN,
        ErrorKind::ReadOnly => BFS_ERR_READONLY,
        ErrorKind::Mismatch => BFS_ERR_MISMATCH,
        ErrorKind::Busy => BFS_ERR_BUSY,
        ErrorKind::Full => BFS_ERR_FULL,
    }
}

/// Copy `msg` into the caller's buffer, truncated on a character boundary.
pub(super) fn write_err(err: *mut c_char, msg: &str) {
    if err.is_null() {
        return;
    }
    let mut n = msg.len().min(BFS_ERRBUF_LEN - 1);
    while !msg.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the caller provides BFS_ERRBUF_LEN writable bytes at err; we
    // write n < BFS_ERRBUF_LEN bytes and a NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), err as *mut u8, n);
        *err.add(n) = 0;
    }
}

/// The panic boundary: run `f`, map its error or a panic to a status.
pub(super) fn guard(err: *mut c_char, f: impl FnOnce() -> Result<(), Error>) -> BfsStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => BFS_OK,
        Ok(Err(e)) => {
            write_err(err, &e.msg);
            status(e.kind)
        }
        Err(_) => {
            write_err(err, "internal error (a bug): please report it");
            BFS_ERR_PANIC
        }
    }
}

/// The panic boundary for calls that cannot fail: a panic gives `dflt`.
pub(super) fn guard_value<T>(dflt: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(dflt)
}

/// All pointer-to-reference casts happen in these helpers. A handle that
/// lost pages (`Filter::lost`) gives its error here, so that every later
/// call fails at once.
///
/// # Safety
/// `h` must be NULL or a live handle from a `bfs_new*` call.
pub(super) unsafe fn handle<'a>(h: *const BfsFilter) -> Result<&'a Filter, Error> {
    // SAFETY: per the contract above.
    let f = unsafe { handle_unchecked(h) }?;
    f.intact()?;
    Ok(f)
}

/// As `handle`, without the check for lost pages: for the per-item calls,
/// which check once, after their work (`checked`, `Filter::lost`).
///
/// # Safety
/// As `handle`.
pub(super) unsafe fn handle_unchecked<'a>(h: *const BfsFilter) -> Result<&'a Filter, Error> {
    // SAFETY: per the contract above.
    unsafe { h.as_ref() }
        .map(|b| &b.inner)
        .ok_or_else(|| Error::arg("null handle"))
}

/// The answer of a call on `f`, or, when a page of its mappings was lost
/// during the call, the handle's error instead (whatever the call made of
/// the zeros it read there: `sys::sigbus`).
#[inline(always)]
pub(super) fn checked<T>(f: &Filter, r: Result<T, Error>) -> Result<T, Error> {
    f.intact()?;
    r
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(super) unsafe fn opt_path<'a>(p: *const c_char) -> Option<&'a std::path::Path> {
    use std::os::unix::ffi::OsStrExt;
    if p.is_null() {
        return None;
    }
    // SAFETY: per the contract above. Paths are bytes: no UTF-8 required.
    let s = unsafe { CStr::from_ptr(p) };
    Some(std::path::Path::new(std::ffi::OsStr::from_bytes(s.to_bytes())))
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(super) unsafe fn opt_cbytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per the contract above.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// # Safety
/// `ptr` must be valid for `len` bytes, or `len` must be 0.
pub(super) unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        return &[];
    }
    // SAFETY: per the contract above.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// # Safety
/// `items` must point to `n` valid slices (or `n` is 0).
pub(super) unsafe fn slices<'a>(items: *const BfsSlice, n: usize) -> Vec<&'a [u8]> {
    if n == 0 || items.is_null() {
        return Vec::new();
    }
    // SAFETY: per the contract above.
    let s = unsafe { std::slice::from_raw_parts(items, n) };
    // SAFETY: each slice is valid per the contract.
    s.iter().map(|x| unsafe { bytes(x.ptr, x.len) }).collect()
}

/// # Safety
/// `out` must be NULL or valid for `n` bytes.
pub(super) unsafe fn out_bytes<'a>(out: *mut u8, n: usize) -> Option<&'a mut [u8]> {
    if out.is_null() {
        return None;
    }
    // SAFETY: per the contract above.
    Some(unsafe { std::slice::from_raw_parts_mut(out, n) })
}

pub(super) fn path_bytes(p: &std::path::Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

pub(super) fn options(opts: *const BfsOptions) -> Result<Options, Error> {
    // SAFETY: the caller passes NULL or a valid BfsOptions.
    match unsafe { opts.as_ref() } {
        Some(o) => Ok(Options {
            mode: o.mode,
            seed: o.seed,
            layout: match o.layout {
                BFS_LAYOUT_DEFAULT => None,
                n => Some(Layout::from_code(n).ok_or_else(|| Error::arg(format!("unknown layout {n}")))?),
            },
            window: match o.generations {
                0 => None,
                BFS_GENERATIONS_DEFAULT => Some(WindowOptions::from_secs(o.window, None)?),
                g => Some(WindowOptions::from_secs(o.window, Some(g))?),
            },
            size: match (o.bits, o.hashes) {
                (0, 0) => None,
                (0, _) | (_, 0) => return Err(Error::arg("bits and hashes go together")),
                (b, k) => Some((b, k)),
            },
            grow: match (o.grow, o.max_capacity) {
                (0, 0) => None,
                (0, _) => return Err(Error::arg("max_capacity needs grow")),
                (f, max) => Some(GrowOptions::new(f, (max != 0).then_some(max))?),
            },
        }),
        None => Ok(Options {
            mode: 0o600,
            seed: 0,
            layout: None,
            window: None,
            size: None,
            grow: None,
        }),
    }
}

pub(super) fn publish(out: *mut *mut BfsFilter, f: Filter) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::arg("null output pointer"));
    }
    f.intact()?; // a file truncated while it was being opened
                 // SAFETY: out is a valid pointer to write the new handle into.
    unsafe { *out = Box::into_raw(Box::new(BfsFilter { inner: f })) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panic boundary: a panic becomes BFS_ERR_PANIC and a message, or
    /// the default value; it never unwinds into the caller.
    #[test]
    fn a_panic_never_crosses_the_boundary() {
        let mut err = [0 as c_char; BFS_ERRBUF_LEN];
        let st = guard(err.as_mut_ptr(), || panic!("deliberate panic, testing the boundary"));
        assert_eq!(st, BFS_ERR_PANIC);
        // SAFETY: guard NUL-terminated what it wrote into the zeroed buffer.
        let msg = unsafe { CStr::from_ptr(err.as_ptr()) }.to_str().unwrap();
        assert!(msg.starts_with("internal error"), "{msg}");
        assert_eq!(
            guard(std::ptr::null_mut(), || panic!(
                "deliberate panic, testing the boundary"
            )),
            BFS_ERR_PANIC
        );
        assert_eq!(
            guard_value(7u64, || panic!("deliberate panic, testing the boundary")),
            7
        );
    }
}
