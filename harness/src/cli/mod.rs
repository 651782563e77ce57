//! The `vkexit` command line: its arguments and one handler per command.

pub(crate) mod bench;

use crate::engine::doctor;
use crate::engine::gate::{self, Gate};
use crate::host::drivers;
use crate::judge::{Baseline, BaselineFile};
use crate::plan::matrix::{Matrix, Overrides};
use crate::support::errors::{Error, Result};
use crate::{plan, report, run};
use clap::{CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "vkexit",
    version,
    about = "Finds, reproduces and gates the bugs Vulkan compute runtimes hit at process exit"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run cases under validation on each driver and judge them.
    Run(Box<RunArgs>),
    /// List the built-in cases, refrt policies and the drivers found.
    List,
    /// Check the loader, drivers, validation layer and scenarios.
    Doctor,
    /// Join results files (shards, machines) into one, judge the cells again, and report.
    Merge(MergeArgs),
    /// Run one cell until it fails, or until its failure rate is shown below --max-rate.
    Repro(Box<ReproArgs>),
    /// Baseline files: what cells are known to do.
    Baseline {
        #[command(subcommand)]
        command: BaselineCommand,
    },
    /// Tell the story of one kept run: exit timeline, Vulkan lifetimes, driver, crash.
    Explain {
        /// A run directory under the artifacts directory.
        run_dir: PathBuf,
    },
    /// Pack vkexit, its scenarios, refrt, layers and the CI files into one tarball that runs on
    /// another Linux machine of the same architecture without a Rust toolchain.
    Bundle(BundleArgs),
    /// Time vkexit against a plain loop and CTest on the same runs; layer cost per call; peak memory.
    Bench(Box<bench::BenchArgs>),
    /// Print the JSON Schema of the results file (docs/results.schema.json).
    Schema,
    /// Print a shell completion script: `vkexit completions bash > /etc/bash_completion.d/vkexit`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `vkexit man > vkexit.1`.
    Man,
    /// Print the devices the driver selected by the environment shows (JSON).
    #[command(hide = true)]
    ProbeDriver(ProbeArgs),
    /// Print the version of the Vulkan loader at PATH.
    #[command(hide = true)]
    ProbeLoader { path: PathBuf },
}

#[derive(clap::Args)]
struct ProbeArgs {
    /// Write the report to this file instead of stdout: a layer may print to stdout too.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// A matrix file: cases, runtimes, drivers, layer sets, runs, environment
    /// (the flags below replace or extend what it says).
    #[arg(long, value_name = "MATRIX.toml")]
    config: Option<PathBuf>,
    /// A baseline file: what cells are known to do (repeatable; the first
    /// entry that matches a cell judges it, else the built-in baseline).
    #[arg(long = "baseline", value_name = "EXPECT.toml")]
    baselines: Vec<PathBuf>,
    #[command(flatten)]
    select: Selection,
    /// Runs per cell [default: 5].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::plan::matrix::MAX_RUNS)))]
    runs: Option<u32>,
    #[command(flatten)]
    exec: Execution,
    /// Write the results file (schema vkexit.results/1).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    reports: ReportArgs,
    /// Keep the run directories of passing runs too.
    #[arg(long)]
    keep_passing: bool,
    /// Run only shard K of N (1 ≤ K ≤ N); a cell's shard is fixed by its identity.
    #[arg(long, value_name = "K/N")]
    shard: Option<crate::plan::shard::Shard>,
    /// An external program and its arguments, run as one case.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Which cells: what `run` and `repro` share.
#[derive(clap::Args)]
struct Selection {
    /// A built-in case, or a case of the matrix file (repeatable; default: all).
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
    /// A runtime spec such as refrt:guarded (repeatable; default: every refrt policy).
    #[arg(long = "runtime", value_name = "SPEC")]
    runtimes: Vec<String>,
    /// A driver short name (lavapipe, radv, nvidia, …) or ICD manifest path (repeatable; default: every driver with a device).
    #[arg(long = "driver", value_name = "NAME")]
    drivers: Vec<String>,
    /// Run without the validation layer (VUIDs cannot be seen then).
    #[arg(long)]
    no_validation: bool,
    /// Emulate a driver's exit behaviour: none, tegra (the Jetson crash,
    /// every time) or tegra-racy (flaky, as on the Orin) [default: none].
    #[arg(long, value_name = "MODE")]
    emulate: Option<String>,
    /// Add the trace layer: object lifetimes, calls on dead handles, objects alive at exit.
    #[arg(long)]
    trace: bool,
    /// Objects alive at exit fail a run (verdict `leak`); implies --trace.
    #[arg(long)]
    fail_on_leak: bool,
    /// The case name of the program after `--` [default: its file name, or its script's].
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

/// How runs are made: what `run` and `repro` share.
#[derive(clap::Args)]
struct Execution {
    /// Runs at once (default: the number of cores).
    #[arg(short = 'j', long = "jobs", value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::plan::matrix::MAX_JOBS)))]
    jobs: Option<u32>,
    /// Seconds before a run counts as hung and its process group is killed [default: 60].
    #[arg(long, value_name = "SECS", value_parser = crate::plan::matrix::parse_timeout)]
    timeout: Option<f64>,
    /// Where failing runs keep their evidence.
    #[arg(long, value_name = "DIR", default_value = "vkexit-artifacts")]
    artifacts: PathBuf,
    /// Do not preload the crash report and exit timeline into the runs.
    #[arg(long)]
    no_diagnostics: bool,
    /// Time every C++ static destructor in the exit timeline too (slower exit: can change races).
    #[arg(long)]
    time_destructors: bool,
    /// Start external programs' runs in a private directory of their own, not in the current one.
    #[arg(long)]
    private_cwd: bool,
    /// The program crashes child processes on purpose (death tests): their crashes are
    /// recorded as findings, not failures. Only the started process's own end is judged.
    #[arg(long)]
    children_may_crash: bool,
    /// Do not run a cell again without the layer its crashes were in (validation, trace).
    #[arg(long)]
    no_rerun_without_layer: bool,
}

impl Selection {
    fn overrides(self, exec: &Execution, runs: Option<u32>, command: Vec<OsString>) -> Overrides {
        Overrides {
            cases: self.cases,
            runtimes: self.runtimes,
            drivers: self.drivers,
            command,
            name: self.name,
            private_cwd: exec.private_cwd,
            runs,
            jobs: exec.jobs,
            timeout: exec.timeout,
            emulate: self.emulate,
            trace: self.trace,
            no_validation: self.no_validation,
            fail_on_leak: self.fail_on_leak,
        }
    }
}

#[derive(clap::Args)]
struct ReproArgs {
    #[command(flatten)]
    select: Selection,
    #[command(flatten)]
    exec: Execution,
    /// Stop, green, once the 95 % upper bound of the failure rate is below this.
    #[arg(long, value_name = "RATE", default_value = "1%", value_parser = crate::engine::repro::parse_rate)]
    max_rate: f64,
    /// The most runs; a --max-rate that needs more clean runs is refused.
    #[arg(long, value_name = "N", default_value_t = crate::engine::repro::DEFAULT_MAX_RUNS, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    max_runs: u64,
    /// An external program and its arguments, as the cell.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Subcommand)]
enum BaselineCommand {
    /// Bring a baseline file up to date with a results file.
    Update {
        /// The results file (schema vkexit.results/1) of the job.
        #[arg(long, value_name = "FILE")]
        results: PathBuf,
        /// The baseline file to update (created when missing).
        #[arg(long, value_name = "FILE")]
        baseline: PathBuf,
        /// Remove the entries that match no cell of the results.
        #[arg(long)]
        prune: bool,
    },
}

/// The reports besides the results file, for `run` and `merge`.
#[derive(clap::Args)]
struct ReportArgs {
    /// Write JUnit XML for a CI's test view.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a Markdown summary (for a PR comment or a CI step summary).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write an HTML report: DIR/index.html.
    #[arg(long, value_name = "DIR")]
    html: Option<PathBuf>,
}

impl ReportArgs {
    fn outputs(self, json: Option<PathBuf>) -> report::Outputs {
        report::Outputs {
            json,
            junit: self.junit,
            markdown: self.markdown,
            html: self.html,
        }
    }
}

#[derive(clap::Args)]
struct MergeArgs {
    /// Results files (schema vkexit.results/1).
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Write the merged results file.
    #[arg(long, value_name = "FILE")]
    json: PathBuf,
    /// Judge the merged cells against a baseline file (repeatable), as `run --baseline` does;
    /// without one, against the built-in baseline.
    #[arg(long = "baseline", value_name = "EXPECT.toml")]
    baselines: Vec<PathBuf>,
    #[command(flatten)]
    reports: ReportArgs,
}

#[derive(clap::Args)]
struct BundleArgs {
    /// The tarball to write [default: vkexit-VERSION-ARCH.tar.gz].
    #[arg(short, long, value_name = "FILE.tar.gz")]
    output: Option<PathBuf>,
    /// Carry the Vulkan loader and the validation layer: `apt-get download` them
    /// (libvulkan1, vulkan-validationlayers) and unpack them into the bundle.
    #[arg(long)]
    with_vulkan: bool,
    /// A .deb file, or a directory of them, to unpack into the bundle too (repeatable).
    #[arg(long = "deb", value_name = "PATH")]
    debs: Vec<PathBuf>,
    /// A file or directory to carry under share/ (repeatable)
    /// [default: ci/matrix and ci/baselines of the current directory].
    #[arg(long, value_name = "PATH")]
    include: Vec<PathBuf>,
    /// A real-runtime cache directory to carry under runtimes/.
    #[arg(long, value_name = "DIR")]
    runtimes: Option<PathBuf>,
    /// Drop the debug info of the binaries (function names stay for backtraces).
    #[arg(long)]
    strip_debug: bool,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run_command(*args),
        Command::List => list().map(|()| Outcome::Green),
        Command::Doctor => doctor::doctor(&mut std::io::stdout().lock())
            .map(Outcome::from)
            .map_err(|e| Error::Usage(format!("cannot print: {e}"))),
        Command::Merge(args) => merge(args),
        Command::Repro(args) => repro(*args),
        Command::Baseline {
            command:
                BaselineCommand::Update {
                    results,
                    baseline,
                    prune,
                },
        } => baseline_update(&results, &baseline, prune),
        Command::Explain { run_dir } => explain(&run_dir),
        Command::Bundle(args) => bundle(args),
        Command::Bench(args) => bench::bench(*args).map(Outcome::from),
        Command::Schema => print(&format!("{:#}\n", crate::results::json_schema())),
        Command::Completions { shell } => {
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "vkexit", &mut text);
            print(&String::from_utf8_lossy(&text))
        }
        Command::Man => {
            let mut text = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut text)
                .map_err(|e| Error::Usage(format!("cannot render the man page: {e}")))
                .and_then(|()| print(&String::from_utf8_lossy(&text)))
        }
        Command::ProbeDriver(args) => probe_driver(args.report.as_deref()).map(Outcome::from),
        Command::ProbeLoader { path } => match crate::host::loader::probe_loader_here(&path) {
            Ok(version) => {
                println!("{version}");
                Ok(Outcome::Green)
            }
            Err(e) => Err(Error::Usage(e)),
        },
    };
    match outcome {
        Ok(Outcome::Green) => ExitCode::SUCCESS,
        Ok(Outcome::Red) => ExitCode::from(1),
        Ok(Outcome::Interrupted) => ExitCode::from(run::interrupt::EXIT_CODE),
        Err(e) => {
            eprintln!("vkexit: {e}");
            ExitCode::from(2)
        }
    }
}

/// How `vkexit run` ended, for its exit code.
enum Outcome {
    Green,
    Red,
    Interrupted,
}

impl From<bool> for Outcome {
    fn from(green: bool) -> Self {
        if green {
            Outcome::Green
        } else {
            Outcome::Red
        }
    }
}

fn run_command(args: RunArgs) -> Result<Outcome> {
    prepare_to_run()?;
    let mut matrix = match &args.config {
        Some(path) => Matrix::read(path)?,
        None => Matrix::default(),
    };
    matrix.apply(args.select.overrides(&args.exec, args.runs, args.command))?;
    matrix.check_programs()?;
    let baseline = Baseline::read(&args.baselines)?;
    let outputs = args.reports.outputs(args.json);
    outputs.check()?;
    let settings = gate::Settings {
        jobs: matrix.jobs.map(|j| j as usize).unwrap_or_else(cores),
        artifacts: args.exec.artifacts,
        keep_passing: args.keep_passing,
        diagnostics: !args.exec.no_diagnostics,
        time_destructors: args.exec.time_destructors,
        shard: args.shard,
        children_may_crash: args.exec.children_may_crash,
        rerun_without_layer: !args.exec.no_rerun_without_layer,
    };
    let gate = Gate::plan(&matrix, &baseline, settings)?;
    for note in &gate.notes {
        eprintln!("vkexit: {note}");
    }
    let total_cells = gate.runnable_cells();
    let mut done_cells = 0;
    let cells = gate.run(|cell| {
        done_cells += 1;
        eprintln!("[{done_cells}/{total_cells}] {} done", cell.label());
    })?;
    drop(gate);
    let mut out = std::io::stdout().lock();
    let _ = report::print_table(&mut out, &cells);
    let _ = writeln!(out, "{}", report::summary_line(&cells));
    if !args.baselines.is_empty() {
        let (from_files, builtin) = gate::judged_by(&cells);
        let _ = writeln!(
            out,
            "expectations: {from_files} cells judged by the baseline files, {builtin} by the built-in baseline"
        );
    }
    let interrupted = run::interrupt::interrupted();
    let mut results = report::results(cells, interrupted);
    results.shard = args.shard.map(|s| s.to_string());
    outputs.write(&results)?;
    if interrupted {
        eprintln!("vkexit: interrupted; the results above are what finished before");
        return Ok(Outcome::Interrupted);
    }
    Ok(Outcome::from(gate::green(&results.cells)))
}

fn bundle(args: BundleArgs) -> Result<Outcome> {
    let built = crate::engine::bundle::build(&crate::engine::bundle::Options {
        output: args.output,
        with_vulkan: args.with_vulkan,
        debs: args.debs,
        include: args.include,
        runtimes: args.runtimes,
        strip_debug: args.strip_debug,
    })?;
    let m = &built.manifest;
    println!(
        "{}: {:.1} MiB, {} programs and libraries for {} (glibc {} or newer)",
        built.tarball.display(),
        built.bytes as f64 / (1024.0 * 1024.0),
        m.binaries.len(),
        m.arch,
        m.glibc_min
    );
    if !m.share.is_empty() {
        println!("  share/: {}", m.share.join(", "));
    }
    for p in &m.packages {
        println!("  sysroot/: {} {}", p.name, p.version);
    }
    if m.runtimes {
        println!("  runtimes/: the real-runtime cache");
    }
    println!(
        "  unpack it anywhere and run: {}/vkexit doctor",
        crate::engine::bundle::top_dir_name()
    );
    Ok(Outcome::Green)
}

/// What `run` and `repro` do before anything else: refuse a process limit that would make every
/// run an error, then take over Ctrl-C, so that nothing may be left behind.
fn prepare_to_run() -> Result<()> {
    run::cgroup::max_processes().map_err(Error::Usage)?;
    run::interrupt::install()
        .map_err(|e| Error::Usage(format!("cannot install signal handlers: {e}")))
}

fn repro(args: ReproArgs) -> Result<Outcome> {
    prepare_to_run()?;
    let mut matrix = Matrix::default();
    matrix.apply(args.select.overrides(&args.exec, None, args.command))?;
    matrix.check_programs()?;
    let [set] = &matrix.layer_sets()[..] else {
        unreachable!("flags alone give one layer set")
    };
    let validation = match set.validation {
        true => Some(crate::host::validation::find_layer()?),
        false => None,
    };
    let chain = gate::chain(set, validation.as_ref(), matrix.fail_on_leak);
    let plan = plan::plan(&gate::request(&matrix, chain.clone()))?;
    let options = run::Options {
        runs: 1,
        jobs: matrix.jobs.map(|j| j as usize).unwrap_or_else(cores),
        timeout: Duration::from_secs_f64(matrix.timeout_secs()),
        artifacts: args.exec.artifacts,
        keep_passing: false,
        chain,
        fail_on_leak: matrix.fail_on_leak,
        diagnostics: !args.exec.no_diagnostics,
        time_destructors: args.exec.time_destructors,
        children_may_crash: args.exec.children_may_crash,
        examine: crate::classify::EXAMINE,
    };
    let needed = crate::engine::repro::clean_runs_needed(args.max_rate);
    if let Some(cell) = plan.cells.first().filter(|_| plan.cells.len() == 1) {
        println!(
            "repro: {} [{}, emulation {}]: until the first failure, or {needed} runs without one (failure rate below {}), {} at once",
            cell.label(),
            crate::judge::layers_text(&cell.layers),
            cell.emulation.name(),
            crate::engine::repro::percent(args.max_rate),
            options.jobs
        );
    }
    let tty = std::io::stderr().is_terminal();
    let outcome =
        crate::engine::repro::repro(&plan, &options, args.max_rate, args.max_runs, |runs| {
            if tty {
                let bound =
                    crate::engine::repro::percent(crate::engine::repro::upper_bound(0, runs));
                eprint!("\r{runs} runs, no failure; failure rate below {bound}   ");
            }
        })?;
    if tty {
        eprintln!();
    }
    for f in &outcome.failures {
        println!("run {} failed: {}: {}", f.run, f.verdict, f.reason);
        if let Some(dir) = &f.evidence {
            println!("  evidence: {}", dir.display());
        }
    }
    let rerun = !args.exec.no_rerun_without_layer;
    if let Some(line) = repro_without_layer(&plan, &options, &outcome, rerun, matrix.runs())? {
        println!("{line}");
    }
    let n = outcome.runs;
    let failures = outcome.failures.len();
    let (lo, hi) = crate::support::stats::wilson95(failures as u64, n);
    let pct = crate::engine::repro::percent;
    if outcome.interrupted {
        println!("interrupted after {n} runs, {failures} failures");
        return Ok(Outcome::Interrupted);
    }
    if failures > 0 {
        println!(
            "failed: {failures} of {n} runs; failure rate {} (95 % interval {}–{})",
            pct(failures as f64 / n as f64),
            pct(lo),
            pct(hi)
        );
        return Ok(Outcome::Red);
    }
    println!(
        "no failure in {n} runs: the failure rate is below {} (95 % upper bound {}: one-sided interval 0–{}, exact Clopper–Pearson; Wilson's 0–{})",
        pct(args.max_rate),
        pct(outcome.upper_bound()),
        pct(outcome.upper_bound()),
        pct(hi)
    );
    Ok(Outcome::Green)
}

/// When every failure of a repro was a crash in one layer: that layer's line,
/// with the cell's runs made again without it unless turned off.
fn repro_without_layer(
    plan: &plan::Plan,
    options: &run::Options,
    outcome: &crate::engine::repro::Outcome,
    rerun: bool,
    runs: u32,
) -> Result<Option<String>> {
    let mut layers = outcome.failures.iter().map(|f| match f.verdict {
        crate::verdict::RunVerdict::Crash => f.crash_layer.clone(),
        _ => None,
    });
    let Some(Some(layer)) = layers.next() else {
        return Ok(None);
    };
    if !layers.all(|l| l.as_deref() == Some(layer.as_str())) {
        return Ok(None);
    }
    let without = match rerun {
        true => gate::run_without_layer(plan, &plan.cells[0], options, &layer, runs)?,
        false => None,
    };
    let crashed = outcome.failures.len() as u64;
    Ok(Some(
        gate::layer_crash(options, layer, crashed, without).summary,
    ))
}

fn baseline_update(results: &Path, baseline: &Path, prune: bool) -> Result<Outcome> {
    let input = crate::report::merge::read(results)?;
    if input.interrupted {
        return Err(Error::Usage(format!(
            "{}: the run was interrupted, so its cells are not all there; run the job again",
            results.display()
        )));
    }
    let old = match baseline.exists() {
        true => BaselineFile::read(baseline)?,
        false => BaselineFile {
            path: baseline.to_path_buf(),
            ..BaselineFile::default()
        },
    };
    let (new, changes) = crate::judge::update::update(&old, &input, prune);
    // An existing file keeps its comments and layout; a new one is written whole.
    let text = match std::fs::read_to_string(baseline) {
        Ok(old_text) => crate::judge::update::render_over(&old_text, &old, &new),
        Err(_) => crate::judge::update::render(&new),
    };
    report::write_atomically(baseline, text.as_bytes())
        .map_err(|e| Error::io("cannot write the baseline file", baseline, e))?;
    for line in &changes.removed {
        println!("removed: {line}");
    }
    for line in &changes.added {
        println!("added:   {line}");
    }
    let todo = new
        .entries
        .iter()
        .filter(|e| e.reason == crate::judge::update::TODO_REASON)
        .count();
    println!(
        "{}: {} entries kept, {} added, {} removed; {todo} need a reason (\"{}\")",
        baseline.display(),
        changes.kept,
        changes.added.len(),
        changes.removed.len(),
        crate::judge::update::TODO_REASON
    );
    Ok(Outcome::Green)
}

fn merge(args: MergeArgs) -> Result<Outcome> {
    let outputs = args.reports.outputs(Some(args.json));
    let inputs = crate::report::merge::read_all(&args.files)?;
    let baseline = Baseline::read(&args.baselines)?;
    outputs.check()?;
    let mut results = crate::report::merge::merge(inputs);
    if !args.baselines.is_empty() {
        crate::report::merge::judge_against(&mut results, &baseline);
    }
    let mut out = std::io::stdout().lock();
    let _ = report::print_table(&mut out, &results.cells);
    let _ = writeln!(out, "{}", report::summary_line(&results.cells));
    outputs.write(&results)?;
    if results.interrupted {
        eprintln!("vkexit: an input was interrupted: its matrix is incomplete, so the gate is red");
    }
    Ok(Outcome::from(report::gate_green(&results)))
}

/// Writes generated text to stdout; a closed pipe (`| head`) is no error.
fn print(text: &str) -> Result<Outcome> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => Ok(Outcome::Green),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Outcome::Green),
        Err(e) => Err(Error::Usage(format!("cannot print: {e}"))),
    }
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn list() -> Result<()> {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "cases:");
    for case in plan::CASES {
        let _ = writeln!(out, "  {:30} {}", case.name, case.description);
    }
    let _ = writeln!(out, "runtimes:");
    for policy in plan::POLICIES {
        let _ = writeln!(out, "  refrt:{policy}");
    }
    let _ = writeln!(out, "drivers:");
    let (found, problems) = drivers::discover();
    for d in found {
        let _ = writeln!(out, "  {:10} {}", d.name, d.manifest.display());
    }
    for (manifest, problem) in problems {
        let _ = writeln!(out, "  (ignored {}: {problem})", manifest.display());
    }
    Ok(())
}

fn explain(run_dir: &std::path::Path) -> Result<Outcome> {
    if !run_dir.is_dir() {
        return Err(Error::Usage(format!(
            "{}: not a run directory (failing runs keep theirs under vkexit-artifacts/CELL/run-K)",
            run_dir.display()
        )));
    }
    let evidence = [
        "result.json",
        "command.txt",
        crate::classify::explain::TIMELINE_FILE,
        crate::host::layers::TRACE_FILE,
        crate::host::layers::TEGRA_FILE,
        crate::classify::explain::CRASH_FILE,
    ];
    if !evidence.iter().any(|f| run_dir.join(f).is_file()) {
        let has_runs = std::fs::read_dir(run_dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("run-"));
        let hint = match has_runs {
            false => "failing runs keep theirs under vkexit-artifacts/CELL/run-K",
            true => "it is a cell's directory: explain one of its run-K directories",
        };
        return Err(Error::Usage(format!(
            "{}: no evidence to explain (none of {}); {hint}",
            run_dir.display(),
            evidence.join(", ")
        )));
    }
    if let Ok(text) = std::fs::read_to_string(run_dir.join("result.json")) {
        if let Ok(result) = serde_json::from_str::<serde_json::Value>(&text) {
            let verdict = result["verdict"].as_str().unwrap_or("?");
            let reason = result["reason"].as_str().unwrap_or("");
            println!("verdict: {verdict}: {reason}");
        }
    }
    if let Ok(command) = std::fs::read_to_string(run_dir.join("command.txt")) {
        if let Some(line) = command.lines().last() {
            println!("command: {line}");
        }
    }
    println!();
    print!(
        "{}",
        crate::classify::explain::Story::read(run_dir).render()
    );
    Ok(Outcome::Green)
}

fn probe_driver(report_file: Option<&Path>) -> Result<bool> {
    let report = crate::host::probe::probe_here().map_err(Error::Usage)?;
    let json = serde_json::to_string(&report).expect("report serialises");
    match report_file {
        Some(path) => std::fs::write(path, json).map_err(|e| {
            Error::Usage(format!(
                "cannot write the probe report {}: {e}",
                path.display()
            ))
        })?,
        None => println!("{json}"),
    }
    Ok(true)
}
