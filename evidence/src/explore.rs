//! The exploration file, schema `vkexit.explore/1`: what `vkexit explore --json` writes. Per
//! cell, its natural exit (as `run` judges it) and each perturbation of it, with the fix found
//! where the natural exit fails. Fields may be added; the ones here keep their meaning.

use crate::results::{CellResult, Counts};
use serde::{Deserialize, Serialize};

/// The exploration file's `schema`.
pub const SCHEMA: &str = "vkexit.explore/1";

/// A vkexit exploration file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(title = "vkexit exploration file (vkexit.explore/1)")
)]
pub struct Exploration {
    /// Always "vkexit.explore/1".
    pub schema: String,
    /// The version of the vkexit that wrote the file.
    pub vkexit_version: String,
    /// The thread-timing seed of the `threads` perturbation.
    pub chaos_seed: u64,
    /// The shard explored, `K/N`, when the exploration was split (`--shard`); absent in a
    /// whole exploration and in one merged from every shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Perturbations not run because `--budget` ran out, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// vkexit was stopped before the exploration finished.
    #[serde(default)]
    pub interrupted: bool,
    /// Every cell explored.
    pub cells: Vec<ExploredCell>,
}

/// One cell: its natural exit and each perturbation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExploredCell {
    /// The natural exit, exactly as `vkexit run` judges the cell.
    pub natural: CellResult,
    /// Each perturbation, in the order run.
    pub perturbations: Vec<Perturbation>,
    /// Where the natural exit fails: the smallest change of order found that makes it clean,
    /// verified by runs; absent when it passes or when none helped (`no_fix` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// Where the natural exit fails and no change of order made it clean: why. When
    /// `fix_undecided` is set, the search ended before it could say (what cut it short).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_fix: Option<String>,
    /// The search for a fix ended before every change of order it planned was judged: the
    /// budget ran out, a run could not be judged, or vkexit was stopped. Not an answer: no
    /// "no order helps" is said of such a cell.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fix_undecided: bool,
    /// What a developer acts on, one line each: latent bugs and the fix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
}

/// One perturbation of a cell's exit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Perturbation {
    /// Its name: an exit order (`module`, `linked`, `link-order`), `driver-exit:tegra`,
    /// `driver-exit:tegra-racy`, `threads:seed=N` or `slow-teardown`.
    pub name: String,
    /// The real-world condition it stands for.
    pub condition: String,
    /// The `vkexit run` flags that replay it.
    pub replay: String,
    /// How many runs ended each way.
    pub counts: Counts,
    /// `pass` (every run), `fail` (none), `flaky` (some), `error` (a run could not be
    /// judged), or `not-applicable` (it changes nothing in this program: no runs counted).
    pub verdict: String,
    /// The exit handlers it moved, as the first run's timeline names them; for the
    /// perturbations of threads (`threads:seed=N`, `slow-teardown`), the other threads' states
    /// where it acted (alive, runnable, asleep, blocked); when `not-applicable` or `error`, why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<String>,
    /// The signals that ended a run, once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// The validation message ids logged, once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vuids: Vec<String>,
    /// The run directories kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

/// The change of order that makes a failing exit clean.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Fix {
    /// The exit order that made it clean (`--exit-order` replays it).
    pub exit_order: String,
    /// The change, in source terms.
    pub change: String,
    /// The change as a unified diff of the program's source, where both registrations it
    /// swaps lie in one function of a source file that could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The exit handlers it moved.
    pub moved: Vec<String>,
    /// The verifying runs.
    pub counts: Counts,
    /// `pass`: every verifying run passed.
    pub verdict: String,
}

/// The JSON Schema of the exploration file.
#[cfg(feature = "schema")]
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Exploration)).expect("a schema is JSON")
}

fn is_false(b: &bool) -> bool {
    !*b
}
