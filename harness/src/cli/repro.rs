//! `vkexit repro`: one cell run until it fails, or until its failure rate is shown low.

use super::run::{prepare_to_run, Execution, Selection};
use super::{cores, Outcome};
use crate::engine::gate;
use crate::plan::matrix::Matrix;
use crate::support::errors::Result;
use crate::{plan, run};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::time::Duration;

#[derive(clap::Args)]
pub(super) struct ReproArgs {
    #[command(flatten)]
    pub(super) select: Selection,
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

pub(super) fn repro(args: ReproArgs) -> Result<Outcome> {
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
pub(super) fn repro_without_layer(
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
