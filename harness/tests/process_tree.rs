//! A crash anywhere in a run's process tree fails the run: a child or a
//! grandchild that dies of SIGSEGV while the parent exits 0, and a child that
//! crashes in its own exit handlers. Real processes (the mock starting copies
//! of itself with fork and exec) on lavapipe under the real validation layer;
//! the crash report preloaded into the exec'd children is what sees them.

use serde_json::Value;
use std::path::Path;
use vkexit_testkit::results::{run_record, the_cell, CellResult, CellVerdict};
use vkexit_testkit::vkexit::*;

/// The JSON records of a kept run's evidence file.
fn records(run_dir: &Path, file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(run_dir.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", run_dir.join(file).display()));
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn kept_runs(cell: &CellResult) -> Vec<std::path::PathBuf> {
    cell.artifacts.iter().map(Into::into).collect()
}

fn reason(run_dir: &Path) -> String {
    run_record(run_dir).reason
}

/// The pid of the process vkexit started: the first whose preloaded library loaded.
fn main_pid(run_dir: &Path) -> i64 {
    records(run_dir, "timeline.jsonl")
        .iter()
        .filter(|r| r["ev"] == "preload-loaded")
        .min_by_key(|r| r["t_ns"].as_u64().unwrap())
        .expect("a preload-loaded record")["pid"]
        .as_i64()
        .unwrap()
}

/// The one crash record of a kept run, from a process other than the main one.
fn child_crash(run_dir: &Path) -> Value {
    let crashes: Vec<Value> = records(run_dir, "crash.jsonl")
        .into_iter()
        .filter(|r| r["ev"] == "crash")
        .collect();
    assert_eq!(crashes.len(), 1, "{crashes:#?}");
    let crash = crashes.into_iter().next().unwrap();
    assert_ne!(crash["pid"].as_i64().unwrap(), main_pid(run_dir));
    // The preloaded handler, reinstalled by the exec, wrote it.
    assert_eq!(crash["handler"], "preload", "{crash:#}");
    crash
}

#[test]
fn a_child_that_crashes_while_its_parent_exits_0_fails_the_run() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate_mock(2, &[], &["--child-crash"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 2, "{cell:#?}");
    assert_eq!(cell.signals, ["SIGSEGV"]);
    assert_eq!(cell.verdict, CellVerdict::Fail);
    assert_eq!(code, 1);
    for run in kept_runs(cell) {
        let crash = child_crash(&run);
        assert_eq!(crash["signal"], "SIGSEGV");
        assert_eq!(crash["then"], "default-action", "{crash:#}");
        let cmdline = crash["cmdline"].as_str().unwrap();
        assert!(
            cmdline.ends_with("mock --signal SIGSEGV --device 0"),
            "{cmdline}"
        );
        assert_eq!(crash["ppid"].as_i64().unwrap(), main_pid(&run));
        let why = reason(&run);
        assert!(
            why.starts_with(&format!("process {} (", crash["pid"])),
            "{why}"
        );
        assert!(why.contains("mock --signal SIGSEGV"), "{why}");
        assert!(why.contains("the main process exited 0"), "{why}");
    }
}

#[test]
fn a_forked_child_that_never_execs_still_has_the_crash_report() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(2, &[], &["--forked-child-crash"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 2, "{cell:#?}");
    for run in kept_runs(cell) {
        // Inherited across fork: the parent's handler, its file, the child's own pid.
        let crash = child_crash(&run);
        assert_eq!(crash["ppid"].as_i64().unwrap(), main_pid(&run));
        let cmdline = crash["cmdline"].as_str().unwrap();
        assert!(cmdline.ends_with("mock --forked-child-crash"), "{cmdline}");
        assert!(reason(&run).contains("the main process exited 0"));
    }
}

#[test]
fn a_grandchild_that_crashes_fails_the_run() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(2, &[], &["--grandchild-crash"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 2, "{cell:#?}");
    for run in kept_runs(cell) {
        let crash = child_crash(&run);
        // Two processes down: its parent is the intermediate child, not the main process.
        let parent = crash["ppid"].as_i64().unwrap();
        assert_ne!(parent, main_pid(&run));
        let pids: Vec<i64> = records(&run, "timeline.jsonl")
            .iter()
            .filter(|r| r["ev"] == "preload-loaded")
            .map(|r| r["pid"].as_i64().unwrap())
            .collect();
        assert_eq!(
            pids.len(),
            3,
            "three processes, each with the preload: {pids:?}"
        );
        assert!(pids.contains(&parent), "{pids:?} {crash:#}");
        assert!(reason(&run).contains("the main process exited 0"));
    }
}

#[test]
fn a_child_that_crashes_in_its_own_exit_handlers_fails_the_run() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(2, &[], &["--child-crash-at-exit"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 2, "{cell:#?}");
    for run in kept_runs(cell) {
        let crash = child_crash(&run);
        assert_eq!(crash["si_code_name"], "SEGV_MAPERR", "{crash:#}");
        assert_eq!(crash["main_returned"], true, "{crash:#}");
        // Rust's own SIGSEGV handler got the fault first, gave it back, and the default
        // action ended the child: the `fatal` record says so.
        assert_eq!(crash["then"], "program-handler", "{crash:#}");
        let fatal = records(&run, "crash.jsonl")
            .into_iter()
            .find(|r| r["ev"] == "fatal")
            .expect("a fatal record");
        assert_eq!(fatal["pid"], crash["pid"]);
        assert!(reason(&run).contains("mock --crash-at-exit"));
    }
}

#[test]
fn children_that_may_crash_are_recorded_not_judged() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate_mock(
        2,
        &["--children-may-crash", "--keep-passing"],
        &["--child-crash"],
    );
    let cell = the_cell(&r);
    assert_eq!(cell.counts.pass, 2, "{cell:#?}");
    assert_eq!(code, 0);
    let findings = &cell.findings;
    assert!(
        findings.iter().any(|f| f.contains("mock --signal SIGSEGV")
            && f.contains("killed by SIGSEGV (children may crash: recorded, not judged)")),
        "{findings:#?}"
    );
    for run in kept_runs(cell) {
        assert_eq!(child_crash(&run)["signal"], "SIGSEGV");
    }
    // The started process's own crash is still judged.
    let (_, r) = sb.gate_mock(1, &["--children-may-crash"], &["--signal", "SIGABRT"]);
    assert_eq!(the_cell(&r).counts.crash, 1, "{r:#?}");
}

/// Processes still alive anywhere on the machine that one of this sandbox's runs started: a
/// run's environment points `HOME` into the sandbox.
fn left_alive(sb: &Sandbox) -> Vec<String> {
    let home = format!("HOME={}", sb.path().display());
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let ours = environ
            .split(|&b| b == 0)
            .any(|v| v.starts_with(home.as_bytes()));
        if ours {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            left.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    left
}

/// More runs than slots (`-j 1`): each run after the first is made in the slot the run before
/// it left, whose detached helper vkexit had to kill. A run started in a cgroup that was
/// killed through `cgroup.kill` dies at birth of SIGKILL (Linux 6.x); none may.
#[test]
fn a_detached_helper_that_outlives_the_program_never_kills_the_next_run() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate_mock(3, &["-j", "1"], &["--detached-helper", "2"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.pass, 3, "{cell:#?}");
    assert_eq!(cell.verdict, CellVerdict::Pass);
    assert_eq!(code, 0);
    assert_eq!(left_alive(&sb), Vec::<String>::new());
}

/// A hang whose exit handler ignores SIGTERM, with a detached helper left behind too: every
/// run is a timeout, none a crash, and nothing of any run outlives vkexit.
#[test]
fn an_exit_handler_that_spins_past_the_timeout_ignoring_term_is_a_timeout_every_run() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(
        3,
        &["-j", "1", "--timeout", "1"],
        &["--detached-helper", "30", "--spin-at-exit-ignoring-term"],
    );
    let cell = the_cell(&r);
    assert_eq!(cell.counts.timeout, 3, "{cell:#?}");
    assert_eq!(cell.verdict, CellVerdict::Fail);
    for run in kept_runs(cell) {
        let hang: Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("hang.json")).unwrap()).unwrap();
        assert_eq!(hang["during_exit"], true, "{hang:#}");
    }
    assert_eq!(left_alive(&sb), Vec::<String>::new());
}

/// A helper that daemonises (double fork, setsid), closes every descriptor and dies of
/// SIGSEGV while the program runs can write no crash record: its wait status, taken where
/// vkexit reaps it, fails the run, and names it.
#[test]
fn a_daemon_that_closed_its_descriptors_and_crashed_fails_the_run() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate_mock(2, &["-j", "1"], &["--daemon-crash"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 2, "{cell:#?}");
    assert_eq!(cell.signals, ["SIGSEGV"]);
    assert_eq!(code, 1);
    for run in kept_runs(cell) {
        // The helper's pid, as the mock said it.
        let stdout = std::fs::read_to_string(run.join("stdout.txt")).unwrap();
        let helper = stdout
            .lines()
            .find_map(|l| {
                let rest = l.strip_prefix("vkexit-step: helper ")?;
                Some(rest.split_once(" started;")?.0)
            })
            .unwrap_or_else(|| panic!("{stdout}"));
        let why = reason(&run);
        assert!(
            why.starts_with(&format!(
                "detached process {helper} (mock) killed by SIGSEGV; the main process exited 0"
            )),
            "{why}"
        );
        // It left no crash record of its own.
        let crashes = std::fs::read_to_string(run.join("crash.jsonl")).unwrap_or_default();
        let pids: Vec<String> = crashes
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|r| r["pid"].to_string())
            .collect();
        assert!(!pids.iter().any(|p| p == helper), "{crashes}");
    }
    assert_eq!(left_alive(&sb), Vec::<String>::new());
}
