//! `vkexit explore`: the natural exit of every selected cell, each perturbation of it, and the
//! fix where it fails.

use super::run::{request_of, CellArgs, Execution, ReportArgs, SuiteArgs};
use super::Exit;
use crate::engine::explore::{self, Request};
use crate::engine::invocation::{self, Own, Resolved};
use crate::plan::exit_order::Order;
use crate::report::Document;
use crate::support::errors::{Error, Result};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(super) struct ExploreArgs {
    /// A matrix file, as for `run`.
    #[arg(long, value_name = "MATRIX.toml")]
    config: Option<PathBuf>,
    /// A baseline file for the natural exit, as for `run` (repeatable).
    #[arg(long = "baseline", value_name = "EXPECT.toml")]
    baselines: Vec<PathBuf>,
    #[command(flatten)]
    select: CellArgs,
    #[command(flatten)]
    suites: SuiteArgs,
    /// Runs per cell and perturbation [default: 5].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::plan::matrix::MAX_RUNS)))]
    runs: Option<u32>,
    /// `--exit-order` names the exit orders to explore (default: module, linked, link-order);
    /// `--chaos-seed` the thread-timing perturbation's seed (default: 1).
    #[command(flatten)]
    exec: Execution,
    /// Start no perturbation or fix search after this many seconds; what was left out is said.
    #[arg(long, value_name = "SECS", value_parser = crate::plan::matrix::parse_timeout)]
    budget: Option<f64>,
    /// Write the exploration file (schema vkexit.explore/1).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The Markdown summary and the HTML report: a row a cell, a column a perturbation, then
    /// what to act on; JUnit: a test suite a cell, a test case a perturbation.
    #[command(flatten)]
    reports: ReportArgs,
    /// Explore only shard K of N (1 ≤ K ≤ N) of the natural cells, each with all its
    /// perturbations; `vkexit merge` joins the shards' exploration files.
    #[arg(long, value_name = "K/N")]
    shard: Option<crate::plan::shard::Shard>,
    /// Exit 0 when no run started (every cell skipped, an empty shard); without it, that
    /// is an error (exit 2).
    #[arg(long)]
    allow_no_runs: bool,
    /// An external program and its arguments, explored as one case.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

pub(super) fn explore_command(args: ExploreArgs) -> Result<Exit> {
    let mut settings = args.exec.settings(true, args.shard)?;
    let orders = match settings.exit_order.take() {
        Some(asked) if asked.orders().len() < asked.0.len() => {
            return Err(crate::support::errors::Error::BadFlag {
                flag: "--exit-order",
                value: Some(asked.to_string()),
                why: "explore perturbs with whole orders; a run:FIRST:before:THEN step replays \
                      a fix with `vkexit run --exit-order`"
                    .into(),
            });
        }
        Some(asked) => asked.orders(),
        None => Order::DEPLOYMENTS.to_vec(),
    };
    let chaos_seed = settings.chaos_seed.take().unwrap_or(1);
    if settings.slow_teardown {
        return Err(crate::support::errors::Error::BadFlag {
            flag: "--slow-teardown",
            value: None,
            why: "explore runs the slow teardown as one of its perturbations (slow-teardown); \
                  `vkexit run --slow-teardown` replays it"
                .into(),
        });
    }
    let resolved = Resolved::new(invocation::Request {
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
    let request = Request {
        matrix: &resolved.matrix,
        baseline: &resolved.baseline,
        settings: resolved.settings.clone(),
        orders,
        chaos_seed,
        budget: args.budget.map(std::time::Duration::from_secs_f64),
    };
    let explore::Explored {
        exploration,
        no_runs,
    } = explore::explore(&request, &mut [])?;
    print!("{}", crate::report::explore::table(&exploration));
    resolved.outputs.write_document(
        Document::Exploration(&exploration),
        Some(&request.settings.artifacts),
    )?;
    if exploration.interrupted {
        return Ok(Exit::Interrupted);
    }
    if let (Some(why), false) = (no_runs, resolved.allow_no_runs) {
        return Err(Error::NoRuns { why });
    }
    Ok(Exit::from(crate::judge::explore::green(&exploration)))
}
