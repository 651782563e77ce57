//! A Markdown summary for a pull-request comment or a GitHub step summary:
//! the totals, a table of the cells that are not green, then one ordering ×
//! policy matrix per driver, emulation and layers, like the README's tables; programs of
//! their own (a suite's tests, `-- CMD`) as a list of tests instead, failures first.

use super::first_run::FirstRun;
use super::markup::{md, md_code, url_path};
use super::{groups, observation, summary_line};
use std::fmt::Write as _;
use vkexit_evidence::files;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::CellVerdict;

pub fn render(results: &Results) -> String {
    let mut out = String::new();
    let gate = match results.is_green() {
        true => "green",
        false => "red",
    };
    let _ = writeln!(out, "## vkexit: gate {gate}\n");
    let _ = writeln!(out, "{}", md(&summary_line(&results.cells)));
    if results.interrupted {
        out.push_str(
            "\n**Interrupted**: these are the runs that finished before vkexit was stopped.\n",
        );
    }

    let red: Vec<&CellResult> = results.cells.iter().filter(|c| !c.is_green()).collect();
    if !red.is_empty() {
        let _ = writeln!(out, "\n### Cells that are not green ({})\n", red.len());
        out.push_str("| verdict | case | runtime | driver | emulation | runs | evidence | reason | artifacts |\n");
        out.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for c in red {
            let _ = writeln!(
                out,
                "| **{}** | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.verdict,
                md_code(&c.case),
                md_code(&c.runtime),
                md(&c.driver),
                md(&c.emulation),
                md(&observation(c)),
                md(&evidence(c)),
                md(c.reason.as_deref().unwrap_or("")),
                artifacts(c),
            );
        }
    }

    for group in groups(&results.cells) {
        let _ = writeln!(out, "\n### {}\n", md(&group.title()));
        let (cases, runtimes) = group.axes();
        if runtimes == ["external"] {
            tests_list(&mut out, &group.cells);
            continue;
        }
        out.push_str("| ordering ↓ / runtime → |");
        for r in &runtimes {
            let _ = write!(out, " {} |", md_code(r.strip_prefix("refrt:").unwrap_or(r)));
        }
        out.push('\n');
        out.push_str("|---|");
        out.push_str(&"---|".repeat(runtimes.len()));
        out.push('\n');
        for case in &cases {
            let _ = write!(out, "| {} |", md_code(case));
            for runtime in &runtimes {
                let text = match group.cell(case, runtime) {
                    None => "—".to_string(),
                    Some(c) => seen(c),
                };
                let _ = write!(out, " {text} |");
            }
            out.push('\n');
        }
    }
    out.push_str(
        "\nA cell that is not green is marked with its verdict in bold. \
         Known failures (`expected-fail`) and cells a baseline knows to be flaky \
         (`flaky = true`, marked \"known flaky\") keep the gate green.\n",
    );
    out
}

/// What a cell's runs came to: its verdict in bold when it is not green.
fn seen(c: &CellResult) -> String {
    match c.is_green() {
        true if c.counts.failures() > 0 && c.flaky_expected => {
            format!("{} (known flaky): {}", c.verdict, md(&observation(c)))
        }
        true => md(&observation(c)),
        false => format!("**{}**: {}", c.verdict, md(&observation(c))),
    }
}

/// Programs of their own have no runtime to lay out against: a row a test, the ones that turn
/// the gate red first, then the other failures, then the rest, with why each failed.
fn tests_list(out: &mut String, cells: &[&CellResult]) {
    let mut sorted = cells.to_vec();
    sorted.sort_by_key(|c| (c.is_green(), c.verdict.is_success()));
    out.push_str("| test | runs | why |\n|---|---|---|\n");
    for c in sorted {
        // What its runs said (a signal, a VUID and the layer's message, stderr's last lines),
        // else the verdict's reason; a skip says its runner's reason.
        let why = match (c.verdict.is_success(), evidence(c)) {
            _ if c.verdict == CellVerdict::Skipped => c.reason.clone().unwrap_or_default(),
            (true, _) => String::new(),
            (false, said) if !said.is_empty() => said,
            (false, _) => c.reason.clone().unwrap_or_default(),
        };
        let _ = writeln!(out, "| {} | {} | {} |", md_code(&c.case), seen(c), md(&why));
    }
}

/// Signals, VUIDs and the first findings of a cell, then what its first kept run said: the
/// layer's first message of each id, or the exit code and stderr's last lines.
fn evidence(c: &CellResult) -> String {
    let mut parts: Vec<String> = c.signals.clone();
    let run = FirstRun::of(c);
    let said = run.as_ref().map(FirstRun::lines).unwrap_or_default();
    // An id the run's messages name is shown with its message.
    parts.extend(
        c.vuids
            .iter()
            .filter(|id| !said.iter().any(|l| l.contains(id.as_str())))
            .cloned(),
    );
    parts.extend(c.findings.iter().take(3).cloned());
    let mut text = parts.join(", ");
    for line in said {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(&line);
    }
    text
}

/// The first kept run's directory, and a link to its validation log when it has one.
fn artifacts(c: &CellResult) -> String {
    let Some(first) = c.artifacts.first() else {
        return String::new();
    };
    let log = std::path::Path::new(first).join(files::VALIDATION_LOG);
    match log.is_file() {
        true => format!(
            "{} [validation.log](<{}>)",
            md_code(first),
            url_path(&log.to_string_lossy())
        ),
        false => md_code(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{cell, counts, results};
    use vkexit_evidence::verdict::CellVerdict;

    #[test]
    fn red_cells_first_then_a_matrix_like_the_readme() {
        let mut vuid = cell(
            "buffer-kept-at-exit",
            "refrt:guarded",
            CellVerdict::ExpectedFail,
            counts(0, 0, 20),
        );
        vuid.vuids = vec!["VUID-vkDestroyDevice-device-00378".into()];
        vuid.vuid_counts.insert(vuid.vuids[0].clone(), 80);
        let mut crash = cell(
            "handler-before-load",
            "refrt:never",
            CellVerdict::Flaky,
            counts(3, 2, 0),
        );
        crash.signals = vec!["SIGSEGV".into()];
        crash.artifacts = vec!["/a/handler-before-load/run-1".into()];
        let md = render(&results(vec![
            cell(
                "clean-exit",
                "refrt:never",
                CellVerdict::Pass,
                counts(20, 0, 0),
            ),
            crash,
            vuid,
            cell(
                "clean-exit",
                "refrt:guarded",
                CellVerdict::Pass,
                counts(20, 0, 0),
            ),
        ]));
        assert!(
            md.starts_with("## vkexit: gate red\n\n4 cells, 65 runs"),
            "{md}"
        );
        assert!(md.contains("### Cells that are not green (1)"), "{md}");
        assert!(
            md.contains("| **flaky** | `handler-before-load` | `refrt:never` | lavapipe | none | pass 3/5, SIGSEGV 2/5 | SIGSEGV |"),
            "{md}"
        );
        assert!(md.contains("`/a/handler-before-load/run-1`"), "{md}");
        assert!(md.contains("### lavapipe, emulation none, layers validation"));
        assert!(
            md.contains("| ordering ↓ / runtime → | `never` | `guarded` |"),
            "{md}"
        );
        assert!(
            md.contains("| `clean-exit` | pass 20/20 | pass 20/20 |"),
            "{md}"
        );
        assert!(
            md.contains("| `buffer-kept-at-exit` | — | vuid 20/20, 00378 ×4 per run |"),
            "{md}"
        );
        assert!(
            md.contains("| `handler-before-load` | **flaky**: pass 3/5, SIGSEGV 2/5 | — |"),
            "{md}"
        );
    }

    #[test]
    fn hostile_names_cannot_break_a_table_row() {
        let hostile = "a|b<script>\n*c*`";
        let mut c = cell(hostile, "external", CellVerdict::Fail, counts(0, 1, 0));
        c.reason = Some(hostile.into());
        let md = render(&results(vec![c]));
        let row = md
            .lines()
            .find(|l| l.starts_with("| **fail**"))
            .expect("a row for the failing cell");
        // Every unescaped `|` is a column border: 10 of them for 9 columns.
        let borders = row.len() - row.replace('|', "").len() - row.matches("\\|").count();
        assert_eq!(borders, 10, "{row}");
        // Plain text is escaped; a code span shows its text as it is.
        assert!(row.contains("| a\\|b&lt;script&gt; \\*c\\*\\` |"), "{row}");
        assert!(row.contains("| `` a\\|b<script> *c*` `` |"), "{row}");
    }

    #[test]
    fn a_suite_is_a_list_of_tests_failures_first_with_why() {
        let mut failing = cell(
            "Gpu.KeepsBuffer",
            "external",
            CellVerdict::Fail,
            counts(0, 0, 3),
        );
        failing.reason = Some("0 of 3 runs passed".into());
        failing.vuids = vec!["VUID-vkDestroyDevice-device-00378".into()];
        let skipped = cell(
            "Cpu.NoVulkan",
            "external",
            CellVerdict::NoVulkan,
            counts(0, 0, 0),
        );
        let md = render(&results(vec![
            cell("Cpu.Adds", "external", CellVerdict::Pass, counts(3, 0, 0)),
            failing,
            skipped,
        ]));
        assert!(!md.contains("ordering ↓ / runtime →"), "{md}");
        let rows: Vec<&str> = md
            .lines()
            .skip_while(|l| !l.starts_with("| test | runs | why |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(rows.len(), 3, "{md}");
        assert!(
            rows[0].starts_with("| `Gpu.KeepsBuffer` | **fail**: vuid 3/3, 00378 | VUID-vkDestroyDevice-device-00378 |"),
            "{md}"
        );
        assert!(
            rows[1..]
                .iter()
                .any(|r| r.starts_with("| `Cpu.Adds` | pass 3/3 |  |")),
            "{md}"
        );
        assert!(
            rows[1..]
                .iter()
                .any(|r| r.starts_with("| `Cpu.NoVulkan` |")),
            "{md}"
        );
    }

    #[test]
    fn a_green_run_has_no_red_table() {
        let md = render(&results(vec![cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(5, 0, 0),
        )]));
        assert!(md.starts_with("## vkexit: gate green"));
        assert!(!md.contains("not green ("));
    }
}
