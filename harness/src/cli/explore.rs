//! `vkexit explore`: the natural exit of every selected cell, each perturbation of it, and the
//! fix where it fails.

use super::run::{matrix_of, CellArgs, Execution, SuiteArgs};
use super::Exit;
use crate::engine::explore::{self, Request};
use crate::judge::Baseline;
use crate::plan::exit_order::Order;
use crate::run;
use crate::support::errors::{Error, Result};
use crate::support::lock::ArtifactsLock;
use crate::support::output::{write_atomically, Target};
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
    /// Write a Markdown summary: a row a cell, a column a perturbation, then what to act on.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// An external program and its arguments, explored as one case.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

pub(super) fn explore_command(args: ExploreArgs) -> Result<Exit> {
    run::prepare_process()?;
    let (matrix, _) = matrix_of(
        args.config.as_deref(),
        args.suites,
        args.select,
        &args.exec,
        args.runs,
        args.command,
    )?;
    let baseline = Baseline::read(&args.baselines)?;
    let json = match &args.json {
        Some(path) => Some(Target::check(path, "the exploration file")?),
        None => None,
    };
    let markdown = match &args.markdown {
        Some(path) => Some(Target::check(path, "the Markdown summary")?),
        None => None,
    };
    let outputs: Vec<(&str, &Target)> =
        [("--json", json.as_ref()), ("--markdown", markdown.as_ref())]
            .into_iter()
            .filter_map(|(flag, t)| t.map(|t| (flag, t)))
            .collect();
    let mut inputs: Vec<(&str, &std::path::Path)> = args
        .baselines
        .iter()
        .map(|b| ("--baseline", b.as_path()))
        .collect();
    inputs.extend(args.config.iter().map(|c| ("--config", c.as_path())));
    crate::support::output::check_apart(&outputs, &inputs)?;
    let _owner = ArtifactsLock::take(&args.exec.artifacts)?;
    let mut settings = args.exec.settings(true, None)?;
    let orders = match settings.exit_order.take() {
        Some(asked) => asked.0,
        None => Order::DEPLOYMENTS.to_vec(),
    };
    let chaos_seed = settings.chaos_seed.take().unwrap_or(1);
    let request = Request {
        matrix: &matrix,
        baseline: &baseline,
        settings,
        orders,
        chaos_seed,
        budget: args.budget.map(std::time::Duration::from_secs_f64),
    };
    let exploration = explore::explore(&request, &mut [])?;
    print!("{}", crate::report::explore::table(&exploration));
    let json_text = || {
        let text = serde_json::to_string_pretty(&exploration).expect("an exploration is JSON");
        format!("{text}\n")
    };
    let files = [
        (json, json_text()),
        (markdown, crate::report::explore::markdown(&exploration)),
    ];
    for (target, text) in files {
        let Some(target) = target else { continue };
        write_atomically(&target.real, text.as_bytes()).map_err(|e| Error::Output {
            what: format!("cannot write {}", target.given.display()),
            source: e,
        })?;
    }
    if exploration.interrupted {
        return Ok(Exit::Interrupted);
    }
    Ok(Exit::from(crate::judge::explore::green(&exploration)))
}
