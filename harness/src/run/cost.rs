//! What vkexit does around one run, each part measured on its own, for `vkexit bench`: the
//! CPU time (user + system) of the thread that does it, and of the processes it waited for.
//! CPU time hardly depends on what else the machine runs; wall time does.
//!
//! Kernel work deferred to other threads (a removed cgroup's teardown after an RCU grace
//! period, writeback) is not in any of these figures.

use super::observed::{CRASH_FILE, TIMELINE_FILE};
use super::{cgroup, reaper, slot, unix};
use crate::run::capture::DEFAULT_KEEP;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// CPU milliseconds per run of each part of what vkexit does around a run of `/bin/true`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Parts {
    /// Starting the program (in its cgroup, its own process group), waiting for its exit and
    /// its output, killing what is left: vkexit's side, less `cgroup` and `reaper`.
    pub spawn_and_supervise: f64,
    /// Of `spawn_and_supervise`: starting the program alone (its pipes, `clone3`, waiting for
    /// its `exec`), and reaping it.
    pub spawn: f64,
    /// Taking the worker's emptied cgroup, and emptying it after the run.
    pub cgroup: f64,
    /// For comparison: a cgroup made and removed per run, as before it was reused.
    pub cgroup_made_per_run: f64,
    /// Looking for orphans of the run (`/proc/self/task/*/children`).
    pub reaper: f64,
    /// Emptying the run's directory of what a passing run left (the preload's two files).
    pub run_directory: f64,
    /// Reading a passing run's evidence: the crash file and the exit timeline.
    pub evidence: f64,
    /// What the run's own process costs more when vkexit starts it than when a plain loop
    /// does (process group, no core, death signal, cgroup, environment).
    pub child: f64,
}

/// What one measured part cost: `runs` times `each`, this thread's CPU and its children's.
fn per_run(runs: u32, mut each: impl FnMut()) -> (f64, f64) {
    let (thread, children) = (thread_cpu_ms(), children_cpu_ms());
    for _ in 0..runs {
        each();
    }
    let n = f64::from(runs);
    (
        (thread_cpu_ms() - thread) / n,
        (children_cpu_ms() - children) / n,
    )
}

/// Measures each part `runs` times, in `work`. Runs in a thread of its own, as vkexit's
/// workers do (a worker's thread may join a cgroup v1 of its own), and leaves no cgroup.
pub fn parts(work: &Path, runs: u32) -> std::io::Result<Parts> {
    std::fs::create_dir_all(work)?;
    let parts = std::thread::scope(|s| s.spawn(|| measure(work, runs)).join())
        .unwrap_or_else(|_| Err(std::io::Error::other("the measuring thread panicked")));
    cgroup::release();
    parts
}

fn measure(work: &Path, runs: u32) -> std::io::Result<Parts> {
    let spec = unix::CommandSpec {
        program: "/bin/true".into(),
        args: Vec::new(),
        cwd: work.to_path_buf(),
        env_set: Vec::new(),
        env_remove: Vec::new(),
    };
    let prepared = unix::prepare(&spec)?;
    let limits = unix::Limits {
        timeout: Duration::from_secs(60),
        term_grace: Duration::from_secs(2),
        pipe_grace: Duration::from_millis(500),
        capture_keep: DEFAULT_KEEP,
        echo: false,
    };
    let mut reuse = cgroup::Reuse::default();
    let mut failed = None;
    let mut run = || {
        let outcome = unix::run_prepared(&spec, Ok(&prepared), &mut reuse, &limits, &mut |_, _| {});
        if let super::observed::Termination::NotStarted { reason } = outcome.termination {
            failed = Some(reason);
        }
    };
    run();
    let (supervised, child) = per_run(runs, run);
    if let Some(reason) = failed {
        return Err(std::io::Error::other(reason));
    }
    let (_, plain_child) = per_run(runs, || {
        let _ = Command::new("/bin/true")
            .current_dir(work)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    });
    let mut token = 0u64;
    let mut bound = |reuse: &mut cgroup::Reuse| {
        token += 1;
        if let Ok(b) = cgroup::RunBound::new(&format!("cost-{token}"), reuse) {
            b.finish(reuse);
        }
    };
    let (cgroup, _) = per_run(runs, || bound(&mut reuse));
    let (cgroup_made_per_run, _) = per_run(runs, || bound(&mut cgroup::Reuse::default()));
    // The program started in the cgroup and reaped, less the cgroup.
    let (spawn_in_cgroup, _) = per_run(runs, || {
        token += 1;
        let Ok(b) = cgroup::RunBound::new(&format!("cost-{token}"), &mut reuse) else {
            return;
        };
        let started = super::spawn::spawn_prepared(&prepared, &[], b.cgroup_fd(), b.child_setup());
        if let Ok(child) = started {
            let mut status = 0;
            // SAFETY: waits for the child just started.
            unsafe { libc::waitpid(child.pid, &mut status, 0) };
        }
        b.finish(&mut reuse);
    });
    drop(reuse);
    let (reaper, _) = per_run(runs, reaper::sweep);
    let mut slot = slot::Slot::new(work, 0);
    slot.prepare(false)?;
    let dir = slot.dir().to_path_buf();
    let timeline = dir.join(TIMELINE_FILE);
    let crash = dir.join(CRASH_FILE);
    let leave = || {
        std::fs::write(&timeline, TIMELINE)?;
        std::fs::write(&crash, "")
    };
    // Only the emptying is timed: what the run wrote is the run's cost.
    let mut run_directory = 0.0;
    for _ in 0..runs {
        leave()?;
        let t = thread_cpu_ms();
        slot.clean();
        slot.prepare(false)?;
        run_directory += thread_cpu_ms() - t;
    }
    leave()?;
    let (evidence, _) = per_run(runs, || {
        let crashes = super::read_crashes(&dir);
        std::hint::black_box(super::crash_story(&dir, &crashes));
        std::hint::black_box(crate::host::loader::read(&timeline));
    });
    slot::remove_all(work);
    Ok(Parts {
        spawn_and_supervise: (supervised - cgroup - reaper).max(0.0),
        spawn: (spawn_in_cgroup - cgroup).max(0.0),
        cgroup,
        cgroup_made_per_run,
        reaper,
        run_directory: run_directory / f64::from(runs),
        evidence,
        child: (child - plain_child).max(0.0),
    })
}

/// The exit timeline the preload writes for `/bin/true`.
const TIMELINE: &str = concat!(
    r#"{"ev":"preload-loaded","t_ns":1000,"pid":7,"tid":7,"thread":"true","program":"/usr/bin/true","crash_report":true}"#,
    "\n",
    r#"{"ev":"main-start","t_ns":2000,"pid":7,"tid":7,"thread":"true","argc":1}"#,
    "\n",
    r#"{"ev":"main-returned","t_ns":3000,"pid":7,"tid":7,"thread":"true","status":0}"#,
    "\n",
    r#"{"ev":"dl-fini-start","t_ns":4000,"pid":7,"tid":7,"thread":"true"}"#,
    "\n",
    r#"{"ev":"dl-fini-end","t_ns":5000,"pid":7,"tid":7,"thread":"true"}"#,
    "\n",
);

fn thread_cpu_ms() -> f64 {
    // SAFETY: clock_gettime writes into the zeroed struct it is given.
    let t = unsafe {
        let mut t: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
        t
    };
    t.tv_sec as f64 * 1000.0 + t.tv_nsec as f64 / 1e6
}

/// User and system time of every child waited for so far, by any thread: unlike wall time, it
/// hardly depends on what else the machine runs.
pub fn children_cpu_ms() -> f64 {
    rusage_ms(libc::RUSAGE_CHILDREN)
}

/// User and system time of this process so far, all its threads.
pub fn self_cpu_ms() -> f64 {
    rusage_ms(libc::RUSAGE_SELF)
}

fn rusage_ms(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}
