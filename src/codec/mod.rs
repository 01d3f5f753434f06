//! Converting filters between formats: a file of the original C module
//! upgraded in place (`upgrade`).

pub mod upgrade;
