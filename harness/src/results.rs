//! The results file, schema `vkexit.results/1`: its types live in `vkexit-evidence`, which
//! other tools can depend on to read it.

pub use vkexit_evidence::results::*;
