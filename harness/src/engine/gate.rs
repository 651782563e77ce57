//! One gate run of a matrix: every layer set planned, each cell given its
//! expectation (a baseline entry, else the built-in one), the runs made,
//! the allow-listed message ids taken out, and every cell judged.
//!
//! A run's layers are fixed for a whole `run::execute`, so each layer set is
//! its own plan, executed in turn. The environment a matrix adds is set in
//! vkexit's own environment, which every run inherits; a case with variables
//! of its own runs in an execution of its own, with them set.

use crate::classify;
use crate::host::layers::Chain;
use crate::host::validation::{self, ValidationLayer};
use crate::judge::{self, Baseline, Expectation, BUILTIN_SOURCE};
use crate::plan::matrix::{LayerSet, Matrix};
use crate::plan::shard::Shard;
use crate::plan::{self, Cell, ExternalCase, Plan};
use crate::report;
use crate::results::{CellResult, Counts, LayerCrash, WithoutLayer};
use crate::run;
use crate::support::errors::{Error, Result, Selection};
use crate::verdict::RunVerdict;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How the runs are made, beyond what the matrix says.
#[derive(Debug, Clone)]
pub struct Settings {
    pub jobs: usize,
    pub artifacts: PathBuf,
    pub keep_passing: bool,
    pub diagnostics: bool,
    pub time_destructors: bool,
    pub shard: Option<Shard>,
    /// Crashes of processes other than the one started are recorded, not judged.
    pub children_may_crash: bool,
    /// A failing cell whose crashes are in a layer vkexit enabled is run
    /// again without that layer.
    pub rerun_without_layer: bool,
}

/// One layer set's plan, with each cell's expectation.
struct Part {
    chain: Chain,
    plan: Plan,
    expectations: Vec<Option<Expectation>>,
}

/// The planned gate: one plan per layer set.
pub struct Gate<'a> {
    matrix: &'a Matrix,
    baseline: &'a Baseline,
    settings: Settings,
    parts: Vec<Part>,
    /// Facts to show before the table (drivers left out, the shard, …).
    pub notes: Vec<String>,
}

impl<'a> Gate<'a> {
    /// Plans every layer set, so that a bad case or driver stops vkexit
    /// before any run.
    pub fn plan(matrix: &'a Matrix, baseline: &'a Baseline, settings: Settings) -> Result<Self> {
        let sets = matrix.layer_sets();
        let found = match sets
            .iter()
            .any(|s| s.validation && s.validation_manifest.is_none())
        {
            true => Some(validation::find_layer()?),
            false => None,
        };
        let mut parts: Vec<Part> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let (mut kept, mut all) = (0, 0);
        for set in sets {
            let pinned = match (&set.validation_manifest, set.validation) {
                (Some(manifest), true) => {
                    let layer = validation::pinned_layer(manifest).map_err(|e| {
                        Error::BadSelection(Selection::ValidationManifest { why: e })
                    })?;
                    notes.push(format!(
                        "validation layer {} from {} for the cells labelled {}",
                        layer.api_version,
                        layer.manifest.display(),
                        chain(&set, Some(&layer), false).names().join("+")
                    ));
                    Some(layer)
                }
                _ => None,
            };
            let chain = chain(
                &set,
                pinned.as_ref().or(found.as_ref()),
                matrix.fail_on_leak,
            );
            if let Some(twin) = parts
                .iter()
                .map(|p| &p.chain)
                .find(|c| c.names() == chain.names() && c.emulation == chain.emulation)
            {
                let path = |c: &Chain| {
                    c.validation
                        .as_ref()
                        .map(|v| v.manifest.display().to_string())
                };
                return Err(Error::BadSelection(Selection::SameLayers {
                    layers: chain.names().join("+"),
                    first: path(twin).unwrap_or_default(),
                    second: path(&chain).unwrap_or_default(),
                }));
            }
            let mut plan = plan::plan(&request(matrix, chain.clone()))?;
            for note in plan.notes.drain(..) {
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            all += plan.cells.len();
            if let Some(shard) = settings.shard {
                plan.cells.retain(|c| shard.contains(&c.id()));
            }
            kept += plan.cells.len();
            for cell in &mut plan.cells {
                cell.env = cell_env(matrix, cell);
            }
            let expectations = judge::expectations(&plan.cells, baseline);
            parts.push(Part {
                chain,
                plan,
                expectations,
            });
        }
        if let Some(shard) = settings.shard {
            notes.push(format!("shard {shard}: {kept} of {all} cells"));
        }
        check_evidence_dirs(&parts)?;
        Ok(Gate {
            matrix,
            baseline,
            settings,
            parts,
            notes,
        })
    }

    /// The cells that will run (not skipped).
    pub fn runnable_cells(&self) -> usize {
        self.parts
            .iter()
            .flat_map(|p| &p.plan.cells)
            .filter(|c| c.not_run.is_none())
            .count()
    }

    /// Why no run would start, when none would: every cell skipped (a driver with no
    /// device), or no cell at all (an empty shard, a selection that matches
    /// nothing). A gate of no runs is not green unless the user allows it.
    pub fn why_no_runs(&self) -> Option<String> {
        if self.runnable_cells() > 0 {
            return None;
        }
        let cells: Vec<&Cell> = self.parts.iter().flat_map(|p| &p.plan.cells).collect();
        if cells.is_empty() {
            let shard = self
                .settings
                .shard
                .map(|s| format!(" in shard {s}"))
                .unwrap_or_default();
            return Some(format!("the selection has no cell{shard}"));
        }
        let mut reasons: Vec<String> = Vec::new();
        for cell in &cells {
            let why = match &cell.not_run {
                Some(plan::NotRun::Skipped(why)) => why.clone(),
                // A driver that could not be probed is an `error` cell: the gate is red.
                Some(plan::NotRun::Broken(_)) => return None,
                None => continue,
            };
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
        let all = match cells.len() {
            1 => "the one cell was".to_string(),
            n => format!("all {n} cells were"),
        };
        Some(format!("{all} left out: {}", reasons.join("; ")))
    }

    /// Makes every run and judges every cell; `on_cell_done` sees each cell
    /// when its last run has finished.
    pub fn run(&self, mut on_cell_done: impl FnMut(&Cell)) -> Result<Vec<CellResult>> {
        let mut cells = Vec::new();
        for part in &self.parts {
            cells.extend(self.run_part(part, &mut on_cell_done)?);
        }
        Ok(cells)
    }

    fn run_part(
        &self,
        part: &Part,
        on_cell_done: &mut impl FnMut(&Cell),
    ) -> Result<Vec<CellResult>> {
        let Part {
            chain,
            plan,
            expectations,
        } = part;
        let options = run::Options {
            runs: self.matrix.runs(),
            jobs: self.settings.jobs,
            timeout: Duration::from_secs_f64(self.matrix.timeout_secs()),
            artifacts: self.settings.artifacts.clone(),
            keep_passing: self.settings.keep_passing,
            chain: chain.clone(),
            fail_on_leak: self.matrix.fail_on_leak,
            diagnostics: self.settings.diagnostics,
            time_destructors: self.settings.time_destructors,
            children_may_crash: self.settings.children_may_crash,
            examine: crate::classify::EXAMINE,
        };
        let allows: Vec<Vec<&judge::Allow>> = plan
            .cells
            .iter()
            .map(|cell| judge::allows_for(self.baseline, cell))
            .collect();
        // Each run is folded into its cell as it finishes: memory stays flat
        // however many runs there are.
        let mut folds: Vec<report::CellFold> = plan
            .cells
            .iter()
            .map(|_| report::CellFold::default())
            .collect();
        // The allowed ids taken out of each cell's runs, sorted as `apply_allow` gives them.
        let mut removed: Vec<BTreeSet<String>> = vec![BTreeSet::new(); plan.cells.len()];
        let mut done = vec![0u32; plan.cells.len()];
        let fail_on_leak = self.matrix.fail_on_leak;
        run::execute(plan, &options, |cell, mut record| {
            let i = record.cell;
            let ids =
                judge::apply_allow(std::slice::from_mut(&mut record), &allows[i], fail_on_leak);
            removed[i].extend(ids);
            folds[i].add(&record);
            done[i] += 1;
            if done[i] == options.runs {
                on_cell_done(cell);
            }
            run::Flow::Go
        })?;
        let judged = plan.cells.iter().zip(expectations).zip(folds).zip(removed);
        let mut results = Vec::with_capacity(plan.cells.len());
        for (((cell, expectation), fold), removed) in judged {
            let mut result = fold.summarize(cell, expectation.as_ref());
            result.allowed_vuids = removed.into_iter().collect();
            result.crash_in_layer = self.layer_crash(&options, plan, cell, fold.crash_layer())?;
            if let Some(layer) = &result.crash_in_layer {
                result.findings.insert(0, layer.summary.clone());
            }
            for (i, note) in cell.props.notes.iter().enumerate() {
                result.findings.insert(i, note.clone());
            }
            results.push(result);
        }
        Ok(results)
    }

    /// A failing cell whose crashes all had their pc in one layer's library:
    /// which layer, and, when vkexit put that layer in the chain and may take
    /// it out, what the same runs do without it.
    fn layer_crash(
        &self,
        options: &run::Options,
        plan: &Plan,
        cell: &Cell,
        crashes: Option<(String, u64)>,
    ) -> Result<Option<LayerCrash>> {
        let Some((layer, crashed)) = crashes else {
            return Ok(None);
        };
        let without = match self.settings.rerun_without_layer {
            true => run_without_layer(plan, cell, options, &layer, options.runs)?,
            false => None,
        };
        Ok(Some(layer_crash(options, layer, crashed, without)))
    }
}

/// What a cell's crashes in `layer` come to, in one line too: "crash in the
/// validation layer 1.3.239; without validation: pass 5/5".
pub fn layer_crash(
    options: &run::Options,
    layer: String,
    crashed_runs: u64,
    without: Option<WithoutLayer>,
) -> LayerCrash {
    let version = match layer.as_str() {
        "validation" => options
            .chain
            .validation
            .as_ref()
            .map(|v| v.api_version.clone()),
        _ => None,
    };
    let mut summary = format!("crash in {}", classify::layer_phrase(&layer));
    if let Some(v) = &version {
        summary.push_str(&format!(" {v}"));
    }
    if let Some(without) = &without {
        summary.push_str(&format!("; without {layer}: {}", without.summary));
    }
    LayerCrash {
        layer,
        version,
        crashed_runs,
        without,
        summary,
    }
}

/// The cell's runs made again, `runs` of them, with `layer` taken out of the
/// chain, in `<artifacts>/without-<layer>/`; `None` when vkexit may not take
/// it out: a layer it did not put in, or the trace layer when leaks are
/// judged. The tegra-exit layer's fault is the emulated driver's crash, the
/// thing emulated, never a layer bug: it is never run away.
pub fn run_without_layer(
    plan: &Plan,
    cell: &Cell,
    options: &run::Options,
    layer: &str,
    runs: u32,
) -> Result<Option<WithoutLayer>> {
    if run::interrupt::interrupted() {
        return Ok(None);
    }
    let mut chain = options.chain.clone();
    match layer {
        "validation" if chain.validation.is_some() => chain.validation = None,
        "trace" if chain.trace && !options.fail_on_leak => chain.trace = false,
        _ => return Ok(None),
    }
    let mut alone = cell.clone();
    alone.layers = chain.names();
    if layer == "validation" {
        alone.validation_layer = None;
    }
    let single = Plan {
        cells: vec![alone],
        notes: Vec::new(),
        scenario_dir: plan.scenario_dir.clone(),
    };
    let rerun = run::Options {
        runs,
        artifacts: options.artifacts.join(format!("without-{layer}")),
        chain,
        ..options.clone()
    };
    let mut records = Vec::new();
    run::execute(&single, &rerun, |_, record| {
        records.push(record);
        run::Flow::Go
    })?;
    Ok(Some(without_summary(&records)))
}

fn without_summary(runs: &[run::RunRecord]) -> WithoutLayer {
    let mut counts = Counts::default();
    let mut signals: Vec<String> = Vec::new();
    for r in runs {
        counts.add(r.classification.verdict);
        if let Some(s) = &r.classification.signal {
            if !signals.contains(s) {
                signals.push(s.clone());
            }
        }
    }
    let n = counts.total();
    let parts: Vec<String> = RunVerdict::ALL
        .iter()
        .filter(|&&v| counts.get(v) > 0)
        .map(|&v| match v {
            RunVerdict::Crash if !signals.is_empty() => {
                format!("crash {} {}/{n}", signals.join(" "), counts.get(v))
            }
            v => format!("{} {}/{n}", v.name(), counts.get(v)),
        })
        .collect();
    WithoutLayer {
        runs: n,
        counts,
        signals,
        summary: match parts.is_empty() {
            true => "no run finished".into(),
            false => parts.join(", "),
        },
    }
}

/// Two runnable cells whose evidence would share one directory are refused, naming both: one
/// cell's evidence would replace the other's. Cell names are made into directory names so
/// that this does not happen (`Cell::slug`); this holds it whatever the names.
fn check_evidence_dirs(parts: &[Part]) -> Result<()> {
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for cell in parts
        .iter()
        .flat_map(|p| &p.plan.cells)
        .filter(|c| c.not_run.is_none())
    {
        let label = format!("{} ({})", cell.label(), cell.layers.join("+"));
        if let Some(first) = seen.insert(cell.slug(), label.clone()) {
            return Err(Error::BadSelection(Selection::CannotRun {
                cell: label,
                why: format!(
                    "its evidence directory {} is that of {first}; give one of the cases another name",
                    cell.slug()
                ),
            }));
        }
    }
    Ok(())
}

/// What the plan gave the cell (where the runtime cache is), the matrix's
/// variables, then an external case's own.
fn cell_env(matrix: &Matrix, cell: &Cell) -> Vec<(String, String)> {
    let mut env = cell.env.clone();
    env.extend(matrix.env.iter().cloned());
    if let plan::CaseCommand::External(_) = cell.command {
        if let Some(case) = matrix.externals.iter().find(|e| e.name == cell.case) {
            env.extend(case.env.iter().cloned());
        }
    }
    env
}

/// Whether every cell of the gate's results kept it green.
pub fn green(cells: &[CellResult]) -> bool {
    cells.iter().all(CellResult::is_green)
}

/// Counts the cells judged by a baseline file and by the built-in baseline.
pub fn judged_by(cells: &[CellResult]) -> (usize, usize) {
    let builtin = cells
        .iter()
        .filter(|c| c.expectation.as_deref() == Some(BUILTIN_SOURCE))
        .count();
    let file = cells
        .iter()
        .filter(|c| {
            c.expectation
                .as_deref()
                .is_some_and(|e| e != BUILTIN_SOURCE)
        })
        .count();
    (file, builtin)
}

/// The layers of one set.
pub fn chain(set: &LayerSet, validation: Option<&ValidationLayer>, fail_on_leak: bool) -> Chain {
    Chain {
        trace: set.trace || fail_on_leak,
        validation: validation.filter(|_| set.validation).cloned(),
        emulation: set.emulation,
        manifests: None,
    }
}

/// What to plan for one layer set of the matrix.
pub fn request(matrix: &Matrix, chain: Chain) -> plan::Request {
    plan::Request {
        cases: matrix.cases.clone(),
        runtimes: matrix.runtimes.clone(),
        drivers: matrix.drivers.clone(),
        skip_absent_drivers: matrix.skip_absent_drivers,
        externals: matrix
            .externals
            .iter()
            .map(|e| ExternalCase {
                name: e.name.clone(),
                argv: from_here(&e.argv),
                private_cwd: e.private_cwd,
                workdir: e.workdir.clone(),
                not_run: e.not_run.clone(),
                props: e.props.clone(),
            })
            .collect(),
        chain,
    }
}

/// A relative program path (one with a `/`) is made absolute from the
/// directory vkexit runs in, for runs that start in their own directory; a
/// bare name is still looked up in `PATH`.
fn from_here(argv: &[OsString]) -> Vec<OsString> {
    let mut argv = argv.to_vec();
    if let Some(program) = argv.first_mut() {
        let path = Path::new(program.as_os_str());
        let relative_path = path.is_relative() && path.components().count() > 1;
        if let (true, Ok(here)) = (relative_path, std::env::current_dir()) {
            *program = here.join(path).into_os_string();
        }
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Classification, Termination};
    use crate::host::drivers::Driver;
    use crate::plan::CaseCommand;
    use crate::run::RunRecord;
    use crate::verdict::RunVerdict;

    fn cell() -> Cell {
        Cell {
            case: "clean-exit".into(),
            runtime: "refrt:guarded".into(),
            driver: Driver {
                name: "lavapipe".into(),
                manifest: "/x.json".into(),
                library: "libvulkan_lvp.so".into(),
            },
            device: None,
            layers: vec!["validation".into()],
            emulation: crate::host::layers::Emulation::None,
            command: CaseCommand::External(vec![]),
            workdir: None,
            not_run: None,
            env: Vec::new(),
            validation_layer: None,
            props: Default::default(),
        }
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
            drivers: Vec::new(),
            validation_layers: Vec::new(),
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
        let expectation = judge::Expectation {
            outcome: judge::Outcome::Flaky,
            reason: "flaky".into(),
            source: "b.toml:3".into(),
        };
        let whole = report::summarize(&cell(), Some(&expectation), &in_order);
        // Finished in another order (as with -j 2), folded one by one.
        let mut fold = report::CellFold::default();
        let evens = (0..n).filter(|i| i % 2 == 0).rev();
        let odds = (0..n).filter(|i| i % 2 == 1).rev();
        for i in evens.chain(odds) {
            fold.add(&record(i));
        }
        let folded = fold.summarize(&cell(), Some(&expectation));
        let json = |c: &crate::results::CellResult| serde_json::to_value(c).unwrap();
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
            let mut fold = report::CellFold::default();
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
    fn relative_program_paths_are_taken_from_here() {
        let here = std::env::current_dir().unwrap();
        let argv = |args: &[&str]| args.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            from_here(&argv(&["build/t", "x/y"])),
            [here.join("build/t").into_os_string(), "x/y".into()]
        );
        assert_eq!(
            from_here(&argv(&["./t"]))[0],
            here.join("./t").into_os_string()
        );
        assert_eq!(from_here(&argv(&["sh", "-c"])), argv(&["sh", "-c"]));
        assert_eq!(from_here(&argv(&["/bin/sh"])), argv(&["/bin/sh"]));
    }
}
