//! Bounds on what one run may start, and a kill that reaches all of it. Each
//! run gets its own cgroup below one cgroup of this vkexit process:
//!
//! - `pids.max` bounds the processes and threads of a run together, so a
//!   fork bomb stops at the limit. RLIMIT_NPROC does not bind root (CI
//!   usually runs as root); a cgroup does.
//! - `cgroup.kill` (cgroup v2, Linux 5.14) kills every member at once, even
//!   one that left the process group and the session. With cgroup v1 only,
//!   the members are killed one by one until none is left.
//!
//! The program starts inside its cgroups, so every descendant does too:
//! `clone3(CLONE_INTO_CGROUP)` starts it in its cgroup v2 (run/spawn.rs), and
//! where the pids controller is in cgroup v1, the worker thread that starts it
//! is in a v1 pids cgroup already. Only where `clone3` is refused (an older
//! kernel, a seccomp filter, qemu-user) does the child move itself into its
//! cgroup v2, between fork and exec. Where no cgroup can be made
//! (a container whose cgroup file system is read-only), a vkexit that is not
//! root falls back to RLIMIT_NPROC; root then has no bound, and `bound_here`
//! says so.

use crate::support::env::BadVariable;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PREFIX: &str = "vkexit-";

/// The cgroup mounts of this machine.
#[derive(Debug, Default, Clone)]
struct Mounts {
    /// The cgroup v2 (unified) hierarchy.
    unified: Option<PathBuf>,
    /// A cgroup v1 hierarchy holding the pids controller.
    pids_v1: Option<PathBuf>,
}

/// This vkexit's own cgroups, parents of the runs' ones.
struct Parents {
    limit: Result<u64, BadVariable>,
    /// In the unified hierarchy: runs are killed through it.
    unified: Option<PathBuf>,
    /// Where `pids.max` is: `unified` when v2 has the pids controller, else
    /// a cgroup in the v1 pids hierarchy.
    pids: Option<PathBuf>,
    /// Write end of this process's parent cgroup's `cgroup.kill`, for the signal handler.
    kill: Option<OwnedFd>,
}

static PARENTS: Mutex<Option<Parents>> = Mutex::new(None);
/// The raw descriptor of `Parents::kill`, readable from a signal handler.
static KILL_FD: AtomicI32 = AtomicI32::new(-1);

fn parents() -> std::sync::MutexGuard<'static, Option<Parents>> {
    PARENTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why the runs of a vkexit started now would not be bounded.
#[derive(Debug, thiserror::Error)]
pub enum Unbounded {
    /// The limit itself is none (`VKEXIT_MAX_PROCESSES`).
    #[error(transparent)]
    Limit(#[from] BadVariable),
    /// No cgroup with the pids controller can be made, and vkexit is root: the cgroup
    /// mounts, where there are any.
    #[error(
        "no cgroup with the pids controller can be made here (cgroup v2: {}, cgroup v1 pids: {}) and RLIMIT_NPROC does not bind root",
        show(unified),
        show(pids_v1)
    )]
    NoPidsCgroup {
        /// The cgroup v2 hierarchy, if mounted.
        unified: Option<PathBuf>,
        /// The cgroup v1 hierarchy of the pids controller, if mounted.
        pids_v1: Option<PathBuf>,
    },
}

/// How the runs of a vkexit started now would be bounded, in words, or why
/// they would not be. Makes and removes a probe cgroup; starts nothing.
pub fn bound_here() -> Result<String, Unbounded> {
    let limit = max_processes()?;
    let mounts = find_mounts();
    let name = format!("{PREFIX}probe-{}", std::process::id());
    if let Some(unified) = &mounts.unified {
        if let Some(dir) = make_dir(&unified.join(&name)) {
            let pids = enable_pids(unified, &dir) && usable(&dir);
            let _ = std::fs::remove_dir(&dir);
            if pids {
                return Ok(format!(
                    "cgroup v2 pids.max = {limit} per run under {}",
                    unified.display()
                ));
            }
        }
    }
    if let Some(v1) = &mounts.pids_v1 {
        if let Some(dir) = make_dir(&v1.join(&name)).filter(|d| usable(d)) {
            let _ = std::fs::remove_dir(&dir);
            return Ok(format!(
                "cgroup v1 pids.max = {limit} per run under {}",
                v1.display()
            ));
        }
    }
    if !is_root() {
        return Ok(format!(
            "RLIMIT_NPROC: this user's processes now + {limit} per run"
        ));
    }
    Err(Unbounded::NoPidsCgroup {
        unified: mounts.unified,
        pids_v1: mounts.pids_v1,
    })
}

/// Why a run's processes cannot all be killed at once.
#[derive(Debug, thiserror::Error)]
pub enum NoKill {
    /// No cgroup v2.
    #[error("no cgroup v2 hierarchy is mounted")]
    NoUnified,
    /// No cgroup can be made or used under the cgroup v2 hierarchy, at this path.
    #[error("cannot make a cgroup under {} and move a process into it", .0.display())]
    NoCgroup(PathBuf),
    /// A kernel before Linux 5.14.
    #[error("this kernel has no cgroup.kill (Linux 5.14)")]
    NoCgroupKill,
}

/// Whether a run's processes can all be killed at once, wherever they went
/// (`cgroup.kill`), or why not. Makes and removes a probe cgroup.
pub fn kill_here() -> Result<String, NoKill> {
    let Some(unified) = find_mounts().unified else {
        return Err(NoKill::NoUnified);
    };
    let dir = unified.join(format!("{PREFIX}probe-kill-{}", std::process::id()));
    let Some(dir) = make_dir(&dir).filter(|d| usable(d)) else {
        return Err(NoKill::NoCgroup(unified));
    };
    let kill = dir.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&dir);
    match kill {
        true => Ok(format!("cgroup.kill under {}", unified.display())),
        false => Err(NoKill::NoCgroupKill),
    }
}

fn show(p: &Option<PathBuf>) -> String {
    p.as_ref().map_or("not mounted".into(), |p| {
        format!("{} not writable", p.display())
    })
}

/// The limit on processes and threads of one run, as this process was prepared with it.
fn max_processes() -> Result<u64, BadVariable> {
    super::process().max_processes.clone()
}

/// Why a run cannot be placed in its cgroups: the cgroup, and what failed there.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unplaced {
    /// The limit itself is none (`VKEXIT_MAX_PROCESSES`).
    #[error(transparent)]
    Limit(#[from] BadVariable),
    /// The run's cgroup v2 cannot be made.
    #[error("cannot make the run's cgroup {}: {source}", dir.display())]
    MakeRun {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The worker's cgroup v1 cannot be made.
    #[error("cannot make the cgroup {}", .0.display())]
    MakeWorker(PathBuf),
    #[error("cannot set pids.max of {}: {source}", dir.display())]
    PidsMax {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot open the cgroup {}: {source}", dir.display())]
    Open {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot open {}/cgroup.procs: {source}", dir.display())]
    OpenProcs {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The worker thread cannot move itself into its cgroup v1.
    #[error("cannot move into the cgroup {}: {source}", dir.display())]
    MoveWorker {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// How a run's cgroup emptied once the run was over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emptied {
    /// Nothing was left in it: it can take the worker's next run.
    ByItself,
    /// What was left was killed: removed, never reused.
    Killed,
    /// It cannot be told, or it did not empty within 5 s: removed.
    Unknown,
}

/// What one run is placed in and bounded by.
pub(crate) struct RunBound {
    /// The run's own cgroup in the unified hierarchy, removed when it ends.
    dir: Option<PathBuf>,
    /// `dir` opened, for `clone3(CLONE_INTO_CGROUP)`.
    dir_fd: Option<OwnedFd>,
    /// `cgroup.procs` of `dir`, written by a forked child before exec where
    /// `clone3` is refused.
    procs: Option<OwnedFd>,
    /// The v1 pids cgroup of this worker thread, where the run's program
    /// starts as the thread's child; the thread itself is a member too.
    worker: Option<PathBuf>,
    /// Where `pids.events` is, and its count of hits when the run began.
    pids: Option<(PathBuf, u64)>,
    limit: u64,
    nproc: Option<u64>,
    /// `cgroup.kill` of `dir`, open (Linux 5.14).
    kill: Option<OwnedFd>,
    /// `cgroup.events` of `dir`, open: whether anything is left in it.
    events: Option<OwnedFd>,
}

/// The cgroup of a worker's last run, emptied, kept for its next run:
/// making and removing a cgroup cost the kernel more than the rest of what
/// vkexit does around a short run. Removed when dropped.
#[derive(Default)]
pub(crate) struct Reuse {
    held: Option<Held>,
}

struct Held {
    dir: PathBuf,
    dir_fd: OwnedFd,
    procs: OwnedFd,
    kill: Option<OwnedFd>,
    events: OwnedFd,
    /// `pids.events`' count of hits when the last run ended.
    hits: u64,
}

impl Drop for Reuse {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            drop(held.into_bound());
        }
    }
}

impl Held {
    /// A bound that removes the cgroup when it is dropped.
    fn into_bound(self) -> RunBound {
        RunBound {
            dir: Some(self.dir),
            dir_fd: Some(self.dir_fd),
            procs: Some(self.procs),
            worker: None,
            pids: None,
            limit: 0,
            nproc: None,
            kill: self.kill,
            events: Some(self.events),
        }
    }
}

/// Whether every process of a run has been reaped ([`RunBound::settle`]).
pub(crate) struct Settle {
    /// `pids.current` of the run's cgroup, and its count with the run gone.
    current: Option<(PathBuf, u64)>,
}

impl Settle {
    /// True where it cannot be told: the cgroup was removed, or has no
    /// pids controller.
    pub(crate) fn settled(&self) -> bool {
        let Some((file, baseline)) = &self.current else {
            return true;
        };
        std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .is_none_or(|n| n <= *baseline)
    }
}

/// What the child does before exec, whether `clone3` started it in its cgroup (the usual
/// path) or it was forked where `clone3` is refused; plain data, so that it can be used there.
#[derive(Clone, Copy)]
pub(crate) struct ChildSetup {
    procs: RawFd,
    nproc: Option<u64>,
}

thread_local! {
    /// The v1 pids cgroup this thread moved itself into, made once per
    /// thread: a process forked by a thread starts in the thread's v1
    /// cgroups, so its runs need no move of their own.
    static WORKER_PIDS: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

impl RunBound {
    /// Makes the cgroups of the run `token`, or takes the emptied one of
    /// the worker's last run from `reuse`. An error is a reason the run
    /// cannot start.
    pub(crate) fn new(token: &str, reuse: &mut Reuse) -> Result<RunBound, Unplaced> {
        let mut guard = parents();
        // Another vkexit that believed ours gone (another pid namespace on
        // the same cgroup file system) may have removed our empty cgroups.
        let gone = guard.as_ref().is_some_and(|inv| {
            [&inv.unified, &inv.pids]
                .into_iter()
                .flatten()
                .any(|dir| !dir.exists())
        });
        if gone {
            // Its cgroups went with the parents.
            drop(reuse.held.take());
            if let Some(old) = guard.take() {
                old.remove();
            }
        }
        let inv = guard.get_or_insert_with(Parents::start);
        let limit = inv.limit.clone()?;
        let mut bound = RunBound {
            dir: None,
            dir_fd: None,
            procs: None,
            worker: None,
            pids: None,
            limit,
            nproc: None,
            kill: None,
            events: None,
        };
        let held = reuse.held.take();
        let (held, other) = match held {
            Some(h) if inv.unified.as_deref() == h.dir.parent() => (Some(h), None),
            other => (None, other),
        };
        // One of another vkexit's cgroups: removed, not reused.
        drop(other);
        if let Some(held) = held {
            if inv.pids.as_ref() == inv.unified.as_ref() {
                bound.pids = Some((held.dir.clone(), held.hits));
            }
            bound.dir = Some(held.dir);
            bound.dir_fd = Some(held.dir_fd);
            bound.procs = Some(held.procs);
            bound.kill = held.kill;
            bound.events = Some(held.events);
        } else if let Some(parent) = &inv.unified {
            let dir = parent.join(format!("run-{token}"));
            std::fs::create_dir(&dir).map_err(|source| Unplaced::MakeRun {
                dir: dir.clone(),
                source,
            })?;
            bound.dir = Some(dir.clone());
            if inv.pids.as_ref() == Some(parent) {
                std::fs::write(dir.join("pids.max"), limit.to_string()).map_err(|source| {
                    Unplaced::PidsMax {
                        dir: dir.clone(),
                        source,
                    }
                })?;
                bound.pids = Some((dir.clone(), 0));
            }
            bound.dir_fd = Some(open(&dir, libc::O_RDONLY | libc::O_DIRECTORY).map_err(
                |source| Unplaced::Open {
                    dir: dir.clone(),
                    source,
                },
            )?);
            bound.procs = Some(open(&dir.join("cgroup.procs"), libc::O_WRONLY).map_err(
                |source| Unplaced::OpenProcs {
                    dir: dir.clone(),
                    source,
                },
            )?);
            bound.kill = open_write(&dir.join("cgroup.kill")).ok();
            bound.events = open(&dir.join("cgroup.events"), libc::O_RDONLY).ok();
        }
        if let Some(v1) = inv
            .pids
            .as_ref()
            .filter(|p| Some(*p) != inv.unified.as_ref())
        {
            let worker = worker_pids(v1, limit)?;
            bound.pids = Some((worker.clone(), limit_hits(&worker).unwrap_or(0)));
            bound.worker = Some(worker);
        }
        if bound.pids.is_none() && !is_root() {
            // Never above the hard limit this user already has: raising it
            // would fail, and the run with it.
            bound.nproc = Some((tasks_of_this_user() + limit).min(nproc_hard_limit()));
        }
        Ok(bound)
    }

    /// The cgroup that holds this run alone, as `/proc/PID/cgroup` names it
    /// ([`super::reaper::cgroup_keys`]): how an orphan's death, read from a
    /// zombie whose environment is gone, is told to be this run's.
    pub(crate) fn reaper_key(&self) -> Option<String> {
        let under = |dir: &Path| {
            let name = |p: Option<&Path>| p?.file_name()?.to_str().map(str::to_string);
            Some(format!("{}/{}", name(dir.parent())?, name(Some(dir))?))
        };
        match (&self.dir, &self.worker) {
            (Some(dir), _) => under(dir).map(|p| format!("0::/{p}")),
            (None, Some(worker)) => under(worker).map(|p| format!("pids:/{p}")),
            (None, None) => None,
        }
    }

    /// How to tell that every process of the run has been reaped: its
    /// cgroup's `pids.current` is back where it was before the run (a process
    /// is counted until it is reaped, not only until it exits).
    pub(crate) fn settle(&self) -> Settle {
        let current = match (&self.dir, &self.worker, &self.pids) {
            // The worker thread itself is the one task of its v1 cgroup.
            (_, Some(worker), _) => Some((worker.join("pids.current"), 1)),
            (Some(dir), None, Some((pids, _))) if pids == dir => {
                Some((dir.join("pids.current"), 0))
            }
            _ => None,
        };
        Settle { current }
    }

    /// The run's cgroup, open, for starting the program inside it.
    pub(crate) fn cgroup_fd(&self) -> Option<RawFd> {
        self.dir_fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    pub(crate) fn child_setup(&self) -> ChildSetup {
        ChildSetup {
            procs: self.procs.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            nproc: self.nproc,
        }
    }

    /// Kills what is left of the run; its cgroup, once empty, goes back to
    /// `reuse` for the worker's next run, or is removed. Returns what makes
    /// the run's own result untrustworthy: the process limit was hit.
    pub(crate) fn finish(mut self, reuse: &mut Reuse) -> Vec<String> {
        let mut faults = Vec::new();
        let counts = self
            .pids
            .as_ref()
            .map(|(dir, before)| (limit_hits(dir).unwrap_or(0), *before));
        let hits = counts
            .map(|(now, before)| now.saturating_sub(before))
            .filter(|&n| n > 0);
        if let Some(hits) = hits {
            faults.push(format!(
                "the program hit vkexit's limit of {} processes and threads {hits} time(s) (a fork bomb?); raise it with {}",
                self.limit,
                crate::support::env::MAX_PROCESSES
            ));
        }
        // Only a cgroup that emptied by itself is kept: once anything was killed
        // through its `cgroup.kill`, Linux 6.x kills at birth every process later
        // cloned into it (CLONE_INTO_CGROUP), so the next run gets a new one.
        if self.empty_run_cgroup() == Emptied::ByItself {
            if let (Some(dir), Some(dir_fd), Some(procs), Some(events)) = (
                self.dir.take(),
                self.dir_fd.take(),
                self.procs.take(),
                self.events.take(),
            ) {
                let unified_pids = self.pids.as_ref().is_some_and(|(p, _)| *p == dir);
                reuse.held = Some(Held {
                    hits: match unified_pids {
                        true => counts.map_or(0, |(now, _)| now),
                        false => 0,
                    },
                    dir,
                    dir_fd,
                    procs,
                    kill: self.kill.take(),
                    events,
                });
            }
        }
        self.kill_and_remove();
        faults
    }

    /// Kills whatever is left in the run's cgroup until nothing is, and says
    /// how it emptied.
    fn empty_run_cgroup(&self) -> Emptied {
        let (Some(dir), Some(events)) = (&self.dir, &self.events) else {
            return Emptied::Unknown;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut killed = false;
        loop {
            match populated(events) {
                Some(false) if killed => return Emptied::Killed,
                Some(false) => return Emptied::ByItself,
                Some(true) if Instant::now() < deadline => {}
                _ => return Emptied::Unknown,
            }
            killed = true;
            let all_at_once = self.kill.as_ref().is_some_and(|k| write_one(k.as_raw_fd()));
            if !all_at_once {
                kill_members(dir);
            }
            // Killed processes leave their cgroup as they exit.
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn kill_and_remove(&mut self) {
        self.procs = None;
        self.dir_fd = None;
        self.events = None;
        let kill = self.kill.take();
        let dir = self.dir.take();
        let worker = self.worker.take();
        if let Some(dir) = &dir {
            if !kill.is_some_and(|k| write_one(k.as_raw_fd())) {
                kill_members(dir);
            }
        }
        // Killed processes leave their cgroup as they exit; a fork that was
        // under way may still add one, so kill again until all are gone.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut dir_left = dir.is_some();
        let mut worker_left = worker.is_some();
        while (dir_left || worker_left) && Instant::now() < deadline {
            if let Some(dir) = dir.as_ref().filter(|_| dir_left) {
                dir_left =
                    std::fs::remove_dir(dir).is_err_and(|e| e.kind() != io::ErrorKind::NotFound);
                if dir_left {
                    kill_members(dir);
                }
            }
            if let Some(worker) = worker.as_ref().filter(|_| worker_left) {
                worker_left = kill_members(worker) > 0;
            }
            if dir_left || worker_left {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for RunBound {
    fn drop(&mut self) {
        self.kill_and_remove();
    }
}

/// This thread's v1 pids cgroup under `parent`, the thread moved into it the
/// first time. The thread counts as one of the cgroup's tasks: the limit is
/// one above the runs'.
fn worker_pids(parent: &Path, limit: u64) -> Result<PathBuf, Unplaced> {
    let ready = WORKER_PIDS.with(|w| {
        w.borrow()
            .clone()
            .filter(|dir| dir.parent() == Some(parent) && dir.exists())
    });
    if let Some(dir) = ready {
        return Ok(dir);
    }
    // SAFETY: gettid cannot fail.
    let tid = unsafe { libc::gettid() };
    let dir = parent.join(format!("worker-{tid}"));
    make_dir(&dir).ok_or_else(|| Unplaced::MakeWorker(dir.clone()))?;
    std::fs::write(dir.join("pids.max"), (limit + 1).to_string()).map_err(|source| {
        Unplaced::PidsMax {
            dir: dir.clone(),
            source,
        }
    })?;
    // "0" moves the writing thread alone.
    std::fs::write(dir.join("tasks"), "0").map_err(|source| Unplaced::MoveWorker {
        dir: dir.clone(),
        source,
    })?;
    WORKER_PIDS.with(|w| *w.borrow_mut() = Some(dir.clone()));
    Ok(dir)
}

impl ChildSetup {
    /// Nothing to do: no cgroup to enter, no limit to set.
    #[cfg(test)]
    pub(crate) fn none() -> ChildSetup {
        ChildSetup {
            procs: -1,
            nproc: None,
        }
    }

    /// Runs in the child before exec: async-signal-safe only. `in_cgroup`: `clone3` started
    /// the child inside the run's cgroup already; else it was forked and moves itself in.
    ///
    /// # Safety
    /// Call only between fork and exec; the descriptors are those of
    /// `RunBound::child_setup`, still open.
    pub(crate) unsafe fn apply(&self, in_cgroup: bool) -> io::Result<()> {
        if self.procs >= 0 && !in_cgroup {
            // "0" moves the writing process itself into the cgroup.
            // SAFETY: writes one byte from a static buffer to an open fd.
            if unsafe { libc::write(self.procs, b"0".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(n) = self.nproc {
            let limit = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit on this process with a valid struct.
            if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &limit) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Parents {
    fn start() -> Parents {
        let limit = max_processes();
        let mounts = find_mounts();
        let name = parents_name(std::process::id());
        let mut inv = Parents {
            limit,
            unified: None,
            pids: None,
            kill: None,
        };
        if let Some(root) = &mounts.unified {
            remove_stale(root);
            inv.unified = make_dir(&root.join(&name)).filter(|dir| usable(dir));
            if let Some(dir) = &inv.unified {
                if enable_pids(root, dir) {
                    inv.pids = Some(dir.clone());
                }
                inv.kill = open_write(&dir.join("cgroup.kill")).ok();
                if let Some(fd) = &inv.kill {
                    KILL_FD.store(fd.as_raw_fd(), Ordering::SeqCst);
                }
            }
        }
        if inv.pids.is_none() {
            if let Some(root) = &mounts.pids_v1 {
                remove_stale(root);
                inv.pids = make_dir(&root.join(&name)).filter(|dir| usable(dir));
            }
        }
        inv
    }

    fn remove(self) {
        KILL_FD.store(-1, Ordering::SeqCst);
        drop(self.kill);
        for dir in [self.unified, self.pids].into_iter().flatten() {
            // The workers' v1 cgroups: their threads have ended, and leave
            // them a moment after.
            let workers: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.is_dir())
                        .collect()
                })
                .unwrap_or_default();
            for worker in workers {
                remove_when_empty(&worker);
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Removes this vkexit's own cgroups once no run is left; the next run
/// makes them again.
pub(crate) fn release() {
    if let Some(inv) = parents().take() {
        inv.remove();
    }
}

/// Runs inside the second Ctrl-C's signal handler: async-signal-safe only.
/// Kills every process of every run, wherever it went.
pub(crate) fn kill_all_from_signal_handler() {
    let fd = KILL_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: writes one byte from a static buffer to an open fd.
        unsafe { libc::write(fd, b"1".as_ptr().cast(), 1) };
    }
}

/// Lets the pids controller reach this process's parent cgroup and, through it,
/// the runs' cgroups. The root of a v2 hierarchy may take no processes of
/// its own, so enabling a controller there is allowed.
fn enable_pids(root: &Path, dir: &Path) -> bool {
    let has = |file: &Path| {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "pids")
    };
    if !has(&dir.join("cgroup.controllers")) {
        if !has(&root.join("cgroup.controllers")) {
            return false;
        }
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+pids");
        if !has(&dir.join("cgroup.controllers")) {
            return false;
        }
    }
    std::fs::write(dir.join("cgroup.subtree_control"), "+pids").is_ok()
}

/// Whether a process can be started in, or moved into, a cgroup below
/// `dir`: a child is started to try it. Where it cannot (a delegation
/// boundary, a container's rules), runs go without this hierarchy rather
/// than fail to start. An unusable `dir` is removed.
fn usable(dir: &Path) -> bool {
    let probe = dir.join("probe");
    let entered = make_dir(&probe).is_some_and(|p| {
        // As runs start: inside, where `clone3` can (cgroup v2), which moves
        // nothing; else moved in after a fork.
        let started_inside = open(&p, libc::O_RDONLY | libc::O_DIRECTORY)
            .ok()
            .is_some_and(|fd| starts_inside(fd.as_raw_fd()));
        started_inside || open_write(&p.join("cgroup.procs")).is_ok_and(|procs| enters(&procs))
    });
    remove_when_empty(&probe);
    if !entered {
        let _ = std::fs::remove_dir(dir);
    }
    entered
}

fn enters(procs: &OwnedFd) -> bool {
    let fd = procs.as_raw_fd();
    // SAFETY: the child only calls write and _exit, both async-signal-safe,
    // so forking a multi-threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; "0" moves the writing process itself.
        unsafe {
            let moved = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            libc::_exit(if moved { 0 } else { 1 });
        }
    }
    if pid < 0 {
        return false;
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Whether a child can be started inside the cgroup open at `fd`.
fn starts_inside(fd: RawFd) -> bool {
    match super::spawn::clone_into(fd) {
        Some(Ok(0)) => {
            // SAFETY: the child of a clone without CLONE_VM exits at once.
            unsafe { libc::_exit(0) }
        }
        Some(Ok(pid)) => {
            let mut status = 0;
            // SAFETY: waits for the child just started.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
        _ => false,
    }
}

/// The probe's child has exited; its cgroup empties a moment later.
fn remove_when_empty(dir: &Path) {
    let deadline = Instant::now() + Duration::from_millis(500);
    while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `vkexit-PID-NS`: NS, the pid namespace, says whose PID it is.
fn parents_name(pid: u32) -> String {
    format!("{PREFIX}{pid}-{}", pid_namespace())
}

/// The inode of this process's pid namespace (`pid:[4026531836]`), 0 when
/// it cannot be read.
fn pid_namespace() -> u64 {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        })
        .unwrap_or(0)
}

/// Cgroups of vkexit processes of this pid namespace that are gone: killed
/// (SIGKILL, OOM) before they could end their runs. What is still inside
/// (a detached descendant that outlived its vkexit) is killed, then the
/// cgroups are removed. Another namespace's cgroups are never touched: its
/// PIDs mean nothing here.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let ns = pid_namespace();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((pid, owner_ns)) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, ns)| Some((pid.parse::<u32>().ok()?, ns.parse::<u64>().ok()?)))
        else {
            continue;
        };
        if owner_ns != ns || ns == 0 || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let runs: Vec<PathBuf> = std::fs::read_dir(entry.path())
            .map(|d| {
                d.flatten()
                    .map(|r| r.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        for run in runs {
            let mut stale = RunBound {
                dir: Some(run),
                dir_fd: None,
                procs: None,
                worker: None,
                pids: None,
                limit: 0,
                nproc: None,
                kill: None,
                events: None,
            };
            stale.kill_and_remove();
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

fn make_dir(dir: &Path) -> Option<PathBuf> {
    match std::fs::create_dir(dir) {
        Ok(()) => Some(dir.to_path_buf()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Some(dir.to_path_buf()),
        Err(_) => None,
    }
}

/// How many times a fork or clone failed at the limit: `max N` in
/// `pids.events`.
fn limit_hits(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("pids.events")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("max "))
        .and_then(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
}

/// Kills every member of `dir` but vkexit itself (a worker thread lives in
/// its v1 cgroup); returns how many there were.
fn kill_members(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let me = std::process::id() as libc::pid_t;
    let mut killed = 0;
    for pid in text
        .lines()
        .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
    {
        if pid > 0 && pid != me {
            // SAFETY: kill of a process that is a member of this run's cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed += 1;
        }
    }
    killed
}

/// Writes "1" to `fd` (`cgroup.kill`); whether it took.
fn write_one(fd: RawFd) -> bool {
    // SAFETY: writes one byte from a static buffer to an open descriptor.
    unsafe { libc::write(fd, b"1".as_ptr().cast(), 1) == 1 }
}

/// `populated` of an open `cgroup.events`, read again from its start;
/// `None` where it cannot be read.
fn populated(events: &OwnedFd) -> Option<bool> {
    let mut buf = [0u8; 128];
    // SAFETY: reads into a buffer writable for its length from an open fd.
    let n = unsafe { libc::pread(events.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("populated "))
        .map(|v| v.trim() != "0")
}

fn open_write(path: &Path) -> io::Result<OwnedFd> {
    open(path, libc::O_WRONLY)
}

fn open(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open with a NUL-terminated path; a non-negative result is a
    // descriptor nobody else owns.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn nproc_hard_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) } != 0 {
        return u64::MAX;
    }
    limit.rlim_max
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Threads of every process of this user: what RLIMIT_NPROC counts.
fn tasks_of_this_user() -> u64 {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(')')?;
                    rest.split_whitespace().nth(17)?.parse::<u64>().ok()
                })
                .unwrap_or(1)
        })
        .sum()
}

fn find_mounts() -> Mounts {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_mountinfo(&text)
}

/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS…] - FSTYPE SOURCE SUPER`
fn parse_mountinfo(text: &str) -> Mounts {
    let mut mounts = Mounts::default();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(point) = left.split(' ').nth(4) else {
            continue;
        };
        let mut right = right.split(' ');
        let fstype = right.next().unwrap_or("");
        let options = right.nth(1).unwrap_or("");
        let point = PathBuf::from(unescape(point));
        if fstype == "cgroup2" && mounts.unified.is_none() {
            mounts.unified = Some(point);
        } else if fstype == "cgroup"
            && options.split(',').any(|o| o == "pids")
            && mounts.pids_v1.is_none()
        {
            mounts.pids_v1 = Some(point);
        }
    }
    mounts
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn mountinfo_finds_the_unified_and_the_v1_pids_hierarchies() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
";
        let m = parse_mountinfo(text);
        assert_eq!(m.unified.unwrap(), Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(m.pids_v1.unwrap(), Path::new("/sys/fs/cgroup/pids"));
        let pure_v2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let m = parse_mountinfo(pure_v2);
        assert_eq!(m.unified.unwrap(), Path::new("/sys/fs/cgroup"));
        assert!(m.pids_v1.is_none());
        assert!(parse_mountinfo("garbage\n\n- -\n").unified.is_none());
    }

    /// The probe's child reports whether its write went through: a
    /// descriptor it cannot write to reads as a hierarchy it cannot enter.
    #[test]
    fn the_probe_child_reports_whether_it_could_write() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cgroup.procs");
        std::fs::write(&file, "").unwrap();
        assert!(enters(&open_write(&file).unwrap()));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0");
        let read_only: OwnedFd = std::fs::File::open(&file).unwrap().into();
        assert!(!enters(&read_only));
    }

    /// A run starts inside its own cgroup, and its worker thread's v1 pids
    /// cgroup, without moving there: nothing to wait for. Needs root and a
    /// writable cgroup file system (skipped otherwise, as `bound_here` says).
    #[test]
    fn a_run_starts_inside_its_cgroups() {
        if !is_root() || bound_here().is_err() {
            vkexit_testkit::skip!("no cgroup with the pids controller can be made here");
        }
        // In a thread of its own, as a worker: the thread joins a v1 cgroup.
        std::thread::spawn(run_in_cgroups).join().unwrap();
        release();
    }

    fn run_in_cgroups() {
        let token = format!("test-{}", std::process::id());
        let mut reuse = Reuse::default();
        let bound = RunBound::new(&token, &mut reuse).unwrap();
        let spec = crate::run::unix::CommandSpec {
            program: "/bin/cat".into(),
            args: vec!["/proc/self/cgroup".into()],
            cwd: "/".into(),
            env_set: Vec::new(),
            env_remove: Vec::new(),
        };
        let child =
            crate::run::spawn::spawn(&spec, &[], bound.cgroup_fd(), bound.child_setup()).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(child.stdout), &mut text).unwrap();
        let mut status = 0;
        // SAFETY: waits for the child just started.
        unsafe { libc::waitpid(child.pid, &mut status, 0) };
        let run = format!("/run-{token}");
        let unified = find_mounts().unified.is_some();
        assert_eq!(
            unified,
            text.lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&run)),
            "{text}"
        );
        if bound.worker.is_some() {
            assert!(
                text.lines()
                    .any(|l| l.contains(":pids:") && l.contains("/worker-")),
                "{text}"
            );
        }
        assert!(bound.finish(&mut reuse).is_empty());
        if unified {
            // Emptied, it is the next run's.
            let held = reuse.held.as_ref().expect("the emptied cgroup is kept");
            assert!(held.dir.ends_with(&run[1..]));
            assert_eq!(populated(&held.events), Some(false));
            let again = RunBound::new("other", &mut reuse).unwrap();
            assert!(again.dir.as_ref().unwrap().ends_with(&run[1..]));
            assert!(again.finish(&mut reuse).is_empty());
            let dir = reuse.held.as_ref().unwrap().dir.clone();
            drop(reuse);
            assert!(!dir.exists(), "a dropped reuse removes its cgroup");
        }
    }

    #[test]
    fn mount_points_with_escaped_spaces() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/a\\"), r"/a\\");
        assert_eq!(unescape(r"/a\04"), r"/a\04");
    }

    #[test]
    fn the_limit_hits_are_read_from_pids_events() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pids.events"), "max 0\n").unwrap();
        assert_eq!(limit_hits(dir.path()), None);
        std::fs::write(dir.path().join("pids.events"), "max 17\n").unwrap();
        assert_eq!(limit_hits(dir.path()), Some(17));
        let mut f = std::fs::File::create(dir.path().join("pids.events")).unwrap();
        writeln!(f, "max 3").unwrap();
        assert_eq!(limit_hits(dir.path()), Some(3));
    }
}
