//! Pure arithmetic: the layouts by name (`scheme`), sizing (`geometry`, and
//! the blocked layouts' false-positive math in `blocked`, DataSketches'
//! hashing and sizing in `datasketches`), hashing an item
//! (`hashing`) and a windowed filter's generation grid (`window`). No
//! memory is shared here and no syscall made.

pub mod blocked;
pub mod datasketches;
pub mod geometry;
pub mod hashing;
#[cfg(test)]
pub mod rng;
pub mod scheme;
pub mod window;
