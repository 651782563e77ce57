//! Verdicts: what one run did, and what a cell of runs means for the gate.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The class of one run. Order of precedence is decided in `classify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunVerdict {
    Pass,
    Crash,
    Exit,
    Vuid,
    Timeout,
    Error,
    /// Objects alive when the driver's exit handlers would run (only with
    /// `--fail-on-leak`): the root cause of the Jetson crash.
    Leak,
}

impl RunVerdict {
    pub const ALL: [RunVerdict; 7] = [
        RunVerdict::Pass,
        RunVerdict::Crash,
        RunVerdict::Exit,
        RunVerdict::Vuid,
        RunVerdict::Timeout,
        RunVerdict::Error,
        RunVerdict::Leak,
    ];

    pub fn is_success(self) -> bool {
        self == RunVerdict::Pass
    }

    pub fn name(self) -> &'static str {
        match self {
            RunVerdict::Pass => "pass",
            RunVerdict::Crash => "crash",
            RunVerdict::Exit => "exit",
            RunVerdict::Vuid => "vuid",
            RunVerdict::Timeout => "timeout",
            RunVerdict::Error => "error",
            RunVerdict::Leak => "leak",
        }
    }
}

impl fmt::Display for RunVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The verdict of a cell (case × runtime × driver × layers × emulation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CellVerdict {
    Pass,
    Fail,
    Flaky,
    ExpectedFail,
    UnexpectedPass,
    Error,
    Skipped,
}

impl CellVerdict {
    /// Whether the gate is green for this cell.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            CellVerdict::Pass | CellVerdict::ExpectedFail | CellVerdict::Skipped
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            CellVerdict::Pass => "pass",
            CellVerdict::Fail => "fail",
            CellVerdict::Flaky => "flaky",
            CellVerdict::ExpectedFail => "expected-fail",
            CellVerdict::UnexpectedPass => "unexpected-pass",
            CellVerdict::Error => "error",
            CellVerdict::Skipped => "skipped",
        }
    }
}

impl fmt::Display for CellVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
