//! The Invocation: what a command asks of its runs (its [`Request`]: flags, matrix file,
//! baseline files, reports) resolved, once, by [`Resolved::new`] into everything it needs: this
//! process prepared from vkexit's environment (`support::env`, read once), the matrix, the
//! baselines, the reports checked against the files read, whether no run is allowed, the
//! artifacts directory's lock; then, by [`Resolved::invocation`], each layer set's chain and
//! plan, every cell's expectation and allow-lists, the rules runs are judged by, and the run
//! stage's options. `run`, `repro`, `explore`, `exec` and `bench` resolve their requests here
//! and drive the Invocation; `cli/` only parses flags into a `Request`. No other code assembles
//! `run::Options`.
//!
//! A run's layers are fixed for a whole `run::execute`, so each layer set is a part of its
//! own, executed in turn.

use crate::host::layers::Chain;
use crate::host::validation::{self, ValidationLayer};
use crate::judge::run::Rules;
use crate::judge::{self, Allow, Baseline, Expectation};
use crate::plan::exit_order::ExitOrder;
use crate::plan::matrix::{LayerSet, Matrix, Overrides};
use crate::plan::shard::Shard;
use crate::plan::suites::Suite;
use crate::plan::{self, Cell, ExternalCase, Plan};
use crate::report;
use crate::run;
use crate::support::env::Environment;
use crate::support::errors::{BadSelection, Error, Result};
use crate::support::lock::ArtifactsLock;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a command asks, as its flags say it: nothing read or checked yet.
pub(crate) struct Request {
    /// The matrix file (`--config`).
    pub(crate) config: Option<PathBuf>,
    /// Test suites whose tests are cases (`--ctest`, `--gtest`, …).
    pub(crate) suites: Vec<Suite>,
    /// The flags that replace or extend what the matrix says.
    pub(crate) overrides: Overrides,
    /// The baseline files (`--baseline`); none: the built-in baseline alone.
    pub(crate) baselines: Vec<PathBuf>,
    /// The reports to write.
    pub(crate) outputs: report::Outputs,
    /// `--allow-no-runs`.
    pub(crate) allow_no_runs: bool,
    pub(crate) settings: Settings,
    /// When the command takes its artifacts directory.
    pub(crate) own_artifacts: Own,
}

/// When a command takes the lock of its artifacts directory, held until it exits: the runs'
/// slots and evidence are its alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Own {
    /// Once its files are read, before its cells are planned (`run`, `explore`, `bench`).
    BeforePlanning,
    /// When it asks ([`Resolved::own_artifacts`]), once what only its plan shows is known good
    /// (`repro`: the one cell and the bound), so that bad input makes nothing.
    WhenAsked,
    /// Never: it makes its own directory under the artifacts directory (`exec`).
    Never,
}

/// A [`Request`] resolved: everything the command needs before it plans its cells.
pub(crate) struct Resolved {
    pub(crate) matrix: Matrix,
    pub(crate) baseline: Baseline,
    /// Baseline files were given (the table says what judged each cell then).
    pub(crate) baselines_given: bool,
    /// The reports, checked against the files the command reads.
    pub(crate) outputs: report::Checked,
    /// No run started is not an error (`--allow-no-runs`, or the matrix's `allow_no_runs`).
    pub(crate) allow_no_runs: bool,
    pub(crate) settings: Settings,
    /// What listing the suites found, to show before the runs.
    pub(crate) suite_notes: Vec<String>,
    /// The artifacts directory's lock, when taken.
    pub(crate) owner: Option<ArtifactsLock>,
}

impl Resolved {
    /// Resolves `request`, in this order: this process prepared from vkexit's environment (a
    /// process limit that would fail every run is refused first), the matrix (its file, the
    /// suites listed, the flags applied, the programs checked), the baselines, the reports
    /// checked against the files read, then the artifacts lock when it is taken now.
    pub(crate) fn new(request: Request) -> Result<Resolved> {
        run::prepare_process(run::Process::of(Environment::get()))?;
        let mut matrix = match &request.config {
            Some(path) => Matrix::read(path)?,
            None => Matrix::default(),
        };
        matrix.suites.extend(request.suites);
        let suite_notes = matrix.list_suites()?;
        matrix.apply(request.overrides)?;
        matrix.check_programs()?;
        let baseline = super::baselines::read(&request.baselines)?;
        let mut inputs: Vec<(&str, &Path)> = request
            .baselines
            .iter()
            .map(|b| ("--baseline", b.as_path()))
            .collect();
        inputs.extend(request.config.as_deref().map(|c| ("--config", c)));
        let outputs = request.outputs.check(&inputs)?;
        let mut resolved = Resolved {
            allow_no_runs: request.allow_no_runs || matrix.allow_no_runs,
            matrix,
            baseline,
            baselines_given: !request.baselines.is_empty(),
            outputs,
            settings: request.settings,
            suite_notes,
            owner: None,
        };
        if request.own_artifacts == Own::BeforePlanning {
            resolved.owner = Some(resolved.own_artifacts()?);
        }
        Ok(resolved)
    }

    /// Takes the artifacts directory's lock, or says who holds it.
    pub(crate) fn own_artifacts(&self) -> Result<ArtifactsLock> {
        ArtifactsLock::take(&self.settings.artifacts)
    }

    /// The Invocation of the matrix with the settings, judged against the baselines; the
    /// suites' notes come first among its notes.
    pub(crate) fn invocation(&self) -> Result<Invocation> {
        let mut invocation = Invocation::new(&self.matrix, &self.baseline, self.settings.clone())?;
        invocation
            .notes
            .splice(0..0, self.suite_notes.iter().cloned());
        Ok(invocation)
    }
}

/// What a command says of its runs beyond what the matrix says.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) artifacts: PathBuf,
    /// Keep the directories of passing runs too.
    pub(crate) keep_passing: bool,
    /// Preload the crash report and exit timeline into every run.
    pub(crate) diagnostics: bool,
    /// Time every C++ static destructor in the exit timeline (slower exit).
    pub(crate) time_destructors: bool,
    pub(crate) shard: Option<Shard>,
    /// Crashes of processes other than the one started are recorded, not judged.
    pub(crate) children_may_crash: bool,
    /// A failing cell whose crashes are in a layer vkexit enabled is run again without it.
    pub(crate) rerun_without_layer: bool,
    /// Every run's exit in another order ([`crate::plan::exit_order`]).
    pub(crate) exit_order: Option<ExitOrder>,
    /// Every run's other threads let run ahead at the exit handler boundaries this seed picks.
    pub(crate) chaos_seed: Option<u64>,
    /// Every run's destroy calls at exit held as a slower device's teardown would hold them.
    pub(crate) slow_teardown: bool,
    /// A run that never used Vulkan is an error (`--require-vulkan`).
    pub(crate) require_vulkan: bool,
}

impl Settings {
    /// Settings for runs whose evidence goes to `artifacts`, with everything else as a
    /// command without flags has it.
    pub(crate) fn new(artifacts: PathBuf) -> Self {
        Settings {
            artifacts,
            keep_passing: false,
            diagnostics: true,
            time_destructors: false,
            shard: None,
            children_may_crash: false,
            rerun_without_layer: true,
            exit_order: None,
            chaos_seed: None,
            slow_teardown: false,
            require_vulkan: false,
        }
    }
}

/// One layer set's runs: its chain, its plan, and each cell's expectation and allow-lists.
#[derive(Clone)]
pub(crate) struct Part {
    pub(crate) chain: Chain,
    pub(crate) plan: Plan,
    pub(crate) expectations: Vec<Option<Expectation>>,
    pub(crate) allows: Vec<Vec<Allow>>,
}

/// Everything the runs of one command need, resolved.
#[derive(Clone)]
pub(crate) struct Invocation {
    pub(crate) parts: Vec<Part>,
    pub(crate) settings: Settings,
    /// Runs per cell.
    pub(crate) runs: u32,
    /// Runs of a cell made again without a layer its crashes were in: the matrix's runs.
    pub(crate) rerun_runs: u32,
    /// Runs at once.
    pub(crate) jobs: usize,
    pub(crate) timeout: Duration,
    pub(crate) rules: Rules,
    /// Facts to show before the runs (drivers left out, the shard, pinned layers, …).
    pub(crate) notes: Vec<String>,
    /// Every run's output passed through to vkexit's own as it comes (`vkexit exec`).
    pub(crate) echo: bool,
}

impl Invocation {
    /// Plans every layer set, so that a bad case, driver or layer stops vkexit before any
    /// run.
    pub(crate) fn new(matrix: &Matrix, baseline: &Baseline, settings: Settings) -> Result<Self> {
        crate::host::helpers::fall_back_beside(&settings.artifacts);
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
                        Error::BadSelection(BadSelection::ValidationManifest { why: e })
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
                return Err(Error::BadSelection(BadSelection::SameLayers {
                    layers: chain.names().join("+"),
                    first: path(twin).unwrap_or_default(),
                    second: path(&chain).unwrap_or_default(),
                }));
            }
            let mut plan = plan::plan(&request(matrix, chain.clone(), Environment::get()))?;
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
            let allows = plan
                .cells
                .iter()
                .map(|cell| {
                    judge::allows_for(baseline, cell)
                        .into_iter()
                        .cloned()
                        .collect()
                })
                .collect();
            parts.push(Part {
                chain,
                plan,
                expectations,
                allows,
            });
        }
        if let Some(shard) = settings.shard {
            notes.push(format!("shard {shard}: {kept} of {all} cells"));
        }
        check_evidence_dirs(&parts)?;
        let invocation = Invocation {
            parts,
            runs: matrix.runs(),
            rerun_runs: matrix.runs(),
            jobs: matrix
                .jobs
                .map(|j| j as usize)
                .unwrap_or_else(crate::support::util::cores),
            timeout: Duration::from_secs_f64(matrix.timeout_secs()),
            rules: Rules {
                fail_on_leak: matrix.fail_on_leak,
                children_may_crash: settings.children_may_crash,
                require_vulkan: settings.require_vulkan || matrix.require_vulkan,
            },
            settings: Settings {
                exit_order: None,
                chaos_seed: None,
                slow_teardown: false,
                ..settings.clone()
            },
            notes,
            echo: false,
        };
        let exit_order = settings.exit_order.or_else(|| matrix.exit_order.clone());
        Ok(invocation
            .perturbed(exit_order, settings.chaos_seed.or(matrix.chaos_seed))
            .with_slow_teardown(settings.slow_teardown))
    }

    /// The same runs, each with a slower device's teardown at exit when `slow` (the trace
    /// layer reports each destroy call, the preload holds it): the built-in baseline, of each
    /// cell's own teardown, does not judge them.
    pub(crate) fn with_slow_teardown(mut self, slow: bool) -> Self {
        if slow {
            self.forget_builtin_expectations();
        }
        self.settings.slow_teardown = slow;
        self
    }

    fn forget_builtin_expectations(&mut self) {
        for e in self.parts.iter_mut().flat_map(|p| &mut p.expectations) {
            if e.as_ref()
                .is_some_and(|e| e.source == judge::BUILTIN_SOURCE)
            {
                *e = None;
            }
        }
    }

    /// The same runs, each exiting in `exit_order` and with threads timed by `chaos_seed`.
    /// The built-in baseline says what each built-in cell does in its own exit order: in
    /// another, only a baseline file can expect something.
    pub(crate) fn perturbed(
        mut self,
        exit_order: Option<ExitOrder>,
        chaos_seed: Option<u64>,
    ) -> Self {
        if exit_order.is_some() || chaos_seed.is_some() {
            self.forget_builtin_expectations();
        }
        if let Some(order) = &exit_order {
            self.notes.push(format!(
                "every run exits in the order {order}; the built-in baseline (of each cell's own order) does not judge them"
            ));
        }
        self.settings.exit_order = exit_order;
        self.settings.chaos_seed = chaos_seed;
        self
    }

    /// The same invocation making `runs` runs of each cell.
    pub(crate) fn with_runs(self, runs: u32) -> Self {
        Invocation { runs, ..self }
    }

    /// How the run stage makes the runs of `part`.
    pub(crate) fn options(&self, part: &Part) -> run::Options {
        run::Options {
            runs: self.runs,
            jobs: self.jobs,
            timeout: self.timeout,
            artifacts: self.settings.artifacts.clone(),
            chain: Chain {
                slow_teardown: self.settings.slow_teardown,
                ..part.chain.clone()
            },
            diagnostics: self.settings.diagnostics,
            time_destructors: self.settings.time_destructors,
            exit_order: self.settings.exit_order.as_ref().map(|o| o.to_string()),
            chaos_seed: self.settings.chaos_seed,
            echo: self.echo,
        }
    }

    /// How the runs of `part` are made again without `layer`, in `<artifacts>/without-<layer>/`;
    /// `None` when vkexit may not take it out: a layer it did not put in, or the trace layer
    /// when leaks are judged. The tegra-exit layer's fault is the emulated driver's crash, the
    /// thing emulated, never a layer bug: it is never run away.
    pub(crate) fn without_layer(&self, part: &Part, layer: &str) -> Option<run::Options> {
        let mut chain = part.chain.clone();
        match layer {
            "validation" if chain.validation.is_some() => chain.validation = None,
            "trace" if chain.trace && !self.rules.fail_on_leak => chain.trace = false,
            _ => return None,
        }
        Some(run::Options {
            runs: self.rerun_runs,
            artifacts: self.settings.artifacts.join(format!("without-{layer}")),
            chain,
            ..self.options(part)
        })
    }

    /// Keeps only the cells `keep` picks, with their expectations and allow-lists.
    pub(crate) fn retain_cells(&mut self, keep: impl Fn(&Cell) -> bool) {
        for part in &mut self.parts {
            let mask: Vec<bool> = part.plan.cells.iter().map(&keep).collect();
            let mut i = 0;
            part.plan.cells.retain(|_| (mask[i], i += 1).0);
            i = 0;
            part.expectations.retain(|_| (mask[i], i += 1).0);
            i = 0;
            part.allows.retain(|_| (mask[i], i += 1).0);
        }
    }

    /// The cells that will run (not skipped).
    pub(crate) fn runnable_cells(&self) -> usize {
        self.cells().filter(|c| c.not_run.is_none()).count()
    }

    /// Every planned cell, part by part.
    pub(crate) fn cells(&self) -> impl Iterator<Item = &Cell> {
        self.parts.iter().flat_map(|p| &p.plan.cells)
    }

    /// Why no run would start, when none would: every cell skipped (a driver with no
    /// device), or no cell at all (an empty shard, a selection that matches nothing). A
    /// gate of no runs is not green unless the user allows it.
    pub(crate) fn why_no_runs(&self) -> Option<String> {
        if self.runnable_cells() > 0 {
            return None;
        }
        let cells: Vec<&Cell> = self.cells().collect();
        let mut reasons: Vec<&str> = Vec::new();
        for cell in &cells {
            match &cell.not_run {
                Some(plan::NotRun::Skipped(why)) => reasons.push(why),
                // A driver that could not be probed is an `error` cell: the gate is red.
                Some(plan::NotRun::Broken(_)) => return None,
                None => {}
            }
        }
        let shard = self.settings.shard.map(|s| s.to_string());
        Some(crate::judge::why_none_ran(
            cells.len(),
            shard.as_deref(),
            reasons,
        ))
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
            return Err(Error::BadSelection(BadSelection::CannotRun {
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

/// The layers of one set.
fn chain(set: &LayerSet, validation: Option<&ValidationLayer>, fail_on_leak: bool) -> Chain {
    Chain {
        slow_teardown: false,
        trace: set.trace || fail_on_leak,
        validation: validation.filter(|_| set.validation).cloned(),
        emulation: set.emulation,
        manifests: None,
    }
}

/// What to plan for one layer set of the matrix.
fn request(matrix: &Matrix, chain: Chain, env: &Environment) -> plan::Request {
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
        runtime_cache: env.runtime_cache.clone(),
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
