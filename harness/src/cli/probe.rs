//! The hidden probes vkexit runs in a child process: a driver's devices, a loader's version.

use crate::support::errors::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub(super) struct ProbeArgs {
    /// Write the report to this file instead of stdout: a layer may print to stdout too.
    #[arg(long, value_name = "FILE")]
    pub(super) report: Option<PathBuf>,
}

pub(super) fn probe_driver(report_file: Option<&Path>) -> Result<bool> {
    let report = crate::host::probe::probe_here()?;
    let json = serde_json::to_string(&report).expect("report serialises");
    match report_file {
        Some(path) => std::fs::write(path, json).map_err(|e| Error::Output {
            what: format!("cannot write the probe report {}", path.display()),
            source: e,
        })?,
        None => println!("{json}"),
    }
    Ok(true)
}

pub(super) fn probe_loader(path: &Path) -> Result<bool> {
    let version = crate::host::loader::probe_loader_here(path)?;
    println!("{version}");
    Ok(true)
}
