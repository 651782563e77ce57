//! Judging: every rule that decides a verdict, and nothing else does.
//!
//! - a run's verdict (`run`): its classification from what it left, then the overrules
//!   (a fault around the run, validation not proven, the loader bypassed or the driver not
//!   chosen, evidence that could not be kept);
//! - the allow-lists (`allow`), on the evidence the run stage handed over;
//! - a cell's fold of its runs (`cell`) held to its expectation: the first entry of the
//!   baseline files (`--baseline`, whose format is `file`) that matches it, else the
//!   built-in baseline (`builtin`) — `evaluate`, `cell`;
//! - cells of results files judged again (`results_file`), and baseline updates (`update`);
//! - the one green rule, [`CellVerdict::keeps_gate_green`], which the results file's readers
//!   share (it lives beside the verdicts in `vkexit-evidence`).

pub(crate) mod allow;
pub(crate) mod builtin;
pub(crate) mod cell;
pub(crate) mod explore;
pub(crate) mod file;
mod no_runs;
mod results_file;
pub mod run;
pub(crate) mod update;

pub use file::BaselineFile;
pub(crate) use file::{
    allow_in_cell, layer_version_of, layers_text, Allow, Baseline, Entry, Pattern, Subject,
};
pub(crate) use no_runs::{no_runs, no_runs_explored, why_none_ran};
pub(crate) use results_file::{contradiction, merged, rejudge, PartOutcome};

use crate::host::vuid;
use crate::plan::{Cell, NotRun};
use vkexit_evidence::results::Counts;
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

/// What a cell is expected to do: a baseline entry's `expect` (`flaky`), the built-in
/// baseline's, or a test suite's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expected {
    /// `expect = "pass"`.
    Pass,
    /// `expect = "fail"`: every run fails, each with one of `run_verdicts`, and together they
    /// show every id in `vuids` and every signal in `signals`.
    Fail {
        /// `run_verdicts`: how runs may fail; `None` (left out) allows any failure.
        run_verdicts: Option<Vec<RunVerdict>>,
        /// `vuids`: each seen in some run (under any of its names).
        vuids: Vec<String>,
        /// `signals`: each seen in some run (`SIGSEGV`, …).
        signals: Vec<String>,
    },
    /// `flaky = true`: some runs pass and some fail; whatever the cell does, the gate stays
    /// green, and the cell is still reported as it is (`pass`, `flaky`, `fail`).
    Flaky,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expectation {
    pub(crate) outcome: Expected,
    pub(crate) reason: String,
    /// Which expectation this is: "built-in", or "FILE:LINE" of a baseline entry.
    pub(crate) source: String,
}

pub(crate) const BUILTIN_SOURCE: &str = "built-in";

/// Whether a cell with this verdict, judged against this expectation, keeps
/// the gate green ([`CellVerdict::keeps_gate_green`]).
pub(crate) fn green(verdict: CellVerdict, expectation: Option<&Expectation>) -> bool {
    verdict.keeps_gate_green(expectation.is_some_and(|e| e.outcome == Expected::Flaky))
}

/// What the runs of a cell showed, in aggregate.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunsSeen {
    pub(crate) counts: Counts,
    pub(crate) vuids: Vec<String>,
    pub(crate) signals: Vec<String>,
}

/// The cell verdict, and a line saying why.
pub(crate) fn evaluate(
    expectation: Option<&Expectation>,
    seen: &RunsSeen,
) -> (CellVerdict, String) {
    let c = &seen.counts;
    let total = c.total();
    if total == 0 {
        return (CellVerdict::Error, "no run finished".into());
    }
    if c.error > 0 {
        return (
            CellVerdict::Error,
            format!("{} of {total} runs could not be judged", c.error),
        );
    }
    if c.skipped == total {
        return (
            CellVerdict::Skipped,
            format!("its runner skipped each of its {total} runs"),
        );
    }
    let passes = c.passed();
    let mixed = passes > 0 && passes < total;
    let none_used_vulkan = c.no_vulkan == total;
    match expectation.map(|e| (&e.outcome, e.reason.as_str())) {
        None | Some((Expected::Pass | Expected::Flaky, _)) if none_used_vulkan => (
            CellVerdict::NoVulkan,
            format!("none of {total} runs used Vulkan, and each exited 0"),
        ),
        None | Some((Expected::Pass, _)) => {
            let verdict = match (passes == total, mixed) {
                (true, _) => CellVerdict::Pass,
                (false, true) => CellVerdict::Flaky,
                (false, false) => CellVerdict::Fail,
            };
            (verdict, format!("{passes} of {total} runs passed"))
        }
        Some((Expected::Flaky, reason)) => {
            let verdict = match (passes == total, mixed) {
                (true, _) => CellVerdict::Pass,
                (false, true) => CellVerdict::Flaky,
                (false, false) => CellVerdict::Fail,
            };
            (
                verdict,
                format!("{passes} of {total} runs passed; known to be flaky: {reason}"),
            )
        }
        Some((Expected::Fail { .. }, reason)) if passes == total => (
            CellVerdict::UnexpectedPass,
            format!("all {total} runs passed, but known to fail: {reason}; update the baseline"),
        ),
        Some((Expected::Fail { .. }, reason)) if mixed => (
            CellVerdict::Flaky,
            format!("{passes} of {total} runs passed; known to fail: {reason}"),
        ),
        Some((
            Expected::Fail {
                run_verdicts,
                vuids,
                signals,
            },
            reason,
        )) => match mismatch(
            run_verdicts.as_deref().unwrap_or(&file::FAILING),
            vuids,
            signals,
            seen,
        ) {
            None => (CellVerdict::ExpectedFail, reason.to_string()),
            Some(diff) => (
                CellVerdict::Fail,
                format!("failed, but not as known ({reason}): {diff}"),
            ),
        },
    }
}

fn mismatch(
    verdicts: &[RunVerdict],
    vuids: &[String],
    signals: &[String],
    seen: &RunsSeen,
) -> Option<String> {
    let mut diffs = Vec::new();
    for v in RunVerdict::ALL {
        if !v.is_success() && seen.counts.get(v) > 0 && !verdicts.contains(&v) {
            diffs.push(format!("{} {v} runs", seen.counts.get(v)));
        }
    }
    // An expected id may be a pattern (`VUID-vkDestroyDevice-device-*`), and
    // matches a check under any of its names: layers rename ids.
    let shown = |want: &String| seen.vuids.iter().any(|id| vuid::matches(want, id));
    for id in vuids.iter().filter(|id| !shown(id)) {
        diffs.push(format!("no {id}"));
    }
    for s in signals.iter().filter(|s| !seen.signals.contains(s)) {
        diffs.push(format!("no {s}"));
    }
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

/// Each planned cell's expectation: the first baseline-file entry that
/// matches it, else the built-in one.
pub(crate) fn expectations(cells: &[Cell], baseline: &Baseline) -> Vec<Option<Expectation>> {
    cells
        .iter()
        .map(|cell| {
            let subject = Subject::of_cell(cell);
            let own = match cell.props.will_fail {
                true => Some(will_fail()),
                false => builtin::expectation(&subject),
            };
            baseline.judge(&subject, own)
        })
        .collect()
}

/// Where an expectation comes from that the test suite itself gave (CTest's `WILL_FAIL`).
pub(crate) const WILL_FAIL_SOURCE: &str = "ctest WILL_FAIL";

/// A `WILL_FAIL` test: every run must exit nonzero, as CTest counts its pass; a crash, a
/// VUID or a hang still fails it, and so does a run that exits 0.
pub(crate) fn will_fail() -> Expectation {
    Expectation {
        outcome: Expected::Fail {
            run_verdicts: Some(vec![RunVerdict::Exit]),
            vuids: Vec::new(),
            signals: Vec::new(),
        },
        reason: "WILL_FAIL in CTest: a nonzero exit is its pass".into(),
        source: WILL_FAIL_SOURCE.into(),
    }
}

/// Every allow-list that applies to a cell's runs: the baseline files', then
/// the built-in ones.
pub(crate) fn allows_for<'a>(baseline: &'a Baseline, cell: &Cell) -> Vec<&'a Allow> {
    let subject = Subject::of_cell(cell);
    let version = cell.validation_layer.as_deref();
    let mut allows = baseline.allowed(&subject, version);
    allows.extend(builtin::allows(&subject, version));
    allows
}

/// A cell's verdict, why, and what judged it.
#[derive(Debug, Clone)]
pub(crate) struct Judgement {
    pub(crate) verdict: CellVerdict,
    pub(crate) reason: String,
    /// The expectation's source, when one judged the cell.
    pub(crate) source: Option<String>,
    pub(crate) flaky_expected: bool,
}

/// Judges a planned cell from what its runs showed: a cell that could not
/// run is `skipped` (no device) or `error` (a broken driver), never green.
pub(crate) fn cell(cell: &Cell, expectation: Option<&Expectation>, seen: &RunsSeen) -> Judgement {
    let (verdict, reason) = match &cell.not_run {
        Some(NotRun::Skipped(why)) => (CellVerdict::Skipped, why.clone()),
        Some(NotRun::Broken(why)) => (CellVerdict::Error, why.clone()),
        None => evaluate(expectation, seen),
    };
    let judged_by = expectation.filter(|_| cell.not_run.is_none());
    Judgement {
        verdict,
        reason,
        source: judged_by.map(|e| e.source.clone()),
        flaky_expected: judged_by.is_some_and(|e| e.outcome == Expected::Flaky),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHILDREN_ALIVE: &str = "VUID-vkDestroyDevice-device-00378";

    fn seen(pass: u64, crash: u64, vuid: u64, vuids: &[&str], signals: &[&str]) -> RunsSeen {
        RunsSeen {
            counts: Counts {
                pass,
                crash,
                vuid,
                ..Counts::default()
            },
            vuids: vuids.iter().map(|s| s.to_string()).collect(),
            signals: signals.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn expect_vuid() -> Expectation {
        Expectation {
            outcome: Expected::Fail {
                run_verdicts: Some(vec![RunVerdict::Vuid]),
                vuids: vec![CHILDREN_ALIVE.into()],
                signals: vec![],
            },
            reason: "kept buffer".into(),
            source: "b.toml:3".into(),
        }
    }

    #[test]
    fn without_expectation_all_none_or_some() {
        assert_eq!(
            evaluate(None, &seen(5, 0, 0, &[], &[])).0,
            CellVerdict::Pass
        );
        assert_eq!(
            evaluate(None, &seen(0, 5, 0, &[], &["SIGSEGV"])).0,
            CellVerdict::Fail
        );
        assert_eq!(
            evaluate(None, &seen(3, 2, 0, &[], &["SIGSEGV"])).0,
            CellVerdict::Flaky
        );
    }

    #[test]
    fn a_known_failure_met_exactly_is_expected_fail() {
        let e = expect_vuid();
        let (v, why) = evaluate(Some(&e), &seen(0, 0, 5, &[CHILDREN_ALIVE], &[]));
        assert_eq!(v, CellVerdict::ExpectedFail);
        assert_eq!(why, "kept buffer");
    }

    #[test]
    fn a_known_failure_that_now_passes_fails_the_gate() {
        let (v, why) = evaluate(Some(&expect_vuid()), &seen(5, 0, 0, &[], &[]));
        assert_eq!(v, CellVerdict::UnexpectedPass);
        assert!(!v.is_success());
        assert!(why.contains("update the baseline"));
    }

    #[test]
    fn a_known_failure_that_fails_differently_is_a_fail() {
        let (v, why) = evaluate(Some(&expect_vuid()), &seen(0, 5, 0, &[], &["SIGSEGV"]));
        assert_eq!(v, CellVerdict::Fail);
        assert!(
            why.contains("5 crash runs") && why.contains("no VUID"),
            "{why}"
        );
    }

    #[test]
    fn some_passes_are_flaky_never_pass() {
        let (v, _) = evaluate(Some(&expect_vuid()), &seen(2, 0, 3, &[CHILDREN_ALIVE], &[]));
        assert_eq!(v, CellVerdict::Flaky);
    }

    #[test]
    fn any_error_run_makes_the_cell_an_error() {
        let mut s = seen(4, 0, 0, &[], &[]);
        s.counts.error = 1;
        assert_eq!(evaluate(None, &s).0, CellVerdict::Error);
    }
}
