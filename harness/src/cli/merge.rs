//! `vkexit merge`: results files joined, judged again and reported.

use super::run::ReportArgs;
use super::Exit;
use crate::judge::Baseline;
use crate::report;
use crate::support::errors::{Error, Result};
use std::path::{Path, PathBuf};

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
    /// Exit 0 when the files hold no run at all (every cell skipped); without it, that is
    /// an error (exit 2).
    #[arg(long)]
    pub(super) allow_no_runs: bool,
}

pub(super) fn merge(args: MergeArgs) -> Result<Exit> {
    let inputs = crate::report::merge::read_all(&args.files)?;
    let baseline = Baseline::read(&args.baselines)?;
    let mut read: Vec<(&str, &Path)> = args.files.iter().map(|f| ("FILES", f.as_path())).collect();
    read.extend(args.baselines.iter().map(|b| ("--baseline", b.as_path())));
    let outputs = args.reports.outputs(Some(args.json)).check(&read)?;
    let mut results = crate::report::merge::merge(inputs);
    if !args.baselines.is_empty() {
        crate::judge::rejudge(&mut results, &baseline);
    }
    let stdout = std::io::stdout();
    let width = crate::support::terminal::width(&stdout);
    let _ = report::terminal::write(&mut stdout.lock(), &results.cells, width);
    outputs.write(&results, None)?;
    if results.interrupted {
        eprintln!("vkexit: an input was interrupted: its matrix is incomplete, so the gate is red");
    }
    let runs = results
        .cells
        .iter()
        .fold(0u64, |n, c| n.saturating_add(c.runs));
    if runs == 0 && !results.interrupted && !args.allow_no_runs {
        return Err(Error::NoRuns {
            why: match results.cells.len() {
                1 => "the one cell of the files given holds no run".to_string(),
                n => format!("the {n} cells of the files given hold no run"),
            },
        });
    }
    Ok(Exit::from(results.is_green()))
}
