//! The library's one error type: a kind (which becomes the C status code)
//! and a lower-case message that names what was wrong.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad argument (capacity, fp_rate, mode, path, ...).
    Arg,
    /// A system call failed.
    Io,
    /// A file or byte string is not a valid filter.
    Format,
    /// A mutation of a frozen filter.
    Frozen,
    /// A mutation through a read-only handle.
    ReadOnly,
    /// Two filters that cannot be combined.
    Mismatch,
    /// Every process slot is taken by a live process.
    Busy,
    /// A new item for a filter that grows, at its bound (`max_capacity`,
    /// or the most stages it can have).
    Full,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub msg: String,
}

impl Error {
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Error {
        Error { kind, msg: msg.into() }
    }
    pub fn arg(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Arg, msg)
    }
    pub fn format(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Format, msg)
    }
    /// A failed system call: `what` names it (and the path, if any).
    pub fn io(what: impl fmt::Display, e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, format!("{what}: {e}"))
    }
    /// The error of the system call that just failed.
    pub fn last_os(what: impl fmt::Display) -> Error {
        Error::io(what, std::io::Error::last_os_error())
    }
    pub fn frozen() -> Error {
        Error::new(ErrorKind::Frozen, "filter is frozen (read-only)")
    }
    pub fn readonly() -> Error {
        Error::new(ErrorKind::ReadOnly, "filter handle is read-only")
    }
    /// A wait for another process that reached its bound (`sync::wait_limit`).
    pub fn waited_for(what: impl fmt::Display, limit: std::time::Duration) -> Error {
        let t = limit.as_secs_f64();
        Error::new(
            ErrorKind::Busy,
            format!("{WAITED}{t} s for {what}; another process may have forged it, or its holder is stopped"),
        )
    }
    /// Whether this is `waited_for`'s error: the wait took its bound, and
    /// trying again waits as long.
    pub fn waited(&self) -> bool {
        self.kind == ErrorKind::Busy && self.msg.starts_with(WAITED)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// How `Error::waited_for`'s message begins.
const WAITED: &str = "waited ";
