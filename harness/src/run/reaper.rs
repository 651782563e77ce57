//! No process left behind, and no death unseen. vkexit is a child subreaper:
//! a descendant of a run that detaches (double fork, `setsid`) is re-parented
//! to vkexit instead of init, so vkexit can still find it. Each run's
//! environment carries a token; once a run has ended, every orphan that
//! carries its token, or no token at all once no run is active, is killed and
//! reaped.
//!
//! Reaping an orphan gives its wait status: one that died of a signal vkexit
//! did not send is kept for its run ([`OrphanDeath`]), so a crash is seen even
//! where the process could not write its crash record (it closed its
//! descriptors, never loaded the preload, is a static binary). A zombie's
//! environment is gone; its cgroup is not, and names the run it was part of.
//!
//! Processes are only ever reaped by pid: a `waitpid(-1)` here would steal
//! the exit status of a run's own program from the thread supervising it.

use super::observed::OrphanDeath;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct State {
    /// Tokens of runs whose program may still be running.
    active: BTreeSet<String>,
    /// Programs spawned by the runner, reaped by their own supervisor.
    direct: BTreeSet<libc::pid_t>,
    /// The cgroup of each run under way, as `/proc/PID/cgroup` names it
    /// ([`cgroup_keys`]), and the run's token.
    cgroups: BTreeMap<String, String>,
    /// Orphans that died of a signal, by the token of their run, until the
    /// run takes them.
    deaths: BTreeMap<String, Vec<OrphanDeath>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    active: BTreeSet::new(),
    direct: BTreeSet::new(),
    cgroups: BTreeMap::new(),
    deaths: BTreeMap::new(),
});

/// The most orphan deaths kept per run; more are not kept.
const MAX_DEATHS: usize = 64;

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes this process the reaper of its orphaned descendants, unless it was prepared not to ask
/// (`run::Process::subreaper`); whether it is. Where it is not, a detached process that dies of
/// a signal without a crash record goes unseen.
pub fn become_subreaper() -> bool {
    if !super::process().subreaper {
        return false;
    }
    // SAFETY: prctl with an integer argument; affects this process only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) == 0 }
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
/// program before it is known as a direct child. `cgroup` is the run's
/// cgroup as [`cgroup_keys`] names it, where it has one of its own.
pub fn spawn<T>(
    token: &str,
    cgroup: Option<String>,
    spawn: impl FnOnce() -> io::Result<(libc::pid_t, T)>,
) -> io::Result<T> {
    let mut s = state();
    s.active.insert(token.to_string());
    if let Some(key) = &cgroup {
        s.cgroups.insert(key.clone(), token.to_string());
    }
    let child = spawn();
    match &child {
        Ok((pid, _)) => {
            s.direct.insert(*pid);
        }
        Err(_) => {
            s.active.remove(token);
            if let Some(key) = &cgroup {
                s.cgroups.remove(key);
            }
        }
    }
    child.map(|(_, c)| c)
}

/// The run's program was reaped and its group killed: forget both, kill
/// whatever of it detached, and give the deaths by signal of its orphans.
/// `settled` says whether every process of the run has been reaped (its
/// cgroup's count of tasks is back where it was); until it does, or for at
/// most a second, what is left is swept again: a process that died as the
/// run ended may reach vkexit a moment later, re-parented.
pub fn finished(token: &str, pid: libc::pid_t, settled: &dyn Fn() -> bool) -> Vec<OrphanDeath> {
    {
        let mut s = state();
        s.direct.remove(&pid);
        s.active.remove(token);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        sweep();
        if settled() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut s = state();
    s.cgroups.retain(|_, t| t != token);
    s.deaths.remove(token).unwrap_or_default()
}

/// Kills and reaps orphans of ended runs, and reaps the dead ones of any
/// run, keeping their deaths by signal for their runs. Killing one
/// re-parents its own children to us, so this repeats until a pass finds
/// nothing to kill.
pub fn sweep() {
    for _ in 0..64 {
        let mut s = state();
        let mut killed = 0;
        for pid in our_children() {
            if s.direct.contains(&pid) {
                continue;
            }
            let seen = Seen::of(pid);
            if seen.dead {
                // Not waited for: a group leader that is gone while its
                // other threads run on cannot be reaped yet.
                if let Some(status) = reap(pid, libc::WNOHANG) {
                    s.keep_death(&seen, Some(status), false);
                    continue;
                }
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
                let status = reap(pid, 0);
                s.keep_death(&seen, status, true);
                killed += 1;
            }
        }
        drop(s);
        if killed == 0 {
            return;
        }
    }
}

impl State {
    /// Keeps the death of `seen` for its run when a signal vkexit did not
    /// send ended it (`killed`: vkexit has just sent it SIGKILL).
    fn keep_death(&mut self, seen: &Seen, status: Option<libc::c_int>, killed: bool) {
        let Some(status) = status.filter(|&st| libc::WIFSIGNALED(st)) else {
            return;
        };
        let signal = libc::WTERMSIG(status);
        if killed && signal == libc::SIGKILL {
            return;
        }
        let owner = seen
            .token
            .clone()
            .filter(|t| self.active.contains(t))
            .or_else(|| {
                seen.cgroups
                    .iter()
                    .find_map(|k| self.cgroups.get(k).cloned())
            });
        let Some(token) = owner else {
            return;
        };
        let deaths = self.deaths.entry(token).or_default();
        if deaths.len() < MAX_DEATHS {
            deaths.push(OrphanDeath {
                pid: i64::from(seen.pid),
                comm: seen.comm.clone(),
                cmdline: seen.cmdline.clone(),
                signal: crate::support::util::signal_name(signal),
                core_dumped: libc::WCOREDUMP(status),
            });
        }
    }
}

/// What can be read of an orphan before it is reaped: of a zombie, its name
/// and its cgroup; of a live one, its command line and token too.
struct Seen {
    pid: libc::pid_t,
    /// A zombie, or exiting: reaped as it is, not killed, where it can be.
    dead: bool,
    comm: String,
    cmdline: String,
    token: Option<String>,
    /// Its cgroups, as [`cgroup_keys`] names them.
    cgroups: Vec<String>,
}

impl Seen {
    fn of(pid: libc::pid_t) -> Seen {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let comm = stat
            .split_once('(')
            .and_then(|(_, rest)| rest.rsplit_once(')'))
            .map_or(String::new(), |(comm, _)| comm.to_string());
        // The state follows the parenthesised name, which may hold spaces;
        // the flags are the seventh field after it (PF_EXITING = 0x4).
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let zombie = fields
            .first()
            .is_some_and(|state| *state == "Z" || *state == "X");
        let exiting = fields
            .get(6)
            .and_then(|f| f.parse::<u64>().ok())
            .is_some_and(|flags| flags & 0x4 != 0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|raw| {
                let text = String::from_utf8_lossy(&raw).replace('\0', " ");
                text.trim_end().chars().take(1024).collect()
            })
            .unwrap_or_default();
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .map(|text| cgroup_keys(&text))
            .unwrap_or_default();
        Seen {
            pid,
            dead: zombie || exiting,
            comm,
            cmdline,
            token: run_token(pid),
            cgroups,
        }
    }
}

/// The cgroups of a `/proc/PID/cgroup`, one key each: `0::PATH` for the
/// unified hierarchy, `CONTROLLER:PATH` for each controller of a v1 one.
pub(crate) fn cgroup_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            keys.push(format!("0::{path}"));
        } else {
            keys.extend(controllers.split(',').map(|c| format!("{c}:{path}")));
        }
    }
    keys
}

/// Reaps our child `pid`, its wait status when it was ours to take.
fn reap(pid: libc::pid_t, flags: libc::c_int) -> Option<libc::c_int> {
    let mut status = 0;
    // SAFETY: waitpid on a specific child of ours.
    let r = unsafe { libc::waitpid(pid, &mut status, flags) };
    (r == pid).then_some(status)
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

fn run_token(pid: libc::pid_t) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{}=", crate::support::env::RUN_TOKEN);
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_keys_name_the_unified_and_each_v1_controller() {
        let text = "9:name=systemd:/\n8:pids:/vkexit-1-2/worker-3\n2:cpu,cpuacct:/\n0::/vkexit-1-2/run-1-0\n";
        assert_eq!(
            cgroup_keys(text),
            [
                "name=systemd:/",
                "pids:/vkexit-1-2/worker-3",
                "cpu:/",
                "cpuacct:/",
                "0::/vkexit-1-2/run-1-0"
            ]
        );
        assert!(cgroup_keys("garbage\n").is_empty());
    }
}
