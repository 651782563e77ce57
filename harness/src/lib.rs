//! vkexit: finds, reproduces and gates the bugs that Vulkan compute runtimes
//! hit at process exit. The engine is `plan → run → classify → report`; the
//! `vkexit` binary is a thin command line over it.

pub mod baseline_update;
pub mod bundle;
pub mod capture;
pub mod classify;
pub mod doctor;
pub mod drivers;
pub mod errors;
pub mod evidence;
pub mod explain;
pub mod gate;
pub mod glob;
pub mod hang;
pub mod judge;
pub mod layers;
pub mod loader;
pub mod matrix;
pub mod merge;
pub mod plan;
pub mod probe;
pub mod provenance;
pub mod report;
pub mod repro;
pub mod results;
pub mod run;
pub mod shard;
pub mod stats;
#[cfg(test)]
pub(crate) mod test_fixtures;
pub mod toml_file;
pub mod util;
pub mod validation;
pub mod verdict;
pub mod vuid;
