//! Baseline files (`vkexit run --baseline FILE.toml`): what cells are known
//! to do, written by hand or by `vkexit baseline update`.
//!
//! ```toml
//! [[expect]]
//! case = "buffer-kept-at-exit"   # each key a `*` pattern; a key left out matches anything
//! runtime = "refrt:*"
//! driver = "lavapipe"            # the short name, or the ICD manifest path
//! layers = "validation"          # the cell's layers joined by "+", or "none"
//! emulation = "none"
//! expect = "fail"                # "pass" or "fail"; or `flaky = true` instead
//! run_verdicts = ["vuid"]        # how its runs may fail (left out: any failure)
//! vuids = ["VUID-vkDestroyDevice-device-00378"]  # each seen in some run
//! signals = []                   # each seen in some run
//! reason = "vkDestroyDevice while the kept buffer is alive"
//!
//! [[allow]]                      # an old layer's false positive
//! allow_vuids = ["VUID-…"]       # removed from every run before it is judged
//! driver = "lavapipe"            # optional
//! layer_version = "1.3.239"      # optional: the validation layer's version, a `*` pattern
//! reason = "…"
//! ```
//!
//! Either kind of entry may hold `layer_versions = "FROM..TO"`: it applies
//! only to cells run under a validation layer of a version from FROM
//! (included) to TO (not included); either end may be left out
//! (`"1.4.300.."`, `"..1.3.268"`). Expectations that truly differ between
//! layer versions are written so, each with its reason.
//!
//! An expected or allowed id names a check under any of its names: an entry
//! written for `VUID-vkDestroyDevice-device-00378` holds for a layer that
//! logs the same check as `…-05137` (see `vuid::RENAMED`), and the reverse.
//!
//! The `[[expect]]` entries are tried in file order, the files in the order
//! given; the first whose pattern matches a cell judges it. A cell that no
//! entry matches is judged by the built-in baseline, if it has one. Every
//! `[[allow]]` entry that applies to a cell applies.

use super::{Expectation, Expected};
use crate::plan::Cell;
use crate::support::errors::Result;
use crate::support::glob;
use crate::support::toml_file::TomlFile;
use serde::Deserialize;
use std::path::PathBuf;
use toml::Spanned;
use vkexit_evidence::results::CellResult;
use vkexit_evidence::verdict::RunVerdict;

/// Which cells an entry is about; `None` matches any value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// `case`: a `*` pattern of the case name.
    pub(crate) case: Option<String>,
    /// `runtime`: a `*` pattern of the runtime (`refrt:never`, `ggml`, …).
    pub(crate) runtime: Option<String>,
    /// `driver`: a `*` pattern of the driver's short name or its ICD manifest path.
    pub(crate) driver: Option<String>,
    /// `layers`: the cell's layers joined by "+", or "none".
    pub(crate) layers: Option<String>,
    /// `emulation`: none, tegra or tegra-racy.
    pub(crate) emulation: Option<String>,
    /// `layer_versions`: the validation layer versions the entry is about.
    pub(crate) layer_versions: Option<VersionRange>,
}

/// One `[[expect]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The cells it is about: its `case`, `runtime`, `driver`, `layers`, `emulation` and
    /// `layer_versions` keys.
    pub(crate) pattern: Pattern,
    /// `expect` (with `run_verdicts`, `vuids`, `signals`) or `flaky`.
    pub(crate) expect: Expected,
    /// `reason`: why the cells do what they do, shown with their verdict.
    pub(crate) reason: String,
    /// "FILE:LINE" of the entry.
    pub(crate) source: String,
}

/// One `[[allow]]` entry: message ids removed from every run of the cells
/// it applies to, before they are judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allow {
    /// `allow_vuids`: the ids removed (under any of their names).
    pub(crate) vuids: Vec<String>,
    /// `driver`: a `*` pattern of the driver's short name or manifest path; `None`: any.
    pub(crate) driver: Option<String>,
    /// `layer_version`: a `*` pattern of the validation layer's version; `None`: any.
    pub(crate) layer_version: Option<String>,
    /// `layer_versions`: the validation layer versions it applies to; `None`: any.
    pub(crate) layer_versions: Option<VersionRange>,
    /// `reason`: why the ids are not the program's fault.
    pub(crate) reason: String,
    /// "FILE:LINE" of the entry.
    pub(crate) source: String,
}

/// Validation layer versions from `from` (included) to `to` (not included),
/// written `FROM..TO`; either end may be left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VersionRange {
    /// The first version in the range; `None`: no lower end.
    pub(crate) from: Option<[u32; 3]>,
    /// The first version past the range; `None`: no upper end.
    pub(crate) to: Option<[u32; 3]>,
}

/// A `layer_versions` value that is no range: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}`: {why}; expected FROM..TO (FROM included, TO not, either may be left out), e.g. \"1.4.300..\", \"..1.3.268\" or \"1.4.0..1.4.400\""
)]
pub(crate) struct BadRange {
    text: String,
    why: RangeFault,
}

/// What is wrong with a version range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RangeFault {
    /// No `..` between the ends.
    #[error("no `..`")]
    NoDots,
    /// An end that is no version: the end.
    #[error("`{0}` is not a version such as 1.3.268")]
    NotAVersion(String),
    /// `..`
    #[error("both ends are left out")]
    NoEnd,
    /// FROM is not below TO.
    #[error("it holds no version")]
    Empty,
}

impl VersionRange {
    /// Parses `1.4.300..`, `..1.3.268` or `1.4.0..1.4.400`.
    pub(crate) fn parse(text: &str) -> Result<VersionRange, BadRange> {
        let bad = |why| BadRange {
            text: text.to_string(),
            why,
        };
        let (from, to) = text
            .split_once("..")
            .ok_or_else(|| bad(RangeFault::NoDots))?;
        let end = |v: &str| match v.trim() {
            "" => Ok(None),
            v => parse_version(v)
                .map(Some)
                .ok_or_else(|| bad(RangeFault::NotAVersion(v.to_string()))),
        };
        let range = VersionRange {
            from: end(from)?,
            to: end(to)?,
        };
        match (range.from, range.to) {
            (None, None) => Err(bad(RangeFault::NoEnd)),
            (Some(a), Some(b)) if a >= b => Err(bad(RangeFault::Empty)),
            _ => Ok(range),
        }
    }

    /// Whether a layer of this version (`1.3.239`) is in the range; a
    /// version that cannot be read is in none.
    pub(crate) fn contains(&self, version: &str) -> bool {
        let Some(v) = parse_version(version) else {
            return false;
        };
        self.from.is_none_or(|a| v >= a) && self.to.is_none_or(|b| v < b)
    }
}

impl std::fmt::Display for VersionRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = |v: Option<[u32; 3]>| v.map_or(String::new(), |[a, b, c]| format!("{a}.{b}.{c}"));
        write!(f, "{}..{}", end(self.from), end(self.to))
    }
}

/// `1.3`, `1.3.268`: missing parts are 0; more than three parts are refused.
fn parse_version(text: &str) -> Option<[u32; 3]> {
    let mut out = [0u32; 3];
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() > 3 {
        return None;
    }
    for (slot, part) in out.iter_mut().zip(parts) {
        *slot = part.parse().ok()?;
    }
    Some(out)
}

fn in_versions(range: &Option<VersionRange>, layer_version: Option<&str>) -> bool {
    match range {
        None => true,
        Some(r) => layer_version.is_some_and(|v| r.contains(v)),
    }
}

/// One baseline file, checked.
#[derive(Debug, Clone, Default)]
pub struct BaselineFile {
    /// Where it was read from (`--baseline`), for messages and `source`.
    pub(crate) path: PathBuf,
    /// Its `[[expect]]` entries, in file order.
    pub(crate) entries: Vec<Entry>,
    /// Its `[[allow]]` entries, in file order.
    pub(crate) allows: Vec<Allow>,
}

/// The baseline files of a run, in the order given.
#[derive(Debug, Clone, Default)]
pub(crate) struct Baseline {
    pub(crate) files: Vec<BaselineFile>,
}

/// What patterns are matched against: a cell's identity and its driver's
/// manifest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) case: &'a str,
    pub(crate) runtime: &'a str,
    pub(crate) driver: &'a str,
    pub(crate) manifest: Option<&'a str>,
    pub(crate) layers: &'a [String],
    pub(crate) emulation: &'a str,
    /// The validation layer's version, when the runs use it.
    pub(crate) layer_version: Option<&'a str>,
}

impl<'a> Subject<'a> {
    pub(crate) fn of_cell(cell: &'a Cell) -> Subject<'a> {
        Subject {
            case: &cell.case,
            runtime: &cell.runtime,
            driver: &cell.driver.name,
            manifest: cell.driver.manifest.to_str(),
            layers: &cell.layers,
            emulation: cell.emulation.name(),
            layer_version: cell.validation_layer.as_deref(),
        }
    }

    pub(crate) fn of_result(cell: &'a CellResult) -> Subject<'a> {
        Subject {
            case: &cell.case,
            runtime: &cell.runtime,
            driver: &cell.driver,
            manifest: cell.driver_manifest.as_deref(),
            layers: &cell.layers,
            emulation: &cell.emulation,
            layer_version: layer_version_of(cell),
        }
    }
}

/// A cell's layers as a baseline writes them: "trace+validation", or "none".
pub(crate) fn layers_text(layers: &[String]) -> String {
    match layers.is_empty() {
        true => "none".to_string(),
        false => layers.join("+"),
    }
}

fn matches(pattern: &Option<String>, value: &str) -> bool {
    match pattern {
        None => true,
        Some(p) => glob::matches(p, value),
    }
}

/// A driver pattern matches the short name or the ICD manifest path.
fn matches_driver(pattern: &Option<String>, subject: &Subject) -> bool {
    matches(pattern, subject.driver)
        || subject
            .manifest
            .is_some_and(|m| pattern.as_deref().is_some_and(|p| glob::matches(p, m)))
}

impl Pattern {
    pub(crate) fn matches(&self, s: &Subject) -> bool {
        matches(&self.case, s.case)
            && matches(&self.runtime, s.runtime)
            && matches_driver(&self.driver, s)
            && matches(&self.layers, &layers_text(s.layers))
            && matches(&self.emulation, s.emulation)
            && in_versions(&self.layer_versions, s.layer_version)
    }

    /// Whether every key is given and none is a pattern: the entry is about
    /// one cell (under any layer version: one keyed by versions is not).
    pub(crate) fn is_exact(&self) -> bool {
        self.layer_versions.is_none()
            && [
                &self.case,
                &self.runtime,
                &self.driver,
                &self.layers,
                &self.emulation,
            ]
            .iter()
            .all(|k| k.as_deref().is_some_and(|p| !glob::is_glob(p)))
    }
}

impl Entry {
    pub(crate) fn expectation(&self) -> Expectation {
        Expectation {
            outcome: self.expect.clone(),
            reason: self.reason.clone(),
            source: self.source.clone(),
        }
    }
}

/// The run verdicts a failure may have; `error` is never expected, since a
/// run that could not be judged says nothing about the cell.
pub(crate) const FAILING: [RunVerdict; 5] = [
    RunVerdict::Crash,
    RunVerdict::Exit,
    RunVerdict::Vuid,
    RunVerdict::Timeout,
    RunVerdict::Leak,
];

impl Allow {
    pub(crate) fn applies(&self, s: &Subject, layer_version: Option<&str>) -> bool {
        matches_driver(&self.driver, s)
            && match &self.layer_version {
                None => true,
                Some(p) => layer_version.is_some_and(|v| glob::matches(p, v)),
            }
            && in_versions(&self.layer_versions, layer_version)
    }

    pub(crate) fn allows(&self, id: &str) -> bool {
        self.vuids.iter().any(|p| crate::host::vuid::matches(p, id))
    }
}

impl Baseline {
    /// The baseline of `files`, checked and in order (`engine::baselines` reads them).
    pub(crate) fn of(files: Vec<BaselineFile>) -> Baseline {
        Baseline { files }
    }

    /// The first entry that matches the cell, else the built-in expectation.
    pub(crate) fn judge(&self, s: &Subject, builtin: Option<Expectation>) -> Option<Expectation> {
        self.files
            .iter()
            .flat_map(|f| &f.entries)
            .find(|e| e.pattern.matches(s))
            .map(Entry::expectation)
            .or(builtin)
    }

    /// Every allow-list that applies to the cell.
    pub(crate) fn allowed(&self, s: &Subject, layer_version: Option<&str>) -> Vec<&Allow> {
        self.files
            .iter()
            .flat_map(|f| f.allowed(s, layer_version))
            .collect()
    }
}

/// What a cell of a results file did once the allow-lists took their ids out, and the ids
/// taken. A results file keeps ids per cell, not per run: when every id of the cell is allowed,
/// its `vuid` runs had allowed ids only and pass; when some stay, its runs cannot be told apart
/// and keep their verdicts (a run judged as it finishes is exact: [`super::allow::apply`]).
pub(crate) fn allow_in_cell(
    cell: &CellResult,
    allows: &[&Allow],
) -> (super::RunsSeen, Vec<String>) {
    let (removed, vuids): (Vec<String>, Vec<String>) = cell
        .vuids
        .iter()
        .cloned()
        .partition(|id| allows.iter().any(|a| a.allows(id)));
    let mut counts = cell.counts;
    // Only ids taken out make a `vuid` run pass: a cell with `vuid` runs but no ids listed
    // (a file cut short, or written by hand) keeps its failures.
    if vuids.is_empty() && !removed.is_empty() {
        counts.pass += counts.vuid;
        counts.vuid = 0;
    }
    let seen = super::RunsSeen {
        counts,
        vuids,
        signals: cell.signals.clone(),
    };
    (seen, removed)
}

/// The validation layer version a results cell ran under, for `[[allow]] layer_version`.
pub(crate) fn layer_version_of(cell: &CellResult) -> Option<&str> {
    cell.provenance
        .as_ref()
        .and_then(|p| p.validation_layer.as_deref())
}

// ---------------------------------------------------------------------------
// Reading: the file as written, then each entry checked, with its position.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    allow: Vec<Spanned<RawAllow>>,
    #[serde(default)]
    expect: Vec<Spanned<RawExpect>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Class {
    Pass,
    Fail,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    case: Option<String>,
    runtime: Option<String>,
    driver: Option<String>,
    layers: Option<Spanned<String>>,
    emulation: Option<Spanned<String>>,
    expect: Option<Spanned<Class>>,
    flaky: Option<Spanned<bool>>,
    run_verdicts: Option<Spanned<Vec<Spanned<RunVerdict>>>>,
    vuids: Option<Spanned<Vec<Spanned<String>>>>,
    signals: Option<Spanned<Vec<Spanned<String>>>>,
    layer_versions: Option<Spanned<String>>,
    reason: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllow {
    allow_vuids: Spanned<Vec<Spanned<String>>>,
    driver: Option<String>,
    layer_version: Option<String>,
    layer_versions: Option<Spanned<String>>,
    reason: Spanned<String>,
}

const LAYER_VALUES: [&str; 4] = ["none", "validation", "trace", "trace+validation"];
const EMULATION_VALUES: [&str; 3] = ["none", "tegra", "tegra-racy"];

impl BaselineFile {
    /// The allow-lists of this file that apply to the cell.
    pub(crate) fn allowed(&self, s: &Subject, layer_version: Option<&str>) -> Vec<&Allow> {
        self.allows
            .iter()
            .filter(|a| a.applies(s, layer_version))
            .collect()
    }

    /// Checks a baseline file's text; an error names the file, line and column and what
    /// was expected there.
    pub fn parse(file: &TomlFile) -> Result<BaselineFile> {
        let raw: RawFile = file.parse()?;
        let mut allows = Vec::new();
        for a in raw.allow {
            let at = a.span().start;
            allows.push(check_allow(file, at, a.into_inner())?);
        }
        let mut entries = Vec::new();
        for e in raw.expect {
            let at = e.span().start;
            entries.push(check_expect(file, at, e.into_inner())?);
        }
        Ok(BaselineFile {
            path: file.path.clone(),
            entries,
            allows,
        })
    }
}

fn check_reason(file: &TomlFile, reason: Spanned<String>) -> Result<String> {
    if reason.get_ref().trim().is_empty() {
        return Err(file.error(
            &reason.span(),
            "`reason` is empty: say why the cells do what they do",
        ));
    }
    Ok(reason.into_inner())
}

fn check_allow(file: &TomlFile, at: usize, raw: RawAllow) -> Result<Allow> {
    let list_span = raw.allow_vuids.span();
    let vuids = check_ids(file, raw.allow_vuids.into_inner())?;
    if vuids.is_empty() {
        return Err(file.error(&list_span, "`allow_vuids` is empty: name the ids to allow"));
    }
    Ok(Allow {
        vuids,
        driver: raw.driver,
        layer_version: raw.layer_version,
        layer_versions: check_versions(file, raw.layer_versions)?,
        reason: check_reason(file, raw.reason)?,
        source: file.location(at),
    })
}

fn check_expect(file: &TomlFile, at: usize, raw: RawExpect) -> Result<Entry> {
    let layers = check_value(file, raw.layers, "layers", &LAYER_VALUES)?;
    let emulation = check_value(file, raw.emulation, "emulation", &EMULATION_VALUES)?;
    let flaky = raw.flaky.as_ref().is_some_and(|f| *f.get_ref());
    let expect = match (raw.expect, flaky) {
        (Some(_), true) => {
            let span = raw.flaky.expect("flaky was given").span();
            return Err(file.error(
                &span,
                "`flaky = true` and `expect` exclude each other: a flaky cell may pass or fail",
            ));
        }
        (None, false) => {
            return Err(file.error_at(
                at,
                "this entry says nothing about its cells: expected `expect = \"pass\"`, `expect = \"fail\"` or `flaky = true`",
            ))
        }
        (None, true) => None,
        (Some(class), false) => Some(*class.get_ref()),
    };
    let details_only_with_fail = |span: std::ops::Range<usize>, key: &str| {
        file.error(
            &span,
            format!("`{key}` describes a failure: it goes only with `expect = \"fail\"`"),
        )
    };
    if expect != Some(Class::Fail) {
        if let Some(v) = &raw.run_verdicts {
            return Err(details_only_with_fail(v.span(), "run_verdicts"));
        }
        if let Some(v) = &raw.vuids {
            return Err(details_only_with_fail(v.span(), "vuids"));
        }
        if let Some(v) = &raw.signals {
            return Err(details_only_with_fail(v.span(), "signals"));
        }
    }
    let expect = match expect {
        None => Expected::Flaky,
        Some(Class::Pass) => Expected::Pass,
        Some(Class::Fail) => Expected::Fail {
            run_verdicts: raw
                .run_verdicts
                .map(|v| check_run_verdicts(file, v))
                .transpose()?,
            vuids: match raw.vuids {
                Some(v) => check_ids(file, v.into_inner())?,
                None => Vec::new(),
            },
            signals: match raw.signals {
                Some(v) => check_signals(file, v.into_inner())?,
                None => Vec::new(),
            },
        },
    };
    Ok(Entry {
        pattern: Pattern {
            case: raw.case,
            runtime: raw.runtime,
            driver: raw.driver,
            layers,
            emulation,
            layer_versions: check_versions(file, raw.layer_versions)?,
        },
        expect,
        reason: check_reason(file, raw.reason)?,
        source: file.location(at),
    })
}

fn check_versions(file: &TomlFile, text: Option<Spanned<String>>) -> Result<Option<VersionRange>> {
    let Some(text) = text else {
        return Ok(None);
    };
    VersionRange::parse(text.get_ref())
        .map(Some)
        .map_err(|why| file.error(&text.span(), format!("layer_versions {why}")))
}

/// A value without `*` must be one the key can have: a typo would make the
/// entry match nothing, silently.
fn check_value(
    file: &TomlFile,
    value: Option<Spanned<String>>,
    key: &str,
    valid: &[&str],
) -> Result<Option<String>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let text = value.get_ref();
    if !glob::is_glob(text) && !valid.contains(&text.as_str()) {
        return Err(file.error(
            &value.span(),
            format!(
                "{key} `{text}`: expected one of {}, or a `*` pattern",
                valid.join(", ")
            ),
        ));
    }
    Ok(Some(value.into_inner()))
}

fn check_run_verdicts(
    file: &TomlFile,
    list: Spanned<Vec<Spanned<RunVerdict>>>,
) -> Result<Vec<RunVerdict>> {
    let span = list.span();
    let list = list.into_inner();
    if list.is_empty() {
        return Err(file.error(
            &span,
            "`run_verdicts` is empty: leave it out to allow any failure",
        ));
    }
    let mut out: Vec<RunVerdict> = Vec::new();
    for v in list {
        let verdict = *v.get_ref();
        if !FAILING.contains(&verdict) {
            return Err(file.error(
                &v.span(),
                format!(
                    "`{verdict}` is not a failure a cell can be known for; expected one of crash, exit, vuid, timeout, leak"
                ),
            ));
        }
        if !out.contains(&verdict) {
            out.push(verdict);
        }
    }
    Ok(out)
}

/// Message ids as the validation layer writes them, `*` allowed:
/// `VUID-vkDestroyDevice-device-00378`, `UNASSIGNED-…`, `VKEXIT-trace-dead-handle`.
fn check_ids(file: &TomlFile, list: Vec<Spanned<String>>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for id in list {
        let text = id.get_ref();
        let shaped = text.contains('-')
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_*".contains(c));
        if !shaped {
            return Err(file.error(
                &id.span(),
                format!("`{text}` is not a message id such as VUID-vkDestroyDevice-device-00378"),
            ));
        }
        if !out.contains(text) {
            out.push(id.into_inner());
        }
    }
    Ok(out)
}

fn check_signals(file: &TomlFile, list: Vec<Spanned<String>>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for s in list {
        let text = s.get_ref();
        if text.parse::<nix::sys::signal::Signal>().is_err() {
            return Err(file.error(
                &s.span(),
                format!(
                    "`{text}` is not a signal name; expected one such as SIGSEGV, SIGABRT, SIGBUS"
                ),
            ));
        }
        if !out.contains(text) {
            out.push(s.into_inner());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::vuid::{Severity, VuidReport, VuidStat};
    use crate::judge::run::{Classification, RunRecord, Termination};
    use crate::judge::{self as baseline, RunsSeen};
    use vkexit_evidence::results::Counts;
    use vkexit_evidence::verdict::CellVerdict;

    fn parse(text: &str) -> Result<BaselineFile> {
        let file = TomlFile {
            path: "b.toml".into(),
            text: text.into(),
        };
        BaselineFile::parse(&file)
    }

    fn baseline(text: &str) -> Baseline {
        Baseline {
            files: vec![parse(text).unwrap()],
        }
    }

    fn validation() -> Vec<String> {
        vec!["validation".into()]
    }

    fn subject<'a>(case: &'a str, runtime: &'a str, layers: &'a [String]) -> Subject<'a> {
        Subject {
            case,
            runtime,
            driver: "lavapipe",
            manifest: Some("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"),
            layers,
            emulation: "none",
            layer_version: Some("1.3.239"),
        }
    }

    const CHILDREN: &str = "VUID-vkDestroyDevice-device-00378";

    #[test]
    fn a_full_entry_reads_back_as_written() {
        let f = parse(
            r#"
# known failures
[[expect]]
case = "buffer-kept-at-exit"
runtime = "refrt:guarded"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "fail"
run_verdicts = ["vuid"]
vuids = ["VUID-vkDestroyDevice-device-00378"]
reason = "kept buffer"

[[expect]]
case = "clean-exit"
flaky = true
reason = "racy"

[[allow]]
allow_vuids = ["UNASSIGNED-x"]
layer_version = "1.3.239"
reason = "false positive"
"#,
        )
        .unwrap();
        assert_eq!(f.entries.len(), 2);
        let e = &f.entries[0];
        assert!(e.pattern.is_exact());
        assert_eq!(e.source, "b.toml:3");
        assert_eq!(
            e.expect,
            Expected::Fail {
                run_verdicts: Some(vec![RunVerdict::Vuid]),
                vuids: vec![CHILDREN.into()],
                signals: vec![],
            }
        );
        assert_eq!(f.entries[1].expect, Expected::Flaky);
        assert_eq!(f.entries[1].source, "b.toml:14");
        assert!(!f.entries[1].pattern.is_exact());
        assert_eq!(f.allows[0].source, "b.toml:19");
        assert_eq!(f.allows[0].layer_version.as_deref(), Some("1.3.239"));
    }

    #[test]
    fn errors_name_the_file_line_and_column_and_what_was_expected() {
        let cases: [(&str, &str); 14] = [
            ("[[expect]]\ncase = \"x\"\nexpect = \"pass\"\n", "b.toml:1:1: missing field `reason`"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"pass\"\ncsae = \"x\"\n", "b.toml:4:1: unknown field `csae`, expected one of"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"passes\"\n", "b.toml:3:10: unknown variant `passes`, expected `pass` or `fail`"),
            ("[[expect]]\nreason = \"r\"\n", "b.toml:1:1: this entry says nothing about its cells"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"fail\"\nflaky = true\n", "b.toml:4:9: `flaky = true` and `expect` exclude each other"),
            ("[[expect]]\nreason = \"  \"\nexpect = \"pass\"\n", "b.toml:2:10: `reason` is empty"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"pass\"\nvuids = [\"VUID-a-1\"]\n", "b.toml:4:9: `vuids` describes a failure"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"fail\"\nrun_verdicts = [\"crash\", \"pass\"]\n", "b.toml:4:26: `pass` is not a failure"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"fail\"\nrun_verdicts = [\"segfault\"]\n", "b.toml:4:17: unknown variant `segfault`"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"fail\"\nsignals = [\"SEGV\"]\n", "b.toml:4:12: `SEGV` is not a signal name"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"fail\"\nvuids = [\"00378\"]\n", "b.toml:4:10: `00378` is not a message id"),
            ("[[expect]]\nreason = \"r\"\nexpect = \"pass\"\nemulation = \"jetson\"\n", "b.toml:4:13: emulation `jetson`: expected one of none, tegra, tegra-racy"),
            ("[[allow]]\nallow_vuids = []\nreason = \"r\"\n", "b.toml:2:15: `allow_vuids` is empty"),
            ("[[expect]\n", "b.toml:1:"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}\n  got:  {e}\n  want: {want}");
        }
    }

    #[test]
    fn the_first_matching_entry_wins_in_file_order() {
        let b = baseline(
            r#"
[[expect]]
case = "buffer-kept-at-exit"
runtime = "refrt:guarded"
expect = "pass"
reason = "specific"

[[expect]]
case = "buffer-kept-*"
expect = "fail"
reason = "general"
"#,
        );
        let layers = validation();
        let e = b
            .judge(
                &subject("buffer-kept-at-exit", "refrt:guarded", &layers),
                None,
            )
            .unwrap();
        assert_eq!(
            (e.reason.as_str(), e.source.as_str()),
            ("specific", "b.toml:2")
        );
        let e = b
            .judge(
                &subject("buffer-kept-at-exit", "refrt:never", &layers),
                None,
            )
            .unwrap();
        assert_eq!(
            (e.reason.as_str(), e.source.as_str()),
            ("general", "b.toml:8")
        );
        assert!(b
            .judge(&subject("clean-exit", "refrt:never", &layers), None)
            .is_none());
    }

    #[test]
    fn a_user_entry_replaces_the_built_in_one_only_for_its_cells() {
        let b = baseline(
            "[[expect]]\ncase = \"handler-before-load\"\nruntime = \"refrt:never\"\nexpect = \"pass\"\nreason = \"fixed here\"\n",
        );
        let layers = validation();
        let mine = subject("handler-before-load", "refrt:never", &layers);
        let e = b
            .judge(&mine, baseline::builtin::expectation(&mine))
            .unwrap();
        assert_eq!((e.outcome, e.source.as_str()), (Expected::Pass, "b.toml:1"));
        let other = subject("handler-before-load", "refrt:static-destructor", &layers);
        let e = b
            .judge(&other, baseline::builtin::expectation(&other))
            .unwrap();
        assert_eq!(e.source, "built-in");
        assert!(matches!(e.outcome, Expected::Fail { .. }));
    }

    #[test]
    fn patterns_match_every_key_and_drivers_by_name_or_manifest() {
        let layers = validation();
        let s = subject("clean-exit", "refrt:never", &layers);
        let p = |case: &str, driver: &str, layers: &str| Pattern {
            case: Some(case.into()),
            driver: Some(driver.into()),
            layers: Some(layers.into()),
            ..Pattern::default()
        };
        assert!(p("clean-*", "lavapipe", "validation").matches(&s));
        assert!(p("*", "/usr/share/vulkan/icd.d/lvp*", "*validation").matches(&s));
        assert!(!p("*", "nvidia", "*").matches(&s));
        assert!(!p("*", "*", "trace+validation").matches(&s));
        assert!(!p("*", "*", "none").matches(&s));
        assert!(p("*", "*", "none").matches(&Subject { layers: &[], ..s }));
        assert!(Pattern::default().matches(&s));
        assert!(!Pattern::default().is_exact());
    }

    /// The allow-lists applied to each run, `leaks[i]` saying whether run i's trace showed a
    /// leak that fails it; the ids taken out of all of them, sorted.
    fn apply_all(runs: &mut [RunRecord], allows: &[&Allow], leaks: &[bool]) -> Vec<String> {
        let mut removed = std::collections::BTreeSet::new();
        for (run, &leak) in runs.iter_mut().zip(leaks) {
            removed.extend(crate::judge::allow::apply(run, allows, leak));
        }
        removed.into_iter().collect()
    }

    fn run(verdict: RunVerdict, ids: &[&str], kept: Option<PathBuf>) -> RunRecord {
        let mut report = VuidReport::default();
        for id in ids {
            report.ids.insert(
                id.to_string(),
                VuidStat {
                    count: 2,
                    severity: Severity::Error,
                },
            );
        }
        RunRecord {
            cell: 0,
            index: 0,
            classification: Classification {
                verdict,
                reason: "r".into(),
                signal: None,
                vuids: ids.iter().map(|s| s.to_string()).collect(),
                findings: vec![],
                crash_layer: None,
            },
            termination: Termination::Exited { code: 0 },
            vuid_counts: report,
            duration_ms: 1,
            stdout_bytes: 0,
            stderr_bytes: 0,
            kept,
            vulkan: None,
        }
    }

    #[test]
    fn allow_lists_apply_per_driver_and_layer_version() {
        let b = baseline(
            r#"
[[allow]]
allow_vuids = ["UNASSIGNED-old-layer-*"]
layer_version = "1.3.2*"
reason = "fixed in 1.4"

[[allow]]
allow_vuids = ["VUID-only-on-nvidia-1"]
driver = "nvidia"
reason = "driver quirk"
"#,
        );
        let layers = validation();
        let s = subject("clean-exit", "refrt:never", &layers);
        let on = |version| b.allowed(&s, version).len();
        assert_eq!(on(Some("1.3.239")), 1);
        assert_eq!(on(Some("1.4.304")), 0);
        assert_eq!(on(None), 0, "no validation layer, no layer version");
        let nvidia = Subject {
            driver: "nvidia",
            ..s
        };
        assert_eq!(b.allowed(&nvidia, Some("1.3.239")).len(), 2);
    }

    #[test]
    fn a_results_cell_passes_its_vuid_runs_only_when_allowed_ids_were_all_it_logged() {
        use crate::test_fixtures::{cell, counts};
        let allow = Allow {
            vuids: vec!["UNASSIGNED-fp-*".into()],
            driver: None,
            layer_version: None,
            layer_versions: None,
            reason: "false positive".into(),
            source: "b.toml:2".into(),
        };
        let mut c = cell("x", "external", CellVerdict::Fail, counts(0, 0, 3));
        c.vuids = vec!["UNASSIGNED-fp-1".into()];
        let (seen, removed) = allow_in_cell(&c, &[&allow]);
        assert_eq!((seen.counts.pass, seen.counts.vuid), (3, 0));
        assert_eq!(removed, ["UNASSIGNED-fp-1"]);

        c.vuids.push("VUID-real".into());
        let (seen, _) = allow_in_cell(&c, &[&allow]);
        assert_eq!((seen.counts.pass, seen.counts.vuid), (0, 3));
        assert_eq!(seen.vuids, ["VUID-real"]);

        // vuid runs with no ids listed, and nothing allowed: still failures.
        c.vuids.clear();
        let (seen, removed) = allow_in_cell(&c, &[&allow]);
        assert_eq!((seen.counts.pass, seen.counts.vuid), (0, 3));
        assert!(removed.is_empty());
    }

    #[test]
    fn allowed_ids_are_removed_before_judging() {
        let allow = Allow {
            vuids: vec!["UNASSIGNED-fp-*".into()],
            driver: None,
            layer_version: None,
            layer_versions: None,
            reason: "false positive".into(),
            source: "b.toml:2".into(),
        };
        let mut runs = vec![
            run(RunVerdict::Vuid, &["UNASSIGNED-fp-1"], None),
            run(RunVerdict::Vuid, &["UNASSIGNED-fp-1", CHILDREN], None),
            run(RunVerdict::Crash, &["UNASSIGNED-fp-2"], None),
            run(RunVerdict::Pass, &[], None),
        ];
        let removed = apply_all(&mut runs, &[&allow], &[false; 4]);
        assert_eq!(removed, ["UNASSIGNED-fp-1", "UNASSIGNED-fp-2"]);
        // Only false positives: the run passes, and says why.
        assert_eq!(runs[0].classification.verdict, RunVerdict::Pass);
        assert!(runs[0].classification.reason.contains("b.toml:2"));
        assert!(runs[0].vuid_counts.ids.is_empty());
        // A real finding beside it: still a vuid run, without the false positive.
        assert_eq!(runs[1].classification.verdict, RunVerdict::Vuid);
        assert_eq!(runs[1].classification.vuids, [CHILDREN]);
        assert_eq!(runs[1].vuid_counts.ids.len(), 1);
        // A crash stays a crash.
        assert_eq!(runs[2].classification.verdict, RunVerdict::Crash);
        assert!(runs[2].classification.vuids.is_empty());
    }

    #[test]
    fn a_run_left_with_a_leak_is_a_leak_when_leaks_fail() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(vkexit_evidence::files::TRACE.name),
            "{\"ev\":\"loaded\"}\n{\"ev\":\"alive\",\"when\":\"exit\",\"type\":\"VkDevice\",\"handle\":\"0x1\"}\n",
        )
        .unwrap();
        let allow = Allow {
            vuids: vec!["UNASSIGNED-fp".into()],
            driver: None,
            layer_version: None,
            layer_versions: None,
            reason: "r".into(),
            source: "b.toml:1".into(),
        };
        // The run's trace, as the run stage read it from the run's directory.
        let trace = std::fs::File::open(dir.path().join(vkexit_evidence::files::TRACE.name))
            .and_then(crate::run::summaries::read_trace)
            .unwrap();
        let leak = |fail_on_leak: bool| fail_on_leak && trace.leaked();
        let kept = Some(dir.path().to_path_buf());
        let mut runs = vec![run(RunVerdict::Vuid, &["UNASSIGNED-fp"], kept.clone())];
        apply_all(&mut runs, &[&allow], &[leak(false)]);
        assert_eq!(runs[0].classification.verdict, RunVerdict::Pass);
        let mut runs = vec![run(RunVerdict::Vuid, &["UNASSIGNED-fp"], kept)];
        apply_all(&mut runs, &[&allow], &[leak(true)]);
        assert_eq!(runs[0].classification.verdict, RunVerdict::Leak);
    }

    #[test]
    fn a_flaky_entry_keeps_the_gate_green_whatever_the_cell_did() {
        let b =
            baseline("[[expect]]\ncase = \"mock\"\nflaky = true\nreason = \"racy by design\"\n");
        let layers = validation();
        let e = b.judge(&subject("mock", "external", &layers), None);
        let seen = |pass, crash| RunsSeen {
            counts: Counts {
                pass,
                crash,
                ..Counts::default()
            },
            vuids: vec![],
            signals: vec!["SIGSEGV".into()],
        };
        for (pass, crash, verdict) in [
            (5, 0, CellVerdict::Pass),
            (3, 2, CellVerdict::Flaky),
            (0, 5, CellVerdict::Fail),
        ] {
            let (v, why) = baseline::evaluate(e.as_ref(), &seen(pass, crash));
            assert_eq!(v, verdict, "{pass}/{crash}");
            assert!(why.contains("known to be flaky: racy by design"), "{why}");
            assert!(baseline::green(v, e.as_ref()), "{v}");
        }
        // Without the entry, flaky and fail turn the gate red.
        assert!(!baseline::green(CellVerdict::Flaky, None));
        assert!(!baseline::green(CellVerdict::Fail, None));
        // An error is never green.
        let mut s = seen(4, 0);
        s.counts.error = 1;
        let (v, _) = baseline::evaluate(e.as_ref(), &s);
        assert!(!baseline::green(v, e.as_ref()));
    }

    #[test]
    fn expected_ids_may_be_patterns() {
        let b = baseline(
            "[[expect]]\nexpect = \"fail\"\nvuids = [\"VUID-vkDestroyDevice-device-*\"]\nreason = \"renamed in newer layers\"\n",
        );
        let layers = validation();
        let e = b.judge(&subject("x", "external", &layers), None);
        let seen = |id: &str| RunsSeen {
            counts: Counts {
                vuid: 2,
                ..Counts::default()
            },
            vuids: vec![id.to_string()],
            signals: vec![],
        };
        let (v, _) = baseline::evaluate(e.as_ref(), &seen("VUID-vkDestroyDevice-device-05137"));
        assert_eq!(v, CellVerdict::ExpectedFail);
        let (v, why) = baseline::evaluate(e.as_ref(), &seen("VUID-vkDestroyBuffer-buffer-00922"));
        assert_eq!(v, CellVerdict::Fail);
        assert!(why.contains("no VUID-vkDestroyDevice-device-*"), "{why}");
    }

    #[test]
    fn a_check_matches_entries_and_allow_lists_written_under_its_other_name() {
        let old = CHILDREN;
        let new = "VUID-vkDestroyDevice-device-05137";
        let layers = validation();
        let seen = |id: &str| RunsSeen {
            counts: Counts {
                vuid: 2,
                ..Counts::default()
            },
            vuids: vec![id.to_string()],
            signals: vec![],
        };
        for (written, logged) in [(old, new), (new, old)] {
            let b = baseline(&format!(
                "[[expect]]\nexpect = \"fail\"\nvuids = [\"{written}\"]\nreason = \"kept buffer\"\n"
            ));
            let e = b.judge(&subject("x", "external", &layers), None);
            let (v, why) = baseline::evaluate(e.as_ref(), &seen(logged));
            assert_eq!(v, CellVerdict::ExpectedFail, "{written} vs {logged}: {why}");
            let allow = Allow {
                vuids: vec![written.into()],
                driver: None,
                layer_version: None,
                layer_versions: None,
                reason: "r".into(),
                source: "b.toml:1".into(),
            };
            let mut runs = vec![run(RunVerdict::Vuid, &[logged], None)];
            assert_eq!(apply_all(&mut runs, &[&allow], &[false]), [logged]);
            assert_eq!(runs[0].classification.verdict, RunVerdict::Pass);
        }
    }

    #[test]
    fn layer_version_ranges_key_entries_and_allow_lists() {
        let b = baseline(
            r#"
[[expect]]
case = "clean-exit"
layer_versions = "1.4.300.."
expect = "fail"
run_verdicts = ["crash"]
reason = "newer layers crash at exit"

[[expect]]
case = "clean-exit"
expect = "pass"
reason = "older layers"

[[allow]]
allow_vuids = ["UNASSIGNED-x"]
layer_versions = "1.3.0..1.3.268"
reason = "old layers only"
"#,
        );
        let layers = validation();
        let on = |version| Subject {
            layer_version: version,
            ..subject("clean-exit", "refrt:never", &layers)
        };
        let source = |version| b.judge(&on(version), None).unwrap().source;
        assert_eq!(source(Some("1.4.309")), "b.toml:2");
        assert_eq!(source(Some("1.4.300")), "b.toml:2");
        assert_eq!(source(Some("1.3.239")), "b.toml:9");
        assert_eq!(
            source(None),
            "b.toml:9",
            "no layer version, no version-keyed entry"
        );
        assert!(!b.files[0].entries[0].pattern.is_exact());
        let allowed = |v| b.allowed(&on(v), v).len();
        assert_eq!(allowed(Some("1.3.239")), 1);
        assert_eq!(allowed(Some("1.3.268")), 0);
        assert_eq!(allowed(Some("1.2.9")), 0);
        assert_eq!(allowed(None), 0);
    }

    #[test]
    fn a_bad_version_range_names_the_file_line_and_column_and_what_was_expected() {
        for (range, why) in [
            ("1.4", "no `..`"),
            ("..", "both ends are left out"),
            ("1.4.x..", "`1.4.x` is not a version"),
            ("1.4.0..1.3.0", "it holds no version"),
            ("1.2.3.4..", "`1.2.3.4` is not a version"),
        ] {
            let text = format!(
                "[[expect]]\nreason = \"r\"\nexpect = \"pass\"\nlayer_versions = \"{range}\"\n"
            );
            let e = parse(&text).unwrap_err().to_string();
            assert!(
                e.starts_with("b.toml:4:18: layer_versions `") && e.contains(why),
                "{range}: {e}"
            );
            assert!(e.contains("expected FROM..TO"), "{e}");
        }
        let r = VersionRange::parse("1.4..1.4.400").unwrap();
        assert_eq!(r.to_string(), "1.4.0..1.4.400");
        assert!(r.contains("1.4.309") && !r.contains("1.4.400") && !r.contains("1.3.239"));
        assert!(!r.contains("unknown"));
    }
}
