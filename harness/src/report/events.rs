//! What a gate tells its reporters, as it happens, and the reporters `vkexit run` has: the
//! progress line, the terminal table, and the report files. Each consumes the same stream.

use super::{print_table, summary_line, Checked};
use crate::judge::BUILTIN_SOURCE;
use crate::plan::Cell;
use crate::support::errors::Result;
use crate::support::util::counted;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use vkexit_evidence::results::{CellResult, Results};

/// One thing a gate did.
#[derive(Debug)]
pub(crate) enum GateEvent<'e> {
    /// Facts to show before the runs (drivers left out, the shard, a pinned layer).
    Notes(&'e [String]),
    /// The gate is about to make its runs: this many cells will run, `runs` times each.
    Started { cells: usize, runs: u32 },
    /// A run of `cell` is complete: judged, allow-listed, kept or removed.
    RunFinished { cell: &'e Cell },
    /// Every cell judged, in the matrix's order.
    Finished(&'e Results),
}

/// Something that shows or keeps what a gate did.
pub(crate) trait Reporter {
    /// Takes one event; an error stops the gate's reporting and is the command's error.
    fn report(&mut self, event: &GateEvent) -> Result<()>;
}

/// `[3/20] clean-exit × refrt:guarded on lavapipe done` on stderr, as each cell's last run
/// finishes; the notes first.
#[derive(Default)]
pub(crate) struct Progress {
    cells: usize,
    runs: u32,
    done_cells: usize,
    done_runs: HashMap<String, u32>,
}

impl Reporter for Progress {
    fn report(&mut self, event: &GateEvent) -> Result<()> {
        match event {
            GateEvent::Notes(notes) => {
                for note in *notes {
                    eprintln!("vkexit: {note}");
                }
            }
            GateEvent::Started { cells, runs } => (self.cells, self.runs) = (*cells, *runs),
            GateEvent::RunFinished { cell, .. } => {
                let done = self.done_runs.entry(cell.slug()).or_insert(0);
                *done += 1;
                if *done == self.runs {
                    self.done_cells += 1;
                    eprintln!("[{}/{}] {} done", self.done_cells, self.cells, cell.label());
                }
            }
            GateEvent::Finished(_) => {}
        }
        Ok(())
    }
}

/// The terminal table and the summary line on stdout, and how many cells the baseline files
/// judged when some were given.
pub(crate) struct Table {
    pub(crate) baselines_given: bool,
}

impl Reporter for Table {
    fn report(&mut self, event: &GateEvent) -> Result<()> {
        let GateEvent::Finished(results) = event else {
            return Ok(());
        };
        let cells = &results.cells;
        let mut out = std::io::stdout().lock();
        let _ = print_table(&mut out, cells);
        let _ = writeln!(out, "{}", summary_line(cells));
        if self.baselines_given {
            let (from_files, builtin) = judged_by(cells);
            let _ = writeln!(
                out,
                "expectations: {} judged by the baseline files, {builtin} by the built-in baseline",
                counted(from_files as u64, "cell", "cells")
            );
        }
        Ok(())
    }
}

/// Counts the cells judged by a baseline file and by the built-in baseline.
fn judged_by(cells: &[CellResult]) -> (usize, usize) {
    let builtin = cells
        .iter()
        .filter(|c| c.expectation.as_deref() == Some(BUILTIN_SOURCE))
        .count();
    let file = cells
        .iter()
        .filter(|c| {
            c.expectation
                .as_deref()
                .is_some_and(|e| e != BUILTIN_SOURCE)
        })
        .count();
    (file, builtin)
}

/// The report files asked for (results file, JUnit, Markdown, HTML), written once every
/// cell is judged; one that cannot be written where it goes is kept in `keep_in`.
pub(crate) struct Files {
    pub(crate) outputs: Checked,
    pub(crate) keep_in: Option<PathBuf>,
}

impl Reporter for Files {
    fn report(&mut self, event: &GateEvent) -> Result<()> {
        match event {
            GateEvent::Finished(results) => self.outputs.write(results, self.keep_in.as_deref()),
            _ => Ok(()),
        }
    }
}
