//! `vkexit merge`: results files joined, judged again and reported.

use super::run::ReportArgs;
use super::Outcome;
use crate::judge::Baseline;
use crate::report;
use crate::support::errors::Result;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(super) struct MergeArgs {
    /// Results files (schema vkexit.results/1).
    #[arg(required = true, value_name = "FILES")]
    pub(super) files: Vec<PathBuf>,
    /// Write the merged results file.
    #[arg(long, value_name = "FILE")]
    pub(super) json: PathBuf,
    /// Judge the merged cells against a baseline file (repeatable), as `run --baseline` does;
    /// without one, against the built-in baseline.
    #[arg(long = "baseline", value_name = "EXPECT.toml")]
    pub(super) baselines: Vec<PathBuf>,
    #[command(flatten)]
    pub(super) reports: ReportArgs,
}

pub(super) fn merge(args: MergeArgs) -> Result<Outcome> {
    let outputs = args.reports.outputs(Some(args.json));
    let inputs = crate::report::merge::read_all(&args.files)?;
    let baseline = Baseline::read(&args.baselines)?;
    outputs.check()?;
    let mut results = crate::report::merge::merge(inputs);
    if !args.baselines.is_empty() {
        crate::judge::rejudge(&mut results, &baseline);
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
