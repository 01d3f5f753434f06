//! What lives in the shared file or memory, and how it is mapped: the
//! header (`format`), the lock words' storage (`slots`), the journal's
//! storage (`journal`), a grown filter's later stages (`stages`), the mapping itself (`region`), and the byte formats
//! a filter is read from or written as: the portable bytes (`serial`) and
//! the original C module's header (`legacy`).

pub mod format;
pub mod journal;
pub mod legacy;
pub mod region;
pub mod serial;
pub mod slots;
pub mod stages;
