//! An exploration shown: the terminal table (per cell, its natural exit, each perturbation,
//! the fix and what to act on) and the Markdown summary.

use crate::judge::explore::failed;
use vkexit_evidence::explore::Exploration;
use vkexit_evidence::results::Counts;
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
        let natural_outcome = match (n.runs, n.counts.passed() == n.runs) {
            (0, _) => n.reason.clone().unwrap_or_else(|| "no run".into()),
            (_, true) => format!("pass {}/{}", n.runs, n.runs),
            (_, false) => outcome(&n.counts, &n.signals, &n.vuids),
        };
        out.push_str(&format!(
            "  {:<24} {:<15} {}\n",
            "natural",
            n.verdict.name(),
            natural_outcome
        ));
        for p in &cell.perturbations {
            let what = match (p.verdict.as_str(), p.counts.total()) {
                ("not-applicable", _) => match (p.moved.first(), p.name.starts_with("threads")) {
                    (Some(why), _) => why.clone(),
                    (None, true) => "no other thread was running at the exit handlers".into(),
                    (None, false) => "moves no exit handler in this program".into(),
                },
                ("pass", n) => format!("pass {n}/{n}"),
                _ => outcome(&p.counts, &p.signals, &p.vuids),
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
    }
    let order_proof = exploration
        .cells
        .iter()
        .filter(|c| {
            c.natural.runs > 0
                && c.natural.is_green()
                && !c.perturbations.iter().any(|p| failed(&p.verdict))
        })
        .count();
    let not_run = exploration
        .cells
        .iter()
        .filter(|c| c.natural.runs == 0)
        .count();
    let latent = exploration
        .cells
        .iter()
        .filter(|c| {
            c.natural.runs > 0
                && c.natural.counts.passed() == c.natural.runs
                && c.perturbations.iter().any(|p| failed(&p.verdict))
        })
        .count();
    let fixed = exploration.cells.iter().filter(|c| c.fix.is_some()).count();
    let unfixed = exploration
        .cells
        .iter()
        .filter(|c| c.no_fix.is_some())
        .count();
    out.push_str(&format!(
        "{} cells explored: {order_proof} order-proof, {latent} passing with a latent order bug, {fixed} failing with a fix found, {unfixed} failing with no order that helps\n",
        exploration.cells.len()
    ));
    if not_run > 0 {
        out.push_str(&format!(
            "{not_run} cell(s) not explored: their natural exit could not run here (skipped or error)\n"
        ));
    }
    if !exploration.left_out.is_empty() {
        out.push_str(&format!(
            "left out by --budget: {}\n",
            exploration.left_out.join(", ")
        ));
    }
    out
}

/// The Markdown summary: one row a cell, one column a perturbation, then what to act on.
pub(crate) fn markdown(exploration: &Exploration) -> String {
    let mut names: Vec<&str> = Vec::new();
    for p in exploration.cells.iter().flat_map(|c| &c.perturbations) {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
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
        let natural = match (n.runs, n.counts.passed() == n.runs) {
            (0, _) => n.verdict.name().to_string(),
            (_, true) => format!("pass {}/{}", n.runs, n.runs),
            (_, false) => outcome(&n.counts, &n.signals, &n.vuids),
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {natural} |",
            n.case, n.runtime, n.driver, n.emulation
        ));
        for name in &names {
            let shown = match cell.perturbations.iter().find(|p| p.name == *name) {
                None => "–".to_string(),
                Some(p) if p.verdict == "not-applicable" => "n/a".into(),
                Some(p) if p.verdict == "pass" => format!("pass {0}/{0}", p.counts.total()),
                Some(p) => format!("**{}**", outcome(&p.counts, &p.signals, &p.vuids)),
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
            (None, Some(_)) => "none helps".into(),
            (None, None) => "–".into(),
        };
        out.push_str(&format!(" {fix} |\n"));
    }
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
}
