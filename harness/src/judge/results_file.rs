//! Judging cells read back from results files: a cell merged from several files (shards,
//! machines), judged again from its summed runs, and cells judged again against baseline
//! files (`vkexit merge --baseline`).

use super::{Baseline, RunsSeen, Subject};
use crate::support::stats;
use crate::support::util::union_sorted;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::CellVerdict;

/// How one part of a merged cell (its result in one file) ended: what merging judges by.
#[derive(Debug, Clone)]
pub struct PartOutcome {
    verdict: CellVerdict,
    runs: u64,
    reason: Option<String>,
}

impl PartOutcome {
    /// The outcome of the part `c`.
    pub fn of(c: &CellResult) -> PartOutcome {
        PartOutcome {
            verdict: c.verdict,
            runs: c.runs,
            reason: c.reason.clone(),
        }
    }
}

/// The verdict of a cell merged from parts: from its summed runs, against the built-in
/// expectation of a built-in case; `error` while a part could not run at all (its driver could
/// not be probed: the other parts do not make up for it) or the sums overflow; `skipped` when
/// no part ran.
pub fn merged(c: &mut CellResult, parts: &[PartOutcome], overflow: bool) {
    let (mut broken, mut skipped): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for p in parts {
        let bucket = match p.verdict {
            CellVerdict::Error if p.runs == 0 => &mut broken,
            CellVerdict::Skipped => &mut skipped,
            _ => continue,
        };
        if let Some(r) = &p.reason {
            if !bucket.contains(r) {
                bucket.push(r.clone());
            }
        }
    }
    let (verdict, reason) = if c.counts.total() == 0 {
        match broken.is_empty() {
            false => (CellVerdict::Error, broken.join("; ")),
            true => (CellVerdict::Skipped, skipped.join("; ")),
        }
    } else {
        let (verdict, why) = judge(c);
        match broken.is_empty() {
            true => (verdict, why),
            false => (
                CellVerdict::Error,
                format!("{}; where it ran: {verdict}, {why}", broken.join("; ")),
            ),
        }
    };
    let total = c.counts.total();
    let (verdict, reason) = if overflow || total == u64::MAX {
        (
            CellVerdict::Error,
            format!("its run counts overflow when added up ({total}); these are not real results: {reason}"),
        )
    } else {
        (verdict, reason)
    };
    c.verdict = verdict;
    c.reason = Some(reason);
    // Judged again, against the built-in expectation only.
    let expectation = builtin_expectation(c);
    c.expectation = expectation.as_ref().map(|e| e.source.clone());
    c.flaky_expected = false;
}

/// What a cell's verdict says that its counts deny, whatever expectation judged it: a
/// cell is `pass` or `unexpected-pass` only when every run passed, `flaky` only when some
/// did, `fail` or `expected-fail` only when none did, `no-vulkan` only when no run used
/// Vulkan, anything but `error` only without erroring runs, and `skipped` only without runs or
/// when its runner skipped every run; its `runs` are its counts' sum.
pub fn contradiction(c: &CellResult) -> Option<String> {
    let k = &c.counts;
    let total = k.total();
    if c.runs != total {
        return Some(format!(
            "\"runs\" is {} but the counts add up to {total}",
            c.runs
        ));
    }
    match c.verdict {
        CellVerdict::Error => None,
        CellVerdict::Skipped if k.skipped < total => Some(format!(
            "a skipped cell has {total} runs, {} of them skipped by their runner",
            k.skipped
        )),
        CellVerdict::Skipped => None,
        _ if total == 0 => Some("no run was made".to_string()),
        _ if k.error > 0 => Some(format!("{} of {total} runs are errors", k.error)),
        CellVerdict::NoVulkan if k.no_vulkan < total => Some(format!(
            "{} of {total} runs did not use Vulkan",
            k.no_vulkan
        )),
        CellVerdict::Pass | CellVerdict::UnexpectedPass if k.passed() < total => {
            Some(format!("{} of {total} runs passed", k.passed()))
        }
        CellVerdict::Flaky if k.passed() == 0 || k.passed() == total => {
            Some(format!("{} of {total} runs passed", k.passed()))
        }
        CellVerdict::Fail | CellVerdict::ExpectedFail if k.passed() > 0 => {
            Some(format!("{} of {total} runs passed", k.passed()))
        }
        _ => None,
    }
}

/// Judges the cells again against baseline files, as `vkexit run --baseline` would: the first
/// entry that matches a cell, else the built-in baseline; the allow-lists that apply take their
/// ids out first. Skipped and error cells keep their verdict.
pub fn rejudge(results: &mut Results, baseline: &Baseline) {
    for c in &mut results.cells {
        // An error stays one whatever a baseline says (runs that could not be judged, a part
        // that could not run, counts that overflow), and a skipped cell has nothing to judge.
        if matches!(c.verdict, CellVerdict::Error | CellVerdict::Skipped) {
            continue;
        }
        let subject = Subject::of_result(c);
        let allows = baseline.allowed(&subject, super::layer_version_of(c));
        let (seen, removed) = super::allow_in_cell(c, &allows);
        let expectation = baseline.judge(&subject, builtin_expectation(c));
        let (verdict, reason) = super::evaluate(expectation.as_ref(), &seen);
        // As a run judged with the allow-lists would have recorded it.
        for id in &removed {
            c.vuid_counts.remove(id);
        }
        c.counts = seen.counts;
        c.vuid_names = crate::host::vuid::renamed_ids(&seen.vuids);
        c.vuids = seen.vuids;
        c.pass_rate = stats::pass_rate(c.counts.passed(), c.counts.total());
        c.pass_rate_95 = stats::pass_rate_95(c.counts.passed(), c.counts.total());
        c.verdict = verdict;
        c.reason = Some(reason);
        c.flaky_expected = expectation
            .as_ref()
            .is_some_and(|e| e.outcome == super::Expected::Flaky);
        c.expectation = expectation.map(|e| e.source);
        union_sorted(&mut c.allowed_vuids, removed);
    }
}

/// As `vkexit run` judges a cell: against the built-in expectation of a
/// built-in case under validation, else pass, fail, flaky or error.
fn judge(c: &CellResult) -> (CellVerdict, String) {
    let expectation = builtin_expectation(c);
    let observed = RunsSeen {
        counts: c.counts,
        vuids: c.vuids.clone(),
        signals: c.signals.clone(),
    };
    super::evaluate(expectation.as_ref(), &observed)
}

/// The built-in baseline's, or the one its suite gave the cell (CTest's `WILL_FAIL`), which
/// the results file keeps as the cell's expectation.
fn builtin_expectation(c: &CellResult) -> Option<super::Expectation> {
    match c.expectation.as_deref() {
        Some(super::WILL_FAIL_SOURCE) => Some(super::will_fail()),
        _ => super::builtin::expectation(&Subject::of_result(c)),
    }
}
