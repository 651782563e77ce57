//! What a cell's runs wrote into the directory they share with other runs: the top-level
//! names that the preload saw the runs' own processes write there (`shared-write` records in
//! each run's timeline), never vkexit's own output, its artifacts and reports, or the files of
//! processes outside the run; and the runs made again because they overlapped a run writing
//! there before vkexit knew it wrote (`run::schedule`).

use crate::plan::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use vkexit_evidence::timeline::{Entry, Event};

/// A cell whose runs wrote into their shared directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    /// The cell's place in the plan.
    pub(crate) cell: usize,
    pub(crate) dir: PathBuf,
    /// The top-level names its runs wrote, sorted.
    pub(crate) names: Vec<String>,
}

/// Runs made again alone in one shared directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MadeAgain {
    pub(crate) dir: PathBuf,
    /// How many runs, and of how many cells.
    pub(crate) runs: usize,
    pub(crate) cells: usize,
}

/// What a plan's runs wrote into their shared directories, gathered as they end.
#[derive(Default)]
pub(crate) struct Watch {
    written: Mutex<BTreeMap<usize, (PathBuf, BTreeSet<String>)>>,
    again: Mutex<BTreeMap<PathBuf, (usize, BTreeSet<usize>)>>,
}

impl Watch {
    /// A run of `cell` (its place `at` in the plan) that counts wrote `names`.
    pub(crate) fn counted(&self, cell: &Cell, at: usize, names: &[String]) {
        let Some(dir) = shared(cell).filter(|_| !names.is_empty()) else {
            return;
        };
        let mut written = lock(&self.written);
        let (_, all) = written
            .entry(at)
            .or_insert_with(|| (dir.to_path_buf(), BTreeSet::new()));
        all.extend(names.iter().cloned());
    }

    /// A run of `cell` is made again.
    pub(crate) fn made_again(&self, cell: &Cell, at: usize) {
        let Some(dir) = shared(cell) else {
            return;
        };
        let mut again = lock(&self.again);
        let (runs, cells) = again.entry(dir.to_path_buf()).or_default();
        *runs += 1;
        cells.insert(at);
    }

    /// What the cells wrote, in the plan's order, and the runs made again, by directory.
    pub(crate) fn finish(self) -> (Vec<Written>, Vec<MadeAgain>) {
        let written = self.written.into_inner().unwrap_or_else(|e| e.into_inner());
        let again = self.again.into_inner().unwrap_or_else(|e| e.into_inner());
        let written = written
            .into_iter()
            .map(|(cell, (dir, names))| Written {
                cell,
                dir,
                names: names.into_iter().collect(),
            })
            .collect();
        let again = again
            .into_iter()
            .map(|(dir, (runs, cells))| MadeAgain {
                dir,
                runs,
                cells: cells.len(),
            })
            .collect();
        (written, again)
    }
}

/// The names a run's processes wrote into the shared directory, from its timeline, sorted.
pub(crate) fn read(timeline: &Path) -> Vec<String> {
    let Ok(file) = std::fs::File::open(timeline) else {
        return Vec::new();
    };
    let mut names = BTreeSet::new();
    let _ = vkexit_evidence::read::records_of(file, Event::SharedWrite, |_, e: Entry| {
        if let Entry::SharedWrite(w) = e {
            names.insert(w.name);
        }
    });
    names.into_iter().collect()
}

/// The directory `cell`'s runs share with other runs.
pub(crate) fn shared(cell: &Cell) -> Option<&Path> {
    cell.workdir.as_deref().filter(|_| cell.shares_workdir())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_written_are_read_from_the_runs_timeline() {
        let dir = tempfile::tempdir().unwrap();
        let timeline = dir.path().join("timeline.jsonl");
        let line = |ev: &str, name: &str| {
            format!(r#"{{"ev":"{ev}","t_ns":1,"pid":2,"tid":2,"thread":"t","name":"{name}"}}"#)
        };
        let text = [
            line("shared-write", "shader.spv"),
            line("preload-loaded", "x"),
            line("shared-write", "out"),
            line("shared-write", "shader.spv"),
        ]
        .join("\n");
        std::fs::write(&timeline, text + "\n").unwrap();
        assert_eq!(read(&timeline), ["out", "shader.spv"]);
        assert!(read(&dir.path().join("missing")).is_empty());
    }
}
