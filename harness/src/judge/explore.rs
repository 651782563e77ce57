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

pub(crate) fn failed(verdict: &str) -> bool {
    matches!(verdict, "fail" | "flaky" | "error")
}

/// Whether the exploration keeps the gate green: every natural cell as `run` judges it, and
/// no perturbation failing.
pub(crate) fn green(exploration: &Exploration) -> bool {
    !exploration.interrupted
        && exploration
            .cells
            .iter()
            .all(|c| c.natural.is_green() && !c.perturbations.iter().any(|p| failed(&p.verdict)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
