//! Classification: a pure function from what a run left behind to its verdict.
//! No Vulkan, no processes: everything it needs is in `RunEvidence`.

use crate::verdict::RunVerdict;
use crate::vuid::VuidReport;
use serde::{Deserialize, Serialize};

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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    pub verdict: RunVerdict,
    /// One line a person can read: why this verdict.
    pub reason: String,
    pub signal: Option<String>,
    pub vuids: Vec<String>,
}

pub fn signal_name(signal: i32) -> String {
    match nix::sys::signal::Signal::try_from(signal) {
        Ok(s) => s.as_str().to_string(),
        Err(_) => format!("SIG{signal}"),
    }
}

/// Decides the verdict. Failures the program itself showed (hang, signal,
/// exit code) come first, since they are certain whatever validation did;
/// then a run that asked for validation and cannot prove it had it is an
/// `error`, never a pass; then any message id in the log; then `pass`.
pub fn classify(evidence: &RunEvidence) -> Classification {
    let vuids: Vec<String> = match &evidence.validation {
        Validation::Active(report) => report.names().map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let mut signal = None;
    let (verdict, reason) = match &evidence.termination {
        Termination::NotStarted { reason } => {
            (RunVerdict::Error, format!("could not start: {reason}"))
        }
        Termination::TimedOut { after_ms } => (
            RunVerdict::Timeout,
            format!(
                "still running after {:.1} s; process group killed",
                *after_ms as f64 / 1000.0
            ),
        ),
        Termination::Signaled {
            signal: sig,
            core_dumped,
        } => {
            let name = signal_name(*sig);
            let core = if *core_dumped { " (core dumped)" } else { "" };
            signal = Some(name.clone());
            (RunVerdict::Crash, format!("killed by {name}{core}"))
        }
        Termination::Exited { code } if *code != 0 => {
            (RunVerdict::Exit, format!("exited with code {code}"))
        }
        Termination::Exited { .. } => classify_clean_exit(&evidence.validation),
    };
    Classification {
        verdict,
        reason,
        signal,
        vuids,
    }
}

fn classify_clean_exit(validation: &Validation) -> (RunVerdict, String) {
    match validation {
        Validation::NotRequested => (RunVerdict::Pass, "exited 0 (no validation)".into()),
        Validation::NotActive => (
            RunVerdict::Error,
            "exited 0 but the validation layer was not active: it never created its log".into(),
        ),
        Validation::Unreadable(why) => (
            RunVerdict::Error,
            format!("exited 0 but the validation log could not be read: {why}"),
        ),
        Validation::Active(report) if report.is_empty() => {
            (RunVerdict::Pass, "exited 0, validation clean".into())
        }
        Validation::Active(report) => {
            let list: Vec<String> = report
                .ids
                .iter()
                .map(|(id, s)| format!("{id} ×{}", s.count))
                .collect();
            (RunVerdict::Vuid, format!("validation: {}", list.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vuid::scan_str;

    fn run(termination: Termination, validation: Validation) -> Classification {
        classify(&RunEvidence {
            termination,
            validation,
        })
    }

    fn clean_log() -> Validation {
        Validation::Active(scan_str(""))
    }

    fn log_with(id: &str) -> Validation {
        Validation::Active(scan_str(&format!("Validation Error: [ {id} ] x\n")))
    }

    #[test]
    fn exit_zero_with_a_clean_active_layer_passes() {
        let c = run(Termination::Exited { code: 0 }, clean_log());
        assert_eq!(c.verdict, RunVerdict::Pass);
    }

    #[test]
    fn exit_zero_without_proof_of_validation_is_an_error_never_a_pass() {
        let c = run(Termination::Exited { code: 0 }, Validation::NotActive);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.contains("not active"));
        let c = run(
            Termination::Exited { code: 0 },
            Validation::Unreadable("EIO".into()),
        );
        assert_eq!(c.verdict, RunVerdict::Error);
    }

    #[test]
    fn a_vuid_fails_an_otherwise_clean_run() {
        let c = run(
            Termination::Exited { code: 0 },
            log_with("VUID-vkDestroyDevice-device-00378"),
        );
        assert_eq!(c.verdict, RunVerdict::Vuid);
        assert_eq!(c.vuids, ["VUID-vkDestroyDevice-device-00378"]);
        assert!(c.reason.contains("00378 ×1"));
    }

    #[test]
    fn a_signal_is_a_crash_and_keeps_the_vuids_seen_before_it() {
        let c = run(
            Termination::Signaled {
                signal: libc::SIGSEGV,
                core_dumped: false,
            },
            log_with("VUID-vkDestroyDevice-device-00378"),
        );
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(c.vuids.len(), 1);
    }

    #[test]
    fn a_crash_without_validation_proof_is_still_a_crash() {
        let c = run(
            Termination::Signaled {
                signal: libc::SIGABRT,
                core_dumped: true,
            },
            Validation::NotActive,
        );
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert!(c.reason.contains("SIGABRT (core dumped)"));
    }

    #[test]
    fn nonzero_exit_beats_vuids() {
        let c = run(Termination::Exited { code: 3 }, log_with("VUID-x-y-1"));
        assert_eq!(c.verdict, RunVerdict::Exit);
    }

    #[test]
    fn timeout_and_not_started() {
        let c = run(Termination::TimedOut { after_ms: 2500 }, clean_log());
        assert_eq!(c.verdict, RunVerdict::Timeout);
        assert!(c.reason.contains("2.5 s"));
        let c = run(
            Termination::NotStarted {
                reason: "No such file".into(),
            },
            Validation::NotActive,
        );
        assert_eq!(c.verdict, RunVerdict::Error);
    }

    #[test]
    fn no_validation_requested_passes_on_exit_zero() {
        let c = run(Termination::Exited { code: 0 }, Validation::NotRequested);
        assert_eq!(c.verdict, RunVerdict::Pass);
    }

    #[test]
    fn unknown_signal_numbers_get_a_name() {
        assert_eq!(signal_name(libc::SIGBUS), "SIGBUS");
        assert_eq!(signal_name(99), "SIG99");
    }
}
