//! The storage of a grown filter's stages past the first (doc/DESIGN.md,
//! §6 grown filters, §8 N4, N5, N8): reserved by the process that adds a
//! stage, mapped by each process on its own when it first needs it.
//!
//! Stage 0 is the bit array of the region's own mapping. Every later stage
//! is a range of the same file or memfd, past the end of the stage before
//! it, at offsets every process derives from the validated header
//! (`format::stage_ranges`); a stage is mapped only after checking that
//! the file covers it, so no mapping ever reaches past the end of the file.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, ErrorKind, Result};
use crate::sys::file::{errno_name, fallocate, fstat, over_fsize_limit};
use crate::sys::memory::{human, shortfall, Store};
use crate::sys::sigbus::{self, Lost, Watch};

/// One process's mapping of one stage: `words` atomics, shared with every
/// process that maps the stage.
pub struct StageMap {
    /// Removed before the mapping goes (fields drop in order).
    _watch: Option<Watch>,
    map: MmapRaw,
    words: usize,
}

impl StageMap {
    pub fn as_ptr(&self) -> *const AtomicU64 {
        self.map.as_mut_ptr() as *const AtomicU64
    }

    pub fn words(&self) -> usize {
        self.words
    }

    /// Write the stage's dirty pages to the file (`msync`).
    pub fn flush(&self) -> std::io::Result<()> {
        self.map.flush()
    }
}

/// The message of a file too short for the stages its header publishes.
pub fn short_message(size: u64, needs: u64) -> String {
    format!("file is shorter than its stages ({size} bytes, the published stages need {needs})")
}

/// Map `len` bytes of `fd` at `off` (a stage's range), shared, read-only
/// when `readonly`; refused when the file does not cover the range. A lost
/// page in it marks `lost`, the handle's flag (`sys::sigbus`).
pub fn map_stage(fd: RawFd, off: u64, len: u64, readonly: bool, lost: &Arc<Lost>) -> Result<StageMap> {
    let size = fstat(fd, "stage")?.st_size as u64;
    let end = off.saturating_add(len);
    if size < end {
        return Err(Error::format(short_message(size, end)));
    }
    let len = usize::try_from(len).map_err(|_| Error::format("stage too large to map"))?;
    let mut o = MmapOptions::new();
    o.offset(off).len(len);
    let map = if readonly {
        o.map_raw_read_only(fd)
    } else {
        o.map_raw(fd)
    }
    .map_err(|e| Error::io("mmap of a stage", e))?;
    Ok(StageMap {
        _watch: sigbus::watch(map.as_ptr(), len, readonly, lost),
        map,
        words: len / 8,
    })
}

/// Give a new stage its storage (§8 N4): the range `[off, off + len)`
/// allocated, so that no page of it can fail later with `SIGBUS`, then
/// made zero (a grower or a merger killed earlier, or a clear, may have
/// left bytes there). Zeroed by writing zeros through a mapping of our
/// own, never by shrinking the file or punching a hole: another process
/// may still map the range (a stage a clear dropped, a journal), and
/// neither may take pages from under it (doc/DESIGN.md, §6 Journal). Any
/// failure (no room, a quota, the file size limit, a memfd sealed against
/// growing) is an error naming it, with the range as it was; a page of it
/// lost meanwhile sets `lost`, and the handle's call fails. The published
/// stages are untouched either way.
pub fn reserve_stage(fd: RawFd, off: u64, len: u64, lost: &Arc<Lost>) -> Result<()> {
    let end = off.saturating_add(len);
    let failed = |why: String| {
        Error::new(
            ErrorKind::Io,
            format!(
                "the filter is full and its next stage needs the file to grow to {end} bytes: {why}; nothing was added"
            ),
        )
    };
    // Growing a file past RLIMIT_FSIZE sends SIGXFSZ, which kills the
    // process: ask first.
    if let Some(lim) = over_fsize_limit(end) {
        return Err(failed(format!(
            "more than the file size limit (RLIMIT_FSIZE, {lim} bytes)"
        )));
    }
    // Past the memory there is (a memfd, tmpfs), the reservation would be
    // the OOM killer's, not an error: ask first (the free space too).
    if let Some(limit) = shortfall(len, Store::File(fd)) {
        return Err(failed(format!(
            "the stage is {len} bytes ({}), but {limit}",
            human(len)
        )));
    }
    let size = fstat(fd, "stage")?.st_size as u64;
    if let Err(e) = fallocate(fd, off, len) {
        let why = if e.raw_os_error() == Some(libc::EPERM) {
            format!("{}: {e} (a memfd sealed against growing)", errno_name(&e))
        } else {
            format!("{}: {e}", errno_name(&e))
        };
        return Err(failed(why));
    }
    if size > off {
        // Past the old end the file reads zeros already.
        let zero = size.min(end) - off;
        let m = map_stage(fd, off, zero, false, lost)?;
        for w in 0..m.words() {
            // SAFETY: within the mapping; shared words are only ever used
            // as atomics.
            let word = unsafe { &*m.as_ptr().add(w) };
            // Only words that are not zero are written, so that pages
            // already zero are not dirtied (a file's are written back).
            // Relaxed: the stage is published later (N6, Release), after
            // these stores.
            if word.load(std::sync::atomic::Ordering::Relaxed) != 0 {
                word.store(0, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    Ok(())
}
