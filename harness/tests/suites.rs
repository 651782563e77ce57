//! A project's own test suites as cases, one process per test: the fixture suites of suites/
//! (a CMake project whose CTest tests drive refrt, a GoogleTest program and a Rust test
//! program on the Vulkan API, a pytest file on wgpu-py), listed by their real tools and run
//! on lavapipe under the real validation layer, each test given the verdict its program
//! deserves; and the ways a suite cannot be listed, each an error that says why.
//!
//! suites/build.sh builds the fixtures into target/suites, once per test process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use vkexit_testkit::results::{read, the_cell, CellResult, CellVerdict, Results, RunVerdict};
use vkexit_testkit::vkexit::*;
use vkexit_testkit::{or_skip, workspace as repo};

// The commands docs/guide.md shows, run here as written (with fewer runs).
const GUIDE_CTEST: &str =
    "vkexit run --ctest target/suites/cmake --ctest-args \"-R teardown\" --runs 20";
const GUIDE_GTEST: &str = "vkexit run --gtest target/suites/cmake/teardown-gtest --runs 20";
const GUIDE_LIBTEST: &str = "vkexit run --libtest target/suites/teardown-tests --runs 20";
const GUIDE_PYTEST: &str =
    "vkexit run --pytest suites/pytest --python /usr/bin/python3 --emulate tegra --runs 20";
const GUIDE_MATRIX: &str =
    "vkexit run --config ci/matrix/suites.toml --baseline ci/baselines/suites.toml";

/// Builds the fixture suites into target/suites once; the error says what is missing.
fn built() -> &'static Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Command::new(repo().join("suites/build.sh"))
            .arg(repo().join("target/suites"))
            .arg(bin_dir())
            .output()
            .map_err(|e| format!("suites/build.sh could not start: {e}"))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!(
                "suites/build.sh failed (ci/setup-tests.sh installs cmake and libgtest-dev):\n{}",
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    })
}

fn build() {
    if let Err(e) = built() {
        panic!("{e}");
    }
}

/// The words of a command as the guide shows it, with `--runs N` in place of its own.
fn words(command: &str, runs: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut quoted: Option<String> = None;
    for w in command.split(' ') {
        match (&mut quoted, w.strip_prefix('"')) {
            (None, Some(rest)) if rest.ends_with('"') => {
                out.push(rest.trim_end_matches('"').into())
            }
            (None, Some(rest)) => quoted = Some(rest.to_string()),
            (Some(q), _) if w.ends_with('"') => {
                out.push(format!("{q} {}", w.trim_end_matches('"')));
                quoted = None;
            }
            (Some(q), _) => *q = format!("{q} {w}"),
            (None, None) => out.push(w.to_string()),
        }
    }
    if let Some(at) = out.iter().position(|w| w == "--runs") {
        out[at + 1] = runs.to_string();
    }
    out.remove(0); // vkexit
    out
}

/// vkexit from the repository's root (where the guide's paths start), its results, exit
/// code and stderr.
fn vkexit_at_root(sb: &Sandbox, args: &[String]) -> (i32, Results, String) {
    let out = sb
        .vkexit()
        .current_dir(repo())
        .args(args)
        .args(["--driver", "lavapipe", "--json"])
        .arg(sb.results())
        .arg("--artifacts")
        .arg(sb.path().join("artifacts"))
        .output()
        .expect("vkexit starts");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().expect("vkexit exits");
    assert!(sb.results().is_file(), "no results, exit {code}:\n{stderr}");
    (code, read(&sb.results()), stderr)
}

fn cell<'a>(results: &'a Results, case: &str, emulation: &str) -> &'a CellResult {
    results
        .cells
        .iter()
        .find(|c| c.case == case && c.emulation == emulation)
        .unwrap_or_else(|| panic!("no cell {case} ({emulation}) in {results:#?}"))
}

fn cases(results: &Results) -> Vec<&str> {
    results.cells.iter().map(|c| c.case.as_str()).collect()
}

fn assert_verdict(c: &CellResult, verdict: CellVerdict, runs: u64, run_verdict: RunVerdict) {
    assert_eq!(c.verdict, verdict, "{c:#?}");
    assert_eq!(c.counts.get(run_verdict), runs, "{c:#?}");
}

#[test]
fn ctest_teardown_tests_get_the_verdict_their_programs_deserve() {
    build();
    let sb = Sandbox::new();
    let (code, r, stderr) = vkexit_at_root(&sb, &words(GUIDE_CTEST, "3"));
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        cases(&r),
        [
            "teardown-kept-buffer",
            "teardown-kept-buffer-released",
            "teardown-handler-before-load"
        ]
    );
    let kept = cell(&r, "teardown-kept-buffer", "none");
    assert_verdict(kept, CellVerdict::Fail, 3, RunVerdict::Vuid);
    assert_eq!(kept.vuids, ["VUID-vkDestroyDevice-device-00378"]);
    assert_verdict(
        cell(&r, "teardown-kept-buffer-released", "none"),
        CellVerdict::Pass,
        3,
        RunVerdict::Pass,
    );
    let late = cell(&r, "teardown-handler-before-load", "none");
    assert_verdict(late, CellVerdict::Fail, 3, RunVerdict::Crash);
    assert_eq!(late.signals, ["SIGSEGV"]);
    // One listing, its time said.
    assert_eq!(stderr.matches("tests listed").count(), 1, "{stderr}");
    assert!(stderr.contains("3 tests listed (3 to run) in "), "{stderr}");
}

#[test]
fn ctest_properties_are_honoured_or_said_per_test() {
    build();
    let sb = Sandbox::new();
    let args = words(
        "vkexit run --ctest target/suites/cmake --ctest-args \"-L properties\" --runs 1",
        "1",
    );
    let (code, r, stderr) = vkexit_at_root(&sb, &args);
    assert_eq!(code, 1, "the hang fails the gate: {stderr}");
    // Its ENVIRONMENT, ENVIRONMENT_MODIFICATION (append, unset) and WORKING_DIRECTORY: else it exits 1.
    assert_verdict(
        cell(&r, "env-and-workdir", "none"),
        CellVerdict::Pass,
        1,
        RunVerdict::Pass,
    );
    let will_fail = cell(&r, "exits-nonzero-on-purpose", "none");
    assert_verdict(will_fail, CellVerdict::ExpectedFail, 1, RunVerdict::Exit);
    assert_eq!(
        will_fail.expectation.as_deref(),
        Some("ctest WILL_FAIL"),
        "{will_fail:#?}"
    );
    // Merged, it is judged as its suite said.
    let merged = sb.path().join("m.json");
    let out = sb
        .vkexit()
        .arg("merge")
        .arg(sb.results())
        .arg("--json")
        .arg(&merged)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let m = read(&merged);
    assert_eq!(
        cell(&m, "exits-nonzero-on-purpose", "none").verdict,
        CellVerdict::ExpectedFail
    );
    // TIMEOUT 3 over the default 60 s.
    let hang = cell(&r, "hangs-at-exit", "none");
    assert_verdict(hang, CellVerdict::Fail, 1, RunVerdict::Timeout);
    // Its time is written (a file without it reads 0), and is the 3 s limit's, not 60 s.
    assert!((1..30_000).contains(&hang.duration_ms), "{hang:#?}");
    let off = cell(&r, "disabled-for-now", "none");
    assert_eq!((off.verdict, off.runs), (CellVerdict::Skipped, 0));
    assert!(
        off.reason
            .as_deref()
            .is_some_and(|r| r.contains("DISABLED in CTest")),
        "{off:#?}"
    );
    let fixture = cell(&r, "needs-a-fixture", "none");
    let findings = &fixture.findings;
    let property = "FIXTURES_REQUIRED gpu-ready";
    assert!(
        findings
            .iter()
            .any(|f| f.starts_with(&format!("not honoured: {property}"))),
        "{findings:?}"
    );
    assert!(
        stderr.contains(&format!("needs-a-fixture: not honoured: {property}")),
        "{stderr}"
    );
    // Its RESOURCE_LOCK is honoured (held apart from other runs): not said.
    assert!(
        !findings.iter().any(|f| f.contains("RESOURCE_LOCK")),
        "{findings:?}"
    );
}

#[test]
fn gtest_runs_each_test_alone_by_its_full_name() {
    build();
    let sb = Sandbox::new();
    let (code, r, stderr) = vkexit_at_root(&sb, &words(GUIDE_GTEST, "2"));
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        cases(&r),
        [
            "Teardown.DestroysItsBuffer",
            "Teardown.KeepsItsBufferAtExit",
            "Teardown.DISABLED_NotWrittenYet",
            "TypedBuffers/0.Destroyed",
            "TypedBuffers/1.Destroyed",
            "Sizes/BufferSizes.Destroyed/0",
            "Sizes/BufferSizes.Destroyed/1"
        ]
    );
    let leak = cell(&r, "Teardown.KeepsItsBufferAtExit", "none");
    assert_verdict(leak, CellVerdict::Fail, 2, RunVerdict::Vuid);
    assert_eq!(leak.vuids, ["VUID-vkDestroyDevice-device-00378"]);
    for clean in [
        "Teardown.DestroysItsBuffer",
        "TypedBuffers/1.Destroyed",
        "Sizes/BufferSizes.Destroyed/1",
    ] {
        assert_verdict(
            cell(&r, clean, "none"),
            CellVerdict::Pass,
            2,
            RunVerdict::Pass,
        );
    }
    // A disabled test would run nothing and exit 0: it is skipped, not passed.
    assert_eq!(
        cell(&r, "Teardown.DISABLED_NotWrittenYet", "none").verdict,
        CellVerdict::Skipped
    );
    // The same program in one process passes: its leak is seen only in a test's own process
    // under the layer.
    let plain = Command::new(repo().join("target/suites/cmake/teardown-gtest"))
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stdout)
    );
}

#[test]
fn libtest_runs_each_test_alone_by_its_exact_name() {
    build();
    let sb = Sandbox::new();
    let (code, r, stderr) = vkexit_at_root(&sb, &words(GUIDE_LIBTEST, "2"));
    assert_eq!(code, 1, "{stderr}");
    assert_verdict(
        cell(&r, "teardown::destroys_its_buffer", "none"),
        CellVerdict::Pass,
        2,
        RunVerdict::Pass,
    );
    let leak = cell(&r, "teardown::keeps_its_buffer_at_device_destroy", "none");
    assert_verdict(leak, CellVerdict::Fail, 2, RunVerdict::Vuid);
    assert_eq!(leak.vuids, ["VUID-vkDestroyDevice-device-00378"]);
    let ignored = cell(&r, "teardown::spreads_over_two_devices", "none");
    assert_eq!(ignored.verdict, CellVerdict::Skipped, "{ignored:#?}");
    // With --include-ignored it runs, and passes.
    let (code, r, stderr) = vkexit_at_root(
        &sb,
        &words(
            "vkexit run --libtest target/suites/teardown-tests --libtest-args \"spreads --include-ignored\" --runs 1",
            "1",
        ),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(cases(&r), ["teardown::spreads_over_two_devices"]);
    assert_verdict(
        cell(&r, "teardown::spreads_over_two_devices", "none"),
        CellVerdict::Pass,
        1,
        RunVerdict::Pass,
    );
}

/// pytest for the scripts' interpreter, and wgpu-py in the runtime cache, or why not.
fn pytest_with_wgpu() -> Result<(), String> {
    let python = Path::new("/usr/bin/python3");
    let ok = Command::new(python)
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        return Err(
            "pytest is not installed for /usr/bin/python3 (apt-get install python3-pytest)".into(),
        );
    }
    let cache = vkexit::support::env::Environment::get()
        .runtime_cache
        .clone()
        .ok_or("no runtime cache")?;
    let present = std::fs::read_dir(cache.join("wgpu-py"))
        .map_err(|e| format!("wgpu-py is not in the runtime cache (ci/setup-python-more.sh): {e}"))?
        .flatten()
        .any(|d| d.path().join("PINS").is_file());
    match present {
        true => Ok(()),
        false => Err("wgpu-py is not in the runtime cache (ci/setup-python-more.sh)".into()),
    }
}

#[test]
fn pytest_runs_each_node_in_its_own_interpreter() {
    or_skip!(pytest_with_wgpu());
    let sb = Sandbox::new();
    let (code, r, stderr) = vkexit_at_root(&sb, &words(GUIDE_PYTEST, "2"));
    assert_eq!(code, 1, "{stderr}");
    let id = "suites/pytest/test_wgpu_teardown.py::";
    assert_verdict(
        cell(
            &r,
            &format!("{id}test_device_released_before_exit"),
            "tegra",
        ),
        CellVerdict::Pass,
        2,
        RunVerdict::Pass,
    );
    let held = cell(
        &r,
        &format!("{id}test_device_held_by_a_daemon_thread_at_exit"),
        "tegra",
    );
    assert_verdict(held, CellVerdict::Fail, 2, RunVerdict::Crash);
    assert_eq!(held.signals, ["SIGSEGV"]);
}

#[test]
fn a_matrix_of_suites_is_judged_by_its_baseline_and_lists_each_suite_once() {
    build();
    or_skip!(pytest_with_wgpu());
    let sb = Sandbox::new();
    let mut args = words(GUIDE_MATRIX, "1");
    args.extend(["--runs".into(), "1".into()]);
    let (code, r, stderr) = vkexit_at_root(&sb, &args);
    assert_eq!(code, 0, "{stderr}");
    // Four suites, two layer sets: four listings.
    assert_eq!(stderr.matches("tests listed").count(), 4, "{stderr}");
    let cells = &r.cells;
    assert_eq!(cells.len(), 30, "{r:#?}");
    let by_file = |c: &&CellResult| {
        c.expectation
            .as_deref()
            .is_some_and(|e| e.contains("suites.toml:"))
    };
    assert_eq!(cells.iter().filter(by_file).count(), 9, "{r:#?}");
    for c in cells.iter().filter(by_file) {
        assert_eq!(c.verdict, CellVerdict::ExpectedFail, "{c:#?}");
    }
    // A shard of the same matrix holds its own cells only.
    let (_, one, _) = vkexit_at_root(
        &sb,
        &[
            args.clone(),
            vec!["--shard".into(), "1/2".into(), "--allow-no-runs".into()],
        ]
        .concat(),
    );
    let (_, two, _) = vkexit_at_root(
        &sb,
        &[
            args,
            vec!["--shard".into(), "2/2".into(), "--allow-no-runs".into()],
        ]
        .concat(),
    );
    assert_eq!(one.cells.len() + two.cells.len(), 30);
}

#[test]
fn a_listing_that_fails_or_lists_nothing_is_an_error_with_what_the_tool_said() {
    build();
    let sb = Sandbox::new();
    let (code, r, _) = vkexit_at_root(
        &sb,
        &words(
            "vkexit run --ctest target/suites/cmake --ctest-args \"-R no-such-test\" --runs 1",
            "1",
        ),
    );
    let c = the_cell(&r);
    assert_eq!((code, c.verdict), (1, CellVerdict::Error), "{r:#?}");
    assert!(c.case.starts_with("ctest:"), "{c:#?}");
    assert!(
        c.reason
            .as_deref()
            .is_some_and(|r| r.contains("-R no-such-test` listed no test")),
        "{c:#?}"
    );

    // A "test program" that fails at listing: its stderr is the reason.
    let failing = sb.path().join("broken-tests");
    std::fs::write(
        &failing,
        "#!/bin/sh\necho 'cannot open libfoo.so' >&2\nexit 127\n",
    )
    .unwrap();
    make_executable(&failing);
    for flag in ["--gtest", "--libtest"] {
        let args: Vec<String> = vec![
            "run".into(),
            flag.into(),
            failing.display().to_string(),
            "--runs".into(),
            "1".into(),
        ];
        let (code, r, _) = vkexit_at_root(&sb, &args);
        let c = the_cell(&r);
        assert_eq!((code, c.verdict), (1, CellVerdict::Error), "{r:#?}");
        let reason = c.reason.as_deref().expect("a reason");
        assert!(
            reason.contains("exited 127") && reason.contains("cannot open libfoo.so"),
            "{reason}"
        );
    }
    // pytest that collects nothing (exit 5) is an error too.
    std::fs::write(sb.path().join("empty_test_dir.txt"), "").unwrap();
    let args: Vec<String> = [
        "run",
        "--pytest",
        &sb.path().join("empty_test_dir.txt").display().to_string(),
        "--runs",
        "1",
    ]
    .map(String::from)
    .to_vec();
    if Command::new("/usr/bin/python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let args = [args, vec!["--python".into(), "/usr/bin/python3".into()]].concat();
        let (code, r, _) = vkexit_at_root(&sb, &args);
        assert_eq!(
            (code, the_cell(&r).verdict),
            (1, CellVerdict::Error),
            "{r:#?}"
        );
    }
}

#[test]
fn a_suite_that_cannot_be_used_is_refused_before_any_run_naming_the_flag_or_line() {
    let sb = Sandbox::new();
    let refused = |args: &[&str]| {
        let out = sb.vkexit().arg("run").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = refused(&["--ctest", "/nonexistent"]);
    assert!(
        e.contains("--ctest /nonexistent") && e.contains("not a directory"),
        "{e}"
    );
    let e = refused(&["--ctest", sb.path().to_str().unwrap()]);
    assert!(e.contains("no CTestTestfile.cmake there"), "{e}");
    let plain = sb.path().join("plain.txt");
    std::fs::write(&plain, "").unwrap();
    let e = refused(&["--gtest", plain.to_str().unwrap()]);
    assert!(
        e.contains("--gtest ") && e.contains("plain.txt: not executable"),
        "{e}"
    );
    let e = refused(&["--ctest-args", "-R x"]);
    assert!(e.contains("--ctest"), "{e}");
    let matrix = |text: &str| {
        let path = sb.path().join("m.toml");
        std::fs::write(&path, text).unwrap();
        refused(&["--config", path.to_str().unwrap()])
    };
    let e = matrix("runs = 1\n[[suite]]\nkind = \"ctset\"\nbuild_dir = \".\"\n");
    assert!(
        e.contains("m.toml:3:")
            && e.contains("unknown suite kind `ctset`; kinds: ctest, gtest, pytest, libtest"),
        "{e}"
    );
    let e = matrix("[[suite]]\nkind = \"gtest\"\nbuild_dir = \".\"\n");
    assert!(
        e.contains("m.toml:3:") && e.contains("`build_dir` is for suites of kind ctest, not gtest"),
        "{e}"
    );
    let e = matrix("[[suite]]\nkind = \"ctest\"\n");
    assert!(
        e.contains("m.toml:1:") && e.contains("needs `build_dir`"),
        "{e}"
    );
    let e = matrix("[[suite]]\nkind = \"libtest\"\nprogram = \"no/such/program\"\n");
    assert!(
        e.contains("m.toml:3:") && e.contains("no/such/program"),
        "{e}"
    );
    let e = matrix("[[suite]]\nkind = \"ctest\"\nbuild_dir = \".\"\nfilter = \"x\"\n");
    assert!(
        e.contains("m.toml:4:") && e.contains("unknown field `filter`"),
        "{e}"
    );
}

fn make_executable(path: &PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// vkexit from the repository's root with `args` and a terminal `columns` wide: exit code,
/// stdout and stderr.
fn vkexit_columns(sb: &Sandbox, columns: &str, args: &[&str]) -> (i32, String, String) {
    let out = sb
        .vkexit()
        .current_dir(repo())
        .env("COLUMNS", columns)
        .args(args)
        .arg("--artifacts")
        .arg(sb.path().join("artifacts"))
        .output()
        .expect("vkexit starts");
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (
        out.status.code().unwrap(),
        text(out.stdout),
        text(out.stderr),
    )
}

#[test]
fn a_suite_reads_as_one_short_line_a_test_then_its_failures_then_the_summary() {
    build();
    let sb = Sandbox::new();
    let html = sb.path().join("html");
    let markdown = sb.path().join("summary.md");
    let gtest = "target/suites/cmake/teardown-gtest";
    let args = [
        "run", "--gtest", gtest, "--runs", "1", "--driver", "lavapipe", "--html",
    ];
    let mut args: Vec<&str> = args.to_vec();
    args.push(html.to_str().unwrap());
    args.push("--markdown");
    args.push(markdown.to_str().unwrap());
    let (code, stdout, stderr) = vkexit_columns(&sb, "60", &args);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    // No line wider than the terminal, but an evidence path, which has a line of its own.
    for line in stdout.lines().chain(stderr.lines()) {
        if !line.starts_with("    evidence: ") && !line.starts_with("vkexit: ") {
            assert!(line.chars().count() <= 60, "{line:?}\n{stdout}\n{stderr}");
        }
    }
    // As each test finishes, on stderr: how its runs ended, their time, its name (the suite's
    // test name: one driver, no runtime of its own to tell it from other tests).
    let progress = stderr
        .lines()
        .find(|l| l.contains("Teardown.DestroysItsBuffer"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        regex::Regex::new(r"^\[\d+/\d+\] pass  \d+\.\d\d s  Teardown\.DestroysItsBuffer$")
            .unwrap()
            .is_match(progress),
        "{progress}"
    );
    // Then on stdout: one line a test, the failure with its reason and evidence, the summary.
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{stdout}"))
    };
    assert!(
        line(" Teardown.DestroysItsBuffer").starts_with("pass "),
        "{stdout}"
    );
    assert!(
        line(" Teardown.KeepsItsBufferAtExit").starts_with("fail "),
        "{stdout}"
    );
    let failures = stdout
        .split_once("\nfailures:\n")
        .unwrap_or_else(|| panic!("{stdout}"))
        .1;
    let mut lines = failures.lines();
    assert_eq!(lines.next(), Some("fail Teardown.KeepsItsBufferAtExit"));
    let why: Vec<&str> = lines
        .by_ref()
        .take_while(|l| l.starts_with("    "))
        .collect();
    assert!(
        why.join(" ").contains("VUID-vkDestroyDevice-device-00378"),
        "{failures}"
    );
    assert!(
        why.last().unwrap().starts_with("    evidence: "),
        "{failures}"
    );
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("7 cells, 6 runs: "),
        "{stdout}"
    );

    // The HTML report shows the suite as a list of its tests, the failure first, with why.
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(!page.contains("ordering ↓ / runtime →"), "{page}");
    let list = &page[page.find("<table class=\"tests\">").unwrap()..];
    let fail = list.find("Teardown.KeepsItsBufferAtExit").unwrap();
    assert!(
        fail < list.find("Teardown.DestroysItsBuffer").unwrap(),
        "{list}"
    );
    assert!(list.contains("00378 ×1 per run"), "{list}");

    // So does the Markdown summary: a row a test, the failure first, with why.
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(!md.contains("ordering ↓ / runtime →"), "{md}");
    let list = &md[md.find("| test | runs | why |").unwrap()..];
    let fail = list.find("Teardown.KeepsItsBufferAtExit").unwrap();
    assert!(
        fail < list.find("Teardown.DestroysItsBuffer").unwrap(),
        "{list}"
    );
    assert!(list.contains("VUID-vkDestroyDevice-device-00378"), "{list}");
}

#[test]
fn repro_takes_a_suite_and_runs_the_one_test_it_is_given() {
    build();
    let sb = Sandbox::new();
    let gtest = "target/suites/cmake/teardown-gtest";
    let (code, stdout, stderr) = vkexit_columns(
        &sb,
        "100",
        &[
            "repro",
            "--gtest",
            gtest,
            "--case",
            "Teardown.KeepsItsBufferAtExit",
            "--driver",
            "lavapipe",
            "-j",
            "1",
        ],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("repro: Teardown.KeepsItsBufferAtExit × external × lavapipe"),
        "{stdout}"
    );
    assert!(stdout.contains("\nrun 1 failed: vuid: "), "{stdout}");
    // The suite without one test picked: which tests it could be.
    let (code, _, stderr) = vkexit_columns(&sb, "100", &["repro", "--gtest", gtest]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("Teardown.DestroysItsBuffer"), "{stderr}");
}
