//! What a hung program was doing, captured before it is killed: every
//! thread of every process of its group (name, state, kernel wait channel),
//! and with gdb installed, every thread's backtrace. Whether the hang began
//! during exit is read from the backtraces (`__run_exit_handlers`,
//! `_dl_fini`) and from the scenario's own `main returns` step line.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadState {
    pub pid: i32,
    pub tid: i32,
    pub name: String,
    /// R, S, D, Z, T … as in /proc/PID/stat.
    pub state: String,
    /// The kernel function the thread sleeps in, if any.
    pub wchan: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HangReport {
    pub threads: Vec<ThreadState>,
    /// `thread apply all bt` per process, when gdb is installed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backtraces: Vec<String>,
    /// The hang began after main returned: inside exit handlers or `_dl_fini`.
    pub during_exit: bool,
}

impl HangReport {
    /// One line for the run summary.
    pub fn summary(&self) -> String {
        let main = self.threads.first();
        let when = if self.during_exit {
            "during exit"
        } else {
            "before exit"
        };
        match main {
            Some(t) => format!(
                "hung {when}: {} threads; main thread {} in state {} at {}",
                self.threads.len(),
                t.name,
                t.state,
                if t.wchan.is_empty() { "-" } else { &t.wchan }
            ),
            None => format!("hung {when}"),
        }
    }
}

/// Captures the state of process group `pgid`; `stdout` is what the program
/// printed so far (its step lines tell whether main returned).
pub fn capture(pgid: i32, stdout: &str) -> HangReport {
    let pids = group_members(pgid);
    let mut report = HangReport::default();
    for &pid in &pids {
        report.threads.extend(threads_of(pid));
    }
    if let Some(gdb) = find_gdb() {
        for &pid in pids.iter().take(4) {
            report.backtraces.extend(backtrace(&gdb, pid));
        }
    }
    let exit_frames = ["__run_exit_handlers", "_dl_fini", "__cxa_finalize"];
    report.during_exit = stdout.contains("vkexit-step: main returns")
        || report
            .backtraces
            .iter()
            .any(|bt| exit_frames.iter().any(|f| bt.contains(f)));
    report
}

fn group_members(pgid: i32) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
                .filter(|&pid| {
                    stat_field(&format!("/proc/{pid}/stat"), 2).as_deref()
                        == Some(&pgid.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    // The group leader (the program itself) first.
    pids.sort_by_key(|&p| (p != pgid, p));
    pids
}

/// Field `index` after the command name (0 = state, 1 = ppid, 2 = pgrp).
fn stat_field(path: &str, index: usize) -> Option<String> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(index).map(str::to_string)
}

fn threads_of(pid: i32) -> Vec<ThreadState> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut tids: Vec<i32> = tasks
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    tids.sort();
    tids.into_iter()
        .map(|tid| {
            let dir = format!("/proc/{pid}/task/{tid}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap_or_default();
            let wchan = read("wchan");
            ThreadState {
                pid,
                tid,
                name: read("comm").trim().to_string(),
                state: stat_field(&format!("{dir}/stat"), 0).unwrap_or_default(),
                wchan: if wchan == "0" { String::new() } else { wchan },
            }
        })
        .collect()
}

fn find_gdb() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_string_lossy()
        .split(':')
        .map(|d| Path::new(d).join("gdb"))
        .find(|p| p.exists())
}

/// gdb attaches, prints every thread's stack and detaches; bounded in time.
fn backtrace(gdb: &Path, pid: i32) -> Option<String> {
    let mut child = Command::new(gdb)
        .args([
            "-nx",
            "-batch",
            "-p",
            &pid.to_string(),
            "-ex",
            "thread apply all bt 30",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (!text.trim().is_empty()).then(|| format!("process {pid}:\n{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_can_be_described() {
        let me = std::process::id() as i32;
        let threads = threads_of(me);
        assert!(!threads.is_empty());
        assert_eq!(threads[0].pid, me);
        assert!(!threads[0].state.is_empty());
    }

    #[test]
    fn the_summary_names_the_main_thread_and_when() {
        let r = HangReport {
            threads: vec![ThreadState {
                pid: 7,
                tid: 7,
                name: "mock".into(),
                state: "S".into(),
                wchan: "hrtimer_nanosleep".into(),
            }],
            backtraces: vec![],
            during_exit: true,
        };
        assert_eq!(
            r.summary(),
            "hung during exit: 1 threads; main thread mock in state S at hrtimer_nanosleep"
        );
    }
}
