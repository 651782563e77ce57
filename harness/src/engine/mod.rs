//! The engine: the Invocation (a matrix and the flags resolved once into everything its runs
//! need) and what drives it for each command. The gate runs an invocation, judges every run
//! and cell and tells the reporters; explore runs each cell's natural exit and each perturbation of
//! it, and searches the fix; repro runs one cell until it fails; bench measures what
//! vkexit costs; doctor checks the host and the scenarios; bundle packs vkexit for another
//! machine.

pub(crate) mod baselines;
pub mod bench;
pub mod bundle;
pub mod doctor;
pub(crate) mod exec;
pub mod explore;
pub mod gate;
pub mod invocation;
pub mod repro;
pub(crate) mod runs;
