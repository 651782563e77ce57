//! vkexit's fixed cost per run on `/bin/true`, in CPU time, and what it is made of: what the
//! bench names when the 0.3 ms target is not met. CPU time hardly depends on the load, so
//! these figures hold on a busy machine too, where the wall-clock ones do not.

use super::memory;
use crate::run::cost::{self, Parts};
use crate::support::errors::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// CPU milliseconds per run of `/bin/true`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Breakdown {
    /// A plain loop's: the loop's own and the process's.
    pub bare: f64,
    /// Everything the diagnostics preload costs: loading it (and `libgcc_s`) into the run,
    /// its constructor, its records, and vkexit reading and removing its two files.
    pub preload: f64,
    /// What the run's process, without the preload, costs more than the plain loop's.
    pub child: f64,
    /// vkexit's own CPU beyond the plain loop's own.
    pub supervisor: f64,
    /// The supervisor's parts, each measured on its own.
    pub parts: Parts,
}

impl Breakdown {
    /// The whole fixed cost: vkexit and its run beyond a plain loop and its run.
    pub fn total(&self) -> f64 {
        self.preload + self.child + self.supervisor
    }

    /// The largest part, named, as what bounds the fixed cost.
    pub fn largest(&self) -> (&'static str, f64) {
        let p = &self.parts;
        let rest = self.supervisor
            - (p.spawn_and_supervise + p.cgroup + p.reaper + p.run_directory + p.evidence);
        [
            ("the diagnostics preload", self.preload),
            ("the run's process setup", self.child),
            ("spawning and supervising", p.spawn_and_supervise),
            ("the run's cgroup", p.cgroup),
            ("the orphan sweep", p.reaper),
            ("emptying the run directory", p.run_directory),
            ("reading the evidence", p.evidence),
            ("the rest of vkexit's loop", rest),
        ]
        .into_iter()
        .fold(("nothing", f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
    }
}

/// Measures `runs` runs of `/bin/true` each way, in `work`.
pub fn measure(work: &Path, driver: &str, runs: u32) -> Result<Breakdown> {
    let runs = runs.max(2);
    let (bare_self, bare_child) = bare(runs)?;
    let with = per_run(work, driver, runs, true)?;
    let without = per_run(work, driver, runs, false)?;
    let parts = cost::parts(&work.join("parts"), runs)
        .map_err(|e| Error::io("cannot measure vkexit's parts", work, e))?;
    Ok(Breakdown {
        bare: bare_self + bare_child,
        preload: (with.0 + with.1) - (without.0 + without.1),
        child: without.1 - bare_child,
        supervisor: without.0 - bare_self,
        parts,
    })
}

/// This process's CPU and its children's, per run of a plain loop of `/bin/true`.
fn bare(runs: u32) -> Result<(f64, f64)> {
    let (me, children) = (cost::self_cpu_ms(), cost::children_cpu_ms());
    memory::true_loop(runs)?;
    let n = f64::from(runs);
    Ok((
        (cost::self_cpu_ms() - me) / n,
        (cost::children_cpu_ms() - children) / n,
    ))
}

/// vkexit's own CPU and its runs', per run of `vkexit run --no-validation -j 1 -- /bin/true`:
/// `runs` runs less one, over `runs − 1`, so that start-up and tear-down are left out.
fn per_run(work: &Path, driver: &str, runs: u32, diagnostics: bool) -> Result<(f64, f64)> {
    let report = |runs| {
        let name = format!("fixed-{runs}-{diagnostics}");
        memory::child_report(work, &name, driver, runs, 1, diagnostics)
    };
    let (many, one) = (report(runs)?, report(1)?);
    let n = f64::from(runs - 1);
    Ok((
        (many.self_cpu_ms - one.self_cpu_ms) / n,
        (many.children_cpu_ms - one.children_cpu_ms) / n,
    ))
}
