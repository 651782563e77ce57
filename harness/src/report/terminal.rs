//! What `run` and `merge` print on stdout once every cell is judged: the table when its rows
//! fit the terminal, else one short line per cell (verdict, runs, time, name); then each
//! failing cell with its reason and, on a line of its own, where its evidence is; then the
//! summary line. On a terminal no line but an evidence path is wider than the width given;
//! elsewhere (a log, a file) a reason and a layer's message are never broken inside, so that a
//! search of the log finds them whole.

use super::{first_run, summary_line};
use crate::support::terminal::{fit, wrap};
use std::io::Write;
use vkexit_evidence::results::CellResult;
use vkexit_evidence::verdict::CellVerdict;

/// The report of `cells` in lines of at most `width` characters; with `whole` (not a terminal),
/// the reasons and the summary each on one line, whatever their length.
pub(crate) fn write(
    out: &mut impl Write,
    cells: &[CellResult],
    width: usize,
    whole: bool,
) -> std::io::Result<()> {
    let table = table(cells);
    let fits = table.iter().all(|(row, _)| row.chars().count() <= width);
    let lines: Vec<String> = match fits {
        true => table
            .into_iter()
            .map(|(row, evidence)| with_evidence(row, &evidence, width))
            .collect(),
        false => list(cells, width),
    };
    for line in lines {
        writeln!(out, "{line}")?;
    }
    let lines = |text: &str, indent: &str| match whole {
        true => vec![format!("{indent}{text}")],
        false => wrap(text, indent, width),
    };
    failures(out, cells, width, &lines)?;
    for line in lines(&summary_line(cells), "") {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The table's header and rows, each with the evidence it shows in its last column.
fn table(cells: &[CellResult]) -> Vec<(String, String)> {
    let w_case = column(cells.iter().map(|c| c.case.len()), 4);
    let w_rt = column(cells.iter().map(|c| c.runtime.len()), 7);
    let w_drv = column(cells.iter().map(|c| c.driver.len()), 6);
    let w_emu = column(cells.iter().map(|c| c.emulation.len()), 7);
    let header = format!(
        "{:w_case$}  {:w_rt$}  {:w_drv$}  {:w_emu$}  runs  pass crash exit vuid hang  err leak  {:15}",
        "case", "runtime", "driver", "emulate", "verdict"
    );
    let mut rows = vec![(header, "evidence".to_string())];
    for c in cells {
        let k = &c.counts;
        let row = format!(
            "{:w_case$}  {:w_rt$}  {:w_drv$}  {:w_emu$}  {:4}  {:4} {:5} {:4} {:4} {:4} {:4} {:4}  {:15}",
            c.case,
            c.runtime,
            c.driver,
            c.emulation,
            c.runs,
            k.passed(),
            k.crash,
            k.exit,
            k.vuid,
            k.timeout,
            k.error,
            k.leak,
            c.verdict.name(),
        );
        rows.push((row, evidence(c)));
    }
    rows
}

/// A row with as much of its evidence as the width leaves room for.
fn with_evidence(row: String, evidence: &str, width: usize) -> String {
    let room = width.saturating_sub(row.chars().count() + 2);
    match (evidence.is_empty(), room) {
        (true, _) | (false, 0..=3) => row.trim_end().to_string(),
        (false, room) => format!("{row}  {}", fit(evidence, room)),
    }
}

fn column(lens: impl Iterator<Item = usize>, min: usize) -> usize {
    lens.max().unwrap_or(0).max(min)
}

/// One line per cell: its verdict, runs, time and name (the case, and of the runtime,
/// driver, layers and emulation those that differ between cells).
fn list(cells: &[CellResult], width: usize) -> Vec<String> {
    let w_verdict = column(cells.iter().map(|c| c.verdict.name().len()), 7);
    cells
        .iter()
        .map(|c| {
            let line = format!(
                "{:w_verdict$}  {:>4} {}  {:>8}  {}",
                c.verdict.name(),
                c.runs,
                if c.runs == 1 { "run " } else { "runs" },
                duration(c.duration_ms),
                name(c, cells)
            );
            fit(&line, width)
        })
        .collect()
}

/// The cell's case, with what else sets it apart from the other cells.
fn name(c: &CellResult, cells: &[CellResult]) -> String {
    let first = &cells[0];
    let mut apart = Vec::new();
    if cells.iter().any(|o| o.runtime != first.runtime) {
        apart.push(c.runtime.clone());
    }
    if cells.iter().any(|o| o.driver != first.driver) {
        apart.push(c.driver.clone());
    }
    if cells.iter().any(|o| o.layers != first.layers) {
        apart.push(format!("layers {}", c.layers.join("+")));
    }
    if cells.iter().any(|o| o.emulation != first.emulation) {
        apart.push(format!("emulation {}", c.emulation));
    }
    match apart.is_empty() {
        true => c.case.clone(),
        false => format!("{} [{}]", c.case, apart.join(", ")),
    }
}

/// "0.21 s", "12.3 s", "754 s".
fn duration(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    match s {
        s if s < 10.0 => format!("{s:.2} s"),
        s if s < 100.0 => format!("{s:.1} s"),
        s => format!("{s:.0} s"),
    }
}

/// Every cell that turns the gate red: its verdict and name, what its runs showed and why,
/// then its first kept run's directory on a line of its own.
fn failures(
    out: &mut impl Write,
    cells: &[CellResult],
    width: usize,
    lines: &dyn Fn(&str, &str) -> Vec<String>,
) -> std::io::Result<()> {
    let failing: Vec<&CellResult> = cells.iter().filter(|c| !c.is_green()).collect();
    if failing.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "failures:")?;
    for c in failing {
        let head = format!("{} {}", c.verdict.name(), name(c, cells));
        writeln!(out, "{}", fit(&head, width))?;
        for line in lines(&evidence(c), "    ") {
            writeln!(out, "{line}")?;
        }
        if let Some(dir) = c.artifacts.first() {
            writeln!(out, "    evidence: {dir}")?;
        }
    }
    writeln!(out)
}

/// What a cell's runs showed, in short: signals, ids, findings, the reason when it is not
/// a pass, and what its first kept run said.
fn evidence(c: &CellResult) -> String {
    let said = first_run::FirstRun::of(c).and_then(|run| run.one_line());
    let mut parts: Vec<String> = c.signals.clone();
    // An id the run's message names is shown with the message, not twice.
    parts.extend(
        c.vuids
            .iter()
            .filter(|id| !said.as_ref().is_some_and(|s| s.contains(id.as_str())))
            .cloned(),
    );
    parts.extend(c.findings.iter().take(3).map(|f| format!("[{f}]")));
    if parts.is_empty() || !matches!(c.verdict, CellVerdict::ExpectedFail) {
        if let Some(reason) = &c.reason {
            if !matches!(c.verdict, CellVerdict::Pass) {
                parts.push(format!("({reason})"));
            }
        }
    }
    if let Some(said) = said {
        parts.push(format!("— {said}"));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{cell, counts};

    fn report(cells: &[CellResult], width: usize) -> String {
        let mut out = Vec::new();
        write(&mut out, cells, width, false).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn no_line_but_an_evidence_path_is_wider_than_the_width() {
        let mut cells = Vec::new();
        for i in 0..30 {
            let case = format!("Suite/Params.{}TestOfSomething/{i}", "Long".repeat(i));
            cells.push(cell(&case, "external", CellVerdict::Pass, counts(2, 0, 0)));
        }
        let mut failing = cell(
            "Teardown.KeepsItsBuffer",
            "external",
            CellVerdict::Fail,
            counts(0, 0, 2),
        );
        failing.reason = Some(format!("0 of 2 runs passed: {}", "word ".repeat(60)));
        failing.artifacts = vec![format!("/tmp/{}/run-1", "deep/".repeat(40))];
        cells.push(failing);
        for width in [40, 80, 100] {
            let text = report(&cells, width);
            for line in text.lines().filter(|l| !l.starts_with("    evidence: ")) {
                assert!(line.chars().count() <= width, "{width}: {line:?}\n{text}");
            }
            assert!(
                text.contains("failures:\nfail Teardown.KeepsItsBuffer\n"),
                "{text}"
            );
            assert!(text.contains("\n    evidence: /tmp/deep/"), "{text}");
        }
    }

    #[test]
    fn a_narrow_matrix_keeps_its_table_and_a_wide_one_becomes_a_list() {
        let cells = vec![cell(
            "clean-exit",
            "refrt:guarded",
            CellVerdict::Pass,
            counts(4, 0, 0),
        )];
        let wide = report(&cells, 200);
        assert!(wide.starts_with("case "), "{wide}");
        let narrow = report(&cells, 60);
        assert!(narrow.starts_with("pass "), "{narrow}");
        assert!(!narrow.contains("failures:"), "{narrow}");
    }

    #[test]
    fn in_a_log_a_reason_stays_on_one_line_however_long() {
        let mut failing = cell(
            "Teardown.Keeps",
            "external",
            CellVerdict::Fail,
            counts(0, 0, 2),
        );
        let message = format!(
            "Validation Error: [ VUID-vkDestroyDevice-device-00378 ] OBJ ERROR : VkBuffer 0x5 has not been destroyed. {}",
            "word ".repeat(30)
        );
        failing.reason = Some(message.clone());
        let mut out = Vec::new();
        write(&mut out, &[failing], 100, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("VkBuffer 0x5 has not been destroyed"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains(message.trim_end()), "{line}");
        assert!(line.chars().count() > 100, "{line}");
    }
}
