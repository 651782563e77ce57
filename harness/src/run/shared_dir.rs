//! What a cell's runs wrote into the directory they share: the top level of that directory
//! (names, sizes, modification times; nothing below it, however large the tree) listed before
//! the cell's first run and after its last, compared.

use crate::plan::Cell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// How many entries are read: a listing stops there, cheap whatever the directory holds.
const MAX_ENTRIES: usize = 10_000;

/// The top level of a directory: each name with its size and modification time.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Listing(BTreeMap<String, (u64, Option<SystemTime>)>);

impl Listing {
    /// The top level of `dir`, leaving out `skip` (vkexit's own artifacts, when they lie there).
    pub(crate) fn of(dir: &Path, skip: &Path) -> Listing {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Listing::default();
        };
        let entries = entries
            .flatten()
            .take(MAX_ENTRIES)
            .filter(|e| !skip.starts_with(e.path()))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                let name = e.file_name().to_string_lossy().into_owned();
                Some((name, (meta.len(), meta.modified().ok())))
            });
        Listing(entries.collect())
    }

    /// The names that appeared or changed since `before`, sorted.
    pub(crate) fn written_since(&self, before: &Listing) -> Vec<String> {
        self.0
            .iter()
            .filter(|(name, now)| before.0.get(*name) != Some(*now))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// A cell whose runs wrote into their shared directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    /// The cell's place in the plan.
    pub(crate) cell: usize,
    pub(crate) dir: PathBuf,
    /// The top-level names that appeared or changed, sorted.
    pub(crate) names: Vec<String>,
}

/// The listings of the cells whose runs are under way in a shared directory, and what the
/// cells that are done wrote there.
#[derive(Default)]
pub(crate) struct Watch {
    before: Mutex<HashMap<usize, Listing>>,
    written: Mutex<Vec<Written>>,
}

impl Watch {
    /// Before run `index` of `cell` (its first lists the directory). A cell's runs in a shared
    /// directory run one at a time (`schedule`), in order: the first and last are its ends.
    pub(crate) fn before(&self, cell: &Cell, at: usize, index: u32, artifacts: &Path) {
        if let (Some(dir), 0) = (shared(cell), index) {
            lock(&self.before).insert(at, Listing::of(dir, artifacts));
        }
    }

    /// After run `index` of `runs` (the last compares).
    pub(crate) fn after(&self, cell: &Cell, at: usize, index: u32, runs: u32, artifacts: &Path) {
        let Some(dir) = shared(cell).filter(|_| index + 1 == runs) else {
            return;
        };
        let Some(before) = lock(&self.before).remove(&at) else {
            return;
        };
        let names = Listing::of(dir, artifacts).written_since(&before);
        if !names.is_empty() {
            lock(&self.written).push(Written {
                cell: at,
                dir: dir.to_path_buf(),
                names,
            });
        }
    }

    /// What the cells wrote, in the plan's order.
    pub(crate) fn written(self) -> Vec<Written> {
        let mut written = self.written.into_inner().unwrap_or_else(|e| e.into_inner());
        written.sort_by_key(|w| w.cell);
        written
    }
}

fn shared(cell: &Cell) -> Option<&Path> {
    cell.workdir.as_deref().filter(|_| cell.shares_workdir())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_changed_names_are_written_and_artifacts_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("same"), "x").unwrap();
        std::fs::write(d.join("grows"), "x").unwrap();
        let artifacts = d.join("vkexit-artifacts/cell");
        let before = Listing::of(d, &artifacts);
        std::fs::write(d.join("grows"), "xx").unwrap();
        std::fs::write(d.join("shader.spv"), "x").unwrap();
        std::fs::create_dir_all(&artifacts).unwrap();
        let after = Listing::of(d, &artifacts);
        assert_eq!(after.written_since(&before), ["grows", "shader.spv"]);
        assert!(after.written_since(&after).is_empty());
    }
}
