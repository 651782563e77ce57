//! An exploration shown: the terminal table (per cell, its natural exit, each perturbation,
//! the fix and what to act on), the Markdown summary and the HTML report.

use super::markup::{attr, text};
use crate::judge::explore::{failed, tally};
use std::fmt::Write as _;
use std::path::Path;
use vkexit_evidence::explore::{Exploration, ExploredCell, Perturbation};
use vkexit_evidence::results::{CellResult, Counts};
use vkexit_evidence::verdict::RunVerdict;

/// "crashes 5/5 (SIGSEGV)", "vuid 5/5 (VUID-…)", "flaky 2/5 pass".
pub(crate) fn outcome(counts: &Counts, signals: &[String], vuids: &[String]) -> String {
    let total = counts.total();
    let mut parts = Vec::new();
    for v in RunVerdict::ALL {
        let n = counts.get(v);
        if n == 0 || v == RunVerdict::Pass {
            continue;
        }
        let detail = match v {
            RunVerdict::Crash if !signals.is_empty() => format!(" ({})", signals.join(", ")),
            RunVerdict::Vuid if !vuids.is_empty() => format!(" ({})", vuids.join(", ")),
            _ => String::new(),
        };
        let word = match v {
            RunVerdict::Crash => "crashes".to_string(),
            other => other.name().to_string(),
        };
        parts.push(format!("{word} {n}/{total}{detail}"));
    }
    parts.join(", ")
}

/// A natural exit's runs in short: "pass N/N" when every run passed, else how they ended;
/// `None` when none ran.
fn natural_runs(n: &CellResult) -> Option<String> {
    match (n.runs, n.counts.passed() == n.runs) {
        (0, _) => None,
        (_, true) => Some(format!("pass {0}/{0}", n.runs)),
        (_, false) => Some(outcome(&n.counts, &n.signals, &n.vuids)),
    }
}

/// A perturbation's runs in short: "pass N/N" when it passed, else how they ended.
fn perturbation_runs(p: &Perturbation) -> String {
    match p.verdict.as_str() {
        "pass" => format!("pass {0}/{0}", p.counts.total()),
        _ => outcome(&p.counts, &p.signals, &p.vuids),
    }
}

/// The terminal table: per cell, the natural exit and each perturbation, then what to act on.
pub(crate) fn table(exploration: &Exploration) -> String {
    let mut out = String::new();
    for cell in &exploration.cells {
        let n = &cell.natural;
        let emulation = match n.emulation.as_str() {
            "none" => String::new(),
            e => format!(", emulate {e}"),
        };
        out.push_str(&format!(
            "{} × {} × {} ({}{emulation})\n",
            n.case,
            n.runtime,
            n.driver,
            n.layers.join("+")
        ));
        let natural_outcome =
            natural_runs(n).unwrap_or_else(|| n.reason.clone().unwrap_or_else(|| "no run".into()));
        out.push_str(&format!(
            "  {:<24} {:<15} {}\n",
            "natural",
            n.verdict.name(),
            natural_outcome
        ));
        for p in &cell.perturbations {
            let what = match p.verdict.as_str() {
                "not-applicable" => match (p.moved.first(), p.name.starts_with("threads")) {
                    (Some(why), _) => why.clone(),
                    // An older exploration file: thread timing then applied wherever a thread
                    // was alive.
                    (None, true) => "no other thread was alive at the exit handlers".into(),
                    (None, false) => "moves no exit handler in this program".into(),
                },
                _ => perturbation_runs(p),
            };
            out.push_str(&format!("  {:<24} {:<15} {what}\n", p.name, p.verdict));
        }
        if let Some(fix) = &cell.fix {
            out.push_str(&format!(
                "  {:<24} {:<15} pass {}/{} with --exit-order {}\n",
                "fix",
                fix.exit_order,
                fix.counts.passed(),
                fix.counts.total(),
                fix.exit_order
            ));
        }
        for f in &cell.findings {
            out.push_str(&format!("  → {f}\n"));
        }
        if let Some(diff) = cell.fix.as_ref().and_then(|f| f.diff.as_ref()) {
            out.push_str("  the change, in the program's source:\n");
            for line in diff.lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out.push_str(&tally_lines(exploration));
    if !exploration.left_out.is_empty() {
        out.push_str(&format!(
            "left out by --budget: {}\n",
            exploration.left_out.join(", ")
        ));
    }
    out
}

/// The tally of the cells, and the cells not explored.
fn tally_lines(exploration: &Exploration) -> String {
    let t = tally(exploration);
    let mut out = format!(
        "{} cells explored: {} order-proof, {} passing with a latent order bug, {} failing with a fix found, {} failing with no order that helps\n",
        t.cells, t.order_proof, t.latent, t.fixed, t.unfixed
    );
    if t.undecided > 0 {
        out.push_str(&format!(
            "{} failing cell(s) not decided: the search for a fix was cut short (--budget, a run that could not be judged, or a stop); raise --budget or run again\n",
            t.undecided
        ));
    }
    if t.not_run > 0 {
        out.push_str(&format!(
            "{} cell(s) not explored: their natural exit could not run here (skipped or error)\n",
            t.not_run
        ));
    }
    if let Some(shard) = &exploration.shard {
        out.push_str(&format!(
            "shard {shard}: `vkexit merge` joins the shards' exploration files\n"
        ));
    }
    out
}

/// The perturbations' names, in the order they first appear: the columns.
fn columns(exploration: &Exploration) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for p in exploration.cells.iter().flat_map(|c| &c.perturbations) {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    names
}

/// The Markdown summary: one row a cell, one column a perturbation, then what to act on.
pub(crate) fn markdown(exploration: &Exploration) -> String {
    let names = columns(exploration);
    let mut out = String::from("# vkexit explore\n\n");
    out.push_str("| case | runtime | driver | emulate | natural |");
    for name in &names {
        out.push_str(&format!(" `{name}` |"));
    }
    out.push_str(" fix |\n|");
    out.push_str(&"---|".repeat(6 + names.len()));
    out.push('\n');
    for cell in &exploration.cells {
        let n = &cell.natural;
        let natural = natural_runs(n).unwrap_or_else(|| n.verdict.name().to_string());
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {natural} |",
            n.case, n.runtime, n.driver, n.emulation
        ));
        for name in &names {
            let shown = match cell.perturbations.iter().find(|p| p.name == *name) {
                None => "–".to_string(),
                Some(p) if p.verdict == "not-applicable" => "n/a".into(),
                Some(p) if p.verdict == "pass" => perturbation_runs(p),
                Some(p) => format!("**{}**", perturbation_runs(p)),
            };
            out.push_str(&format!(" {shown} |"));
        }
        let fix = match (&cell.fix, &cell.no_fix) {
            (Some(f), _) => format!(
                "`{}`: pass {}/{}",
                f.exit_order,
                f.counts.passed(),
                f.counts.total()
            ),
            (None, Some(_)) if cell.fix_undecided => "not decided".into(),
            (None, Some(_)) => "none helps".into(),
            (None, None) => "–".into(),
        };
        out.push_str(&format!(" {fix} |\n"));
    }
    out.push('\n');
    out.push_str(&tally_lines(exploration));
    let to_act: Vec<String> = exploration
        .cells
        .iter()
        .flat_map(|c| {
            let label = format!("`{} × {}`", c.natural.case, c.natural.runtime);
            c.findings.iter().map(move |f| format!("- {label}: {f}"))
        })
        .collect();
    if !to_act.is_empty() {
        out.push_str("\n## To act on\n\n");
        out.push_str(&to_act.join("\n"));
        out.push('\n');
    }
    if !exploration.left_out.is_empty() {
        out.push_str(&format!(
            "\nLeft out by `--budget`: {}\n",
            exploration.left_out.join(", ")
        ));
    }
    out
}

/// JUnit XML for a CI's test view: a test suite a cell, a test case its natural exit and each
/// perturbation (`not-applicable` ones skipped), failing where the exploration's gate fails.
pub(crate) fn junit(exploration: &Exploration) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"vkexit explore\">\n",
    );
    for cell in &exploration.cells {
        let n = &cell.natural;
        let suite = format!(
            "{} × {} × {} ({})",
            n.case, n.runtime, n.driver, n.emulation
        );
        let mut cases: Vec<(String, Option<String>, bool)> = Vec::new();
        let natural_failure = (!n.is_green()).then(|| match n.reason.clone() {
            Some(why) => format!("{}: {why}", n.verdict.name()),
            None => n.verdict.name().to_string(),
        });
        cases.push(("natural".into(), natural_failure, n.runs == 0));
        for p in &cell.perturbations {
            let failure = failed(&p.verdict).then(|| {
                let what = outcome(&p.counts, &p.signals, &p.vuids);
                format!(
                    "{}: {what} ({}); replay: vkexit run {}",
                    p.verdict, p.condition, p.replay
                )
            });
            cases.push((p.name.clone(), failure, p.verdict == "not-applicable"));
        }
        let failures = cases.iter().filter(|c| c.1.is_some()).count();
        let skipped = cases.iter().filter(|c| c.1.is_none() && c.2).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">",
            attr(&suite),
            cases.len()
        );
        for (name, failure, skip) in cases {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\"",
                attr(&suite),
                attr(&name)
            );
            match (failure, skip) {
                (Some(why), _) => {
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\"/>\n    </testcase>",
                        attr(&why)
                    );
                }
                (None, true) => out.push_str(">\n      <skipped/>\n    </testcase>\n"),
                (None, false) => out.push_str("/>\n"),
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; overflow-wrap: anywhere; }
td.name, th code { white-space: nowrap; overflow-wrap: normal; }
pre { margin: 0.3em 0 0; font-size: 0.9em; white-space: pre; overflow-wrap: normal; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #9e9e9e; padding: 0.3em 0.5em; vertical-align: top; text-align: left; font-size: 0.9em; }
th { background: #f5f5f5; }
td a { color: inherit; }
.pass { background: #c8e6c9; }
.fail { background: #ef9a9a; font-weight: bold; }
.flaky { background: #ffcc80; font-weight: bold; }
.error { background: #b71c1c; color: #fff; font-weight: bold; }
.na { color: #9e9e9e; }
.also { background: #f3e5e5; color: #6d4c41; }
h1 .green { color: #1b5e20; } h1 .red { color: #b71c1c; }
";

/// The HTML report (`--html DIR` writes `DIR/index.html`): self-contained, no script. A row a
/// cell, a column a perturbation, each coloured by its verdict and linked to its first kept
/// run; then what to act on, per cell. `base` is the report's directory, for relative links.
pub(crate) fn html(exploration: &Exploration, base: Option<&Path>) -> String {
    let names = columns(exploration);
    let green = crate::judge::explore::green(exploration);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vkexit explore</title><style>{STYLE}</style></head><body>\n<h1>vkexit explore: <span class=\"{}\">{}</span></h1>\n",
        if green { "green" } else { "red" },
        headline(exploration, green)
    );
    for line in tally_lines(exploration).lines() {
        let _ = writeln!(out, "<p>{}</p>", text(line));
    }
    out.push_str(
        "<table>\n<tr><th>case</th><th>runtime</th><th>driver</th><th>emulate</th><th>natural</th>",
    );
    for name in &names {
        let _ = write!(out, "<th><code>{}</code></th>", text(name));
    }
    out.push_str("<th>fix</th></tr>\n");
    for cell in &exploration.cells {
        html_row(&mut out, cell, &names, base);
    }
    out.push_str("</table>\n");
    let acted: Vec<&ExploredCell> = exploration
        .cells
        .iter()
        .filter(|c| !c.findings.is_empty())
        .collect();
    if !acted.is_empty() {
        out.push_str("<h2>To act on</h2>\n<ul>\n");
        for c in acted {
            for f in &c.findings {
                let _ = writeln!(
                    out,
                    "<li><code>{} × {}</code>: {}</li>",
                    text(&c.natural.case),
                    text(&c.natural.runtime),
                    text(f)
                );
            }
        }
        out.push_str("</ul>\n");
    }
    if !exploration.left_out.is_empty() {
        let _ = writeln!(
            out,
            "<p>Left out by <code>--budget</code>: {}</p>",
            text(&exploration.left_out.join(", "))
        );
    }
    out.push_str("</body></html>\n");
    out
}

/// What the page's title says of the gate: order-proof only where every cell is.
fn headline(exploration: &Exploration, green: bool) -> &'static str {
    let t = crate::judge::explore::tally(exploration);
    match (green, t.order_proof == t.cells && t.cells > 0) {
        (true, true) => "order-proof",
        (true, false) => "green: no failure beyond what the baseline expects",
        (false, _) => "a perturbation or a natural exit fails",
    }
}

/// One cell's row: its natural exit, each perturbation, the fix.
fn html_row(out: &mut String, cell: &ExploredCell, names: &[&str], base: Option<&Path>) {
    let n = &cell.natural;
    let (class, natural) = match (n.runs, n.counts.passed() == n.runs) {
        (0, _) => (
            "na",
            n.reason.clone().unwrap_or_else(|| n.verdict.name().into()),
        ),
        (_, true) => ("pass", format!("pass {0}/{0}", n.runs)),
        (_, false) => (
            if n.is_green() { "pass" } else { "fail" },
            format!(
                "{}: {}",
                n.verdict.name(),
                outcome(&n.counts, &n.signals, &n.vuids)
            ),
        ),
    };
    let _ = write!(
        out,
        "<tr><td class=\"name\"><code>{}</code></td><td class=\"name\"><code>{}</code></td><td class=\"name\">{}</td><td class=\"name\">{}</td>",
        text(&n.case),
        text(&n.runtime),
        text(&n.driver),
        text(&n.emulation)
    );
    cell_td(
        out,
        class,
        &natural,
        n.artifacts.first().map(String::as_str),
        base,
    );
    for name in names {
        match cell.perturbations.iter().find(|p| p.name == *name) {
            None => out.push_str("<td class=\"na\">–</td>"),
            Some(p) if p.verdict == "not-applicable" => {
                let why = p
                    .moved
                    .first()
                    .map(String::as_str)
                    .unwrap_or("moves nothing here");
                let _ = write!(out, "<td class=\"na\" title=\"{}\">n/a</td>", attr(why));
            }
            Some(p) => {
                let mut shown = perturbation_runs(p);
                let natural_fails = n.runs > 0 && n.counts.passed() < n.runs;
                let class = match p.verdict.as_str() {
                    "pass" => "pass",
                    "flaky" => "flaky",
                    "error" => "error",
                    // The exit fails already: no new alarm.
                    _ if natural_fails => {
                        shown = format!("also fails: {shown}");
                        "also"
                    }
                    _ => "fail",
                };
                cell_td(
                    out,
                    class,
                    &shown,
                    p.artifacts.first().map(String::as_str),
                    base,
                );
            }
        }
    }
    let fix = match (&cell.fix, &cell.no_fix) {
        // The change first (its reason in it), then how it was verified and replays, then the
        // source's own diff.
        (Some(f), _) => {
            let diff = f
                .diff
                .as_ref()
                .map_or(String::new(), |d| format!("<pre>{}</pre>", text(d)));
            format!(
                "{}<br>verified: pass {}/{} with <code>--exit-order {}</code>{diff}",
                text(&f.change),
                f.counts.passed(),
                f.counts.total(),
                text(&f.exit_order)
            )
        }
        (None, Some(why)) if cell.fix_undecided => text(why),
        (None, Some(why)) => text(&format!("none helps: {why}")),
        (None, None) => "–".into(),
    };
    let _ = writeln!(out, "<td>{fix}</td></tr>");
}

/// A coloured cell, linked to a kept run's directory when there is one.
fn cell_td(out: &mut String, class: &str, shown: &str, run: Option<&str>, base: Option<&Path>) {
    match run {
        Some(dir) => {
            let href = super::html::link(Path::new(dir), base, true);
            let _ = write!(
                out,
                "<td class=\"{class}\"><a href=\"{}\">{}</a></td>",
                attr(&href),
                text(shown)
            );
        }
        None => {
            let _ = write!(out, "<td class=\"{class}\">{}</td>", text(shown));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exploration of one cell whose natural exit did not run here (its runtime lacks an
    /// operation the case needs): nothing was explored, so nothing is order-proof.
    fn skipped_cell() -> Exploration {
        serde_json::from_value(serde_json::json!({
            "schema": vkexit_evidence::explore::SCHEMA,
            "vkexit_version": "0",
            "chaos_seed": 1,
            "cells": [{
                "natural": {
                    "case": "events-freed-after-teardown", "runtime": "halide",
                    "driver": "lavapipe", "layers": ["validation"], "emulation": "none",
                    "runs": 0,
                    "counts": {"pass": 0, "crash": 0, "exit": 0, "vuid": 0, "timeout": 0, "error": 0},
                    "verdict": "skipped", "reason": "halide has no events",
                    "vuids": [], "signals": [], "artifacts": [],
                    "pass_rate": 0.0, "pass_rate_95": [0.0, 1.0]
                },
                "perturbations": [],
                "findings": []
            }]
        }))
        .expect("an exploration")
    }

    #[test]
    fn a_cell_that_did_not_run_is_not_explored_nor_order_proof() {
        let e = skipped_cell();
        let text = table(&e);
        assert!(text.contains("halide has no events"), "{text}");
        assert!(text.contains(" 0 order-proof,"), "{text}");
        assert!(text.contains("1 cell(s) not explored"), "{text}");
        let md = markdown(&e);
        assert!(md.contains("| skipped |"), "{md}");
    }

    /// A cell whose natural exit crashes, a perturbation that crashes too, and a fix with its
    /// diff.
    fn failing_cell_with_a_fix() -> Exploration {
        let counts = |pass: u64, crash: u64| serde_json::json!({"pass": pass, "crash": crash, "exit": 0, "vuid": 0, "timeout": 0, "error": 0});
        serde_json::from_value(serde_json::json!({
            "schema": vkexit_evidence::explore::SCHEMA,
            "vkexit_version": "0",
            "chaos_seed": 1,
            "cells": [{
                "natural": {
                    "case": "handler-before-load", "runtime": "refrt:static-destructor",
                    "driver": "lavapipe", "layers": ["validation"], "emulation": "tegra",
                    "runs": 2, "counts": counts(0, 2), "verdict": "fail",
                    "vuids": [], "signals": ["SIGSEGV"], "artifacts": [],
                    "pass_rate": 0.0, "pass_rate_95": [0.0, 0.8]
                },
                "perturbations": [{
                    "name": "threads:seed=1", "condition": "c", "replay": "--chaos-seed 1",
                    "counts": counts(0, 2), "verdict": "fail", "moved": [],
                    "signals": ["SIGSEGV"], "vuids": [], "artifacts": []
                }],
                "fix": {
                    "exit_order": "run:join_workers:before:vk_shutdown",
                    "change": "register `join_workers` after `vk_shutdown` (app.c:4, app.c:5)",
                    "diff": "--- app.c\n+++ app.c\n@@ -4,2 +4,2 @@\n-a\n+b\n-b\n+a\n",
                    "moved": [], "counts": counts(2, 0), "verdict": "pass"
                },
                "findings": []
            }]
        }))
        .expect("an exploration")
    }

    #[test]
    fn the_html_table_keeps_names_whole_says_also_fails_and_leads_the_fix_with_the_change() {
        let page = html(&failing_cell_with_a_fix(), None);
        // Names are never broken inside a word, whatever the width.
        assert!(
            page.contains("td.name, th code { white-space: nowrap;"),
            "{page}"
        );
        assert!(
            page.contains("<td class=\"name\"><code>refrt:static-destructor</code></td>"),
            "{page}"
        );
        assert!(page.contains("<td class=\"name\">lavapipe</td>"), "{page}");
        // A perturbation of an exit that fails already is no new alarm.
        assert!(page.contains("<td class=\"also\">also fails: "), "{page}");
        assert!(!page.contains("<td class=\"fail\">crashes"), "{page}");
        // The fix: the change, then its verification and replay, then the diff.
        let fix = page
            .split("register `join_workers` after `vk_shutdown`")
            .nth(1)
            .unwrap_or_else(|| panic!("{page}"));
        let verified = fix.find(
            "verified: pass 2/2 with <code>--exit-order run:join_workers:before:vk_shutdown</code>",
        );
        let diff = fix.find("<pre>--- app.c");
        assert!(verified.is_some() && diff > verified, "{fix}");
        // The terminal shows the diff too.
        let text = table(&failing_cell_with_a_fix());
        assert!(
            text.contains("  the change, in the program's source:\n    --- app.c\n"),
            "{text}"
        );
    }
}
