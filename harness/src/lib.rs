//! vkexit: finds, reproduces and gates the bugs that Vulkan compute runtimes
//! hit at process exit. The `vkexit` binary is [`cli::main`]; everything else
//! is the engine it drives.
//!
//! # One direction of flow
//!
//! The modules form one order; each may use those before it, never one after it
//! (`tests/layering.rs` reads the sources and holds them to it):
//!
//! 1. `support`: helpers (typed errors, atomic writes, globs, TOML with line numbers,
//!    statistics).
//! 2. `host`: facts about this machine (drivers, probe, loader, validation layer, layer
//!    chain, provenance).
//! 3. `plan`: which cells to run (plan, matrix files, suites, the case catalogue, shards).
//! 4. `explain`: the story a run's directory tells (exit timeline, lifetimes, crash).
//! 5. `run`: making the runs (spawning, supervision, cgroups, capture, hangs), reading back
//!    what each left, as events; it decides no verdict.
//! 6. `judge`: every verdict rule (a run's classification and overrules, allow-lists, the
//!    cell fold, expectations, baselines and their updates).
//! 7. `report`: the results file, the terminal table, JUnit/HTML/Markdown, merging results.
//! 8. `engine`: the Invocation (flags and matrix resolved once into everything a run
//!    needs) and what drives it for each command (the gate, repro, bench, doctor, bundle).
//! 9. `cli`: the command line.
//! 10. `test_fixtures` (unit tests only): results cells any stage's tests may build on.
//!
//! The records every stage shares (verdicts, the results file, evidence files) live in the
//! `vkexit-evidence` crate.

pub mod cli;
pub(crate) mod engine;
pub mod explain;
pub mod host;
pub mod judge;
pub mod plan;
pub mod report;
pub mod run;
pub mod support;
#[cfg(test)]
pub(crate) mod test_fixtures;
