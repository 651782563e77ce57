//! The directory a run is made in. Each worker reuses one, under
//! `ARTIFACTS/.slots/N`, instead of making and removing a directory tree per
//! run: on a file system mounted with `discard` (common on cloud VMs) every
//! removed directory waits for the device, 2–3 ms a run. A passing run's
//! slot is emptied of what the run left; a run that is kept is renamed to
//! its place under its cell, and the worker makes a new slot.
//!
//! What a run sees is what it saw before: a private directory (0700) holding
//! an empty `home/` and `xdg-runtime/` and the validation settings file,
//! whose log lives next to it. The settings file is written once per slot.
//! An empty crash file an earlier run's preload made stays: it is what the
//! preload would make, and reads as no crash.

use super::spawn::Prepared;
use super::unix::CommandSpec;
use crate::host::validation;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub const SLOTS_DIR: &str = ".slots";

/// What a run directory holds before the run; everything else is the run's.
const KEPT: [&str; 3] = [
    "home",
    "xdg-runtime",
    vkexit_evidence::files::LAYER_SETTINGS,
];

pub struct Slot {
    worker: usize,
    /// Bumped when a kept run could not be moved out: it stays where it is
    /// and the worker takes a slot of a new name.
    moves_failed: u32,
    dir: PathBuf,
    /// Set up for a run with or without validation; `None` when it must be
    /// made again.
    ready: Option<bool>,
    /// The command of the cell last run here, and its directory: the runs of
    /// one cell in one slot differ only in their token.
    command: Option<Command>,
    /// The cgroup of the worker's last run, for its next.
    cgroups: super::cgroup::Reuse,
}

struct Command {
    cell: usize,
    dir: PathBuf,
    spec: CommandSpec,
    prepared: std::io::Result<Prepared>,
}

impl Slot {
    pub fn new(artifacts: &Path, worker: usize) -> Self {
        Slot {
            worker,
            moves_failed: 0,
            dir: artifacts.join(SLOTS_DIR).join(worker.to_string()),
            ready: None,
            command: None,
            cgroups: super::cgroup::Reuse::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The command of a run of `cell` here: `make` gives it for the slot's
    /// directory, once per cell; and the cgroup the worker's last run left.
    pub fn command(
        &mut self,
        cell: usize,
        make: impl FnOnce(&Path) -> CommandSpec,
    ) -> (
        &CommandSpec,
        Result<&Prepared, &std::io::Error>,
        &mut super::cgroup::Reuse,
    ) {
        let fresh = self
            .command
            .as_ref()
            .is_some_and(|c| c.cell == cell && c.dir == self.dir);
        if !fresh {
            let spec = make(&self.dir);
            let prepared = super::unix::prepare(&spec);
            self.command = Some(Command {
                cell,
                dir: self.dir.clone(),
                spec,
                prepared,
            });
        }
        let c = self.command.as_ref().expect("made above");
        (&c.spec, c.prepared.as_ref(), &mut self.cgroups)
    }

    /// The command [`Slot::command`] gave last.
    pub fn last_command(&self) -> Option<&CommandSpec> {
        self.command.as_ref().map(|c| &c.spec)
    }

    /// Makes the slot ready for a run: made once, reused after.
    pub fn prepare(&mut self, validation: bool) -> std::io::Result<()> {
        if self.ready == Some(validation) {
            return Ok(());
        }
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)?;
        }
        private_dir(&self.dir, true)?;
        private_dir(&self.dir.join("home"), false)?;
        private_dir(&self.dir.join("xdg-runtime"), false)?;
        if validation {
            let text =
                validation::settings_text(&self.dir.join(vkexit_evidence::files::VALIDATION_LOG));
            std::fs::write(self.dir.join(vkexit_evidence::files::LAYER_SETTINGS), text)?;
        }
        self.ready = Some(validation);
        Ok(())
    }

    /// Moves what the run left to `to` (its place under its cell); the next
    /// run gets a new slot.
    pub fn keep_as(&mut self, to: &Path) -> std::io::Result<()> {
        self.ready = None;
        let from = &self.dir;
        let moved = (|| {
            if let Some(parent) = to.parent() {
                private_dir(parent, true)?;
            }
            if to.exists() {
                std::fs::remove_dir_all(to)?;
            }
            std::fs::rename(from, to)
        })();
        if moved.is_err() {
            self.moves_failed += 1;
            let name = format!("{}.{}", self.worker, self.moves_failed);
            self.dir = self.dir.with_file_name(name);
        }
        moved
    }

    /// Removes what the run left, keeping what the next run needs. A slot
    /// that cannot be emptied is made again from nothing.
    pub fn clean(&mut self) {
        if self.empty_out().is_err() {
            self.ready = None;
        }
    }

    fn empty_out(&self) -> std::io::Result<()> {
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let path = entry.path();
            let kept = KEPT.iter().any(|k| name == *k);
            let is_dir = entry.file_type()?.is_dir();
            // The crash report's file, opened by every run's preload and written only when a
            // process crashes: kept while empty, the next run opens it instead of making it.
            let empty_crash_file = || {
                name == vkexit_evidence::files::CRASH.name
                    && entry.metadata().is_ok_and(|m| m.len() == 0)
            };
            match (kept, is_dir) {
                (false, false) if empty_crash_file() => {}
                (true, true) => {
                    if std::fs::read_dir(&path)?.next().is_some() {
                        std::fs::remove_dir_all(&path)?;
                        private_dir(&path, false)?;
                    }
                }
                (true, false) => {}
                (false, true) => std::fs::remove_dir_all(&path)?,
                (false, false) => std::fs::remove_file(&path)?,
            }
        }
        Ok(())
    }
}

/// Removes every slot, when all runs are done.
pub fn remove_all(artifacts: &Path) {
    let _ = std::fs::remove_dir_all(artifacts.join(SLOTS_DIR));
}

/// `path` with `from` at its start replaced by `to`: the command of a kept
/// run names the directory it was kept in.
pub fn moved(value: &str, from: &Path, to: &Path) -> String {
    let from = from.display().to_string();
    match value.strip_prefix(&from) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            format!("{}{rest}", to.display())
        }
        _ => value.to_string(),
    }
}

fn private_dir(path: &Path, recursive: bool) -> std::io::Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(recursive)
        .mode(0o700)
        .create(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_reused_emptied_of_what_a_run_left() {
        let root = tempfile::tempdir().unwrap();
        let mut slot = Slot::new(root.path(), 0);
        slot.prepare(true).unwrap();
        let dir = slot.dir().to_path_buf();
        let settings = dir.join(vkexit_evidence::files::LAYER_SETTINGS);
        assert!(std::fs::read_to_string(&settings)
            .unwrap()
            .contains("validation.log"));
        std::fs::write(dir.join(vkexit_evidence::files::VALIDATION_LOG), "x").unwrap();
        std::fs::create_dir_all(dir.join("home/.cache/mesa")).unwrap();
        std::fs::write(dir.join("home/.cache/mesa/x"), "x").unwrap();
        std::fs::create_dir(dir.join("left")).unwrap();
        std::fs::write(dir.join(vkexit_evidence::files::CRASH.name), "").unwrap();
        slot.clean();
        slot.prepare(true).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let empty_crash_file = vkexit_evidence::files::CRASH.name;
        assert_eq!(
            names,
            [
                empty_crash_file,
                "home",
                vkexit_evidence::files::LAYER_SETTINGS,
                "xdg-runtime"
            ]
        );
        assert_eq!(std::fs::read_dir(dir.join("home")).unwrap().count(), 0);
        // One that holds a crash goes.
        std::fs::write(dir.join(vkexit_evidence::files::CRASH.name), "{}\n").unwrap();
        slot.clean();
        assert!(!dir.join(vkexit_evidence::files::CRASH.name).exists());
    }

    #[test]
    fn a_kept_run_moves_under_its_cell_and_the_next_gets_a_new_slot() {
        let root = tempfile::tempdir().unwrap();
        let mut slot = Slot::new(root.path(), 1);
        slot.prepare(false).unwrap();
        std::fs::write(slot.dir().join("crash.jsonl"), "{}").unwrap();
        let to = root.path().join("cell/run-3");
        slot.keep_as(&to).unwrap();
        assert!(to.join("crash.jsonl").exists());
        slot.prepare(false).unwrap();
        assert!(slot.dir().join("home").is_dir());
        assert!(!slot.dir().join("crash.jsonl").exists());
    }

    #[test]
    fn paths_in_the_slot_are_moved_with_it() {
        let (from, to) = (Path::new("/a/.slots/0"), Path::new("/a/c/run-2"));
        assert_eq!(moved("/a/.slots/0/home", from, to), "/a/c/run-2/home");
        assert_eq!(moved("/a/.slots/0", from, to), "/a/c/run-2");
        assert_eq!(moved("/a/.slots/01", from, to), "/a/.slots/01");
        assert_eq!(
            moved("VK_LAYER_KHRONOS_validation", from, to),
            "VK_LAYER_KHRONOS_validation"
        );
    }
}
