//! `vkexit exec`: its arguments, turned into an engine request (`engine::exec`).

use super::run::{CellArgs, Execution};
use crate::engine::exec;
use crate::engine::invocation::{Own, Request, Resolved};
use crate::support::errors::Result;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(super) struct ExecArgs {
    /// The driver: a short name (lavapipe, radv, nvidia, …) or ICD manifest path [default:
    /// the first driver with a device].
    #[arg(long, value_name = "NAME")]
    driver: Option<String>,
    /// Run without the validation layer (VUIDs cannot be seen then).
    #[arg(long)]
    no_validation: bool,
    /// Emulate a driver's exit behaviour: none, tegra or tegra-racy [default: none].
    #[arg(long, value_name = "MODE")]
    emulate: Option<String>,
    /// Add the trace layer: object lifetimes, calls on dead handles, objects alive at exit.
    #[arg(long)]
    trace: bool,
    /// Objects alive at exit fail the run (verdict `leak`); implies --trace.
    #[arg(long)]
    fail_on_leak: bool,
    /// Seconds before the run counts as hung and its process group is killed [default: 60].
    #[arg(long, value_name = "SECS", value_parser = crate::plan::matrix::parse_timeout)]
    timeout: Option<f64>,
    /// A failing run keeps its evidence in a directory of its own under DIR/exec/.
    #[arg(long, value_name = "DIR", default_value = "vkexit-artifacts")]
    artifacts: PathBuf,
    /// Do not preload the crash report and exit timeline (pair it with --no-validation).
    #[arg(long)]
    no_diagnostics: bool,
    /// The program crashes child processes on purpose (death tests): only its own end is judged.
    #[arg(long)]
    children_may_crash: bool,
    /// Run the exit in another order: module, linked, link-order, glibc-2.31-library-order,
    /// teardown-before-driver, cleanup-first, run:FIRST:before:THEN,
    /// destructors:FIRST:before:THEN (comma-separated, applied in turn).
    #[arg(long, value_name = "ORDER")]
    exit_order: Option<crate::plan::exit_order::ExitOrder>,
    /// Let the other threads run ahead at the exit handler boundaries this seed picks.
    #[arg(long, value_name = "N")]
    chaos_seed: Option<u64>,
    /// Give the run a slower device's teardown at exit: each destroy call during exit held until
    /// the threads asleep at it have woken.
    #[arg(long)]
    slow_teardown: bool,
    /// The program and its arguments; its output passes through, its exit code becomes the
    /// verdict's.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

pub(super) fn exec_command(args: ExecArgs) -> Result<u8> {
    let execution = Execution {
        jobs: Some(1),
        timeout: args.timeout,
        artifacts: args.artifacts,
        no_diagnostics: args.no_diagnostics,
        time_destructors: false,
        private_cwd: false,
        children_may_crash: args.children_may_crash,
        no_rerun_without_layer: true,
        exit_order: args.exit_order,
        chaos_seed: args.chaos_seed,
        slow_teardown: args.slow_teardown,
        require_vulkan: false,
    };
    let cells = CellArgs {
        cases: Vec::new(),
        runtimes: Vec::new(),
        drivers: args.driver.into_iter().collect(),
        no_validation: args.no_validation,
        emulate: args.emulate,
        trace: args.trace,
        fail_on_leak: args.fail_on_leak,
        name: None,
    };
    let settings = execution.settings(false, None)?;
    exec::exec(Resolved::new(Request {
        config: None,
        suites: Vec::new(),
        overrides: cells.overrides(&execution, Some(1), args.command),
        baselines: Vec::new(),
        outputs: crate::report::Outputs::default(),
        allow_no_runs: false,
        settings,
        // Hundreds may run at once, each in a directory of its own.
        own_artifacts: Own::Never,
    })?)
}
