//! `vkexit list`: the built-in cases, refrt policies and drivers.

use crate::host::drivers;
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
    for d in found {
        let _ = writeln!(out, "  {:10} {}", d.name, d.manifest.display());
    }
    for (manifest, problem) in problems {
        let _ = writeln!(out, "  (ignored {}: {problem})", manifest.display());
    }
    Ok(())
}
