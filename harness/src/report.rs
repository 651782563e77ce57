//! Reporting: cells summarised into the results schema, the terminal table
//! and the JSON file.

use crate::baseline::{self, Observed};
use crate::errors::{Error, Result};
use crate::plan::{Cell, NotRun};
use crate::results::{CellResult, Counts, Results, SCHEMA};
use crate::run::RunRecord;
use crate::stats::wilson95;
use crate::verdict::{CellVerdict, RunVerdict};
use std::io::Write;
use std::path::Path;

/// One cell's runs, summarised and judged against its expectation.
pub fn summarize(cell: &Cell, runs: &[RunRecord]) -> CellResult {
    let mut counts = Counts::default();
    let mut vuids: Vec<String> = Vec::new();
    let mut signals: Vec<String> = Vec::new();
    let mut artifacts = Vec::new();
    let mut vuid_counts = std::collections::BTreeMap::new();
    let mut findings: Vec<String> = Vec::new();
    for run in runs {
        for f in &run.classification.findings {
            let f = elide_handles(f);
            if findings.len() < MAX_CELL_FINDINGS && !findings.contains(&f) {
                findings.push(f);
            }
        }
        counts.add(run.classification.verdict);
        for (id, stat) in &run.vuid_counts.ids {
            *vuid_counts.entry(id.clone()).or_insert(0) += stat.count;
        }
        for id in &run.classification.vuids {
            if !vuids.contains(id) {
                vuids.push(id.clone());
            }
        }
        if let Some(s) = &run.classification.signal {
            if !signals.contains(s) {
                signals.push(s.clone());
            }
        }
        if let Some(dir) = &run.kept {
            artifacts.push(dir.display().to_string());
        }
    }
    vuids.sort();
    signals.sort();
    let (verdict, reason) = match &cell.not_run {
        Some(NotRun::Skipped(why)) => (CellVerdict::Skipped, why.clone()),
        Some(NotRun::Broken(why)) => (CellVerdict::Error, why.clone()),
        None => {
            let observed = Observed {
                counts,
                vuids: vuids.clone(),
                signals: signals.clone(),
            };
            let (verdict, why) = baseline::evaluate(cell.expectation.as_ref(), &observed);
            (verdict, explain_errors(verdict, why, runs))
        }
    };
    let n = counts.total();
    let (lo, hi) = wilson95(counts.pass, n);
    CellResult {
        case: cell.case.clone(),
        runtime: cell.runtime.clone(),
        driver: cell.driver.name.clone(),
        layers: cell.layers.clone(),
        emulation: cell.emulation.clone(),
        runs: n,
        counts,
        verdict,
        vuids,
        vuid_counts,
        signals,
        artifacts,
        findings,
        pass_rate: if n == 0 {
            0.0
        } else {
            counts.pass as f64 / n as f64
        },
        pass_rate_95: [round3(lo), round3(hi)],
        reason: Some(reason),
        device: cell.device.as_ref().map(|d| d.name.clone()),
        driver_manifest: Some(cell.driver.manifest.display().to_string()),
    }
}

const MAX_CELL_FINDINGS: usize = 16;

/// "VkDevice 0x55d0c6f3b0a0 alive at exit" → "VkDevice 0x… alive at exit",
/// so the same finding in many runs is listed once.
fn elide_handles(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("0x") {
        out.push_str(&rest[..at]);
        let digits = rest[at + 2..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .count();
        out.push_str(if digits > 0 { "0x…" } else { "0x" });
        rest = &rest[at + 2 + digits..];
    }
    out.push_str(rest);
    out
}

/// An `error` cell says what went wrong in its first erroring run.
fn explain_errors(verdict: CellVerdict, why: String, runs: &[RunRecord]) -> String {
    if verdict != CellVerdict::Error {
        return why;
    }
    match runs
        .iter()
        .find(|r| r.classification.verdict == RunVerdict::Error)
    {
        Some(r) => format!("{why}: {}", r.classification.reason),
        None => why,
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn results(cells: Vec<CellResult>, interrupted: bool) -> Results {
    Results {
        schema: SCHEMA.to_string(),
        vkexit_version: env!("CARGO_PKG_VERSION").to_string(),
        interrupted,
        cells,
    }
}

pub fn write_json(path: &Path, results: &Results) -> Result<()> {
    let text = serde_json::to_string_pretty(results).expect("results serialise");
    std::fs::write(path, text + "\n")
        .map_err(|e| Error::io("cannot write the results file", path, e))
}

/// The terminal table: one line per cell, with its evidence in short.
pub fn print_table(out: &mut impl Write, cells: &[CellResult]) -> std::io::Result<()> {
    let w_case = width(cells.iter().map(|c| c.case.len()), 4);
    let w_rt = width(cells.iter().map(|c| c.runtime.len()), 7);
    let w_drv = width(cells.iter().map(|c| c.driver.len()), 6);
    let w_emu = width(cells.iter().map(|c| c.emulation.len()), 7);
    writeln!(
        out,
        "{:w_case$}  {:w_rt$}  {:w_drv$}  {:w_emu$}  runs  pass crash exit vuid hang  err leak  {:15}  evidence",
        "case", "runtime", "driver", "emulate", "verdict"
    )?;
    for c in cells {
        let k = &c.counts;
        writeln!(
            out,
            "{:w_case$}  {:w_rt$}  {:w_drv$}  {:w_emu$}  {:4}  {:4} {:5} {:4} {:4} {:4} {:4} {:4}  {:15}  {}",
            c.case,
            c.runtime,
            c.driver,
            c.emulation,
            c.runs,
            k.pass,
            k.crash,
            k.exit,
            k.vuid,
            k.timeout,
            k.error,
            k.leak,
            c.verdict.name(),
            evidence_line(c)
        )?;
    }
    Ok(())
}

fn width(lens: impl Iterator<Item = usize>, min: usize) -> usize {
    lens.max().unwrap_or(0).max(min)
}

fn evidence_line(c: &CellResult) -> String {
    let mut parts: Vec<String> = c.signals.clone();
    parts.extend(c.vuids.iter().cloned());
    parts.extend(c.findings.iter().take(3).map(|f| format!("[{f}]")));
    if parts.is_empty() || !matches!(c.verdict, CellVerdict::ExpectedFail) {
        if let Some(reason) = &c.reason {
            if !matches!(c.verdict, CellVerdict::Pass) {
                parts.push(format!("({reason})"));
            }
        }
    }
    parts.join(" ")
}

/// The verdict counts line printed under the table.
pub fn summary_line(cells: &[CellResult]) -> String {
    let mut parts = Vec::new();
    for v in [
        CellVerdict::Pass,
        CellVerdict::ExpectedFail,
        CellVerdict::Fail,
        CellVerdict::Flaky,
        CellVerdict::UnexpectedPass,
        CellVerdict::Error,
        CellVerdict::Skipped,
    ] {
        let n = cells.iter().filter(|c| c.verdict == v).count();
        if n > 0 {
            parts.push(format!("{n} {v}"));
        }
    }
    let runs: u64 = cells.iter().map(|c| c.runs).sum();
    format!("{} cells, {runs} runs: {}", cells.len(), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::elide_handles;

    #[test]
    fn handles_are_elided_so_runs_agree() {
        assert_eq!(
            elide_handles("VkDevice 0x55d0c6f3b0a0 alive at exit (created on thread main)"),
            "VkDevice 0x… alive at exit (created on thread main)"
        );
        assert_eq!(elide_handles("0x 0xZZ and 0xab"), "0x 0xZZ and 0x…");
    }
}
