//! `vkexit baseline update`: a baseline file brought up to date with a results file.

use super::Exit;
use crate::judge::BaselineFile;
use crate::support::errors::{Error, Result};
use crate::support::output::{check_apart, Target};
use clap::Subcommand;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub(super) enum BaselineCommand {
    /// Bring a baseline file up to date with a results file.
    Update {
        /// The results file (schema vkexit.results/1) of the job.
        #[arg(long, value_name = "FILE")]
        results: PathBuf,
        /// The baseline file to update (created when missing).
        #[arg(long, value_name = "FILE")]
        baseline: PathBuf,
        /// Remove the entries that match no cell of the results.
        #[arg(long)]
        prune: bool,
    },
}

pub(super) fn baseline_update(results: &Path, baseline: &Path, prune: bool) -> Result<Exit> {
    let input = crate::report::merge::read(results)?;
    // Checked before anything is changed: a read-only baseline is refused, not replaced;
    // a symlink is written through.
    let target = Target::check(baseline, "the baseline file")?;
    check_apart(&[("--baseline", &target)], &[("--results", results)])?;
    if input.interrupted {
        return Err(Error::bad_input(
            results,
            "the run was interrupted, so its cells are not all there; run the job again",
        ));
    }
    let old = match baseline.exists() {
        true => crate::engine::baselines::read_file(baseline)?,
        false => BaselineFile {
            path: baseline.to_path_buf(),
            ..BaselineFile::default()
        },
    };
    let (new, changes) = crate::judge::update::update(&old, &input, prune);
    // An existing file keeps its comments and layout; a new one is written whole.
    let text = match std::fs::read_to_string(baseline) {
        Ok(old_text) => crate::judge::update::render_over(&old_text, &old, &new),
        Err(_) => crate::judge::update::render(&new),
    };
    target
        .write(text.as_bytes())
        .map_err(|e| Error::io("cannot write the baseline file", baseline, e))?;
    for line in &changes.removed {
        println!("removed: {line}");
    }
    for line in &changes.added {
        println!("added:   {line}");
    }
    let todo = new
        .entries
        .iter()
        .filter(|e| e.reason == crate::judge::update::TODO_REASON)
        .count();
    let counted = crate::support::util::counted;
    println!(
        "{}: {} kept, {} added, {} removed; {} (\"{}\")",
        baseline.display(),
        counted(changes.kept as u64, "entry", "entries"),
        changes.added.len(),
        changes.removed.len(),
        match todo {
            1 => "1 needs a reason".to_string(),
            n => format!("{n} need a reason"),
        },
        crate::judge::update::TODO_REASON
    );
    Ok(Exit::Green)
}
