//! Reporting: cells summarised into the results schema, the terminal table,
//! and the report files: the results file (JSON), JUnit XML for a CI's test
//! view, a Markdown summary for a pull request, and an HTML matrix.

pub mod events;
pub(crate) mod explain_text;
pub(crate) mod explore;
pub(crate) mod first_run;
pub(crate) mod html;
pub(crate) mod junit;
pub(crate) mod markdown;
mod markup;
pub mod merge;
pub(crate) mod swimlane;
pub(crate) mod terminal;

use crate::plan::{case_rank, runtime_rank};
use crate::support::errors::{Error, Result};
use crate::support::util::counted;
use std::path::{Path, PathBuf};
use vkexit_evidence::results::{CellResult, Results, SCHEMA};
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

use crate::support::output::write_atomically;
use crate::support::output::Target;

/// The results file of these cells.
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
    /// The results file.
    pub json: Option<PathBuf>,
    /// The JUnit XML report.
    pub junit: Option<PathBuf>,
    /// The Markdown summary.
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

/// What the reports show: a gate's results, or an exploration (`vkexit explore`, or the
/// shards of one joined by `merge`).
#[derive(Debug, Clone, Copy)]
pub enum Document<'a> {
    /// A results file's contents (`run`, `merge`).
    Results(&'a Results),
    /// An exploration file's contents.
    Exploration(&'a vkexit_evidence::explore::Exploration),
}

impl Checked {
    /// Writes every report. One whose path fails now (its directory gone, the disk full)
    /// is kept in `keep_in` (the artifacts directory; else the system's temporary
    /// directory) under its own name, and stderr says where: results are never lost. The
    /// first failure is then the error.
    pub fn write(&self, results: &Results, keep_in: Option<&Path>) -> Result<()> {
        self.write_document(Document::Results(results), keep_in)
    }

    /// Writes every report of `document`, as [`Checked::write`] does.
    pub fn write_document(&self, document: Document, keep_in: Option<&Path>) -> Result<()> {
        let mut failed: Vec<String> = Vec::new();
        for report in &self.reports {
            let text = render(report.kind, document, &report.target);
            let Err(e) = report.target.write(text.as_bytes()) else {
                continue;
            };
            let what = report.kind.what();
            let given = report.target.given.display();
            let name = match document {
                Document::Results(_) => report.kind.fallback_name().to_string(),
                Document::Exploration(_) => format!("explore-{}", report.kind.fallback_name()),
            };
            failed.push(match keep(&name, &text, keep_in) {
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

fn render(kind: ReportKind, document: Document, target: &Target) -> String {
    // Links to the evidence are relative to the report's directory.
    let base = || target.real.parent().and_then(|d| d.canonicalize().ok());
    match (document, kind) {
        (Document::Results(results), ReportKind::Json) => json_text(results),
        (Document::Results(results), ReportKind::Junit) => junit::render(results),
        (Document::Results(results), ReportKind::Markdown) => markdown::render(results),
        (Document::Results(results), ReportKind::Html) => html::render(results, base().as_deref()),
        (Document::Exploration(e), ReportKind::Json) => {
            serde_json::to_string_pretty(e).expect("an exploration is JSON") + "\n"
        }
        (Document::Exploration(e), ReportKind::Junit) => explore::junit(e),
        (Document::Exploration(e), ReportKind::Markdown) => explore::markdown(e),
        (Document::Exploration(e), ReportKind::Html) => explore::html(e, base().as_deref()),
    }
}

/// A report kept where it can be: `keep_in` (made again if it went), else the temporary
/// directory, under a name of its own.
fn keep(name: &str, text: &str, keep_in: Option<&Path>) -> std::io::Result<PathBuf> {
    let mut last = std::io::Error::other("no directory to keep it in");
    let temp = std::env::temp_dir();
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

/// What a cell's runs showed, in short, as in the README tables: "SIGSEGV 20/20, 00378 ×11
/// per run" (the messages of a VUID in each run), "vuid 3/5, pass 2/5, 01120 ×3 in 5 runs"
/// (its messages in all the runs together), "skipped".
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
    // Each id with its messages: as many in every run, or how many in all the runs.
    for id in &c.vuids {
        let short = short_vuid(id);
        match c.vuid_counts.get(id) {
            Some(&n) if n % c.runs == 0 => parts.push(format!("{short} ×{} per run", n / c.runs)),
            Some(&n) => parts.push(format!(
                "{short} ×{n} in {}",
                counted(c.runs, "run", "runs")
            )),
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

/// The cells of one driver, emulation and layer set: one table of a report.
pub struct Group<'a> {
    /// The driver's short name.
    pub driver: &'a str,
    /// The emulation's name (`none`, `tegra`).
    pub emulation: &'a str,
    /// The layers of its cells.
    pub layers: &'a [String],
    /// Its cells, in the matrix's order.
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

    /// The group's cell of `case` × `runtime`.
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
        CellVerdict::NoVulkan,
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
