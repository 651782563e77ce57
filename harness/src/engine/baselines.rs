//! The baseline files a command is given (`--baseline`), read: judge/ parses their text and
//! reads no file, as it reads no run's directory.

use crate::judge::{Baseline, BaselineFile};
use crate::support::errors::Result;
use crate::support::toml_file::TomlFile;
use std::path::{Path, PathBuf};

/// What a baseline file's read error says it was for.
const READING: &str = "cannot read the baseline file";

/// Every baseline file of `paths`, in order: the first entry that matches a cell judges it.
pub(crate) fn read(paths: &[PathBuf]) -> Result<Baseline> {
    let files = paths
        .iter()
        .map(|p| read_file(p))
        .collect::<Result<Vec<_>>>()?;
    Ok(Baseline::of(files))
}

/// One baseline file, checked.
pub(crate) fn read_file(path: &Path) -> Result<BaselineFile> {
    BaselineFile::parse(&TomlFile::read(path, READING)?)
}
