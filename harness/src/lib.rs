//! vkexit: finds, reproduces and gates the bugs that Vulkan compute runtimes
//! hit at process exit. The `vkexit` binary is [`cli::main`]; everything else
//! is the engine it drives.
//!
//! # One direction of flow
//!
//! The modules form one order; each may use those before it, never one after it
//! (`tests/layering.rs` reads the sources and holds them to it):
//!
//! 1. `support`, `verdict`, `evidence`: helpers and the records every stage shares.
//! 2. `host`: facts about this machine (drivers, probe, loader, validation layer, layer
//!    chain, provenance).
//! 3. `results`: the results file's types (they carry the host's provenance).
//! 4. `plan`: which cells to run (plan, matrix files, the case catalogue, shards).
//! 5. `run`: making the runs (spawning, supervision, cgroups, capture, hangs).
//! 6. `classify`: what one run came to, from what it left behind (and the story of it).
//! 7. `judge`: the one place that decides a cell's verdict (expectations, baseline files,
//!    allow-lists, flaky rules, the built-in baseline, baseline updates).
//! 8. `report`: summaries, the results file, JUnit/HTML/Markdown, merging results files.
//! 9. `engine`: what drives the stages for each command (the gate, repro, doctor, bundle).
//! 10. `cli`: the command line.
//! 11. `test_fixtures` (unit tests only): results cells any stage's tests may build on.

pub mod classify;
pub mod cli;
pub(crate) mod engine;
pub mod evidence;
pub(crate) mod host;
pub mod judge;
pub mod plan;
pub(crate) mod report;
pub(crate) mod results;
pub mod run;
pub(crate) mod support;
#[cfg(test)]
pub(crate) mod test_fixtures;
pub mod verdict;

// The paths the library has always offered, for the programs and tests that use it.
pub use classify::explain;
pub use host::{drivers, layers, validation, vuid};
pub use plan::matrix;
pub use report::merge;
pub use support::toml_file;
