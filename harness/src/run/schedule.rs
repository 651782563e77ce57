//! Which run starts next. Runs are taken in the plan's order (every run of a cell, then the
//! next cell), runs to make again first, skipping a run that may not start now:
//! - a cell whose runs start in a shared directory (an external case or a suite's test run in
//!   the caller's directory) runs one run at a time, as CTest never runs a test beside itself:
//!   two runs writing the same file there would make each other flaky;
//! - once a run is seen writing into a shared directory (the preload's `shared-write`
//!   records; from the start where no preload can tell), no run starts there while another
//!   runs there, whatever its cell: the project's own runner runs its tests one after another;
//! - a run that wrote there while another ran there, or that ran there while another one
//!   wrote, is made again alone ([`Schedule::ended`]), and only the new run counts;
//! - a cell that must run alone (CTest's `RUN_SERIAL`) starts only when nothing runs, and
//!   nothing starts beside it;
//! - cells naming the same lock (CTest's `RESOURCE_LOCK`) never run at the same time.
//!
//! Other runs still run side by side, `-j` at a time. A run that may not start waits for
//! one under way to end; with something always under way while runs wait, none waits forever.

use crate::plan::Cell;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

/// What holds a cell's runs apart from others, decided once per cell from its plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rule {
    /// The working directory its runs share with other runs.
    pub(crate) shared: Option<PathBuf>,
    /// Whether what its runs write there can be seen (the preload records it); when it
    /// cannot, the directory counts as written from the start.
    pub(crate) writes_seen: bool,
    /// Its runs run with nothing else.
    pub(crate) alone: bool,
    /// Locks each of its runs holds while it runs.
    pub(crate) locks: Vec<String>,
}

impl Rule {
    pub(crate) fn of(cell: &Cell, writes_seen: bool) -> Rule {
        Rule {
            shared: cell.workdir.clone().filter(|_| cell.shares_workdir()),
            writes_seen,
            alone: cell.props.run_serial,
            locks: cell.props.resource_locks.clone(),
        }
    }
}

/// A run: its cell (as `execute` numbers them) and its number.
pub(crate) type RunId = (usize, u32);

/// A shared directory's runs under way, and whether a run has written there.
#[derive(Debug, Default)]
struct Shared {
    running: Vec<RunId>,
    written: bool,
}

/// What became of a run in a shared directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It counts.
    Counts,
    /// It overlapped a run that wrote there (or wrote while another ran): it is made again,
    /// alone, and does not count.
    Again,
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
    /// Runs to make again, in the order they were found.
    again: VecDeque<RunId>,
    running: usize,
    alone: bool,
    busy: HashSet<usize>,
    locks: HashSet<String>,
    shared: HashMap<PathBuf, Shared>,
    /// Runs that ran beside another in their shared directory.
    overlapped: HashSet<RunId>,
    /// Runs that ran beside a run that wrote there.
    beside_writer: HashSet<RunId>,
}

impl Schedule {
    /// `runs` runs of each cell, held by `rules`.
    pub(crate) fn new(rules: Vec<Rule>, runs: u32) -> Schedule {
        let open = match runs {
            0 => BTreeSet::new(),
            _ => (0..rules.len()).collect(),
        };
        let mut shared: HashMap<PathBuf, Shared> = HashMap::new();
        for rule in &rules {
            if let Some(dir) = &rule.shared {
                shared.entry(dir.clone()).or_default().written |= !rule.writes_seen;
            }
        }
        Schedule {
            next: vec![0; rules.len()],
            rules,
            runs,
            open,
            again: VecDeque::new(),
            running: 0,
            alone: false,
            busy: HashSet::new(),
            locks: HashSet::new(),
            shared,
            overlapped: HashSet::new(),
            beside_writer: HashSet::new(),
        }
    }

    /// Whether every run has been taken.
    pub(crate) fn exhausted(&self) -> bool {
        self.open.is_empty() && self.again.is_empty()
    }

    /// The first run that may start now, marked as under way: its cell and number.
    pub(crate) fn take(&mut self) -> Option<RunId> {
        let (cell, index) = match self.again.iter().position(|&(c, _)| self.may_start(c)) {
            Some(at) => self.again.remove(at)?,
            None => {
                let cell = *self.open.iter().find(|&&c| self.may_start(c))?;
                let index = self.next[cell];
                self.next[cell] += 1;
                if self.next[cell] == self.runs {
                    self.open.remove(&cell);
                }
                (cell, index)
            }
        };
        let rule = &self.rules[cell];
        self.running += 1;
        self.alone |= rule.alone;
        if let Some(dir) = &rule.shared {
            self.busy.insert(cell);
            let shared = self.shared.entry(dir.clone()).or_default();
            if !shared.running.is_empty() {
                self.overlapped.extend(shared.running.iter().copied());
                self.overlapped.insert((cell, index));
            }
            shared.running.push((cell, index));
        }
        self.locks.extend(rule.locks.iter().cloned());
        Some((cell, index))
    }

    /// Run `index` of `cell`, in a shared directory, ended; `wrote`: it wrote there. Before
    /// [`Schedule::release`]. A run to make again is queued here.
    pub(crate) fn ended(&mut self, cell: usize, index: u32, wrote: bool) -> Ended {
        let id = (cell, index);
        let Some(shared) = self.rules[cell]
            .shared
            .as_ref()
            .and_then(|dir| self.shared.get_mut(dir))
        else {
            return Ended::Counts;
        };
        if wrote {
            shared.written = true;
            self.beside_writer
                .extend(shared.running.iter().copied().filter(|&r| r != id));
        }
        let overlapped = self.overlapped.remove(&id);
        let beside_writer = self.beside_writer.remove(&id);
        match (wrote && overlapped) || beside_writer {
            true => {
                self.again.push_back(id);
                Ended::Again
            }
            false => Ended::Counts,
        }
    }

    /// A run of `cell` that [`Schedule::take`] gave has ended.
    pub(crate) fn release(&mut self, cell: usize, index: u32) {
        let rule = &self.rules[cell];
        self.running = self.running.saturating_sub(1);
        if rule.alone {
            self.alone = false;
        }
        self.busy.remove(&cell);
        if let Some(shared) = rule.shared.as_ref().and_then(|d| self.shared.get_mut(d)) {
            shared.running.retain(|&r| r != (cell, index));
        }
        for lock in &rule.locks {
            self.locks.remove(lock);
        }
    }

    fn may_start(&self, cell: usize) -> bool {
        let rule = &self.rules[cell];
        let shared_busy = rule
            .shared
            .as_ref()
            .and_then(|d| self.shared.get(d))
            .is_some_and(|s| s.written && !s.running.is_empty());
        !self.alone
            && (!rule.alone || self.running == 0)
            && !self.busy.contains(&cell)
            && !shared_busy
            && !rule.locks.iter().any(|l| self.locks.contains(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(apart: bool, alone: bool, locks: &[&str]) -> Rule {
        Rule {
            shared: apart.then(|| PathBuf::from("/w")),
            writes_seen: true,
            alone,
            locks: locks.iter().map(|l| l.to_string()).collect(),
        }
    }

    fn in_dir(dir: &str) -> Rule {
        Rule {
            shared: Some(PathBuf::from(dir)),
            writes_seen: true,
            ..Rule::default()
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
        s.release(0, 0);
        assert_eq!(take_all(&mut s), [(0, 1)]);
        s.release(1, 0);
        assert_eq!(s.take(), None, "the cell's run 1 is still under way");
        s.release(0, 1);
        assert_eq!(take_all(&mut s), [(0, 2)]);
        assert!(s.exhausted());
    }

    #[test]
    fn a_run_serial_cell_runs_alone_and_nothing_starts_beside_it() {
        let mut s = Schedule::new(vec![Rule::default(), rule(false, true, &[])], 2);
        assert_eq!(take_all(&mut s), [(0, 0), (0, 1)]);
        s.release(0, 0);
        assert_eq!(s.take(), None, "one run is under way");
        s.release(0, 1);
        assert_eq!(take_all(&mut s), [(1, 0)]);
        s.release(1, 0);
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
        s.release(0, 0);
        assert_eq!(s.take(), None, "gpu is still held");
        s.release(2, 0);
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
            for &(cell, index) in &now {
                s.release(cell, index);
            }
            taken.extend(now);
        }
        taken.sort();
        let want: Vec<(usize, u32)> = (0..4).flat_map(|c| (0..3).map(move |i| (c, i))).collect();
        assert_eq!(taken, want);
    }

    #[test]
    fn different_cells_share_a_directory_until_a_run_writes_there() {
        let mut s = Schedule::new(vec![in_dir("/w"), in_dir("/w"), in_dir("/other")], 2);
        assert_eq!(take_all(&mut s), [(0, 0), (1, 0), (2, 0)]);
        // The first ends having written nothing: it counts, and the directory stays open.
        assert_eq!(s.ended(0, 0, false), Ended::Counts);
        s.release(0, 0);
        assert_eq!(take_all(&mut s), [(0, 1)]);
        // Now one writes while another runs there: both are made again, one at a time.
        assert_eq!(s.ended(1, 0, true), Ended::Again);
        s.release(1, 0);
        assert_eq!(
            s.take(),
            None,
            "a run is under way in the written directory"
        );
        assert_eq!(s.ended(0, 1, false), Ended::Again, "it ran beside a writer");
        s.release(0, 1);
        assert_eq!(take_all(&mut s), [(1, 0)], "made again first, alone");
        assert_eq!(s.ended(1, 0, true), Ended::Counts, "alone, it counts");
        s.release(1, 0);
        assert_eq!(take_all(&mut s), [(0, 1)]);
        assert_eq!(s.ended(0, 1, false), Ended::Counts);
        s.release(0, 1);
        assert_eq!(take_all(&mut s), [(1, 1)]);
        // Another directory was never held up.
        assert_eq!(s.ended(2, 0, true), Ended::Counts, "it ran alone in /other");
        s.release(2, 0);
        assert_eq!(s.ended(1, 1, true), Ended::Counts);
        s.release(1, 1);
        assert_eq!(take_all(&mut s), [(2, 1)]);
        assert!(s.exhausted());
    }

    #[test]
    fn a_writer_that_ran_alone_counts_and_closes_the_directory() {
        let mut s = Schedule::new(vec![in_dir("/w"), in_dir("/w")], 1);
        assert_eq!(s.take(), Some((0, 0)));
        assert_eq!(s.ended(0, 0, true), Ended::Counts);
        // Its release comes later: nothing starts there before it.
        assert_eq!(s.take(), None);
        s.release(0, 0);
        assert_eq!(s.take(), Some((1, 0)));
        assert_eq!(s.take(), None);
    }

    #[test]
    fn where_writes_cannot_be_seen_the_directory_is_written_from_the_start() {
        let blind = Rule {
            writes_seen: false,
            ..in_dir("/w")
        };
        let mut s = Schedule::new(vec![blind, in_dir("/w")], 1);
        assert_eq!(take_all(&mut s), [(0, 0)]);
        assert_eq!(s.ended(0, 0, false), Ended::Counts);
        s.release(0, 0);
        assert_eq!(take_all(&mut s), [(1, 0)]);
    }
}
