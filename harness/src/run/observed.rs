//! What a run was seen to do, as the run stage reads it back: how the program ended, what
//! the validation layer logged, the layers' and the crash report's summaries.

use crate::host::validation::ValidationLogs;
use crate::run::summaries::{CrashSummary, TegraSummary, TraceSummary};
use serde::{Deserialize, Serialize};

/// The exit timeline the preloaded library writes in a run's directory.
pub(crate) const TIMELINE_FILE: &str = vkexit_evidence::files::TIMELINE.name;
/// The crash reports every process of the run writes in its directory.
pub(crate) const CRASH_FILE: &str = vkexit_evidence::files::CRASH.name;

/// How the program under test ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Termination {
    /// It exited by itself.
    Exited {
        /// Its exit status (0 to 255).
        code: i32,
    },
    /// A signal ended it.
    Signaled {
        /// The signal's number (11 for SIGSEGV).
        signal: i32,
        /// The kernel wrote a core file for it.
        core_dumped: bool,
    },
    /// Killed by the harness after the time limit.
    TimedOut {
        /// The time limit it ran past, in milliseconds.
        after_ms: u64,
    },
    /// vkexit was interrupted (Ctrl-C, SIGTERM) and stopped the program.
    Interrupted,
    /// The program could not be started at all.
    NotStarted {
        /// Why not (the run directory could not be made, the program could not be spawned);
        /// the run's reason says it.
        reason: String,
    },
}

/// What the validation layer left in the run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validation {
    /// The run's layers left validation out (`validation = false`, `--no-validation`).
    NotRequested,
    /// Requested, and the layer created its log: one per instance.
    Active(ValidationLogs),
    /// Requested, but the layer never created its log: it did not load, or
    /// the program never created a Vulkan instance.
    NotActive,
    /// Requested, the log exists but could not be read.
    Unreadable(String),
}

impl Validation {
    /// What the layer left in run directory `dir`, if it was `requested`.
    pub(crate) fn read(dir: &std::path::Path, requested: bool) -> Validation {
        if !requested {
            return Validation::NotRequested;
        }
        match ValidationLogs::read(dir) {
            Ok(Some(logs)) => Validation::Active(logs),
            Ok(None) => Validation::NotActive,
            Err(e) => Validation::Unreadable(e.to_string()),
        }
    }
}

/// Everything one run left behind that its verdict depends on.
#[derive(Debug, Clone)]
pub struct RunEvidence {
    /// How the program ended.
    pub termination: Termination,
    /// What the validation layer logged (`validation.log`), if it was asked for.
    pub validation: Validation,
    /// The trace layer's summary, when the trace layer was asked for.
    pub trace: Option<TraceSummary>,
    /// The tegra-exit layer's summary, when emulation was asked for.
    pub tegra: Option<TegraSummary>,
    /// The crash reports of every process of the run.
    pub tree: ProcessTree,
    /// A built-in scenario's own account of why it could not set up its runtime (it exits
    /// with [`SCENARIO_SETUP_FAILED`] and says why on stderr): nothing was checked then.
    pub setup_failure: Option<String>,
}

/// The exit code of a built-in scenario that could not set up (its runtime did not load, a
/// call before the exit path failed): no exit-time failure produces it.
pub const SCENARIO_SETUP_FAILED: i32 = 3;
/// How a built-in scenario's stderr line of that failure starts.
pub const SCENARIO_SETUP_FAILED_LINE: &str = "vkexit: scenario setup failed: ";

/// The reason a built-in scenario gave on `stderr` for exiting with `code`, when that is its
/// setup failure.
pub fn setup_failure(code: i32, stderr: &str) -> Option<String> {
    if code != SCENARIO_SETUP_FAILED {
        return None;
    }
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(SCENARIO_SETUP_FAILED_LINE))
        .map(str::to_owned)
}

/// The processes of a run, as the crash report saw them.
#[derive(Debug, Clone, Default)]
pub struct ProcessTree {
    /// The process vkexit started; `None` when none was.
    pub(crate) main_pid: Option<i64>,
    /// `crash.jsonl`: every process of the run writes its crashes there.
    pub(crate) crashes: CrashSummary,
    /// Processes of the run that vkexit reaped as orphans, dead of a signal
    /// vkexit did not send: seen whether or not they wrote a crash record.
    pub(crate) orphans: Vec<OrphanDeath>,
}

/// A process of a run, re-parented to vkexit, that a signal ended: its wait
/// status, taken where vkexit reaped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanDeath {
    /// Its process id.
    pub pid: i64,
    /// Its name, `comm` in `/proc/PID/stat` (all a zombie has left).
    pub comm: String,
    /// Its arguments joined by spaces, when it was seen alive; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cmdline: String,
    /// The signal that ended it, `SIGSEGV`.
    pub signal: String,
    /// The kernel wrote a core file for it.
    #[serde(default)]
    pub core_dumped: bool,
}

impl OrphanDeath {
    /// `process 1234 (mock, detached)`, for sentences.
    pub(crate) fn describe(&self) -> String {
        match self.cmdline.as_str() {
            "" => format!("detached process {} ({})", self.pid, self.comm),
            cmdline => format!("detached process {} ({})", self.pid, cmdline),
        }
    }
}
