//! The journal's storage: a shared mapping of the words past the filter's
//! bytes that a merge or intersect copies its operand into (the protocol is
//! `sync::lock_journal`'s).
//!
//! Its space is kept once allocated, never given back: neither `ftruncate`
//! nor a punched hole. Who uses the journal is known only by the journal
//! word, which any writer of the file can forge (a word that looks free,
//! or names a dead process, while a live merger maps the journal); and
//! taking pages from under another process's mapping ends it with
//! `SIGBUS`, or, with `sys::sigbus`, fails its call. So the file keeps the
//! journal's size after the first merge or intersect, and the next one
//! reuses the allocated space (doc/DESIGN.md, §6 Journal, §8 M5).

use std::os::fd::RawFd;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, ErrorKind, Result};
use crate::sys::memory::{human, shortfall, Store};
use crate::sys::sigbus::{self, Lost, Watch};

/// A mapping of the journal: `words` atomics, shared with every process
/// that maps it.
pub struct JournalMap {
    /// Removed before the mapping goes (fields drop in order).
    _watch: Option<Watch>,
    map: MmapRaw,
    words: usize,
}

impl JournalMap {
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is `words` * 8 bytes (map_range asked for
        // exactly that), page aligned, and only ever accessed atomically.
        unsafe { std::slice::from_raw_parts(self.map.as_mut_ptr() as *const AtomicU64, self.words) }
    }
}

/// Refuse a journal of `len` bytes that the memory (a memfd, tmpfs) or
/// the file system behind `fd` has no room for, before any is reserved:
/// past a memory cgroup's limit the reservation would be the OOM killer's.
pub fn check_room(fd: RawFd, len: u64) -> Result<()> {
    match shortfall(len, Store::File(fd)) {
        None => Ok(()),
        Some(limit) => Err(Error::new(
            ErrorKind::Io,
            format!(
                "cannot reserve {len} bytes for the journal (a copy of the other filter, {}): {limit}; nothing was changed",
                human(len)
            ),
        )),
    }
}

/// Map `len` bytes of `fd` at `off`, shared and writable, a lost page in
/// it marking `lost` (`sys::sigbus`).
pub fn map_range(fd: RawFd, off: u64, len: u64, lost: &Arc<Lost>) -> std::io::Result<JournalMap> {
    let map = MmapOptions::new().offset(off).len(len as usize).map_raw(fd)?;
    Ok(JournalMap {
        _watch: sigbus::watch(map.as_ptr(), map.len(), false, lost),
        map,
        words: (len / 8) as usize,
    })
}

/// Where the journal lives: the filter's file or memfd, past the filter
/// (`format::journal`). Any process that maps the filter reaches it
/// through its own descriptor.
pub trait JournalStore: Sync {
    /// The journal of a filter with `stages` published stages (1 for a
    /// filter that does not grow) as its last user left it, mapped shared;
    /// None when it cannot be reached (no descriptor, or a file too short
    /// to hold it: never a mapping past the end of the file).
    fn map_journal(&self, stages: u32) -> Option<JournalMap>;
}
