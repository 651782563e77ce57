//! Which run starts next. Runs are taken in the plan's order (every run of a cell, then the
//! next cell), skipping a run that may not start now:
//! - a cell whose runs start in a shared directory (an external case or a suite's test run in
//!   the caller's directory) runs one run at a time, as CTest never runs a test beside itself:
//!   two runs writing the same file there would make each other flaky;
//! - a cell that must run alone (CTest's `RUN_SERIAL`) starts only when nothing runs, and
//!   nothing starts beside it;
//! - cells naming the same lock (CTest's `RESOURCE_LOCK`) never run at the same time.
//!
//! Different cells still run side by side, `-j` at a time. A run that may not start waits for
//! one under way to end; with something always under way while runs wait, none waits forever.

use crate::plan::Cell;
use std::collections::{BTreeSet, HashSet};

/// What holds a cell's runs apart from others, decided once per cell from its plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rule {
    /// Its runs never overlap each other.
    pub(crate) apart: bool,
    /// Its runs run with nothing else.
    pub(crate) alone: bool,
    /// Locks each of its runs holds while it runs.
    pub(crate) locks: Vec<String>,
}

impl Rule {
    pub(crate) fn of(cell: &Cell) -> Rule {
        Rule {
            apart: cell.shares_workdir(),
            alone: cell.props.run_serial,
            locks: cell.props.resource_locks.clone(),
        }
    }
}

/// The runs not started yet and what the runs under way hold.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Per cell (as `execute` numbers them), its rule and its next run's number.
    rules: Vec<Rule>,
    next: Vec<u32>,
    runs: u32,
    /// The cells with runs left to start, in order.
    open: BTreeSet<usize>,
    running: usize,
    alone: bool,
    busy: HashSet<usize>,
    locks: HashSet<String>,
}

impl Schedule {
    /// `runs` runs of each cell, held by `rules`.
    pub(crate) fn new(rules: Vec<Rule>, runs: u32) -> Schedule {
        let open = match runs {
            0 => BTreeSet::new(),
            _ => (0..rules.len()).collect(),
        };
        Schedule {
            next: vec![0; rules.len()],
            rules,
            runs,
            open,
            running: 0,
            alone: false,
            busy: HashSet::new(),
            locks: HashSet::new(),
        }
    }

    /// Whether every run has been taken.
    pub(crate) fn exhausted(&self) -> bool {
        self.open.is_empty()
    }

    /// The first run that may start now, marked as under way: its cell and number.
    pub(crate) fn take(&mut self) -> Option<(usize, u32)> {
        let cell = *self.open.iter().find(|&&c| self.may_start(c))?;
        let index = self.next[cell];
        self.next[cell] += 1;
        if self.next[cell] == self.runs {
            self.open.remove(&cell);
        }
        let rule = &self.rules[cell];
        self.running += 1;
        self.alone |= rule.alone;
        if rule.apart {
            self.busy.insert(cell);
        }
        self.locks.extend(rule.locks.iter().cloned());
        Some((cell, index))
    }

    /// A run of `cell` that [`Schedule::take`] gave has ended.
    pub(crate) fn release(&mut self, cell: usize) {
        let rule = &self.rules[cell];
        self.running = self.running.saturating_sub(1);
        if rule.alone {
            self.alone = false;
        }
        self.busy.remove(&cell);
        for lock in &rule.locks {
            self.locks.remove(lock);
        }
    }

    fn may_start(&self, cell: usize) -> bool {
        let rule = &self.rules[cell];
        !self.alone
            && (!rule.alone || self.running == 0)
            && !self.busy.contains(&cell)
            && !rule.locks.iter().any(|l| self.locks.contains(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(apart: bool, alone: bool, locks: &[&str]) -> Rule {
        Rule {
            apart,
            alone,
            locks: locks.iter().map(|l| l.to_string()).collect(),
        }
    }

    /// Takes until nothing may start.
    fn take_all(s: &mut Schedule) -> Vec<(usize, u32)> {
        std::iter::from_fn(|| s.take()).collect()
    }

    #[test]
    fn free_cells_start_every_run_at_once() {
        let mut s = Schedule::new(vec![Rule::default(); 2], 2);
        assert_eq!(take_all(&mut s), [(0, 0), (0, 1), (1, 0), (1, 1)]);
        assert!(s.exhausted());
    }

    #[test]
    fn a_cell_in_a_shared_directory_runs_one_run_at_a_time_beside_other_cells() {
        let mut s = Schedule::new(vec![rule(true, false, &[]), Rule::default()], 3);
        assert_eq!(take_all(&mut s), [(0, 0), (1, 0), (1, 1), (1, 2)]);
        s.release(0);
        assert_eq!(take_all(&mut s), [(0, 1)]);
        s.release(1);
        assert_eq!(s.take(), None, "the cell's run 1 is still under way");
        s.release(0);
        assert_eq!(take_all(&mut s), [(0, 2)]);
        assert!(s.exhausted());
    }

    #[test]
    fn a_run_serial_cell_runs_alone_and_nothing_starts_beside_it() {
        let mut s = Schedule::new(vec![Rule::default(), rule(false, true, &[])], 2);
        assert_eq!(take_all(&mut s), [(0, 0), (0, 1)]);
        s.release(0);
        assert_eq!(s.take(), None, "one run is under way");
        s.release(0);
        assert_eq!(take_all(&mut s), [(1, 0)]);
        s.release(1);
        assert_eq!(take_all(&mut s), [(1, 1)]);
    }

    #[test]
    fn cells_sharing_a_lock_never_run_together() {
        let rules = vec![
            rule(false, false, &["db"]),
            rule(false, false, &["db", "gpu"]),
            rule(false, false, &["gpu"]),
            Rule::default(),
        ];
        let mut s = Schedule::new(rules, 1);
        assert_eq!(take_all(&mut s), [(0, 0), (2, 0), (3, 0)]);
        s.release(0);
        assert_eq!(s.take(), None, "gpu is still held");
        s.release(2);
        assert_eq!(take_all(&mut s), [(1, 0)]);
        assert!(s.exhausted());
    }

    #[test]
    fn every_run_is_taken_once_whatever_the_rules() {
        let rules = vec![
            rule(true, false, &[]),
            rule(false, true, &[]),
            rule(true, false, &["x"]),
            rule(false, false, &["x"]),
        ];
        let mut s = Schedule::new(rules, 3);
        let mut taken = Vec::new();
        while !s.exhausted() {
            let now = take_all(&mut s);
            assert!(!now.is_empty(), "nothing under way, yet nothing may start");
            for &(cell, _) in &now {
                s.release(cell);
            }
            taken.extend(now);
        }
        taken.sort();
        let want: Vec<(usize, u32)> = (0..4).flat_map(|c| (0..3).map(move |i| (c, i))).collect();
        assert_eq!(taken, want);
    }
}
