//! Runs that start in a shared directory (an external case, a suite's test) are held apart as
//! CTest holds its tests: repeats of one test never overlap, a `RESOURCE_LOCK` is never held
//! twice, a `RUN_SERIAL` test runs alone; and a test that writes into the shared directory
//! is said once. Each program here takes a lock file in its working directory exclusively
//! and fails if it is already there: any overlap fails a run, whatever the timing.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use vkexit_testkit::vkexit::*;

/// Takes `$1` (default `lock`) in the working directory, holds it briefly, gives it back.
const LOCK_SCRIPT: &str = r#"set -o noclobber
lock="${1:-lock}"
if ! : > "$lock" 2>/dev/null; then
  echo "$lock is held by another run in $(pwd)" >&2
  exit 1
fi
sleep 0.2
rm -f "$lock"
"#;

fn stderr_of(sb: &Sandbox, args: &[&str]) -> (i32, Value, String) {
    let out = sb
        .vkexit()
        .args(["run", "--driver", "lavapipe", "--json"])
        .arg(sb.results())
        .args(args)
        .output()
        .expect("vkexit starts");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().expect("vkexit exits normally");
    (code, sb.read_results(), stderr)
}

#[test]
fn repeats_of_a_program_in_the_callers_directory_never_overlap() {
    let sb = Sandbox::new();
    std::fs::write(sb.path().join("lock.sh"), LOCK_SCRIPT).unwrap();
    let args = [
        "--runs",
        "6",
        "-j",
        "4",
        "--no-validation",
        "--",
        "bash",
        "lock.sh",
    ];
    let (code, r, stderr) = stderr_of(&sb, &args);
    let c = only_cell(&r);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_all(c, "no-vulkan", 6);
    // It left nothing behind: nothing to say.
    assert!(!stderr.contains("shared directory"), "{stderr}");
}

#[test]
fn ctest_resource_lock_and_run_serial_are_honoured() {
    let sb = Sandbox::new();
    let src = sb.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("lock.sh"), LOCK_SCRIPT).unwrap();
    // `a-1` and `a-2` share lock `a` (RESOURCE_LOCK); `alone` (RUN_SERIAL) and `free` share
    // lock `b`, which only RUN_SERIAL keeps apart.
    let lists = r#"cmake_minimum_required(VERSION 3.16)
project(locks NONE)
enable_testing()
add_test(NAME a-1 COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lock.sh a)
add_test(NAME a-2 COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lock.sh a)
add_test(NAME alone COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lock.sh b)
add_test(NAME free COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lock.sh b)
set_tests_properties(a-1 a-2 PROPERTIES RESOURCE_LOCK shared-a)
set_tests_properties(alone PROPERTIES RUN_SERIAL TRUE)
"#;
    std::fs::write(src.join("CMakeLists.txt"), lists).unwrap();
    let build = sb.path().join("build");
    configure(&src, &build);
    let build = build.to_str().unwrap();
    let args = [
        "--ctest",
        build,
        "--runs",
        "3",
        "-j",
        "4",
        "--no-validation",
    ];
    let (code, r, stderr) = stderr_of(&sb, &args);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "{r:#}");
    for c in cells {
        assert_all(c, "no-vulkan", 3);
        let findings = c["findings"].as_array().cloned().unwrap_or_default();
        assert!(
            !findings
                .iter()
                .any(|f| f.to_string().contains("not honoured")),
            "{findings:?}"
        );
    }
}

#[test]
fn a_program_that_writes_into_the_shared_directory_is_said_once() {
    let sb = Sandbox::new();
    let script = "echo compiled > shader.spv\n";
    std::fs::write(sb.path().join("check.sh"), script).unwrap();
    let args = [
        "--runs",
        "3",
        "-j",
        "2",
        "--no-validation",
        "--",
        "bash",
        "check.sh",
    ];
    let (code, r, stderr) = stderr_of(&sb, &args);
    assert_eq!(code, 0, "{stderr}");
    let said = "check.sh: its runs write into the shared directory";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    let line = stderr.lines().find(|l| l.contains(said)).unwrap();
    assert!(
        line.contains("(shader.spv)") && line.contains("--private-cwd"),
        "{line}"
    );
    let findings = strings(&only_cell(&r)["findings"]);
    let written: Vec<_> = findings.iter().filter(|f| f.contains(said)).collect();
    assert_eq!(written.len(), 1, "{findings:?}");

    // Its own directory per run: nothing shared, nothing said.
    let check = sb.path().join("check.sh");
    let args = [
        "--runs",
        "2",
        "--no-validation",
        "--private-cwd",
        "--",
        "bash",
        check.to_str().unwrap(),
    ];
    let (code, _, stderr) = stderr_of(&sb, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("shared directory"), "{stderr}");
}

/// `cmake -S src -B build`, which must work: CTest is part of the test setup.
fn configure(src: &Path, build: &Path) {
    let out = Command::new("cmake")
        .arg("-S")
        .arg(src)
        .arg("-B")
        .arg(build)
        .output()
        .expect("cmake starts (ci/setup-tests.sh installs it)");
    assert!(out.status.success(), "cmake failed: {out:?}");
}
