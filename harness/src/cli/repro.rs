//! `vkexit repro`: one cell run until it fails, or until its failure rate is shown low.

use super::run::{request_of, CellArgs, Execution, SuiteArgs};
use super::Exit;
use crate::engine::invocation::{Own, Request, Resolved};
use crate::engine::repro::{self, percent};
use crate::support::errors::Result;
use std::ffi::OsString;
use std::io::IsTerminal;

#[derive(clap::Args)]
pub(super) struct ReproArgs {
    #[command(flatten)]
    pub(super) select: CellArgs,
    /// A suite's tests as cases; `--case NAME` picks the one to repro.
    #[command(flatten)]
    pub(super) suites: SuiteArgs,
    #[command(flatten)]
    pub(super) exec: Execution,
    /// Stop, green, once the 95 % upper bound of the failure rate is below this.
    #[arg(long, value_name = "RATE", default_value = "1%", value_parser = crate::engine::repro::parse_rate)]
    pub(super) max_rate: f64,
    /// The most runs; a --max-rate that needs more clean runs is refused.
    #[arg(long, value_name = "N", default_value_t = crate::engine::repro::DEFAULT_MAX_RUNS, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub(super) max_runs: u64,
    /// An external program and its arguments, as the cell.
    #[arg(last = true, value_name = "CMD")]
    pub(super) command: Vec<OsString>,
}

pub(super) fn repro(args: ReproArgs) -> Result<Exit> {
    let settings = args.exec.settings(false, None)?;
    let resolved = Resolved::new(Request {
        own_artifacts: Own::WhenAsked,
        ..request_of(
            None,
            args.suites,
            args.select,
            &args.exec,
            None,
            args.command,
            settings,
        )?
    })?;
    for note in &resolved.suite_notes {
        eprintln!("vkexit: {note}");
    }
    let invocation = resolved.invocation()?;
    if let Ok(cell) = repro::the_cell(&invocation) {
        println!(
            "repro: {} [{}, emulation {}]: until the first failure, or {} runs without one (failure rate below {}), {} at once",
            cell.label(),
            crate::judge::layers_text(&cell.layers),
            cell.emulation.name(),
            repro::clean_runs_needed(args.max_rate),
            percent(args.max_rate),
            invocation.jobs
        );
    }
    let tty = std::io::stderr().is_terminal();
    let tally = repro::repro(
        &resolved,
        invocation,
        args.max_rate,
        args.max_runs,
        |runs| {
            if tty {
                let bound = percent(repro::upper_bound(0, runs));
                eprint!("\r{runs} runs, no failure; failure rate below {bound}   ");
            }
        },
    )?;
    if tty {
        eprintln!();
    }
    print!("{}", repro::tally_text(&tally, args.max_rate));
    Ok(match (tally.interrupted, tally.failures.is_empty()) {
        (true, _) => Exit::Interrupted,
        (false, false) => Exit::Red,
        (false, true) => Exit::Green,
    })
}
