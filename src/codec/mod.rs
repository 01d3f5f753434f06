//! Converting filters between formats: a file of the original C module
//! upgraded in place (`upgrade`); Apache DataSketches' serialized Bloom
//! filter in and out (`datasketches`).

pub mod datasketches;
pub mod upgrade;
