//! Ctrl-C stops vkexit cleanly: every running program and its descendants
//! are stopped, the results so far are written marked interrupted, the exit
//! code is nonzero, and nothing is left running. A second Ctrl-C exits at
//! once, still leaving nothing behind.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vkexit_testkit::skip;
use vkexit_testkit::vkexit::*;

/// Six hanging runs of one program, two at a time: each in a private directory, since runs of
/// one cell in the shared working directory never overlap.
fn start_hanging_runs(sb: &Sandbox, marker: &str) -> Child {
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    Command::new(assert_cmd::cargo::cargo_bin("vkexit"))
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .args([
            "run",
            "--driver",
            "lavapipe",
            "--runs",
            "6",
            "-j",
            "2",
            "--private-cwd",
            "--json",
        ])
        .arg(sb.results())
        .arg("--")
        .arg(mock())
        .args(["--hang", "--runtime", marker])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("vkexit exits, it is not killed");
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("vkexit did not exit within 30 s of the interrupt");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn interrupt(child: &Child) {
    // SAFETY: sends SIGINT to the vkexit process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
}

#[test]
fn ctrl_c_stops_every_run_writes_partial_results_and_leaves_nothing() {
    let marker = "interrupt-once-81";
    let sb = Sandbox::new();
    let mut vkexit = start_hanging_runs(&sb, marker);
    wait_for("two hanging runs", Duration::from_secs(30), || {
        mock_processes_with(&["--hang", marker]).len() >= 2
    });
    interrupt(&vkexit);
    assert_eq!(wait_exit(&mut vkexit), 130);
    assert!(mock_processes_with(&[marker]).is_empty(), "left behind");
    let r: serde_json::Value = sb.read_results();
    assert_eq!(r["interrupted"], true, "{r:#}");
    let cell = only_cell(&r);
    assert_eq!(
        count(cell, "error"),
        2,
        "the two running runs were stopped: {cell:#}"
    );
    assert_eq!(count(cell, "pass"), 0);
    assert_eq!(cell["verdict"], "error");
}

#[test]
fn a_second_ctrl_c_exits_at_once_and_still_leaves_nothing() {
    let marker = "interrupt-twice-82";
    let sb = Sandbox::new();
    let mut vkexit = start_hanging_runs(&sb, marker);
    wait_for("two hanging runs", Duration::from_secs(30), || {
        mock_processes_with(&["--hang", marker]).len() >= 2
    });
    interrupt(&vkexit);
    interrupt(&vkexit);
    assert_eq!(wait_exit(&mut vkexit), 130);
    // Killed processes vanish once reaped; give init a moment for that.
    wait_for("the runs to be gone", Duration::from_secs(5), || {
        mock_processes_with(&[marker]).is_empty()
    });
}

#[test]
fn sigterm_stops_vkexit_as_ctrl_c_does() {
    let marker = "interrupt-term-83";
    let sb = Sandbox::new();
    let mut vkexit = start_hanging_runs(&sb, marker);
    wait_for("two hanging runs", Duration::from_secs(30), || {
        mock_processes_with(&["--hang", marker]).len() >= 2
    });
    // SAFETY: sends SIGTERM to the vkexit process this test started.
    unsafe { libc::kill(vkexit.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(wait_exit(&mut vkexit), 130);
    assert!(mock_processes_with(&[marker]).is_empty(), "left behind");
    let r: serde_json::Value = sb.read_results();
    assert_eq!(r["interrupted"], true, "{r:#}");
    let cell = only_cell(&r);
    assert_eq!(count(cell, "error"), 2, "{cell:#}");
    assert_eq!(count(cell, "pass"), 0);
}

/// Processes carrying the run token of a run of vkexit `pid`.
fn run_processes(pid: u32) -> Vec<u32> {
    let prefix = format!("VKEXIT_RUN_TOKEN={pid}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            environ
                .split(|&b| b == 0)
                .any(|v| v.starts_with(prefix.as_bytes()))
                .then_some(p)
        })
        .collect()
}

/// A process that left its run's process group and session survives a
/// kill of the groups; the second Ctrl-C kills it through the cgroup.
#[test]
fn a_second_ctrl_c_also_kills_what_left_the_process_group() {
    if let Err(why) = vkexit::run::cgroup::kill_here() {
        skip!("{why}");
    }
    let sb = Sandbox::new();
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let mut vkexit = Command::new(assert_cmd::cargo::cargo_bin("vkexit"))
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .args([
            "run",
            "--no-validation",
            "--runs",
            "2",
            "-j",
            "2",
            "--private-cwd",
            "--json",
        ])
        .arg(sb.results())
        .args(["--", "sh", "-c", "setsid sleep 300 & exec sleep 301"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = vkexit.id();
    wait_for(
        "two runs with a detached process each",
        Duration::from_secs(30),
        || run_processes(pid).len() >= 4,
    );
    interrupt(&vkexit);
    interrupt(&vkexit);
    assert_eq!(wait_exit(&mut vkexit), 130);
    wait_for(
        "every process of the runs to be gone",
        Duration::from_secs(5),
        || run_processes(pid).is_empty(),
    );
}
