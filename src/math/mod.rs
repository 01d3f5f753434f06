//! Pure arithmetic: the layouts by name (`scheme`), sizing (`geometry`, and
//! the blocked layouts' false-positive math in `blocked`, DataSketches'
//! hashing and sizing in `datasketches`), hashing an item
//! (`hashing`), a windowed filter's generation grid (`window`) and a
//! growing filter's stages and their bound (`growth`). No
//! memory is shared here and no syscall made.

pub mod blocked;
pub mod datasketches;
pub mod geometry;
pub mod growth;
pub mod hashing;
#[cfg(test)]
pub mod rng;
pub mod scheme;
pub mod window;
