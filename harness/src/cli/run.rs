//! `vkexit run`: the arguments it shares with `repro` and `merge`, and its handler.

use super::Exit;
use crate::engine::gate;
use crate::engine::invocation::{Own, Request, Resolved, Settings};
use crate::plan::matrix::{check_suite_target, Overrides, DEFAULT_PYTHON};
use crate::plan::suites::{Kind, Suite};
use crate::report;
use crate::support::errors::{Error, Result};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(super) struct RunArgs {
    /// A matrix file: cases, runtimes, drivers, layer sets, runs, environment
    /// (the flags below replace or extend what it says).
    #[arg(long, value_name = "MATRIX.toml")]
    pub(super) config: Option<PathBuf>,
    /// A baseline file: what cells are known to do (repeatable; the first
    /// entry that matches a cell judges it, else the built-in baseline).
    #[arg(long = "baseline", value_name = "EXPECT.toml")]
    pub(super) baselines: Vec<PathBuf>,
    #[command(flatten)]
    pub(super) select: CellArgs,
    #[command(flatten)]
    pub(super) suites: SuiteArgs,
    /// Runs per cell [default: 5].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::plan::matrix::MAX_RUNS)))]
    pub(super) runs: Option<u32>,
    #[command(flatten)]
    pub(super) exec: Execution,
    /// Write the results file (schema vkexit.results/1).
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,
    #[command(flatten)]
    pub(super) reports: ReportArgs,
    /// Keep the run directories of passing runs too.
    #[arg(long)]
    pub(super) keep_passing: bool,
    /// Run only shard K of N (1 ≤ K ≤ N); a cell's shard is fixed by its identity.
    #[arg(long, value_name = "K/N")]
    pub(super) shard: Option<crate::plan::shard::Shard>,
    /// Exit 0 when no run started (every cell skipped, an empty shard); without it, that
    /// is an error (exit 2).
    #[arg(long)]
    pub(super) allow_no_runs: bool,
    /// An external program and its arguments, run as one case.
    #[arg(last = true, value_name = "CMD")]
    pub(super) command: Vec<OsString>,
}

/// Which cells: what `run` and `repro` share.
#[derive(clap::Args)]
pub(super) struct CellArgs {
    /// A built-in case, or a case of the matrix file (repeatable; default: all).
    #[arg(long = "case", value_name = "NAME")]
    pub(super) cases: Vec<String>,
    /// A runtime spec such as refrt:guarded (repeatable; default: every refrt policy).
    #[arg(long = "runtime", value_name = "SPEC")]
    pub(super) runtimes: Vec<String>,
    /// A driver short name (lavapipe, radv, nvidia, …) or ICD manifest path (repeatable; default: every driver with a device).
    #[arg(long = "driver", value_name = "NAME")]
    pub(super) drivers: Vec<String>,
    /// Run without the validation layer (VUIDs cannot be seen then).
    #[arg(long)]
    pub(super) no_validation: bool,
    /// Emulate a driver's exit behaviour: none, tegra (the Jetson crash,
    /// every time) or tegra-racy (flaky, as on the Orin) [default: none].
    #[arg(long, value_name = "MODE")]
    pub(super) emulate: Option<String>,
    /// Add the trace layer: object lifetimes, calls on dead handles, objects alive at exit.
    #[arg(long)]
    pub(super) trace: bool,
    /// Objects alive at exit fail a run (verdict `leak`); implies --trace.
    #[arg(long)]
    pub(super) fail_on_leak: bool,
    /// The case name of the program after `--` [default: its file name, or its script's].
    #[arg(long, value_name = "NAME")]
    pub(super) name: Option<String>,
}

/// A project's own test suite, each test a case run in its own process.
#[derive(clap::Args)]
pub(super) struct SuiteArgs {
    /// A CMake build directory: each CTest test a case (listed by `ctest --show-only=json-v1` there).
    #[arg(long, value_name = "BUILD_DIR")]
    pub(super) ctest: Option<PathBuf>,
    /// CTest's own selection for --ctest, split at spaces: "-R teardown -LE slow" (-R, -E, -L, -LE, -C).
    #[arg(
        long,
        value_name = "ARGS",
        allow_hyphen_values = true,
        requires = "ctest"
    )]
    pub(super) ctest_args: Option<String>,
    /// A GoogleTest program: each test a case, run with --gtest_filter=Suite.Name.
    #[arg(long, value_name = "PROGRAM")]
    pub(super) gtest: Option<PathBuf>,
    /// Arguments for --gtest, its listing and every test, split at spaces: "--gtest_filter=Teardown.*".
    #[arg(
        long,
        value_name = "ARGS",
        allow_hyphen_values = true,
        requires = "gtest"
    )]
    pub(super) gtest_args: Option<String>,
    /// pytest's collection arguments, split at spaces: "tests/test_gpu.py -k teardown"; each node id a case.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub(super) pytest: Option<String>,
    /// The interpreter for --pytest [default: python3].
    #[arg(long, value_name = "PROGRAM", requires = "pytest")]
    pub(super) python: Option<PathBuf>,
    /// A Rust test program (libtest): each test a case, run with --exact NAME.
    #[arg(long, value_name = "PROGRAM")]
    pub(super) libtest: Option<PathBuf>,
    /// Arguments for --libtest's listing, split at spaces: a filter, --include-ignored.
    #[arg(
        long,
        value_name = "ARGS",
        allow_hyphen_values = true,
        requires = "libtest"
    )]
    pub(super) libtest_args: Option<String>,
}

impl SuiteArgs {
    /// The suites the flags name, checked: a build directory or program that cannot be
    /// used is an error naming its flag.
    pub(super) fn suites(self) -> Result<Vec<Suite>> {
        let words = |a: Option<String>| -> Vec<String> {
            a.map(|a| a.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        };
        let mut out = Vec::new();
        let given = [
            (Kind::Ctest, "--ctest", self.ctest, words(self.ctest_args)),
            (Kind::Gtest, "--gtest", self.gtest, words(self.gtest_args)),
            (
                Kind::Libtest,
                "--libtest",
                self.libtest,
                words(self.libtest_args),
            ),
        ];
        for (kind, flag, target, args) in given {
            let Some(target) = target else { continue };
            let target = check_suite_target(kind, &target)
                .map_err(|why| Error::bad_flag(flag, target.display(), why))?;
            out.push(Suite {
                kind,
                target,
                args,
                python: DEFAULT_PYTHON.into(),
                env: Vec::new(),
            });
        }
        if let Some(args) = self.pytest {
            let python = self.python.unwrap_or_else(|| DEFAULT_PYTHON.into());
            let python = check_suite_target(Kind::Pytest, &python)
                .map_err(|why| Error::bad_flag("--python", python.display(), why))?;
            let args = words(Some(args));
            if args.is_empty() {
                return Err(Error::bad_flag(
                    "--pytest",
                    "\"\"",
                    "give what pytest collects: a path, a node id, -k EXPR",
                ));
            }
            out.push(Suite {
                kind: Kind::Pytest,
                target: PathBuf::new(),
                args,
                python: python.display().to_string(),
                env: Vec::new(),
            });
        }
        Ok(out)
    }
}

/// How runs are made: what `run` and `repro` share.
#[derive(clap::Args)]
pub(super) struct Execution {
    /// Runs at once (default: the number of cores).
    #[arg(short = 'j', long = "jobs", value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::plan::matrix::MAX_JOBS)))]
    pub(super) jobs: Option<u32>,
    /// Seconds before a run counts as hung and its process group is killed [default: 60].
    #[arg(long, value_name = "SECS", value_parser = crate::plan::matrix::parse_timeout)]
    pub(super) timeout: Option<f64>,
    /// Where failing runs keep their evidence.
    #[arg(long, value_name = "DIR", default_value = "vkexit-artifacts")]
    pub(super) artifacts: PathBuf,
    /// Do not preload the crash report, exit timeline and per-instance validation logs into the runs; a clean run under validation is then an error (pair it with --no-validation).
    #[arg(long)]
    pub(super) no_diagnostics: bool,
    /// Time every C++ static destructor in the exit timeline too (slower exit: can change races).
    #[arg(long)]
    pub(super) time_destructors: bool,
    /// Start external programs' runs in a private directory of their own, not in the current one.
    #[arg(long)]
    pub(super) private_cwd: bool,
    /// The program crashes child processes on purpose (death tests): their crashes are
    /// recorded as findings, not failures. Only the started process's own end is judged.
    #[arg(long)]
    pub(super) children_may_crash: bool,
    /// Do not run a cell again without the layer its crashes were in (validation, trace).
    #[arg(long)]
    pub(super) no_rerun_without_layer: bool,
    /// A run that exits 0 without ever using Vulkan is an error, not `no-vulkan` (green).
    /// Built-in scenarios always require it.
    #[arg(long)]
    pub(super) require_vulkan: bool,
    /// Run every exit in another order, as another build would: module, linked, link-order,
    /// glibc-2.31-library-order, teardown-before-driver, cleanup-first, run:FIRST:before:THEN
    /// (one exit handler, by symbol or #ID), destructors:FIRST:before:THEN (one library's
    /// destructors, by file name); comma-separated, applied in turn.
    #[arg(long, value_name = "ORDER")]
    pub(super) exit_order: Option<crate::plan::exit_order::ExitOrder>,
    /// Let the other threads of every run run ahead at the exit handler boundaries this seed
    /// picks (replays a thread-timing failure that `explore` found).
    #[arg(long, value_name = "N")]
    pub(super) chaos_seed: Option<u64>,
    /// Give every run a slower device's teardown at exit (a Jetson's): after each vkDestroy*/vkFree*
    /// call made during exit, its thread is held until the threads asleep at it have woken, at most 1 s
    /// a call and 3 s in all (replays a slow-teardown failure that `explore` found).
    #[arg(long)]
    pub(super) slow_teardown: bool,
}

impl CellArgs {
    pub(super) fn overrides(
        self,
        exec: &Execution,
        runs: Option<u32>,
        command: Vec<OsString>,
    ) -> Overrides {
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

/// The reports besides the results file, for `run` and `merge`.
#[derive(clap::Args)]
pub(super) struct ReportArgs {
    /// Write JUnit XML for a CI's test view.
    #[arg(long, value_name = "FILE")]
    pub(super) junit: Option<PathBuf>,
    /// Write a Markdown summary (for a PR comment or a CI step summary).
    #[arg(long, value_name = "FILE")]
    pub(super) markdown: Option<PathBuf>,
    /// Write an HTML report: DIR/index.html.
    #[arg(long, value_name = "DIR")]
    pub(super) html: Option<PathBuf>,
}

impl ReportArgs {
    pub(super) fn outputs(self, json: Option<PathBuf>) -> report::Outputs {
        report::Outputs {
            json,
            junit: self.junit,
            markdown: self.markdown,
            html: self.html,
        }
    }
}

/// The cells a command's selection flags ask for (a matrix file, suites, cells, `-- CMD`), as a
/// request with no baseline file and no report, which allows no "no run" and does not take the
/// artifacts directory; the command fills in the rest.
pub(super) fn request_of(
    config: Option<PathBuf>,
    suites: SuiteArgs,
    select: CellArgs,
    exec: &Execution,
    runs: Option<u32>,
    command: Vec<OsString>,
    settings: Settings,
) -> Result<Request> {
    Ok(Request {
        config,
        suites: suites.suites()?,
        overrides: select.overrides(exec, runs, command),
        baselines: Vec::new(),
        outputs: report::Outputs::default(),
        allow_no_runs: false,
        settings,
        own_artifacts: Own::Never,
    })
}

pub(super) fn run_command(args: RunArgs) -> Result<Exit> {
    let settings = args.exec.settings(args.keep_passing, args.shard)?;
    let resolved = Resolved::new(Request {
        baselines: args.baselines,
        outputs: args.reports.outputs(args.json),
        allow_no_runs: args.allow_no_runs,
        own_artifacts: Own::BeforePlanning,
        ..request_of(
            args.config,
            args.suites,
            args.select,
            &args.exec,
            args.runs,
            args.command,
            settings,
        )?
    })?;
    let invocation = resolved.invocation()?;
    let mut progress = report::events::Progress::default();
    let mut table = report::events::Table {
        baselines_given: resolved.baselines_given,
    };
    let mut files = report::events::Files {
        outputs: resolved.outputs,
        keep_in: Some(invocation.settings.artifacts.clone()),
    };
    let results = gate::run(&invocation, &mut [&mut progress, &mut table, &mut files])?;
    if results.interrupted {
        eprintln!("vkexit: interrupted; the results above are what finished before");
        return Ok(Exit::Interrupted);
    }
    if let (Some(why), false) = (crate::judge::no_runs(&results), resolved.allow_no_runs) {
        return Err(Error::NoRuns { why });
    }
    Ok(Exit::from(results.is_green()))
}

impl Execution {
    /// The settings of every run these flags ask for.
    pub(super) fn settings(
        &self,
        keep_passing: bool,
        shard: Option<crate::plan::shard::Shard>,
    ) -> Result<Settings> {
        if self.no_diagnostics && (self.exit_order.is_some() || self.chaos_seed.is_some()) {
            let flag = match self.exit_order.is_some() {
                true => "--exit-order",
                false => "--chaos-seed",
            };
            return Err(Error::BadFlag {
                flag,
                value: None,
                why: "the preloaded library changes the exit order: it cannot go with --no-diagnostics"
                    .into(),
            });
        }
        if self.no_diagnostics && self.slow_teardown {
            return Err(Error::BadFlag {
                flag: "--slow-teardown",
                value: None,
                why: "the preloaded library holds the teardown's calls: it cannot go with --no-diagnostics"
                    .into(),
            });
        }
        let settings = Settings {
            artifacts: self.artifacts.clone(),
            keep_passing,
            diagnostics: !self.no_diagnostics,
            time_destructors: self.time_destructors,
            shard,
            children_may_crash: self.children_may_crash,
            rerun_without_layer: !self.no_rerun_without_layer,
            exit_order: self.exit_order.clone(),
            chaos_seed: self.chaos_seed,
            slow_teardown: self.slow_teardown,
            require_vulkan: self.require_vulkan,
        };
        Ok(settings)
    }
}
