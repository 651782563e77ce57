//! One gate run of a matrix: every layer set planned, each cell given its
//! expectation (a baseline entry, else the built-in one), the runs made,
//! the allow-listed message ids taken out, and every cell judged.
//!
//! A run's layers are fixed for a whole `run::execute`, so each layer set is
//! its own plan, executed in turn. The environment a matrix adds is set in
//! vkexit's own environment, which every run inherits; a case with variables
//! of its own runs in an execution of its own, with them set.

use crate::classify;
use crate::errors::{Error, Result};
use crate::judge::{self, Baseline, Expectation, BUILTIN_SOURCE};
use crate::layers::Chain;
use crate::matrix::{LayerSet, Matrix};
use crate::plan::{self, Cell, ExternalCase, Plan};
use crate::report;
use crate::results::{CellResult, Counts, LayerCrash, WithoutLayer};
use crate::run;
use crate::shard::Shard;
use crate::validation::{self, ValidationLayer};
use crate::verdict::RunVerdict;
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
                        Error::Usage(format!("the matrix's validation_manifest {e}"))
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
                return Err(Error::Usage(format!(
                    "two [[layers]] sets give cells the same layers `{}` (validation layers {} and {}): their cells could not be told apart; name builds of different versions",
                    chain.names().join("+"),
                    path(twin).unwrap_or_default(),
                    path(&chain).unwrap_or_default(),
                )));
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
        };
        let mut done = vec![0u32; plan.cells.len()];
        let runs = run::execute(plan, &options, |cell, record| {
            done[record.cell] += 1;
            if done[record.cell] == options.runs {
                on_cell_done(cell);
            }
        })?;
        let mut judged = Vec::with_capacity(plan.cells.len());
        for ((cell, expectation), mut cell_runs) in plan.cells.iter().zip(expectations).zip(runs) {
            let allows = judge::allows_for(self.baseline, cell);
            let removed = judge::apply_allow(&mut cell_runs, &allows, self.matrix.fail_on_leak);
            let mut result = report::summarize(cell, expectation.as_ref(), &cell_runs);
            result.allowed_vuids = removed;
            result.crash_in_layer = self.layer_crash(&options, plan, cell, &cell_runs)?;
            if let Some(layer) = &result.crash_in_layer {
                result.findings.insert(0, layer.summary.clone());
            }
            judged.push(result);
        }
        Ok(judged)
    }

    /// A failing cell whose crashes all had their pc in one layer's library:
    /// which layer, and, when vkexit put that layer in the chain and may take
    /// it out, what the same runs do without it.
    fn layer_crash(
        &self,
        options: &run::Options,
        plan: &Plan,
        cell: &Cell,
        runs: &[run::RunRecord],
    ) -> Result<Option<LayerCrash>> {
        let Some((layer, crashed)) = crashes_in_one_layer(runs) else {
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
    let records = run::execute(&single, &rerun, |_, _| {})?;
    let records = records.into_iter().next().unwrap_or_default();
    Ok(Some(without_summary(&records)))
}

/// The layer every crashing run of a failing cell crashed in, and how many
/// runs that is; `None` when a crash was elsewhere (the application's own).
pub fn crashes_in_one_layer(runs: &[run::RunRecord]) -> Option<(String, u64)> {
    let crashes: Vec<&run::RunRecord> = runs
        .iter()
        .filter(|r| r.classification.verdict == RunVerdict::Crash)
        .collect();
    let layer = crashes.first()?.classification.crash_layer.clone()?;
    crashes
        .iter()
        .all(|r| r.classification.crash_layer.as_deref() == Some(layer.as_str()))
        .then_some((layer, crashes.len() as u64))
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
