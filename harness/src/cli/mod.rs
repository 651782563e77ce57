//! The `vkexit` command line: its arguments, and one file per command group for their
//! handlers.

mod baseline;
mod bench;
mod bundle;
mod exec;
mod explain;
mod explore;
mod list;
mod merge;
mod probe;
mod repro;
pub(crate) mod run;

use crate::support::errors::{Error, Result};
use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The results file's JSON Schema, as committed (docs/results.schema.json, copied by build.rs
/// from the workspace or from the package's copy): a test keeps it equal to what the evidence
/// crate's types generate, so that the generator is not built into vkexit.
const RESULTS_SCHEMA: &str = include_str!(concat!(env!("OUT_DIR"), "/results.schema.json"));

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
    Run(Box<run::RunArgs>),
    /// Run one program once under vkexit, inside another test runner: its output passes
    /// through, its exit code becomes the verdict's, one line on stderr says why.
    Exec(Box<exec::ExecArgs>),
    /// Run each cell's natural exit, then each perturbation of it (module build, link order,
    /// the Tegra driver's exit, thread timing); where the natural exit fails, find the change of
    /// order that makes it clean.
    Explore(Box<explore::ExploreArgs>),
    /// List the built-in cases, refrt policies and the drivers found.
    List,
    /// Check the loader, drivers, validation layer and scenarios.
    Doctor,
    /// Join results files (shards, machines) into one, judge the cells again, and report.
    Merge(merge::MergeArgs),
    /// Run one cell until it fails, or until its failure rate is shown below --max-rate.
    Repro(Box<repro::ReproArgs>),
    /// Baseline files: what cells are known to do.
    Baseline {
        #[command(subcommand)]
        command: baseline::BaselineCommand,
    },
    /// Tell the story of one kept run: exit timeline, Vulkan lifetimes, driver, crash.
    Explain {
        /// A run directory under the artifacts directory.
        run_dir: PathBuf,
        /// Also draw the exit timeline as an SVG swimlane into FILE (one lane per thread).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Pack vkexit, its scenarios, refrt, layers and the CI files into one tarball that runs on
    /// another Linux machine of the same architecture without a Rust toolchain.
    Bundle(bundle::BundleArgs),
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
    ProbeDriver(probe::ProbeArgs),
    /// Print the version of the Vulkan loader at PATH.
    #[command(hide = true)]
    ProbeLoader { path: PathBuf },
}

/// Parses the command line and runs the command. Exits 0 when the gate is green (or the
/// command did its work), 1 when red, 2 on any error (said on stderr: a bad flag or file,
/// a file that cannot be read or written), 130 when interrupted.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run::run_command(*args),
        Command::Exec(args) => exec::exec_command(*args).map(Exit::Code),
        Command::Explore(args) => explore::explore_command(*args),
        Command::List => list::list().map(|()| Exit::Green),
        Command::Doctor => crate::engine::doctor::doctor(&mut std::io::stdout().lock())
            .map(Exit::from)
            .map_err(|e| Error::Output {
                what: "cannot print".into(),
                source: e,
            }),
        Command::Merge(args) => merge::merge(args),
        Command::Repro(args) => repro::repro(*args),
        Command::Baseline {
            command:
                baseline::BaselineCommand::Update {
                    results,
                    baseline,
                    prune,
                },
        } => baseline::baseline_update(&results, &baseline, prune),
        Command::Explain { run_dir, svg } => explain::explain(&run_dir, svg.as_deref()),
        Command::Bundle(args) => bundle::bundle(args),
        Command::Bench(args) => bench::bench(*args).map(Exit::from),
        Command::Schema => print(RESULTS_SCHEMA),
        Command::Completions { shell } => {
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "vkexit", &mut text);
            print(&String::from_utf8_lossy(&text))
        }
        Command::Man => {
            let mut text = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut text)
                .map_err(|e| Error::Output {
                    what: "cannot render the man page".into(),
                    source: e,
                })
                .and_then(|()| print(&String::from_utf8_lossy(&text)))
        }
        Command::ProbeDriver(args) => probe::probe_driver(args.report.as_deref()).map(Exit::from),
        Command::ProbeLoader { path } => probe::probe_loader(&path).map(Exit::from),
    };
    match outcome {
        Ok(Exit::Green) => ExitCode::SUCCESS,
        Ok(Exit::Red) => ExitCode::from(vkexit_evidence::exit_code::RED),
        Ok(Exit::Interrupted) => ExitCode::from(crate::run::interrupt::EXIT_CODE),
        Ok(Exit::Code(code)) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vkexit: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// How a command ended, for its exit code.
enum Exit {
    Green,
    Red,
    Interrupted,
    /// `vkexit exec`: the code its verdict gives.
    Code(u8),
}

impl From<bool> for Exit {
    fn from(green: bool) -> Self {
        if green {
            Exit::Green
        } else {
            Exit::Red
        }
    }
}

/// Writes generated text to stdout; a closed pipe (`| head`) is no error.
fn print(text: &str) -> Result<Exit> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => Ok(Exit::Green),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Exit::Green),
        Err(e) => Err(Error::Output {
            what: "cannot print".into(),
            source: e,
        }),
    }
}
