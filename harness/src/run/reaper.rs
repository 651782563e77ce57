//! No process left behind. vkexit is a child subreaper: a descendant of a
//! run that detaches (double fork, `setsid`) is re-parented to vkexit instead
//! of init, so vkexit can still find it. Each run's environment carries a
//! token; once a run has ended, every orphan that carries its token, or no
//! token at all once no run is active, is killed and reaped.
//!
//! Processes are only ever reaped by pid: a `waitpid(-1)` here would steal
//! the exit status of a run's own program from the thread supervising it.

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub const TOKEN_VAR: &str = "VKEXIT_RUN_TOKEN";

struct State {
    /// Tokens of runs whose program may still be running.
    active: BTreeSet<String>,
    /// Programs spawned by the runner, reaped by their own supervisor.
    direct: BTreeSet<libc::pid_t>,
}

static STATE: Mutex<State> = Mutex::new(State {
    active: BTreeSet::new(),
    direct: BTreeSet::new(),
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() {
    // SAFETY: prctl with an integer argument; affects this process only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
}

pub fn new_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Spawns with the registry locked, so that a sweep never sees the new
/// program before it is known as a direct child.
pub fn spawn<T>(
    token: &str,
    spawn: impl FnOnce() -> io::Result<(libc::pid_t, T)>,
) -> io::Result<T> {
    let mut s = state();
    s.active.insert(token.to_string());
    let child = spawn();
    match &child {
        Ok((pid, _)) => {
            s.direct.insert(*pid);
        }
        Err(_) => {
            s.active.remove(token);
        }
    }
    child.map(|(_, c)| c)
}

/// The run's program was reaped and its group killed: forget both, then
/// kill whatever of it detached.
pub fn finished(token: &str, pid: libc::pid_t) {
    {
        let mut s = state();
        s.direct.remove(&pid);
        s.active.remove(token);
    }
    sweep();
}

/// Kills and reaps orphans of ended runs. Killing one re-parents its own
/// children to us, so this repeats until a pass finds nothing to kill.
pub fn sweep() {
    for _ in 0..64 {
        let s = state();
        let mut killed = 0;
        for pid in our_children() {
            if s.direct.contains(&pid) {
                continue;
            }
            if is_zombie(pid) {
                reap(pid, libc::WNOHANG);
                continue;
            }
            let owner = run_token(pid);
            let ended = match &owner {
                Some(token) => !s.active.contains(token),
                None => s.active.is_empty(),
            };
            if ended {
                // SAFETY: signals a process that is our own child, and its
                // group when it leads one (a `setsid` daemon does).
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
                reap(pid, 0);
                killed += 1;
            }
        }
        drop(s);
        if killed == 0 {
            return;
        }
    }
}

fn reap(pid: libc::pid_t, flags: libc::c_int) {
    let mut status = 0;
    // SAFETY: waitpid on a specific child of ours.
    unsafe { libc::waitpid(pid, &mut status, flags) };
}

/// Children of every thread of this process (orphans are re-parented to
/// one of them).
fn our_children() -> Vec<libc::pid_t> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return pids;
    };
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        pids.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<libc::pid_t>().ok()),
        );
    }
    pids
}

fn is_zombie(pid: libc::pid_t) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name, which may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "Z")
}

fn run_token(pid: libc::pid_t) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{TOKEN_VAR}=");
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}
