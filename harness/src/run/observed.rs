//! What a run was seen to do, as the run stage reads it back: how the program ended, what
//! the validation layer logged, the layers' and the crash report's summaries; and the
//! verdict the classifier made of it, which the run keeps with its evidence.

use crate::evidence::{CrashSummary, TegraSummary, TraceSummary};
use crate::host::vuid::VuidReport;
use crate::verdict::RunVerdict;
use serde::{Deserialize, Serialize};

/// The files the preloaded diagnostics write in a run's directory.
pub(crate) const TIMELINE_FILE: &str = vkexit_evidence::files::TIMELINE.name;
pub(crate) const CRASH_FILE: &str = vkexit_evidence::files::CRASH.name;

/// How the program under test ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Termination {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
        core_dumped: bool,
    },
    /// Killed by the harness after the time limit.
    TimedOut {
        after_ms: u64,
    },
    /// vkexit was interrupted (Ctrl-C, SIGTERM) and stopped the program.
    Interrupted,
    /// The program could not be started at all.
    NotStarted {
        reason: String,
    },
}

/// What the validation layer left in the run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validation {
    NotRequested,
    /// Requested, and the layer proved it was active by creating its log.
    Active(VuidReport),
    /// Requested, but the layer never created its log: it did not load, or
    /// the program never created a Vulkan instance.
    NotActive,
    /// Requested, the log exists but could not be read.
    Unreadable(String),
}

#[derive(Debug, Clone)]
pub struct RunEvidence {
    pub termination: Termination,
    pub validation: Validation,
    /// The trace layer's summary, when the trace layer was asked for.
    pub trace: Option<TraceSummary>,
    /// The tegra-exit layer's summary, when emulation was asked for.
    pub tegra: Option<TegraSummary>,
    /// Objects alive at exit fail the run.
    pub fail_on_leak: bool,
    /// The crash reports of every process of the run.
    pub tree: ProcessTree,
}

/// The processes of a run, as the crash report saw them.
#[derive(Debug, Clone, Default)]
pub struct ProcessTree {
    /// The process vkexit started; `None` when none was.
    pub(crate) main_pid: Option<i64>,
    /// `crash.jsonl`: every process of the run writes its crashes there.
    pub(crate) crashes: CrashSummary,
    /// The program crashes children on purpose (death tests): their crashes
    /// are findings, not failures.
    pub(crate) children_may_crash: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    pub verdict: RunVerdict,
    /// One line a person can read: why this verdict.
    pub(crate) reason: String,
    pub(crate) signal: Option<String>,
    pub vuids: Vec<String>,
    /// What the vkexit layers saw, as sentences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) findings: Vec<String>,
    /// The layer whose library held the pc of the crash that failed the run
    /// (`validation`, `trace`, or another layer's file name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) crash_layer: Option<String>,
}
