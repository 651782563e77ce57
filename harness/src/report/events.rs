//! What a gate tells its reporters, as it happens, and the reporters `vkexit run` has: the
//! progress line, the terminal table, and the report files. Each consumes the same stream.

use super::Checked;
use crate::judge::run::RunRecord;
use crate::judge::BUILTIN_SOURCE;
use crate::plan::Cell;
use crate::support::errors::Result;
use crate::support::terminal::{self, fit};
use crate::support::util::counted;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::RunVerdict;

/// One thing a gate did.
#[derive(Debug)]
pub(crate) enum GateEvent<'e> {
    /// Facts to show before the runs (drivers left out, the shard, a pinned layer).
    Notes(&'e [String]),
    /// The gate is about to make its runs: this many cells will run, `runs` times each, and
    /// which parts of their names tell them apart.
    Started {
        cells: usize,
        runs: u32,
        naming: Naming,
    },
    /// A run of `cell` is complete: judged, allow-listed, kept or removed.
    RunFinished { cell: &'e Cell, run: &'e RunRecord },
    /// Every cell judged, in the matrix's order.
    Finished(&'e Results),
}

/// Which parts of a cell's name tell the cells of one gate apart: its case always, its runtime
/// unless it is a program of its own (`external`), its driver, emulation and layers only when
/// the gate has more than one of each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Naming {
    pub(crate) drivers: bool,
    pub(crate) emulations: bool,
    pub(crate) layers: bool,
}

impl Naming {
    pub(crate) fn of<'c>(cells: impl Iterator<Item = &'c Cell>) -> Naming {
        let mut drivers = BTreeSet::new();
        let mut emulations = BTreeSet::new();
        let mut layers = BTreeSet::new();
        for c in cells {
            drivers.insert(c.driver.name.as_str());
            emulations.insert(c.emulation.name());
            layers.insert(c.layers.join("+"));
        }
        Naming {
            drivers: drivers.len() > 1,
            emulations: emulations.len() > 1,
            layers: layers.len() > 1,
        }
    }

    /// `clean-exit × refrt:guarded`, `Suite.Test`, `mock × lavapipe × emulation tegra`.
    pub(crate) fn name(&self, cell: &Cell) -> String {
        let mut parts = vec![cell.case.clone()];
        if cell.runtime != "external" {
            parts.push(cell.runtime.clone());
        }
        if self.drivers {
            parts.push(cell.driver.name.clone());
        }
        if self.emulations {
            parts.push(format!("emulation {}", cell.emulation.name()));
        }
        if self.layers {
            parts.push(match cell.layers.is_empty() {
                true => "no layers".to_string(),
                false => cell.layers.join("+"),
            });
        }
        parts.join(" × ")
    }
}

/// Something that shows or keeps what a gate did.
pub(crate) trait Reporter {
    /// Takes one event; an error stops the gate's reporting and is the command's error.
    fn report(&mut self, event: &GateEvent) -> Result<()>;
}

/// Tells every reporter of `reporters` one event, in order; the first error stops it.
pub(crate) fn tell(reporters: &mut [&mut dyn Reporter], event: &GateEvent) -> Result<()> {
    for reporter in reporters.iter_mut() {
        reporter.report(event)?;
    }
    Ok(())
}

/// `[3/20] pass  0.41 s  clean-exit × refrt:guarded` on stderr as each cell's last run
/// finishes: what its runs came to, their time, its name (as much of it as tells it from the
/// gate's other cells: `Naming`), cut to the terminal's width;
/// the notes first. On a terminal, a cell whose runs all passed is shown in place of the one
/// before it, so that only failing cells stay on the screen, and notes are wrapped to its width.
pub(crate) struct Progress {
    cells: usize,
    runs: u32,
    naming: Naming,
    done_cells: usize,
    done_runs: HashMap<String, CellRuns>,
    width: usize,
    /// Long lines are broken to `width` (a terminal, or `$COLUMNS`); in a log they stay whole.
    wraps: bool,
    in_place: bool,
    /// A line shown in place is on the screen, without its newline.
    shown: bool,
}

/// The runs of one cell so far.
#[derive(Default)]
struct CellRuns {
    verdicts: BTreeMap<RunVerdict, u32>,
    ms: u64,
    /// A failing run of it was said as it happened.
    failure_said: bool,
}

impl Default for Progress {
    fn default() -> Self {
        let stderr = std::io::stderr();
        Progress {
            cells: 0,
            runs: 0,
            naming: Naming::default(),
            done_cells: 0,
            done_runs: HashMap::new(),
            width: terminal::width(&stderr),
            wraps: terminal::wraps(&stderr),
            in_place: stderr.is_terminal(),
            shown: false,
        }
    }
}

impl Progress {
    /// Takes the line shown in place off the screen.
    fn clear(&mut self) {
        if std::mem::take(&mut self.shown) {
            eprint!("\r\x1b[K");
        }
    }

    /// A note: on a terminal, wrapped to its width; in a log, one line, to be found whole.
    fn note(&self, note: &str) {
        let text = format!("vkexit: {note}");
        if !self.wraps {
            eprintln!("{text}");
            return;
        }
        for (i, line) in terminal::wrap(&text, "", self.width - 2).iter().enumerate() {
            let indent = if i == 0 { "" } else { "  " };
            eprintln!("{indent}{line}");
        }
    }

    /// The first failing run of a cell whose other runs are still to come, as it happens (the
    /// cell's own line comes when its runs are done): the run, how it failed, the cell, why;
    /// then where its evidence is, on a line of its own.
    fn failed_run(&self, cell: &Cell, run: &RunRecord) -> Vec<String> {
        let c = &run.classification;
        let line = format!(
            "[run {}/{}] {}  {}: {}",
            run.index + 1,
            self.runs,
            c.verdict.name(),
            self.naming.name(cell),
            c.reason
        );
        // In a log the reason stays whole, to be found by a search.
        let mut lines = vec![match self.wraps {
            true => fit(&line, self.width),
            false => line,
        }];
        if let Some(dir) = &run.kept {
            lines.push(format!("    evidence: {}", dir.display()));
        }
        lines
    }

    fn cell_done(&mut self, cell: &Cell, runs: &CellRuns) {
        self.done_cells += 1;
        let line = format!(
            "[{}/{}] {}  {:.2} s  {}",
            self.done_cells,
            self.cells,
            runs.status(),
            runs.ms as f64 / 1000.0,
            self.naming.name(cell)
        );
        let line = fit(&line, self.width);
        self.clear();
        let passed = runs.verdicts.keys().all(|v| !v.is_failure());
        match self.in_place && passed {
            true => {
                eprint!("{line}");
                self.shown = true;
            }
            false => eprintln!("{line}"),
        }
    }
}

impl CellRuns {
    /// "pass", "vuid", "crash 1/4, pass 3/4".
    fn status(&self) -> String {
        let total: u32 = self.verdicts.values().sum();
        match self.verdicts.len() {
            1 => self.verdicts.keys().map(|v| v.name()).collect(),
            _ => self
                .verdicts
                .iter()
                .map(|(v, n)| format!("{} {n}/{total}", v.name()))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

impl Reporter for Progress {
    fn report(&mut self, event: &GateEvent) -> Result<()> {
        match event {
            GateEvent::Notes(notes) => {
                self.clear();
                for note in *notes {
                    self.note(note);
                }
            }
            GateEvent::Started {
                cells,
                runs,
                naming,
            } => (self.cells, self.runs, self.naming) = (*cells, *runs, *naming),
            GateEvent::RunFinished { cell, run } => {
                let done = self.done_runs.entry(cell.slug()).or_default();
                *done.verdicts.entry(run.classification.verdict).or_insert(0) += 1;
                done.ms = done.ms.saturating_add(run.duration_ms);
                let runs: u32 = done.verdicts.values().sum();
                let failed = run.classification.verdict.is_failure();
                if failed && runs < self.runs && !std::mem::replace(&mut done.failure_said, true) {
                    let lines = self.failed_run(cell, run);
                    self.clear();
                    for line in lines {
                        eprintln!("{line}");
                    }
                }
                if runs == self.runs {
                    let done = self.done_runs.remove(&cell.slug()).unwrap_or_default();
                    self.cell_done(cell, &done);
                }
            }
            GateEvent::Finished(_) => self.clear(),
        }
        Ok(())
    }
}

/// The terminal report on stdout (`report::terminal`), and how many cells the baseline files
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
        let stdout = std::io::stdout();
        let width = terminal::width(&stdout);
        let mut out = stdout.lock();
        let whole = !terminal::wraps(&stdout);
        let _ = super::terminal::write(&mut out, cells, width, whole);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::vuid::VuidReport;
    use crate::judge::run::{Classification, Termination};

    fn crashed(kept: Option<&str>) -> RunRecord {
        RunRecord {
            cell: 0,
            index: 2,
            classification: Classification {
                verdict: RunVerdict::Crash,
                reason: "SIGSEGV on thread main in libvkexit_refrt.so, during exit".into(),
                signal: Some("SIGSEGV".into()),
                vuids: Vec::new(),
                findings: Vec::new(),
                crash_layer: None,
            },
            termination: Termination::Signaled {
                signal: 11,
                core_dumped: false,
            },
            vuid_counts: VuidReport::default(),
            duration_ms: 410,
            stdout_bytes: 0,
            stderr_bytes: 0,
            kept: kept.map(PathBuf::from),
            vulkan: None,
        }
    }

    #[test]
    fn a_failing_run_is_said_with_its_cell_its_reason_and_its_evidence() {
        let progress = Progress {
            cells: 1,
            runs: 20,
            naming: Naming::default(),
            done_cells: 0,
            done_runs: HashMap::new(),
            width: 200,
            wraps: true,
            in_place: false,
            shown: false,
        };
        let cell = crate::test_fixtures::planned_cell();
        assert_eq!(
            progress.failed_run(&cell, &crashed(Some("/a/run-2"))),
            [
                "[run 3/20] crash  clean-exit × refrt:guarded: SIGSEGV on thread main in \
                 libvkexit_refrt.so, during exit",
                "    evidence: /a/run-2",
            ]
        );
        // Cut to the terminal's width; no evidence line for a run not kept.
        let narrow = Progress {
            width: 40,
            ..progress
        };
        let lines = narrow.failed_run(&cell, &crashed(None));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].chars().count() <= 40, "{lines:?}");
        assert!(
            lines[0].starts_with("[run 3/20] crash  clean-exit"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_cell_is_named_by_what_tells_it_from_the_others() {
        let guarded = crate::test_fixtures::planned_cell();
        let mut test = crate::test_fixtures::planned_cell();
        (test.case, test.runtime) = ("Suite.Test".into(), "external".into());
        let one = Naming::of([&guarded, &test].into_iter());
        assert_eq!(one.name(&guarded), "clean-exit × refrt:guarded");
        assert_eq!(one.name(&test), "Suite.Test");

        let mut elsewhere = crate::test_fixtures::planned_cell();
        elsewhere.driver.name = "nvidia".into();
        elsewhere.layers.clear();
        let two = Naming::of([&guarded, &elsewhere].into_iter());
        assert_eq!(
            two.name(&guarded),
            "clean-exit × refrt:guarded × lavapipe × validation"
        );
        assert_eq!(
            two.name(&elsewhere),
            "clean-exit × refrt:guarded × nvidia × no layers"
        );
    }
}
