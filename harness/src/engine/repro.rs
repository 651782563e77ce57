//! `vkexit repro`: runs one cell until it fails, or until enough clean runs
//! say its failure rate is below a bound, as one would rerun a flaky test by
//! hand, but with every failing run's evidence kept and a number at the end.
//!
//! The runs go through one execution of the run stage, `-j` at a time, and are judged as
//! `vkexit run` judges them, the cell's allow-lists (the built-in baseline's) applied: a run
//! whose only messages are allowed is no failure. After the first failure no new run starts. The bound is the exact one: with no failure in
//! n runs, the one-sided 95 % Clopper–Pearson upper bound of the failure rate
//! is 1 − 0.05^(1/n), below r once (1 − r)^n < 0.05. So the number of clean
//! runs that proves "below r" is known before the first run (299 for 1 %,
//! 59 for 5 %, 29 for 10 %), and no run starts beyond it. The Wilson
//! interval, wider at 0 failures (381 runs for 1 %), is only reported.

use super::gate::layer_crash;
use super::invocation::{Invocation, Resolved};
use super::runs::judged_runs;
use crate::plan::{Cell, Plan};
use crate::run::{interrupt, Flow};
use crate::support::errors::{BadSelection, Error, Result};
use crate::support::stats::clopper_pearson_upper95;
use std::path::PathBuf;
use vkexit_evidence::verdict::RunVerdict;

pub const DEFAULT_MAX_RUNS: u64 = 1000;

/// A failure rate that is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: expected a failure rate such as 1% or 0.5% (or a fraction below 1, 0.01)")]
pub struct BadRate(String);

/// Parses `1%`, `0.5%` or a fraction such as `0.01`.
pub fn parse_rate(text: &str) -> Result<f64, BadRate> {
    let bad = || BadRate(text.to_string());
    let (number, percent) = match text.trim().strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (text.trim(), false),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let rate = if percent { value / 100.0 } else { value };
    if !(rate.is_finite() && rate > 0.0 && rate < 1.0) {
        return Err(bad());
    }
    Ok(rate)
}

/// The exact one-sided 95 % (Clopper–Pearson) upper bound of the failure
/// rate.
pub fn upper_bound(failures: u64, runs: u64) -> f64 {
    clopper_pearson_upper95(failures, runs)
}

/// The fewest clean runs whose failure-rate bound is below `rate`.
pub fn clean_runs_needed(rate: f64) -> u64 {
    // ln 0.05 / ln(1 − r) from the closed form, then checked against the
    // bound the reports print, so both agree to the last run.
    let mut n = (0.05f64.ln() / (1.0 - rate).ln()).floor().max(1.0) as u64;
    while n > 1 && upper_bound(0, n - 1) < rate {
        n -= 1;
    }
    while upper_bound(0, n) >= rate {
        n += 1;
    }
    n
}

/// One failing run, with where its evidence is.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Counted from 1 over the whole repro.
    pub run: u64,
    pub verdict: RunVerdict,
    pub reason: String,
    pub evidence: Option<PathBuf>,
    /// The layer whose library held the crash's pc, when it was one.
    pub crash_layer: Option<String>,
}

/// What a repro came to.
#[derive(Debug, Clone)]
pub struct Tally {
    pub runs: u64,
    pub failures: Vec<Failure>,
    pub interrupted: bool,
    /// When every failure was a crash in one layer: that layer's line, with the cell's runs
    /// made again without it unless turned off.
    pub without_layer: Option<String>,
}

impl Tally {
    pub fn upper_bound(&self) -> f64 {
        upper_bound(self.failures.len() as u64, self.runs)
    }
}

/// The cell a repro runs: the invocation's one part's one cell, checked to be runnable.
pub(crate) fn the_cell(invocation: &Invocation) -> Result<&Cell> {
    match invocation.parts.as_slice() {
        [part] => only_cell(&part.plan),
        _ => unreachable!("flags alone give one layer set"),
    }
}

/// Runs the invocation's one cell, `jobs` at a time, until a run fails,
/// `clean_runs_needed(max_rate)` runs passed, or vkexit is interrupted.
/// `on_batch` sees the number of runs so far after each clean one.
pub(crate) fn repro(
    resolved: &Resolved,
    invocation: Invocation,
    max_rate: f64,
    max_runs: u64,
    mut on_batch: impl FnMut(u64),
) -> Result<Tally> {
    the_cell(&invocation)?;
    let needed = clean_runs_needed(max_rate);
    if needed > max_runs {
        return Err(Error::bad_flag(
            "--max-rate",
            percent(max_rate),
            format!(
                "showing it takes {needed} runs without a failure, more than --max-runs {max_runs}"
            ),
        ));
    }
    // Held until the repro ends, as `run` holds it: the slots and evidence are this repro's
    // alone. Taken once the selection and the bound are known good, so bad input makes nothing.
    let _owner = resolved.own_artifacts()?;
    let invocation = invocation.with_runs(u32::try_from(needed).unwrap_or(u32::MAX));
    let part = &invocation.parts[0];
    let options = invocation.options(part);
    let mut failures = Vec::new();
    let mut finished = 0u64;
    judged_runs(
        &invocation,
        part,
        &options,
        |_| {},
        |_, judged| {
            let r = judged.record;
            finished += 1;
            if r.classification.verdict.is_failure() {
                failures.push(Failure {
                    run: u64::from(r.index) + 1,
                    verdict: r.classification.verdict,
                    reason: r.classification.reason.clone(),
                    evidence: r.kept.clone(),
                    crash_layer: r.classification.crash_layer.clone(),
                });
                return Flow::Stop;
            }
            if failures.is_empty() {
                on_batch(finished);
            }
            Flow::Go
        },
    )?;
    failures.sort_by_key(|f| f.run);
    // Runs cut short by an interrupt say nothing about the cell.
    let interrupted = interrupt::interrupted();
    let without_layer = match one_layer(&failures) {
        Some(layer) => {
            let crashed = failures.len() as u64;
            Some(layer_crash(&invocation, part, &part.plan.cells[0], layer, crashed)?.summary)
        }
        None => None,
    };
    Ok(Tally {
        runs: finished,
        failures,
        interrupted,
        without_layer,
    })
}

/// What a repro prints at its end: each failure with its evidence, the layer line, and the
/// failure rate it showed.
pub fn tally_text(tally: &Tally, max_rate: f64) -> String {
    let mut out = String::new();
    for f in &tally.failures {
        out.push_str(&format!(
            "run {} failed: {}: {}\n",
            f.run, f.verdict, f.reason
        ));
        if let Some(dir) = &f.evidence {
            out.push_str(&format!("  evidence: {}\n", dir.display()));
        }
    }
    if let Some(line) = &tally.without_layer {
        out.push_str(&format!("{line}\n"));
    }
    let n = tally.runs;
    let failures = tally.failures.len();
    let (_, hi) = crate::support::stats::wilson95(failures as u64, n);
    if tally.interrupted {
        out.push_str(&format!(
            "interrupted after {n} runs, {failures} failures\n"
        ));
    } else if failures > 0 {
        let (lo, hi) = crate::support::stats::wilson95(failures as u64, n);
        out.push_str(&format!(
            "failed: {failures} of {n} runs; failure rate {} (95 % interval {}–{})\n",
            percent(failures as f64 / n as f64),
            percent(lo),
            percent(hi)
        ));
    } else {
        out.push_str(&format!(
            "no failure in {n} runs: the failure rate is below {} (95 % upper bound {}: one-sided interval 0–{}, exact Clopper–Pearson; Wilson's 0–{})\n",
            percent(max_rate),
            percent(tally.upper_bound()),
            percent(tally.upper_bound()),
            percent(hi)
        ));
    }
    out
}

/// The layer every failure of a repro crashed in, when they all crashed in one.
fn one_layer(failures: &[Failure]) -> Option<String> {
    let mut layers = failures.iter().map(|f| match f.verdict {
        RunVerdict::Crash => f.crash_layer.clone(),
        _ => None,
    });
    let layer = layers.next()??;
    layers
        .all(|l| l.as_deref() == Some(layer.as_str()))
        .then_some(layer)
}

/// Repro runs exactly one cell that can run here.
fn only_cell(plan: &Plan) -> Result<&Cell> {
    match plan.cells.as_slice() {
        [cell] => match &cell.not_run {
            None => Ok(cell),
            Some(crate::plan::NotRun::Skipped(why) | crate::plan::NotRun::Broken(why)) => {
                Err(Error::BadSelection(BadSelection::CannotRun {
                    cell: cell.label(),
                    why: why.clone(),
                }))
            }
        },
        cells => {
            let some: Vec<String> = cells.iter().take(4).map(Cell::label).collect();
            Err(Error::BadSelection(BadSelection::NotOneCell {
                count: cells.len(),
                some: format!(
                    "{}{}",
                    some.join(", "),
                    if cells.len() > 4 { ", …" } else { "" }
                ),
            }))
        }
    }
}

/// "1 %", "0.5 %", "9.89 %", "0.0001 %": two decimals, or as many as a small rate needs
/// for its first three significant digits.
pub fn percent(rate: f64) -> String {
    let p = rate * 100.0;
    let decimals = match p {
        p if p > 0.0 && p < 0.01 => ((-p.log10()).floor() as usize + 3).min(15),
        _ => 2,
    };
    let text = format!("{p:.decimals$}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} %")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_percentages_or_fractions() {
        assert_eq!(parse_rate("1%").unwrap(), 0.01);
        assert_eq!(parse_rate("10 %").unwrap(), 0.1);
        assert_eq!(parse_rate("0.5%").unwrap(), 0.005);
        assert_eq!(parse_rate("0.02").unwrap(), 0.02);
        for bad in ["0%", "100%", "1", "-1%", "x", "", "5%%", "NaN"] {
            let e = parse_rate(bad).unwrap_err().to_string();
            assert!(e.contains("such as 1%"), "{bad}: {e}");
        }
    }

    #[test]
    fn clean_runs_needed_matches_the_exact_bound() {
        // 0 failures in n runs: the upper bound 1 − 0.05^(1/n).
        assert_eq!(clean_runs_needed(0.10), 29);
        assert_eq!(clean_runs_needed(0.05), 59);
        assert_eq!(clean_runs_needed(0.01), 299);
        assert!(upper_bound(0, 299) < 0.01 && upper_bound(0, 298) >= 0.01);
        assert!((upper_bound(0, 299) - (1.0 - 0.05f64.powf(1.0 / 299.0))).abs() < 1e-9);
        for rate in [0.5, 0.2, 0.05, 0.003] {
            let n = clean_runs_needed(rate);
            assert!(
                upper_bound(0, n) < rate && upper_bound(0, n - 1) >= rate,
                "{rate}"
            );
        }
    }

    #[test]
    fn percentages_read_short() {
        assert_eq!(percent(0.01), "1 %");
        assert_eq!(percent(0.005), "0.5 %");
        assert_eq!(percent(0.0989), "9.89 %");
        // A small rate is printed exactly, never as "0 %".
        assert_eq!(percent(0.000001), "0.0001 %");
        assert_eq!(percent(0.0000123), "0.00123 %");
        assert_eq!(percent(0.0), "0 %");
    }
}
