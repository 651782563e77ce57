//! Faults of the programs under test and of the machine around them: a fork
//! bomb, a program that ignores SIGTERM, a crash that would dump core, a
//! full disk in the artifacts directory. Each ends in a failing verdict or a
//! clear error, never a pass, vkexit returns promptly, and no process of any
//! run is left. Where the machine cannot provide the fault (no cgroups, no
//! tmpfs mount in a container), the test prints why it did not run.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vkexit_testkit::results::{run_record, the_cell, CellVerdict, Results, RunRecord};
use vkexit_testkit::skip;
use vkexit_testkit::vkexit::*;

/// One `vkexit` run, started so that its pid is known: the tokens of its
/// runs start with it.
struct Finished {
    code: i32,
    pid: u32,
    elapsed: Duration,
    stderr: String,
}

fn vkexit(sb: &Sandbox, env: &[(&str, &str)], args: &[&str]) -> Finished {
    vkexit_with(sb, env, args, |_| {})
}

fn vkexit_with(
    sb: &Sandbox,
    env: &[(&str, &str)],
    args: &[&str],
    adjust: impl FnOnce(&mut Command),
) -> Finished {
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("vkexit"));
    cmd.current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    adjust(&mut cmd);
    let start = Instant::now();
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    Finished {
        code: out.status.code().expect("vkexit exits, it is not killed"),
        pid,
        elapsed: start.elapsed(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Processes that carry the run token of a run of vkexit `pid`, with their
/// command lines. Zombies have no environment and do not count.
fn left_behind(pid: u32) -> Vec<String> {
    let prefix = format!("VKEXIT_RUN_TOKEN={pid}-");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ
            .split(|&b| b == 0)
            .any(|e| e.starts_with(prefix.as_bytes()))
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{} {}",
                entry.file_name().to_string_lossy(),
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    found
}

/// Killed processes vanish once reaped: give that a moment, then insist.
fn assert_nothing_left(pid: u32) {
    let start = Instant::now();
    while !left_behind(pid).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = left_behind(pid);
    assert!(
        left.is_empty(),
        "processes of vkexit {pid}'s runs left: {left:?}"
    );
    // Its cgroups, named vkexit-PID-NAMESPACE, are gone too.
    let prefix = format!("vkexit-{pid}-");
    for dir in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/pids",
    ] {
        let left: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .collect();
        assert!(left.is_empty(), "cgroups left behind in {dir}: {left:?}");
    }
}

/// What the only cell says about its runs: its reason, its findings and
/// the reason of each kept run.
fn only_run_reason(r: &Results) -> String {
    let cell = the_cell(r);
    let mut text = vec![cell.reason.clone().unwrap_or_default()];
    text.extend(cell.findings.iter().cloned());
    for run in &cell.artifacts {
        let result = Path::new(run).join("result.json");
        // On a full disk the run's own record may be missing or empty.
        let text_of = std::fs::read_to_string(result).unwrap_or_default();
        if let Ok(record) = serde_json::from_str::<RunRecord>(&text_of) {
            text.push(record.reason);
        }
    }
    text.join("\n")
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit_fails_and_leaves_nothing() {
    let bound = match vkexit::run::cgroup::bound_here() {
        Ok(b) => b,
        Err(why) => {
            skip!("runs cannot be bounded on this machine: {why}")
        }
    };
    // A small limit keeps the bomb cheap on a shared machine; the default
    // (1024) works the same way.
    let sb = Sandbox::new();
    let results = sb.results();
    let done = vkexit(
        &sb,
        &[("VKEXIT_MAX_PROCESSES", "48")],
        &[
            "run",
            "--no-validation",
            "--runs",
            "2",
            "--timeout",
            "20",
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "bomb() { bomb | bomb & }; bomb; sleep 1; exit 0",
        ],
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.pass, 0, "{cell:#?}");
    // The limit ended the bomb, not the 20 s timeout (judged by vkexit, so
    // load on this machine does not decide it).
    assert_eq!(cell.counts.timeout, 0, "{cell:#?}");
    assert_ne!(cell.verdict, CellVerdict::Pass);
    if bound.starts_with("cgroup") {
        // Whether the shell's own last fork failed (exit 2) or not (exit 0,
        // an error then), the limit is named.
        let reason = only_run_reason(&r);
        assert!(reason.contains("limit of 48 processes"), "{reason}");
    }
    assert_nothing_left(done.pid);
}

#[test]
fn a_program_that_ignores_sigterm_is_killed_after_the_grace_period() {
    // The shell and its sleep ignore SIGTERM: only the SIGKILL 2 s later ends
    // them, so the run takes the 1 s limit plus the whole grace.
    let sb = Sandbox::new();
    let results = sb.results();
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--timeout",
            "1",
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 60; exit 0",
        ],
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let cell = the_cell(&sb.gate_results()).clone();
    assert_eq!(cell.counts.timeout, 1, "{cell:#?}");
    assert!(
        done.elapsed >= Duration::from_millis(2900),
        "the grace period was cut short: {:?}",
        done.elapsed
    );
    // Not a speed check: under any load a run that waited for the 60 s
    // sleep instead of killing it takes at least 60 s.
    assert!(
        done.elapsed < Duration::from_secs(60),
        "the program was not killed: {:?}",
        done.elapsed
    );
    assert_nothing_left(done.pid);
}

#[test]
fn a_crash_dumps_no_core_even_when_vkexit_may() {
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    if pattern.starts_with('|') {
        // The limit of 1 that stops a piped core is still checked below;
        // only the absence of a core file in the run directory is not.
        // Only a part of the test: said as a skip would say it, where CI shows it (libtest
        // captures `eprintln!`, not writes to the stream itself).
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: a_crash_dumps_no_core_even_when_vkexit_may (core file part): \
             core_pattern is a pipe: {}",
            pattern.trim()
        );
    }
    let sb = Sandbox::new();
    let results = sb.results();
    let done = vkexit_with(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "grep 'Max core file size' /proc/self/limits; kill -SEGV $$",
        ],
        |cmd| {
            // SAFETY: setrlimit in the forked child before exec.
            unsafe {
                cmd.pre_exec(|| {
                    let unlimited = libc::rlimit {
                        rlim_cur: libc::RLIM_INFINITY,
                        rlim_max: libc::RLIM_INFINITY,
                    };
                    libc::setrlimit(libc::RLIMIT_CORE, &unlimited);
                    Ok(())
                });
            }
        },
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 1, "{cell:#?}");
    let run = PathBuf::from(&cell.artifacts[0]);
    let stdout = std::fs::read_to_string(run.join("stdout.txt")).unwrap();
    // "Max core file size  SOFT  HARD  bytes": at most one byte, which also
    // stops a core piped to a helper (the kernel takes 1 as "no core").
    let limits: Vec<&str> = stdout.split_whitespace().skip(4).take(2).collect();
    assert_eq!(limits, ["1", "1"], "the run's core size limit: {stdout}");
    let cores: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("core"))
        .collect();
    assert!(cores.is_empty(), "{cores:?}");
    assert_nothing_left(done.pid);
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "vkexit-test",
            ])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot mount a tmpfs at {} (needs root outside a restricted container): {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }

    /// Writes until the file system says it is full.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = vec![0x5au8; 64 * 1024];
        loop {
            if let Err(e) = f.write_all(&block) {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                break;
            }
        }
        // The last partial block may still fit byte by byte.
        while f.write_all(b"x").is_ok() {}
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .stdin(Stdio::null())
            .status();
    }
}

#[test]
fn artifacts_on_a_full_disk_make_every_run_an_error() {
    let sb = Sandbox::new();
    let disk = match Tmpfs::mount(&sb.path().join("disk"), "1m") {
        Ok(d) => d,
        Err(why) => skip!("{why}"),
    };
    std::fs::create_dir_all(disk.0.join("art")).unwrap();
    disk.fill();
    let results = sb.results();
    let art = disk.0.join("art");
    let mock = mock();
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--driver",
            "lavapipe",
            "--runs",
            "2",
            "--artifacts",
            art.to_str().unwrap(),
            "--json",
            results.to_str().unwrap(),
            "--",
            mock.to_str().unwrap(),
        ],
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.error, 2, "{cell:#?}");
    assert_eq!(cell.counts.pass, 0);
    let reason = only_run_reason(&r);
    assert!(
        reason.contains("full") || reason.contains("No space left"),
        "{reason}"
    );
    assert_nothing_left(done.pid);
}

#[test]
fn a_program_that_fills_the_disk_during_its_run_is_an_error_not_a_pass() {
    // The program exits 0; the validation log of a real program would have
    // been cut short on that disk, so the run cannot be trusted.
    let sb = Sandbox::new();
    let disk = match Tmpfs::mount(&sb.path().join("disk"), "4m") {
        Ok(d) => d,
        Err(why) => {
            skip!("{why}")
        }
    };
    let results = sb.results();
    let art = disk.0.join("art");
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--artifacts",
            art.to_str().unwrap(),
            "--json",
            results.to_str().unwrap(),
            // The program fills its working directory: the run's own, on the small disk.
            "--private-cwd",
            "--",
            "sh",
            "-c",
            "cat /dev/zero > fill 2>/dev/null; exit 0",
        ],
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.error, 1, "{cell:#?}");
    let reason = only_run_reason(&r);
    assert!(reason.contains("file system is full"), "{reason}");
    assert_nothing_left(done.pid);
}

#[test]
fn a_results_file_that_cannot_be_written_keeps_the_old_one_whole() {
    let sb = Sandbox::new();
    let disk = match Tmpfs::mount(&sb.path().join("disk"), "1m") {
        Ok(d) => d,
        Err(why) => {
            skip!("{why}")
        }
    };
    let results = disk.0.join("r.json");
    let old = "{\"schema\":\"an older results file\"}\n";
    std::fs::write(&results, old).unwrap();
    disk.fill();
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
    );
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr.contains("cannot write the results file"),
        "{}",
        done.stderr
    );
    assert_eq!(std::fs::read_to_string(&results).unwrap(), old);
    let names: Vec<String> = std::fs::read_dir(&disk.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "only r.json and the filler: {names:?}");
}

#[test]
fn results_replace_the_old_file_by_rename() {
    let sb = Sandbox::new();
    let results = sb.results();
    std::fs::write(&results, "stale").unwrap();
    let before = std::fs::metadata(&results).unwrap().ino();
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_ne!(
        std::fs::metadata(&results).unwrap().ino(),
        before,
        "written in place, not through a new file renamed over the old"
    );
    assert_eq!(sb.gate_results().schema, "vkexit.results/1");
    let temps: Vec<String> = std::fs::read_dir(sb.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

#[test]
fn run_directories_are_private() {
    let sb = Sandbox::new();
    let results = sb.results();
    let art = sb.path().join("new-artifacts");
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--artifacts",
            art.to_str().unwrap(),
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
    );
    assert_eq!(done.code, 1, "{}", done.stderr);
    let r = sb.gate_results();
    let run = PathBuf::from(&the_cell(&r).artifacts[0]);
    let cell_dir = run.parent().unwrap();
    for dir in [art.as_path(), cell_dir, run.as_path()] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
    }
}

/// The peak resident memory of a process so far (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn a_flood_of_gigabytes_keeps_vkexit_memory_bounded() {
    // 1 GiB on stdout and 1 GiB on stderr; vkexit keeps a bounded head and
    // tail of each, so its own peak memory stays far below the flood.
    let sb = Sandbox::new();
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("vkexit"))
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .args(["run", "--no-validation", "--runs", "1", "--keep-passing"])
        .args(["--timeout", "120", "--json"])
        .arg(sb.results())
        .arg("--")
        .arg(mock())
        .args(["--no-vulkan", "--flood", "1g"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    };
    // --no-vulkan: no validation proof is asked for, the run passes (`no-vulkan`).
    assert_eq!(status.code(), Some(0));
    assert!(peak > 0, "VmHWM was never read");
    assert!(
        peak < 64 * 1024,
        "vkexit peaked at {peak} KiB during the flood"
    );
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.no_vulkan, 1, "{cell:#?}");
    let run = PathBuf::from(&cell.artifacts[0]);
    for file in ["stdout.txt", "stderr.txt"] {
        let size = std::fs::metadata(run.join(file)).unwrap().len();
        assert!(size < 2 * 1024 * 1024, "{file} is {size} bytes");
    }
    let record = run_record(&run);
    let runs = [record.stdout_bytes, record.stderr_bytes];
    assert!(
        runs.iter().all(|&n| n >= 1 << 30),
        "all of it was read: {runs:?}"
    );
    assert_nothing_left(pid);
}

#[test]
fn arguments_reach_the_program_as_they_are_never_through_a_shell() {
    let sb = Sandbox::new();
    let results = sb.results();
    let words = [
        "$(touch via-substitution)",
        "; touch via-separator",
        "`touch via-backquote`",
        "a b\t'c\"",
    ];
    let mut args = vec![
        "run",
        "--no-validation",
        "--runs",
        "1",
        "--keep-passing",
        "--json",
        results.to_str().unwrap(),
        "--",
        "printf",
        "[%s]\\n",
    ];
    args.extend(words);
    let done = vkexit(&sb, &[], &args);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let r = sb.gate_results();
    let run = PathBuf::from(&the_cell(&r).artifacts[0]);
    let stdout = std::fs::read_to_string(run.join("stdout.txt")).unwrap();
    let printed: Vec<&str> = stdout.lines().collect();
    let expected: Vec<String> = words.iter().map(|w| format!("[{w}]")).collect();
    assert_eq!(printed, expected);
    for name in ["via-substitution", "via-separator", "via-backquote"] {
        assert!(
            !run.join(name).exists() && !sb.path().join(name).exists(),
            "{name}"
        );
    }
}

/// A vkexit killed outright (SIGKILL, the OOM killer) cannot end its runs.
/// Its direct children die with it (PR_SET_PDEATHSIG), but a descendant that
/// detached lives on, inside the run's cgroup. The next vkexit finds the
/// cgroup of a vkexit that is gone and kills what is left in it.
#[test]
fn what_a_killed_vkexit_left_is_killed_by_the_next_one() {
    match vkexit::run::cgroup::bound_here() {
        Ok(b) if b.starts_with("cgroup") => {}
        Ok(other) => skip!("runs get no cgroup here: {other}"),
        Err(why) => skip!("runs get no cgroup here: {why}"),
    }
    let sb = Sandbox::new();
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let mut first = Command::new(assert_cmd::cargo::cargo_bin("vkexit"))
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .args(["run", "--no-validation", "--runs", "1", "--json"])
        .arg(sb.results())
        .args(["--", "sh", "-c", "setsid sleep 289 & exec sleep 290"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = first.id();
    let start = Instant::now();
    while !left_behind(pid).iter().any(|p| p.contains("sleep 289")) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    // The detached sleep outlives the killed vkexit (for 289 s) unless a
    // vkexit that starts later kills it; any other vkexit starting now on
    // this machine may, so its survival is not asserted here.
    let next = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
    );
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_nothing_left(pid);
}

/// Processes whose command line holds `marker` (forked shells keep theirs).
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(marker)
                .then(|| format!("{} {text}", e.file_name().to_string_lossy()))
        })
        .collect()
}

/// Processes (zombies too) that belong to `uid`.
fn processes_of_uid(uid: u32) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .count()
}

/// Without cgroups and not root, RLIMIT_NPROC bounds the bomb: vkexit runs
/// as `nobody` in a mount namespace where the cgroup file system is hidden.
/// The limit counts all of `nobody`'s processes, and a hit cannot be seen
/// afterwards, so what is checked is the bound while the bomb runs.
#[test]
fn without_cgroups_a_user_fork_bomb_stops_at_rlimit_nproc() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip!("needs root to switch to nobody");
    }
    let sb = Sandbox::new();
    // Open to nobody, and sticky as /tmp is: vkexit unpacks its helpers only below directories
    // that others cannot swap.
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    // vkexit as nobody can run it: the build's own may be under a home only root can enter
    // (a checkout in /root); the single file runs from anywhere.
    let vkexit = sb.path().join("vkexit");
    std::fs::copy(assert_cmd::cargo::cargo_bin("vkexit"), &vkexit).unwrap();
    let marker = "nproc-bomb-4711";
    let nobody = 65534;
    let before = processes_of_uid(nobody);
    let script = format!(
        "mount -t tmpfs vkexit-no-cgroups /sys/fs/cgroup || exit 97
         exec setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME={dir} XDG_RUNTIME_DIR={dir} \
           VKEXIT_MAX_PROCESSES=30 {vkexit} run --no-validation --runs 1 --timeout 3 --json {dir}/r.json \
           -- sh -c '{marker}=1; bomb() {{ bomb | bomb & }}; bomb; sleep 60'",
        dir = sb.path().display(),
        vkexit = vkexit.display(),
    );
    let start = Instant::now();
    let mut unshare = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .current_dir(sb.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut most = 0;
    let status = loop {
        if let Some(status) = unshare.try_wait().unwrap() {
            break status;
        }
        most = most.max(processes_of_uid(nobody));
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "vkexit did not return"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut unshare.stderr.take().unwrap(), &mut stderr).unwrap();
    if status.code() == Some(97) || (!status.success() && stderr.contains("unshare")) {
        skip!("no private mount namespace here: {stderr}");
    }
    // The main shell sleeps past the 3 s limit (a timeout), unless the bomb
    // took the last slot before it could start its sleep (exit 2).
    assert_eq!(status.code(), Some(1), "{stderr}");
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.timeout + cell.counts.exit, 1, "{r:#?}");
    // The limit is on all of nobody's processes (vkexit's threads among
    // them, the bomb's zombies until vkexit reaps them): 30 more than when
    // the run started.
    // The bomb went off and met the limit: its shells said so (sampling the
    // process count would depend on how often this test gets the CPU).
    let run = PathBuf::from(&cell.artifacts[0]);
    let said = std::fs::read_to_string(run.join("stderr.txt")).unwrap_or_default();
    assert!(
        said.contains("fork"),
        "the bomb never met the limit: {said}"
    );
    assert!(
        most <= before + 30 + 12,
        "{most} processes of nobody at once ({before} before), over the limit"
    );
    let wait = Instant::now();
    while !processes_with(marker).is_empty() && wait.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = processes_with(marker);
    assert!(left.is_empty(), "{left:?}");
}

/// A tmpfs without a size reports no blocks at all, free or total: that is
/// not a full disk, and a clean run on it passes.
#[test]
fn artifacts_on_a_file_system_without_a_size_are_not_full() {
    let sb = Sandbox::new();
    let disk = match Tmpfs::mount(&sb.path().join("disk"), "0") {
        Ok(d) => d,
        Err(why) => {
            skip!("{why}")
        }
    };
    let results = sb.results();
    let art = disk.0.join("art");
    let done = vkexit(
        &sb,
        &[],
        &[
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--artifacts",
            art.to_str().unwrap(),
            "--json",
            results.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
    );
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(the_cell(&sb.gate_results()).counts.no_vulkan, 1);
}
