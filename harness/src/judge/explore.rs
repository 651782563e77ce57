//! The gate rules of an exploration: a perturbation's verdict from its runs alone, and when
//! an exploration keeps the gate green.

use vkexit_evidence::explore::Exploration;
use vkexit_evidence::results::Counts;

/// A perturbation's verdict from its runs alone.
pub(crate) fn verdict_of(counts: &Counts) -> &'static str {
    let total = counts.total();
    if counts.error > 0 || total == 0 {
        "error"
    } else if counts.passed() == total {
        "pass"
    } else if counts.passed() == 0 {
        "fail"
    } else {
        "flaky"
    }
}

/// A perturbation whose runs ran but whose evidence does not show whether it acted on them (the
/// layer that reports destroy calls was not in the process, the timeline is missing): neither a
/// pass nor not-applicable.
pub(crate) fn unproven() -> &'static str {
    "error"
}

pub(crate) fn failed(verdict: &str) -> bool {
    matches!(verdict, "fail" | "flaky" | "error")
}

/// The most a change's passing runs may owe to chance to count as a fix: the probability that
/// the natural exit, at the rate it passed, would pass as many runs in a row.
const FIX_CHANCE: f64 = 0.05;

/// Whether `fix_passed` passing runs of a change tell it from chance, for a natural exit that
/// passed `natural_passed` of its `natural_runs`: a natural exit that never passed is told apart
/// by any pass; one that passes now and then (flaky) only when it would pass that many runs in
/// a row with a chance of at most 5%. Else the runs of each that would, as `Err`.
pub(crate) fn fix_beyond_chance(
    natural_passed: u64,
    natural_runs: u64,
    fix_passed: u64,
) -> Result<(), u64> {
    if natural_passed == 0 || natural_passed >= natural_runs {
        return Ok(());
    }
    let rate = natural_passed as f64 / natural_runs as f64;
    let needed = (FIX_CHANCE.ln() / rate.ln()).ceil() as u64;
    match fix_passed >= needed {
        true => Ok(()),
        false => Err(needed),
    }
}

/// How the cells of an exploration stand, counted: what its table's last line says.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Every cell.
    pub(crate) cells: usize,
    /// Natural exit green as `run` judges it, and no perturbation failing.
    pub(crate) order_proof: usize,
    /// Every natural run passed, and a perturbation fails: a latent order bug.
    pub(crate) latent: usize,
    /// The natural exit fails and a change of order made it clean.
    pub(crate) fixed: usize,
    /// The natural exit fails and no change of order helped: the search covered what it planned.
    pub(crate) unfixed: usize,
    /// The natural exit fails and the search for a fix ended before it could answer (the
    /// budget, a run that could not be judged, a stop): neither fixed nor unfixed.
    pub(crate) undecided: usize,
    /// The natural exit could not run here (skipped or error before any run): not explored.
    pub(crate) not_run: usize,
}

/// The cells of `exploration`, counted by how they stand.
pub(crate) fn tally(exploration: &Exploration) -> Tally {
    let mut t = Tally {
        cells: exploration.cells.len(),
        ..Tally::default()
    };
    for c in &exploration.cells {
        let n = &c.natural;
        let perturbed_fails = c.perturbations.iter().any(|p| failed(&p.verdict));
        if n.runs == 0 {
            t.not_run += 1;
            continue;
        }
        t.order_proof += usize::from(n.is_green() && !perturbed_fails);
        t.latent += usize::from(n.counts.passed() == n.runs && perturbed_fails);
        t.fixed += usize::from(c.fix.is_some());
        t.unfixed += usize::from(c.no_fix.is_some() && !c.fix_undecided);
        t.undecided += usize::from(c.no_fix.is_some() && c.fix_undecided);
    }
    t
}

/// Whether the exploration keeps the gate green: every natural cell as `run` judges it, and
/// no perturbation failing where the natural exit passes (one of an exit that fails already,
/// as its baseline expects, says nothing new: "also fails"); a perturbation that could not be
/// judged is red wherever it is.
pub(crate) fn green(exploration: &Exploration) -> bool {
    !exploration.interrupted
        && exploration.cells.iter().all(|c| {
            let n = &c.natural;
            let natural_passes = n.runs > 0 && n.counts.passed() == n.runs;
            n.is_green()
                && !c
                    .perturbations
                    .iter()
                    .any(|p| p.verdict == "error" || (natural_passes && failed(&p.verdict)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fix_of_a_flaky_exit_needs_more_passes_than_chance_gives() {
        // Never passed: any pass of the change tells it apart.
        assert_eq!(fix_beyond_chance(0, 2, 1), Ok(()));
        // Passed 1 of 2: 0.5^k <= 0.05 from k = 5.
        assert_eq!(fix_beyond_chance(1, 2, 2), Err(5));
        assert_eq!(fix_beyond_chance(1, 2, 4), Err(5));
        assert_eq!(fix_beyond_chance(1, 2, 5), Ok(()));
        // Passed 1 of 10: 0.1^2 = 0.01.
        assert_eq!(fix_beyond_chance(1, 10, 1), Err(2));
        assert_eq!(fix_beyond_chance(1, 10, 2), Ok(()));
        // Passed 9 of 10: 0.9^k <= 0.05 from k = 29.
        assert_eq!(fix_beyond_chance(9, 10, 10), Err(29));
        assert_eq!(fix_beyond_chance(9, 10, 29), Ok(()));
    }

    /// A natural cell under the Tegra exit with `counts`, as an exploration file holds it.
    fn natural_cell(counts: Counts) -> serde_json::Value {
        serde_json::json!({
            "case": "c", "runtime": "r", "driver": "lavapipe", "layers": [],
            "emulation": "tegra", "runs": counts.total(), "counts": counts,
            "verdict": if counts.passed() == counts.total() { "pass" } else { "expected-fail" },
            "vuids": [], "signals": [], "artifacts": [],
            "pass_rate": 0.0, "pass_rate_95": [0.0, 1.0]
        })
    }

    /// An exploration of the one cell `cell`.
    fn exploration(cell: serde_json::Value) -> Exploration {
        serde_json::from_value(serde_json::json!({
            "schema": vkexit_evidence::explore::SCHEMA, "vkexit_version": "0",
            "chaos_seed": 1, "cells": [cell]
        }))
        .unwrap()
    }

    #[test]
    fn a_perturbation_is_judged_by_its_runs_alone() {
        let counts = |pass, crash, error| Counts {
            pass,
            crash,
            error,
            ..Counts::default()
        };
        assert_eq!(verdict_of(&counts(5, 0, 0)), "pass");
        assert_eq!(verdict_of(&counts(0, 5, 0)), "fail");
        assert_eq!(verdict_of(&counts(2, 3, 0)), "flaky");
        assert_eq!(verdict_of(&counts(4, 0, 1)), "error");
        assert_eq!(verdict_of(&counts(0, 0, 0)), "error");
        assert!(failed("flaky") && failed("error") && failed("fail"));
        assert!(!failed("pass") && !failed("not-applicable"));
    }

    #[test]
    fn a_perturbation_that_also_fails_an_exit_that_fails_already_is_no_new_alarm() {
        let cell = |natural: Counts, perturbed: &str| {
            serde_json::json!({
                "natural": natural_cell(natural),
                "perturbations": [{
                    "name": "threads:seed=1", "condition": "", "replay": "", "verdict": perturbed,
                    "counts": Counts::default(), "moved": [], "signals": [], "vuids": [],
                    "artifacts": []
                }],
                "findings": []
            })
        };
        let crashes = Counts {
            crash: 2,
            ..Counts::default()
        };
        let passes = Counts {
            pass: 2,
            ..Counts::default()
        };
        assert!(green(&exploration(cell(crashes, "fail"))));
        assert!(!green(&exploration(cell(crashes, "error"))));
        assert!(!green(&exploration(cell(passes, "fail"))));
        assert!(green(&exploration(cell(passes, "pass"))));
    }

    #[test]
    fn a_search_cut_short_is_counted_as_not_decided_not_as_no_order_helps() {
        let explored = |undecided: bool| -> Exploration {
            let crashes = Counts {
                crash: 2,
                ..Counts::default()
            };
            let mut cell = serde_json::json!({
                "natural": natural_cell(crashes),
                "perturbations": [],
                "no_fix": "why",
                "findings": []
            });
            if undecided {
                cell["fix_undecided"] = serde_json::json!(true);
            }
            exploration(cell)
        };
        let searched = tally(&explored(false));
        assert_eq!((searched.unfixed, searched.undecided), (1, 0));
        let cut_short = tally(&explored(true));
        assert_eq!((cut_short.unfixed, cut_short.undecided), (0, 1));
    }
}
