//! Reporting: cells summarised into the results schema, the terminal table,
//! and the report files: the results file (JSON), JUnit XML for a CI's test
//! view, a Markdown summary for a pull request, and an HTML matrix.

pub(crate) mod first_run;
pub(crate) mod html;
pub(crate) mod junit;
pub(crate) mod markdown;
mod markup;
pub mod merge;
pub(crate) mod swimlane;

use crate::host::provenance::{FromHost, LoadersUsed, Provenance};
use crate::judge::{self, Expectation, Observed};
use crate::plan::{case_rank, runtime_rank, Cell};
use crate::results::{CellResult, Counts, Results, SCHEMA};
use crate::run::RunRecord;
use crate::support::errors::{Error, Result};
use crate::support::util::counted;
use crate::verdict::{CellVerdict, RunVerdict};
use std::io::Write;
use std::path::{Path, PathBuf};

pub use crate::support::output::write_atomically;
use crate::support::output::Target;

/// One cell's runs, summarised and judged against its expectation, all at once (the gate folds
/// them in as they finish).
#[cfg(test)]
pub(crate) fn summarize(
    cell: &Cell,
    expectation: Option<&Expectation>,
    runs: &[RunRecord],
) -> CellResult {
    let mut fold = CellFold::default();
    for run in runs {
        fold.add(run);
    }
    fold.summarize(cell, expectation)
}

/// A cell's runs folded in as they finish: what its summary needs of them,
/// in a size that does not grow with the number of runs. Each part keeps
/// what the lowest-numbered runs gave, so the summary does not depend on the
/// order in which runs finished.
#[derive(Debug, Default)]
pub struct CellFold {
    counts: Counts,
    vuid_counts: std::collections::BTreeMap<String, u64>,
    vuids: std::collections::BTreeSet<String>,
    signals: std::collections::BTreeSet<String>,
    /// The earliest distinct findings: ((run, place in the run), finding).
    findings: Vec<((u32, usize), String)>,
    /// The directories of the earliest runs kept.
    artifacts: Vec<(u32, PathBuf)>,
    /// The reason of the earliest erroring run.
    first_error: Option<(u32, String)>,
    duration_ms: u64,
    /// The loaders the runs loaded, for the provenance.
    loaders: LoadersUsed,
    /// The layer the crashing runs crashed in, while every one did.
    crash_layer: CrashLayer,
}

/// Whether every crashing run of a cell crashed in one layer's library.
#[derive(Debug, Default)]
enum CrashLayer {
    /// No run crashed yet.
    #[default]
    NoCrash,
    /// Every crash so far was in this layer.
    All(String, u64),
    /// Some crash was elsewhere, or in another layer.
    Mixed,
}

impl CellFold {
    pub fn add(&mut self, run: &RunRecord) {
        for (place, f) in run.classification.findings.iter().enumerate() {
            self.add_finding((run.index, place), elide_handles(f));
        }
        self.counts.add(run.classification.verdict);
        for (id, stat) in &run.vuid_counts.ids {
            *self.vuid_counts.entry(id.clone()).or_insert(0) += stat.count;
        }
        self.vuids.extend(run.classification.vuids.iter().cloned());
        self.signals
            .extend(run.classification.signal.iter().cloned());
        if let Some(dir) = &run.kept {
            keep_earliest(
                &mut self.artifacts,
                MAX_CELL_ARTIFACTS,
                (run.index, dir.clone()),
                |a| a.0,
            );
        }
        let error = run.classification.verdict == RunVerdict::Error;
        if error
            && self
                .first_error
                .as_ref()
                .is_none_or(|(i, _)| run.index < *i)
        {
            self.first_error = Some((run.index, run.classification.reason.clone()));
        }
        self.duration_ms += run.duration_ms;
        self.loaders.add(run.index, run.vulkan.as_ref());
        if run.classification.verdict == RunVerdict::Crash {
            let layer = run.classification.crash_layer.as_ref();
            self.crash_layer = match (std::mem::take(&mut self.crash_layer), layer) {
                (CrashLayer::NoCrash, Some(l)) => CrashLayer::All(l.clone(), 1),
                (CrashLayer::All(seen, n), Some(l)) if seen == *l => CrashLayer::All(seen, n + 1),
                _ => CrashLayer::Mixed,
            };
        }
    }

    /// The layer every crashing run crashed in, and how many runs that is;
    /// `None` when no run crashed or a crash was elsewhere (the application's own).
    pub fn crash_layer(&self) -> Option<(String, u64)> {
        match &self.crash_layer {
            CrashLayer::All(layer, n) => Some((layer.clone(), *n)),
            _ => None,
        }
    }

    fn add_finding(&mut self, key: (u32, usize), finding: String) {
        if let Some(seen) = self.findings.iter_mut().find(|(_, f)| *f == finding) {
            seen.0 = seen.0.min(key);
            return;
        }
        keep_earliest(&mut self.findings, MAX_CELL_FINDINGS, (key, finding), |f| {
            f.0
        });
    }

    /// The cell's summary, judged against its expectation.
    pub fn summarize(&self, cell: &Cell, expectation: Option<&Expectation>) -> CellResult {
        let counts = self.counts;
        let vuids: Vec<String> = self.vuids.iter().cloned().collect();
        let signals: Vec<String> = self.signals.iter().cloned().collect();
        let mut findings = self.findings.clone();
        findings.sort();
        let mut artifacts = self.artifacts.clone();
        artifacts.sort();
        let observed = Observed {
            counts,
            vuids: vuids.clone(),
            signals: signals.clone(),
        };
        let judged = judge::cell(cell, expectation, &observed);
        let verdict = judged.verdict;
        let reason = explain_errors(verdict, judged.reason, self.first_error.as_ref());
        let n = counts.total();
        let [lo, hi] = pass_rate_95(counts);
        CellResult {
            case: cell.case.clone(),
            runtime: cell.runtime.clone(),
            driver: cell.driver.name.clone(),
            layers: cell.layers.clone(),
            emulation: cell.emulation.name().to_string(),
            runs: n,
            counts,
            verdict,
            vuid_names: crate::host::vuid::renamed_ids(&vuids),
            vuids,
            vuid_counts: self.vuid_counts.clone(),
            signals,
            artifacts: artifacts
                .into_iter()
                .map(|(_, dir)| dir.display().to_string())
                .collect(),
            findings: findings.into_iter().map(|(_, f)| f).collect(),
            pass_rate: pass_rate(counts),
            pass_rate_95: [lo, hi],
            duration_ms: self.duration_ms,
            reason: Some(reason),
            device: cell.device.as_ref().map(|d| d.name.clone()),
            provenance: Some(
                Provenance::of(
                    cell.device.as_ref(),
                    cell.device
                        .as_ref()
                        .and_then(|d| d.loader_version.as_deref()),
                    cell.validation_layer.as_deref(),
                )
                .with_loaders(crate::run::selection(cell), &self.loaders),
            ),
            driver_manifest: Some(cell.driver.manifest.display().to_string()),
            expectation: judged.source,
            flaky_expected: judged.flaky_expected,
            allowed_vuids: Vec::new(),
            crash_in_layer: None,
        }
    }
}

/// Adds `item` to `kept`, which holds at most `max`: those of the lowest keys.
fn keep_earliest<T, K: Ord>(kept: &mut Vec<T>, max: usize, item: T, key: impl Fn(&T) -> K) {
    if kept.len() < max {
        kept.push(item);
        return;
    }
    let latest = (0..kept.len()).max_by_key(|&i| key(&kept[i]));
    if let Some(i) = latest.filter(|&i| key(&item) < key(&kept[i])) {
        kept[i] = item;
    }
}

/// Evidence directories listed per cell: those of its earliest kept runs.
const MAX_CELL_ARTIFACTS: usize = 100;
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
fn explain_errors(
    verdict: CellVerdict,
    why: String,
    first_error: Option<&(u32, String)>,
) -> String {
    if verdict != CellVerdict::Error {
        return why;
    }
    match first_error {
        Some((_, reason)) => format!("{why}: {reason}"),
        None => why,
    }
}

/// The share of a cell's runs that passed.
pub fn pass_rate(counts: Counts) -> f64 {
    crate::support::stats::pass_rate(counts.pass, counts.total())
}

/// The 95 % Wilson interval of the pass rate, rounded as in the results file.
pub fn pass_rate_95(counts: Counts) -> [f64; 2] {
    crate::support::stats::pass_rate_95(counts.pass, counts.total())
}

pub fn results(cells: Vec<CellResult>, interrupted: bool) -> Results {
    Results {
        schema: SCHEMA.to_string(),
        vkexit_version: env!("CARGO_PKG_VERSION").to_string(),
        interrupted,
        shard: None,
        cells,
    }
}

/// The results file's text.
pub fn json_text(results: &Results) -> String {
    serde_json::to_string_pretty(results).expect("results serialise") + "\n"
}

/// The report files asked for (`--json`, `--junit`, `--markdown`, `--html`).
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    /// A directory; the report is its `index.html`.
    pub html: Option<PathBuf>,
}

/// One report: what it is, its flag, the name it is kept under when its path fails at the
/// end, and where it goes.
#[derive(Debug, Clone)]
struct Report {
    kind: ReportKind,
    flag: &'static str,
    target: Target,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ReportKind {
    Json,
    Junit,
    Markdown,
    Html,
}

impl ReportKind {
    fn what(self) -> &'static str {
        match self {
            ReportKind::Json => "the results file",
            ReportKind::Junit => "the JUnit report",
            ReportKind::Markdown => "the Markdown summary",
            ReportKind::Html => "the HTML report",
        }
    }

    /// Its name in the directory it is kept in when its own path cannot be written.
    fn fallback_name(self) -> &'static str {
        match self {
            ReportKind::Json => "results.json",
            ReportKind::Junit => "junit.xml",
            ReportKind::Markdown => "summary.md",
            ReportKind::Html => "report.html",
        }
    }
}

/// The reports, checked before any run: each can be written where it goes, none shares a
/// file with another or with an input.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    reports: Vec<Report>,
}

impl Outputs {
    /// Checks that every report can be written (see `support::output`), so that a typo in
    /// a path, a read-only file or two reports on one file fail at once, naming the path,
    /// and not after an hour of runs. `inputs` are the files the command reads, by flag.
    pub fn check(&self, inputs: &[(&str, &Path)]) -> Result<Checked> {
        let mut reports = Vec::new();
        let files = [
            (&self.json, ReportKind::Json, "--json"),
            (&self.junit, ReportKind::Junit, "--junit"),
            (&self.markdown, ReportKind::Markdown, "--markdown"),
        ];
        for (path, kind, flag) in files {
            if let Some(path) = path {
                let target = Target::check(path, kind.what())?;
                reports.push(Report { kind, flag, target });
            }
        }
        if let Some(dir) = &self.html {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io("cannot create the HTML report directory", dir, e))?;
            let target = Target::check(&dir.join(html::INDEX), ReportKind::Html.what())?;
            reports.push(Report {
                kind: ReportKind::Html,
                flag: "--html",
                target,
            });
        }
        let outputs: Vec<(&str, &Target)> = reports.iter().map(|r| (r.flag, &r.target)).collect();
        crate::support::output::check_apart(&outputs, inputs)?;
        Ok(Checked { reports })
    }
}

impl Checked {
    /// Writes every report. One whose path fails now (its directory gone, the disk full)
    /// is kept in `keep_in` (the artifacts directory; else the system's temporary
    /// directory) under its own name, and stderr says where: results are never lost. The
    /// first failure is then the error.
    pub fn write(&self, results: &Results, keep_in: Option<&Path>) -> Result<()> {
        let mut failed: Vec<String> = Vec::new();
        for report in &self.reports {
            let text = render(report.kind, results, &report.target);
            let Err(e) = report.target.write(text.as_bytes()) else {
                continue;
            };
            let what = report.kind.what();
            let given = report.target.given.display();
            failed.push(match keep(report.kind, &text, keep_in) {
                Ok(path) => format!(
                    "cannot write {what} {given}: {e}; kept it in {}",
                    path.display()
                ),
                Err(e2) => format!("cannot write {what} {given}: {e}; nor keep it elsewhere: {e2}"),
            });
        }
        let last = failed.pop();
        for line in failed {
            eprintln!("vkexit: {line}");
        }
        last.map_or(Ok(()), |line| Err(Error::NotWritten(line)))
    }
}

fn render(kind: ReportKind, results: &Results, target: &Target) -> String {
    match kind {
        ReportKind::Json => json_text(results),
        ReportKind::Junit => junit::render(results),
        ReportKind::Markdown => markdown::render(results),
        ReportKind::Html => {
            // Links to the evidence are relative to the report's directory.
            let base = target.real.parent().and_then(|d| d.canonicalize().ok());
            html::render(results, base.as_deref())
        }
    }
}

/// A report kept where it can be: `keep_in` (made again if it went), else the temporary
/// directory, under a name of its own.
fn keep(kind: ReportKind, text: &str, keep_in: Option<&Path>) -> std::io::Result<PathBuf> {
    let mut last = std::io::Error::other("no directory to keep it in");
    let temp = std::env::temp_dir();
    let name = kind.fallback_name();
    let places = [
        keep_in.map(|d| d.join(name)),
        Some(temp.join(format!("vkexit-{}-{name}", std::process::id()))),
    ];
    for path in places.into_iter().flatten() {
        let made = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| write_atomically(&path, text.as_bytes()));
        match made {
            Ok(()) => return Ok(path),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// What a cell's runs showed, in short, as in the README tables:
/// "SIGSEGV 20/20, 00378 ×11", "vuid 3/5, pass 2/5", "skipped".
pub fn observation(c: &CellResult) -> String {
    if c.runs == 0 {
        return c.verdict.name().to_string();
    }
    let mut parts = Vec::new();
    for v in RunVerdict::ALL {
        let n = c.counts.get(v);
        if n == 0 {
            continue;
        }
        let label = match v {
            RunVerdict::Crash if !c.signals.is_empty() => c.signals.join("/"),
            RunVerdict::Timeout => "hang".to_string(),
            _ => v.name().to_string(),
        };
        parts.push(format!("{label} {n}/{}", c.runs));
    }
    for id in &c.vuids {
        let short = short_vuid(id);
        match c.vuid_counts.get(id) {
            Some(&n) if n % c.runs == 0 => parts.push(format!("{short} ×{}", n / c.runs)),
            Some(&n) => parts.push(format!("{short} ×{n} in all")),
            None => parts.push(short.to_string()),
        }
    }
    parts.join(", ")
}

/// "VUID-vkDestroyDevice-device-00378" → "00378"; other ids stay whole.
pub fn short_vuid(id: &str) -> &str {
    match id.rsplit_once('-') {
        Some((head, tail))
            if head.starts_with("VUID-")
                && !tail.is_empty()
                && tail.chars().all(|c| c.is_ascii_digit()) =>
        {
            tail
        }
        _ => id,
    }
}

/// "40 % (95 % interval 12 %–77 %)".
pub fn pass_rate_line(c: &CellResult) -> String {
    let pct = |x: f64| {
        let p = x * 100.0;
        if (p - p.round()).abs() < 0.05 {
            format!("{p:.0} %")
        } else {
            format!("{p:.1} %")
        }
    };
    format!(
        "{} (95 % interval {}–{})",
        pct(c.pass_rate),
        pct(c.pass_rate_95[0]),
        pct(c.pass_rate_95[1])
    )
}

/// The cells grouped by driver, emulation and layers, each group in the
/// order it first appears; what the matrices and JUnit suites are made of.
pub fn groups(cells: &[CellResult]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = Vec::new();
    for c in cells {
        match groups.iter_mut().find(|g| {
            g.driver == c.driver && g.emulation == c.emulation && g.layers == c.layers.as_slice()
        }) {
            Some(g) => g.cells.push(c),
            None => groups.push(Group {
                driver: &c.driver,
                emulation: &c.emulation,
                layers: &c.layers,
                cells: vec![c],
            }),
        }
    }
    groups
}

pub struct Group<'a> {
    pub driver: &'a str,
    pub emulation: &'a str,
    pub layers: &'a [String],
    pub cells: Vec<&'a CellResult>,
}

impl Group<'_> {
    /// "lavapipe, emulation none, layers validation".
    pub fn title(&self) -> String {
        let layers = match self.layers.is_empty() {
            true => "none".to_string(),
            false => self.layers.join("+"),
        };
        format!(
            "{}, emulation {}, layers {layers}",
            self.driver, self.emulation
        )
    }

    /// Rows (cases) and columns (runtimes) of the group's matrix: the
    /// built-in cases and refrt policies in their order, then the others in
    /// the order they appear.
    pub fn axes(&self) -> (Vec<&str>, Vec<&str>) {
        let mut cases: Vec<&str> = Vec::new();
        let mut runtimes: Vec<&str> = Vec::new();
        for c in &self.cells {
            if !cases.contains(&c.case.as_str()) {
                cases.push(&c.case);
            }
            if !runtimes.contains(&c.runtime.as_str()) {
                runtimes.push(&c.runtime);
            }
        }
        cases.sort_by_key(|case| case_rank(case));
        runtimes.sort_by_key(|runtime| runtime_rank(runtime));
        (cases, runtimes)
    }

    pub fn cell(&self, case: &str, runtime: &str) -> Option<&CellResult> {
        self.cells
            .iter()
            .find(|c| c.case == case && c.runtime == runtime)
            .copied()
    }
}

/// Not-green cells first (each kept in its order), then the green ones.
pub fn red_first(cells: &[CellResult]) -> Vec<&CellResult> {
    let mut sorted: Vec<&CellResult> = cells.iter().collect();
    sorted.sort_by_key(|c| c.is_green());
    sorted
}

/// Whether the gate is green for these results: every cell met its
/// expectation and the run was not cut short.
pub fn gate_green(results: &Results) -> bool {
    !results.interrupted && results.cells.iter().all(|c| c.is_green())
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
    let said = first_run::FirstRun::of(c).and_then(|run| run.one_line());
    let mut parts: Vec<String> = c.signals.clone();
    // An id the run's message names is shown with the message, not twice.
    parts.extend(
        c.vuids
            .iter()
            .filter(|id| !said.as_ref().is_some_and(|s| s.contains(id.as_str())))
            .cloned(),
    );
    parts.extend(c.findings.iter().take(3).map(|f| format!("[{f}]")));
    if parts.is_empty() || !matches!(c.verdict, CellVerdict::ExpectedFail) {
        if let Some(reason) = &c.reason {
            if !matches!(c.verdict, CellVerdict::Pass) {
                parts.push(format!("({reason})"));
            }
        }
    }
    // What the first kept run said, then where its evidence is: the line ends with it.
    if let Some(said) = said {
        parts.push(format!("— {said}"));
    }
    if let Some(dir) = c.artifacts.first() {
        parts.push(format!("→ {dir}"));
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
    let runs = cells.iter().fold(0u64, |sum, c| sum.saturating_add(c.runs));
    format!(
        "{}, {}: {}",
        counted(cells.len() as u64, "cell", "cells"),
        counted(runs, "run", "runs"),
        parts.join(", ")
    )
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
