//! Verdicts: what one run did, and what a cell of runs means for the gate.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The class of one run. Order of precedence is decided in `classify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunVerdict {
    /// Exited 0 with every layer asked for active, and nothing found: no validation message,
    /// no call on a destroyed handle, no leak (when leaks count).
    Pass,
    /// The main process, or any other process of its tree, was killed by a signal.
    Crash,
    /// The main process exited with a nonzero status, and no process crashed.
    Exit,
    /// Exited 0, but the validation layer logged messages, or the trace layer saw calls on
    /// destroyed handles.
    Vuid,
    /// Still running at the time limit (`--timeout`): vkexit killed its process group.
    Timeout,
    /// The run could not be judged: it did not start or was interrupted, a layer asked for
    /// was not active, or its evidence could not be read. Never a pass.
    Error,
    /// Objects alive when the driver's exit handlers would run (only with
    /// `--fail-on-leak`): the root cause of the Jetson crash.
    Leak,
    /// Exited 0, and no process of the run ever asked the Vulkan loader for a driver: a test
    /// that does not use Vulkan (the layers had nothing to check). Green, like a pass, unless
    /// the case requires Vulkan (`--require-vulkan`, every built-in case): then `error`.
    NoVulkan,
    /// The test's own runner reported it skipped (pytest's outcome, GoogleTest's
    /// `[  SKIPPED ]`, CTest's `SKIP_RETURN_CODE` or `SKIP_REGULAR_EXPRESSION`), and the run
    /// showed nothing else: no crash, no validation message, no hang. Neither a pass nor a
    /// failure.
    Skipped,
}

impl RunVerdict {
    /// Every run verdict, in declaration order (the order of a cell's `counts`).
    pub const ALL: [RunVerdict; 9] = [
        RunVerdict::Pass,
        RunVerdict::Crash,
        RunVerdict::Exit,
        RunVerdict::Vuid,
        RunVerdict::Timeout,
        RunVerdict::Error,
        RunVerdict::Leak,
        RunVerdict::NoVulkan,
        RunVerdict::Skipped,
    ];

    /// Whether the run passed: `pass`, or `no-vulkan` (it exited 0 and had nothing to check).
    pub fn is_success(self) -> bool {
        matches!(self, RunVerdict::Pass | RunVerdict::NoVulkan)
    }

    /// Whether the run failed: neither passed nor skipped by its runner.
    pub fn is_failure(self) -> bool {
        !self.is_success() && self != RunVerdict::Skipped
    }

    /// Its name in results, baselines and reports, `vuid`.
    pub fn name(self) -> &'static str {
        match self {
            RunVerdict::Pass => "pass",
            RunVerdict::Crash => "crash",
            RunVerdict::Exit => "exit",
            RunVerdict::Vuid => "vuid",
            RunVerdict::Timeout => "timeout",
            RunVerdict::Error => "error",
            RunVerdict::Leak => "leak",
            RunVerdict::NoVulkan => "no-vulkan",
            RunVerdict::Skipped => "skipped",
        }
    }
}

impl fmt::Display for RunVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The verdict of a cell (case × runtime × driver × layers × emulation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum CellVerdict {
    /// Every run passed.
    Pass,
    /// No run passed (and none was in error), and this failure is not one the baseline
    /// expects.
    Fail,
    /// Some runs passed and some failed.
    Flaky,
    /// Every run failed, as the baseline expects (its verdicts, VUIDs and signals).
    ExpectedFail,
    /// Every run passed, but the baseline expects it to fail: the baseline is out of date.
    UnexpectedPass,
    /// A run could not be judged, no run finished, or the cell could not run (a driver that
    /// could not be probed): never green.
    Error,
    /// Not run, as `reason` says: its driver or real runtime is not installed here, the
    /// driver shows no device, the runtime lacks an operation the case needs, or the suite
    /// disables the test; or run, and every run was skipped by the test's own runner.
    Skipped,
    /// Every run exited 0 without ever using Vulkan (run verdict `no-vulkan`): a test of the
    /// suite that runs on the CPU, or compiles a shader. Green, and shown like `skipped`.
    NoVulkan,
}

impl CellVerdict {
    /// Whether the cell met its expectation: `pass`, `expected-fail`, `skipped` or `no-vulkan`.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            CellVerdict::Pass
                | CellVerdict::ExpectedFail
                | CellVerdict::Skipped
                | CellVerdict::NoVulkan
        )
    }

    /// The green rule, the only one: a cell keeps the gate green when it met its
    /// expectation, or when it is known to be flaky (`flaky_expected`) and passed or failed.
    pub fn keeps_gate_green(self, flaky_expected: bool) -> bool {
        self.is_success()
            || (flaky_expected && matches!(self, CellVerdict::Flaky | CellVerdict::Fail))
    }

    /// Its name in results, baselines and reports, `expected-fail`.
    pub fn name(self) -> &'static str {
        match self {
            CellVerdict::Pass => "pass",
            CellVerdict::Fail => "fail",
            CellVerdict::Flaky => "flaky",
            CellVerdict::ExpectedFail => "expected-fail",
            CellVerdict::UnexpectedPass => "unexpected-pass",
            CellVerdict::Error => "error",
            CellVerdict::Skipped => "skipped",
            CellVerdict::NoVulkan => "no-vulkan",
        }
    }
}

impl fmt::Display for CellVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
