//! The `vkexit` command line: a thin layer over the `vkexit` library.

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use vkexit::errors::{Error, Result};
use vkexit::layers::{Chain, Emulation};
use vkexit::{doctor, drivers, plan, report, run};

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
    /// Tell the story of one kept run: exit timeline, Vulkan lifetimes, driver, crash.
    Explain {
        /// A run directory under the artifacts directory.
        run_dir: PathBuf,
    },
    /// Print the devices the driver selected by the environment shows (JSON).
    #[command(hide = true)]
    ProbeDriver,
}

#[derive(clap::Args)]
struct RunArgs {
    /// A built-in case (repeatable; default: all).
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
    /// A runtime spec such as refrt:guarded (repeatable; default: every refrt policy).
    #[arg(long = "runtime", value_name = "SPEC")]
    runtimes: Vec<String>,
    /// A driver short name (lavapipe, radv, nvidia, …) or ICD manifest path (repeatable; default: every driver with a device).
    #[arg(long = "driver", value_name = "NAME")]
    drivers: Vec<String>,
    /// Runs per cell.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Runs at once (default: the number of cores).
    #[arg(short = 'j', long = "jobs", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Seconds before a run counts as hung and its process group is killed.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    timeout: f64,
    /// Run without the validation layer (VUIDs cannot be seen then).
    #[arg(long)]
    no_validation: bool,
    /// Emulate a driver's exit behaviour: none, tegra (the Jetson crash,
    /// every time) or tegra-racy (flaky, as on the Orin).
    #[arg(long, value_name = "MODE", default_value = "none")]
    emulate: String,
    /// Add the trace layer: object lifetimes, calls on dead handles, objects alive at exit.
    #[arg(long)]
    trace: bool,
    /// Objects alive at exit fail a run (verdict `leak`); implies --trace.
    #[arg(long)]
    fail_on_leak: bool,
    /// Write the results file (schema vkexit.results/1).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    reports: ReportArgs,
    /// Where failing runs keep their evidence.
    #[arg(long, value_name = "DIR", default_value = "vkexit-artifacts")]
    artifacts: PathBuf,
    /// Keep the run directories of passing runs too.
    #[arg(long)]
    keep_passing: bool,
    /// Do not preload the crash report and exit timeline into the runs.
    #[arg(long)]
    no_diagnostics: bool,
    /// Run only shard K of N (1 ≤ K ≤ N); a cell's shard is fixed by its identity.
    #[arg(long, value_name = "K/N")]
    shard: Option<vkexit::shard::Shard>,
    /// An external program and its arguments, run as one case.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
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
    #[command(flatten)]
    reports: ReportArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run_command(*args),
        Command::List => list().map(|()| Outcome::Green),
        Command::Doctor => doctor::doctor(&mut std::io::stdout().lock())
            .map(Outcome::from)
            .map_err(|e| Error::Usage(format!("cannot print: {e}"))),
        Command::Merge(args) => merge(args),
        Command::Explain { run_dir } => explain(&run_dir),
        Command::ProbeDriver => probe_driver().map(Outcome::from),
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
    // From here on a Ctrl-C is vkexit's to handle: nothing may be left behind.
    run::interrupt::install()
        .map_err(|e| Error::Usage(format!("cannot install signal handlers: {e}")))?;
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(Error::Usage(format!(
            "--timeout {}: expected a positive number of seconds",
            args.timeout
        )));
    }
    let validation = match args.no_validation {
        true => None,
        false => Some(vkexit::validation::find_layer()?),
    };
    let chain = Chain {
        trace: args.trace || args.fail_on_leak,
        validation,
        emulation: Emulation::parse(&args.emulate)?,
        manifests: None,
    };
    let outputs = args.reports.outputs(args.json);
    outputs.check()?;
    let request = plan::Request {
        cases: args.cases,
        runtimes: args.runtimes,
        drivers: args.drivers,
        external: (!args.command.is_empty()).then_some(args.command),
        chain: chain.clone(),
    };
    let mut plan = plan::plan(&request)?;
    if let Some(shard) = args.shard {
        plan.retain_shard(shard);
    }
    for note in &plan.notes {
        eprintln!("vkexit: {note}");
    }
    let options = run::Options {
        runs: args.runs,
        jobs: args.jobs.map(|j| j as usize).unwrap_or_else(cores),
        timeout: Duration::from_secs_f64(args.timeout),
        artifacts: args.artifacts,
        keep_passing: args.keep_passing,
        chain,
        fail_on_leak: args.fail_on_leak,
        diagnostics: !args.no_diagnostics,
    };
    let total_cells = plan.cells.iter().filter(|c| c.not_run.is_none()).count();
    let mut done_runs = vec![0u32; plan.cells.len()];
    let mut done_cells = 0;
    let runs = run::execute(&plan, &options, |cell, record| {
        done_runs[record.cell] += 1;
        if done_runs[record.cell] == options.runs {
            done_cells += 1;
            eprintln!("[{done_cells}/{total_cells}] {} done", cell.label());
        }
    })?;
    let cells: Vec<_> = plan
        .cells
        .iter()
        .zip(&runs)
        .map(|(cell, runs)| report::summarize(cell, runs))
        .collect();
    let mut out = std::io::stdout().lock();
    let _ = report::print_table(&mut out, &cells);
    let _ = writeln!(out, "{}", report::summary_line(&cells));
    let interrupted = run::interrupt::interrupted();
    let mut results = report::results(cells, interrupted);
    results.shard = args.shard.map(|s| s.to_string());
    outputs.write(&results)?;
    if interrupted {
        eprintln!("vkexit: interrupted; the results above are what finished before");
        return Ok(Outcome::Interrupted);
    }
    Ok(Outcome::from(
        results.cells.iter().all(|c| c.verdict.is_success()),
    ))
}

fn merge(args: MergeArgs) -> Result<Outcome> {
    let outputs = args.reports.outputs(Some(args.json));
    let inputs = vkexit::merge::read_all(&args.files)?;
    outputs.check()?;
    let results = vkexit::merge::merge(inputs);
    let mut out = std::io::stdout().lock();
    let _ = report::print_table(&mut out, &results.cells);
    let _ = writeln!(out, "{}", report::summary_line(&results.cells));
    outputs.write(&results)?;
    if results.interrupted {
        eprintln!("vkexit: an input was interrupted: its matrix is incomplete, so the gate is red");
    }
    Ok(Outcome::from(report::gate_green(&results)))
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn list() -> Result<()> {
    let mut out = std::io::stdout().lock();
    let describe = |case: &str| match case {
        "clean-exit" => "init, allocate, free everything, exit",
        "buffer-kept-at-exit" => "a device buffer and a pinned host buffer still allocated at exit",
        "handler-before-load" => {
            "atexit(cleanup) before the runtime is loaded; cleanup frees after teardown"
        }
        "events-freed-after-teardown" => {
            "events recorded, freed by a handler that runs after the teardown"
        }
        _ => "",
    };
    let _ = writeln!(out, "cases:");
    for case in plan::BUILTIN_CASES {
        let _ = writeln!(out, "  {case:30} {}", describe(case));
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
    print!("{}", vkexit::explain::Story::read(run_dir).render());
    Ok(Outcome::Green)
}

fn probe_driver() -> Result<bool> {
    match vkexit::probe::probe_here() {
        Ok(report) => {
            println!(
                "{}",
                serde_json::to_string(&report).expect("report serialises")
            );
            Ok(true)
        }
        Err(e) => Err(Error::Usage(e)),
    }
}
