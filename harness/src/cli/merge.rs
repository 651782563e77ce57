//! `vkexit merge`: results files joined, judged again and reported; or the shards of one
//! exploration joined and reported.

use super::run::ReportArgs;
use super::Exit;
use crate::report;
use crate::support::errors::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub(super) struct MergeArgs {
    /// Results files (schema vkexit.results/1), or the exploration files of one exploration's
    /// shards (schema vkexit.explore/1).
    #[arg(required = true, value_name = "FILES")]
    pub(super) files: Vec<PathBuf>,
    /// Write the merged results file (or exploration file).
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
    let schema = crate::report::merge::schema_of(&args.files[0])?;
    if schema.as_deref() == Some(vkexit_evidence::explore::SCHEMA) {
        return merge_explorations(args);
    }
    let inputs = crate::report::merge::read_all(&args.files)?;
    let baseline = crate::engine::baselines::read(&args.baselines)?;
    let mut read: Vec<(&str, &Path)> = args.files.iter().map(|f| ("FILES", f.as_path())).collect();
    read.extend(args.baselines.iter().map(|b| ("--baseline", b.as_path())));
    let outputs = args.reports.outputs(Some(args.json)).check(&read)?;
    let mut results = crate::report::merge::merge(inputs);
    if !args.baselines.is_empty() {
        crate::judge::rejudge(&mut results, &baseline);
    }
    // The reporters of `run`, told that every cell is judged: the table with its line of
    // expectations, the report files.
    let mut table = report::events::Table {
        baselines_given: !args.baselines.is_empty(),
    };
    let mut files = report::events::Files {
        outputs,
        keep_in: None,
    };
    report::events::tell(
        &mut [&mut table, &mut files],
        &report::events::GateEvent::Finished(&results),
    )?;
    if results.interrupted {
        eprintln!("vkexit: an input was interrupted: its matrix is incomplete, so the gate is red");
    }
    if let (Some(why), false) = (crate::judge::no_runs(&results), args.allow_no_runs) {
        return Err(Error::NoRuns { why });
    }
    Ok(Exit::from(results.is_green()))
}

/// The shards of one exploration joined: the table and the reports of the whole, its gate.
fn merge_explorations(args: MergeArgs) -> Result<Exit> {
    if let Some(b) = args.baselines.first() {
        return Err(Error::bad_input(
            b,
            "--baseline: an exploration's natural cells were judged when explored; its shards are joined as they are",
        ));
    }
    let exploration = crate::report::merge::explorations(&args.files)?;
    let read: Vec<(&str, &Path)> = args.files.iter().map(|f| ("FILES", f.as_path())).collect();
    let outputs = args.reports.outputs(Some(args.json)).check(&read)?;
    print!("{}", report::explore::table(&exploration));
    outputs.write_document(report::Document::Exploration(&exploration), None)?;
    if exploration.interrupted {
        eprintln!(
            "vkexit: an input was interrupted: its exploration is incomplete, so the gate is red"
        );
    }
    let no_runs = crate::judge::no_runs_explored(&exploration);
    if let (Some(why), false) = (no_runs, args.allow_no_runs) {
        return Err(Error::NoRuns { why });
    }
    Ok(Exit::from(crate::judge::explore::green(&exploration)))
}
