//! A cell's verdict from its runs: each judged run folded in as it finishes ([`CellFold`]),
//! then the fold held to the cell's expectation ([`super::cell`]) and summarised into the
//! results file's cell.

use super::{Expectation, RunsSeen};
use crate::host::provenance::{FromHost, LoadersUsed, Provenance};
use crate::judge::run::RunRecord;
use crate::plan::Cell;
use std::path::PathBuf;
use vkexit_evidence::results::{CellResult, Counts};
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

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
    /// The reason of the earliest run its runner skipped.
    first_skip: Option<(u32, String)>,
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
        let first = match run.classification.verdict {
            RunVerdict::Error => Some(&mut self.first_error),
            RunVerdict::Skipped => Some(&mut self.first_skip),
            _ => None,
        };
        if let Some(first) = first.filter(|f| f.as_ref().is_none_or(|(i, _)| run.index < *i)) {
            *first = Some((run.index, run.classification.reason.clone()));
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
        let observed = RunsSeen {
            counts,
            vuids: vuids.clone(),
            signals: signals.clone(),
        };
        let judged = super::cell(cell, expectation, &observed);
        let verdict = judged.verdict;
        let first = match verdict {
            CellVerdict::Error => self.first_error.as_ref(),
            CellVerdict::Skipped => self.first_skip.as_ref(),
            _ => None,
        };
        let reason = match first {
            Some((_, why)) => format!("{}: {why}", judged.reason),
            None => judged.reason,
        };
        let n = counts.total();
        let [lo, hi] = pass_rate_95(counts);
        CellResult {
            case: cell.case.clone(),
            runtime: cell.runtime.clone(),
            driver: cell.driver.name.clone(),
            layers: cell.layers.clone(),
            emulation: cell.emulation.name().to_string(),
            exit_order: None,
            chaos_seed: None,
            slow_teardown: false,
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

/// The share of a cell's runs that passed.
pub fn pass_rate(counts: Counts) -> f64 {
    crate::support::stats::pass_rate(counts.passed(), counts.total())
}

/// The 95 % Wilson interval of the pass rate, rounded as in the results file.
pub fn pass_rate_95(counts: Counts) -> [f64; 2] {
    crate::support::stats::pass_rate_95(counts.passed(), counts.total())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::run::{Classification, Termination};

    fn cell() -> Cell {
        crate::test_fixtures::planned_cell()
    }

    /// Run i: every 7th fails with a finding of its own and is kept, every
    /// 11th is an error, the rest pass. Every 5th loads a loader of its own,
    /// every 13th is made without the preload (records none), the rest load
    /// the system's.
    fn record(i: u32) -> RunRecord {
        let loader = |path: &str| crate::host::loader::VulkanUse {
            loaders: vec![crate::host::loader::LoaderSeen {
                path: path.into(),
                version: Some("1.4.313".into()),
            }],
            ..Default::default()
        };
        let vulkan = match (i % 5, i % 13) {
            (0, _) => Some(loader("/c/ggml/libvulkan.so.1")),
            (_, 0) => None,
            _ => Some(loader("/usr/lib/libvulkan.so.1")),
        };
        let (verdict, findings) = match (i % 7, i % 11) {
            (0, _) => (
                RunVerdict::Crash,
                vec![format!("finding {i} at 0x{i:x}"), "common".into()],
            ),
            (_, 0) => (RunVerdict::Error, Vec::new()),
            _ => (RunVerdict::Pass, Vec::new()),
        };
        RunRecord {
            cell: 0,
            index: i,
            classification: Classification {
                verdict,
                reason: format!("reason {i}"),
                signal: (verdict == RunVerdict::Crash).then(|| "SIGSEGV".into()),
                vuids: Vec::new(),
                findings,
                crash_layer: None,
            },
            termination: Termination::Exited { code: 0 },
            vuid_counts: Default::default(),
            duration_ms: 1,
            stdout_bytes: 0,
            stderr_bytes: 0,
            kept: (verdict != RunVerdict::Pass).then(|| PathBuf::from(format!("/a/run-{i}"))),
            vulkan,
        }
    }

    #[test]
    fn runs_folded_as_they_finish_summarise_as_all_runs_in_order() {
        let n = 2000;
        let in_order: Vec<RunRecord> = (0..n).map(record).collect();
        let expectation = crate::judge::Expectation {
            outcome: crate::judge::Expected::Flaky,
            reason: "flaky".into(),
            source: "b.toml:3".into(),
        };
        let whole = summarize(&cell(), Some(&expectation), &in_order);
        // Finished in another order (as with -j 2), folded one by one.
        let mut fold = CellFold::default();
        let evens = (0..n).filter(|i| i % 2 == 0).rev();
        let odds = (0..n).filter(|i| i % 2 == 1).rev();
        for i in evens.chain(odds) {
            fold.add(&record(i));
        }
        let folded = fold.summarize(&cell(), Some(&expectation));
        let json = |c: &vkexit_evidence::results::CellResult| serde_json::to_value(c).unwrap();
        assert_eq!(json(&folded), json(&whole));
        assert_eq!(whole.runs, u64::from(n));
        assert_eq!(whole.duration_ms, u64::from(n));
        // Bounded: the earliest kept runs, the earliest distinct findings.
        assert_eq!(whole.artifacts.len(), 100);
        assert_eq!(whole.artifacts[0], "/a/run-0");
        assert_eq!(whole.findings.len(), 16);
        assert_eq!(whole.findings[..2], ["finding 0 at 0x…", "common"]);
        assert!(whole.findings.contains(&"finding 7 at 0x…".to_string()));
        // Judged against the expectation given.
        assert_eq!(whole.expectation.as_deref(), Some("b.toml:3"));
        assert!(whole.flaky_expected);
        // The loaders counted over every run that recorded them, in the order first loaded:
        // 400 runs load their own, 123 record none, the others the system's.
        let provenance = whole.provenance.as_ref().unwrap();
        assert_eq!(
            provenance.loaders_used,
            [
                "1.4.313 (/c/ggml/libvulkan.so.1): 400 runs",
                "1.4.313 (/usr/lib/libvulkan.so.1): 1477 runs"
            ]
        );
    }

    #[test]
    fn a_cells_crashes_are_put_on_a_layer_only_when_every_one_was_in_it() {
        let crash_in = |i: u32, layer: Option<&str>| {
            let mut r = record(i * 7);
            r.classification.crash_layer = layer.map(String::from);
            r
        };
        let fold_of = |runs: Vec<RunRecord>| {
            let mut fold = CellFold::default();
            runs.iter().for_each(|r| fold.add(r));
            fold.crash_layer()
        };
        assert_eq!(fold_of(vec![record(1), record(2)]), None);
        let in_validation = vec![
            crash_in(0, Some("validation")),
            record(1),
            crash_in(2, Some("validation")),
        ];
        assert_eq!(fold_of(in_validation), Some(("validation".to_string(), 2)));
        let one_elsewhere = vec![crash_in(0, Some("validation")), crash_in(1, None)];
        assert_eq!(fold_of(one_elsewhere), None);
        let two_layers = vec![crash_in(0, Some("validation")), crash_in(1, Some("trace"))];
        assert_eq!(fold_of(two_layers), None);
    }

    #[test]
    fn handles_are_elided_so_runs_agree() {
        assert_eq!(
            elide_handles("VkDevice 0x55d0c6f3b0a0 alive at exit (created on thread main)"),
            "VkDevice 0x… alive at exit (created on thread main)"
        );
        assert_eq!(elide_handles("0x 0xZZ and 0xab"), "0x 0xZZ and 0x…");
    }
}
