//! Nothing ran (nextest's `NoTestsRun`): the one rule by which `run`, `explore` and `merge`
//! (of results files and of explorations) refuse a gate whose cells hold no run. Such a gate
//! is not green unless the user allows it (`--allow-no-runs`): a driver absent from a CI
//! runner, an empty shard or a selection that matches nothing must not pass unseen.

use vkexit_evidence::explore::Exploration;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::CellVerdict;

/// Why no run of `results` started, when none did; `None` when one did, or when the gate is
/// red or stopped already (an interrupted gate, a cell that is an `error`: a driver that
/// could not be probed).
pub(crate) fn no_runs(results: &Results) -> Option<String> {
    nothing_ran(
        &results.cells,
        results.interrupted,
        results.shard.as_deref(),
    )
}

/// The same rule for an exploration: its natural cells hold its runs.
pub(crate) fn no_runs_explored(exploration: &Exploration) -> Option<String> {
    let natural: Vec<&CellResult> = exploration.cells.iter().map(|c| &c.natural).collect();
    nothing_ran(
        natural,
        exploration.interrupted,
        exploration.shard.as_deref(),
    )
}

fn nothing_ran<'c>(
    cells: impl IntoIterator<Item = &'c CellResult>,
    interrupted: bool,
    shard: Option<&str>,
) -> Option<String> {
    let cells: Vec<&CellResult> = cells.into_iter().collect();
    if interrupted
        || cells
            .iter()
            .any(|c| c.runs > 0 || c.verdict == CellVerdict::Error)
    {
        return None;
    }
    Some(why_none_ran(
        cells.len(),
        shard,
        cells.iter().filter_map(|c| c.reason.as_deref()),
    ))
}

/// How a gate of `cells` cells, none of which ran, says why: no cell at all, or each reason
/// its cells were left out for, once. Also said by the plan before any run (`exec`).
pub(crate) fn why_none_ran<'r>(
    cells: usize,
    shard: Option<&str>,
    reasons: impl IntoIterator<Item = &'r str>,
) -> String {
    if cells == 0 {
        let shard = shard.map(|s| format!(" in shard {s}")).unwrap_or_default();
        return format!("the selection has no cell{shard}");
    }
    let mut once: Vec<&str> = Vec::new();
    for why in reasons {
        if !once.contains(&why) {
            once.push(why);
        }
    }
    let all = match cells {
        1 => "the one cell was".to_string(),
        n => format!("all {n} cells were"),
    };
    format!("{all} left out: {}", once.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{cell, results};
    use vkexit_evidence::results::Counts;

    fn skipped(why: &str) -> CellResult {
        let mut c = cell(
            "clean-exit",
            "refrt:guarded",
            CellVerdict::Skipped,
            Counts::default(),
        );
        c.runs = 0;
        c.reason = Some(why.into());
        c
    }

    #[test]
    fn a_gate_of_skipped_cells_ran_nothing_and_says_why_once_per_reason() {
        let none = "driver radv shows no device on this machine";
        assert_eq!(
            no_runs(&results(vec![skipped(none)])).unwrap(),
            format!("the one cell was left out: {none}")
        );
        let both = results(vec![skipped(none), skipped(none), skipped("no GPU")]);
        assert_eq!(
            no_runs(&both).unwrap(),
            format!("all 3 cells were left out: {none}; no GPU")
        );
    }

    #[test]
    fn no_cell_at_all_names_the_shard() {
        let mut r = results(Vec::new());
        assert_eq!(no_runs(&r).unwrap(), "the selection has no cell");
        r.shard = Some("2/2".into());
        assert_eq!(
            no_runs(&r).unwrap(),
            "the selection has no cell in shard 2/2"
        );
    }

    #[test]
    fn a_run_an_error_cell_or_an_interruption_is_not_nothing_ran() {
        let mut ran = skipped("x");
        ran.runs = 1;
        assert_eq!(no_runs(&results(vec![skipped("x"), ran])), None);
        let mut broken = skipped("the driver could not be probed");
        broken.verdict = CellVerdict::Error;
        assert_eq!(no_runs(&results(vec![skipped("x"), broken])), None);
        let mut interrupted = results(Vec::new());
        interrupted.interrupted = true;
        assert_eq!(no_runs(&interrupted), None);
    }
}
