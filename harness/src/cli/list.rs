//! `vkexit list`: the built-in cases, refrt policies and drivers, each driver with the device
//! it shows here or why it is not run.

use crate::host::{drivers, probe};
use crate::plan;
use crate::support::errors::Result;
use std::io::Write;

pub(super) fn list() -> Result<()> {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "cases:");
    for case in plan::CASES {
        let _ = writeln!(out, "  {:30} {}", case.name, case.description);
    }
    let _ = writeln!(out, "runtimes:");
    for policy in plan::POLICIES {
        let _ = writeln!(out, "  refrt:{policy}");
    }
    let _ = writeln!(out, "drivers:");
    let (found, problems) = drivers::discover();
    let width = found
        .iter()
        .map(|d| d.manifest.as_os_str().len())
        .max()
        .unwrap_or(0);
    let cwd = std::env::temp_dir();
    for d in found {
        // The same probe `run` makes: only a driver that shows a device here is run.
        let here = match probe::probe_driver(&d, &[], &cwd) {
            Ok(r) => match r.devices.first() {
                Some(device) => format!("device: {}", device.name),
                None => "no device here (not run)".to_string(),
            },
            Err(e) => format!("could not be probed (not run): {e}"),
        };
        let _ = writeln!(
            out,
            "  {:10} {:width$}  {here}",
            d.name,
            d.manifest.display().to_string()
        );
    }
    for (manifest, problem) in problems {
        let _ = writeln!(out, "  (ignored {}: {problem})", manifest.display());
    }
    Ok(())
}
