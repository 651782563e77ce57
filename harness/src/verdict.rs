//! Verdicts: what one run did, and what a cell of runs means for the gate. The enums live in
//! `vkexit-evidence`, beside the results file that carries them.

pub use vkexit_evidence::verdict::*;
