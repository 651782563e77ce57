//! What a run writes into the working directory it shares with other runs (an external
//! program or a suite's test started in the caller's directory).
//!
//! The harness names that directory in [`DIR_VAR`], and in [`SKIP_VAR`] the directory of its
//! own files (the artifacts: run directories, layers, logs), which may lie inside it. The
//! preloaded library then writes a `shared-write` timeline record for each name at the shared
//! directory's top level that a process of the run opens for writing, creates, renames or
//! removes there, once per process. Only a run's own processes write these records: vkexit's
//! own output, its reports and the files of processes outside the run are never among them.

/// The shared working directory, canonical.
pub const DIR_VAR: &str = "VKEXIT_SHARED_DIR";
/// vkexit's own files: nothing below it is a write into the shared directory.
pub const SKIP_VAR: &str = "VKEXIT_SHARED_DIR_SKIP";
