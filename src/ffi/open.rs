//! Making filters: new (anonymous, file, memfd), from a descriptor,
//! read-only, from portable bytes; and freeing them.

use super::boundary::*;
use super::*;
use crate::codec::datasketches;

/// Open (or create) a filter. `path` NULL: a new anonymous filter shared with
/// children after fork; otherwise the file at `path` (an existing filter's
/// stored geometry wins). `opts` may be NULL (mode 0600, seed 0). On success
/// writes `*out`; on error writes a message to `err` (BFS_ERRBUF_LEN bytes).
///
/// # Safety
/// `path`: NULL or NUL-terminated. `opts`: NULL or valid. `out`: valid.
/// `err`: NULL or BFS_ERRBUF_LEN writable bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_new(
    path: *const c_char,
    capacity: u64,
    fp_rate: f64,
    opts: *const BfsOptions,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        let o = options(opts)?;
        // SAFETY: per the function's contract.
        let f = match unsafe { opt_path(path) } {
            None => Filter::new_anonymous(capacity, fp_rate, o)?,
            Some(p) => Filter::open_file(p, capacity, fp_rate, o)?,
        };
        publish(out, f)
    })
}

/// Create a filter in a new memfd named `name`: any bytes (cut to the
/// kernel's 249); NULL or empty gives a default name.
///
/// # Safety
/// As `bfs_new`.
#[no_mangle]
pub unsafe extern "C" fn bfs_new_memfd(
    name: *const c_char,
    capacity: u64,
    fp_rate: f64,
    opts: *const BfsOptions,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let name = unsafe { opt_cbytes(name) }.unwrap_or(b"");
        publish(out, Filter::new_memfd(name, capacity, fp_rate, options(opts)?)?)
    })
}

/// Attach to the filter behind descriptor `fd`, which is duplicated
/// (close-on-exec); the caller keeps its own. A frozen filter, or a read-only
/// descriptor, gives a read-only handle.
///
/// # Safety
/// `out`: valid. `err`: NULL or BFS_ERRBUF_LEN writable bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_new_from_fd(fd: c_int, out: *mut *mut BfsFilter, err: *mut c_char) -> BfsStatus {
    guard(err, || publish(out, Filter::from_fd(fd)?))
}

/// Map the frozen filter file at `path` read-only.
///
/// # Safety
/// `path`: NUL-terminated. `out`: valid. `err`: NULL or BFS_ERRBUF_LEN bytes.
#[no_mangle]
pub unsafe extern "C" fn bfs_new_readonly(
    path: *const c_char,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let p = unsafe { opt_path(path) }.ok_or_else(|| Error::arg("path is required"))?;
        publish(out, Filter::open_readonly(p)?)
    })
}

/// A new filter from portable bytes: anonymous (`path` NULL) or a new file
/// at `path` created with `opts->mode` (an existing path is refused).
/// Windowed bytes give a windowed filter; `opts->generations` (with
/// `opts->window`) other than 0 must then match theirs. Plain bytes with
/// `opts->generations` give a windowed filter whose current generation
/// holds their bits. Bytes whose filter would need more memory than
/// `opts->max_bytes` (0: 64 times `len`, at least 16 MiB) are refused
/// before anything is made.
///
/// # Safety
/// `bytes`: valid for `len` bytes. Others as `bfs_new`.
#[no_mangle]
pub unsafe extern "C" fn bfs_deserialize(
    bytes_ptr: *const u8,
    len: usize,
    path: *const c_char,
    opts: *const BfsOptions,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
) -> BfsStatus {
    // SAFETY: per the function's contract.
    let p = unsafe { opt_path(path) };
    // SAFETY: per the function's contract.
    unsafe {
        deserialize_as(bytes_ptr, len, opts, out, err, |o| {
            if o.mode & !0o7777 != 0 {
                return Err(Error::arg(format!("mode {:#o} is not a file mode", o.mode)));
            }
            Ok(match p {
                Some(p) => Target::File(p, o.mode),
                None => Target::Anonymous,
            })
        })
    }
}

/// As `bfs_deserialize`, into a new memfd named `name` (as `bfs_new_memfd`).
///
/// # Safety
/// As `bfs_deserialize`; `name` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn bfs_deserialize_memfd(
    bytes_ptr: *const u8,
    len: usize,
    name: *const c_char,
    opts: *const BfsOptions,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
) -> BfsStatus {
    // SAFETY: per the function's contract.
    let name = unsafe { opt_cbytes(name) }.unwrap_or(b"");
    // SAFETY: per the function's contract.
    unsafe { deserialize_as(bytes_ptr, len, opts, out, err, |_| Ok(Target::Memfd(name))) }
}

/// The body of `bfs_deserialize` and `bfs_deserialize_memfd`: the bytes
/// and options checked, then a filter made where `target` says.
///
/// # Safety
/// As `bfs_deserialize`.
unsafe fn deserialize_as<'a>(
    bytes_ptr: *const u8,
    len: usize,
    opts: *const BfsOptions,
    out: *mut *mut BfsFilter,
    err: *mut c_char,
    target: impl FnOnce(&Options) -> Result<Target<'a>, Error>,
) -> BfsStatus {
    guard(err, || {
        // SAFETY: per the function's contract.
        let b = unsafe { bytes(bytes_ptr, len) };
        let o = options(opts)?;
        // SAFETY: the caller passes NULL or a valid BfsOptions.
        let max_bytes = unsafe { opts.as_ref() }.and_then(|o| (o.max_bytes != 0).then_some(o.max_bytes));
        let to = target(&o)?;
        // DataSketches' bytes are told by their family byte (ours begin
        // with a magic string).
        if datasketches::is_image(b) {
            if o.grow.is_some() {
                return Err(Error::arg("the datasketches layout does not grow"));
            }
            return publish(
                out,
                datasketches::deserialize_limited(b, to, o.layout, o.window, max_bytes)?,
            );
        }
        Filter::check_bytes_growth(b, o.grow)?;
        publish(out, Filter::deserialize_limited(b, to, o.layout, o.window, max_bytes)?)
    })
}

/// Release a handle (unmaps; the shared filter lives on for others).
/// NULL is fine; call at most once per handle.
///
/// # Safety
/// `h`: NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn bfs_free(h: *mut BfsFilter) {
    if !h.is_null() {
        // SAFETY: h came from Box::into_raw in publish and is freed once.
        let b = unsafe { Box::from_raw(h) };
        let _ = catch_unwind(AssertUnwindSafe(move || drop(b)));
    }
}
