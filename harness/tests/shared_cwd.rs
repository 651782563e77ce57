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
    // Its lock file is gone afterwards, but its runs did write it there: said once.
    let said = "lock.sh: its runs write into the shared directory";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    assert!(stderr.contains("(lock)"), "{stderr}");
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

/// Writes its name into `shader.comp` in its working directory, makes a Vulkan instance,
/// waits, and reads the file back, as a suite that writes a shader and compiles it does:
/// exit 1 when another test overwrote it meanwhile, else the status `$2` asks for.
const FIXED_FILE: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vulkan/vulkan.h>
int main(int argc, char **argv) {
    const char *me = argv[1];
    FILE *f = fopen("shader.comp", "w");
    if (!f) return 3;
    fprintf(f, "%s\n", me);
    fclose(f);
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkInstance instance;
    if (vkCreateInstance(&info, 0, &instance) != VK_SUCCESS) return 2;
    usleep(300000);
    char got[64] = {0};
    f = fopen("shader.comp", "r");
    if (!f || !fgets(got, sizeof got, f)) return 3;
    fclose(f);
    vkDestroyInstance(instance, 0);
    size_t n = strlen(me);
    if (strncmp(got, me, n) != 0 || got[n] != '\n') {
        fprintf(stderr, "shader.comp holds %s, not %s: another test overwrote it\n", got, me);
        return 1;
    }
    return argc > 2 ? atoi(argv[2]) : 0;
}
"#;

#[test]
fn different_tests_writing_one_file_in_the_shared_directory_never_overlap_there() {
    let sb = Sandbox::new();
    let src = sb.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let program = vkexit_testkit::cc::program(&src, "compile", FIXED_FILE, &["-lvulkan"]);
    let prog = program.display();
    // Three tests that pass alone, and one that really fails (its own exit status).
    let lists = format!(
        "cmake_minimum_required(VERSION 3.16)\nproject(fixed NONE)\nenable_testing()\n\
         add_test(NAME compile-a COMMAND {prog} a)\n\
         add_test(NAME compile-b COMMAND {prog} b)\n\
         add_test(NAME compile-c COMMAND {prog} c)\n\
         add_test(NAME broken COMMAND {prog} d 4)\n"
    );
    std::fs::write(src.join("CMakeLists.txt"), lists).unwrap();
    let build = sb.path().join("build");
    configure(&src, &build);
    let args = ["--ctest", build.to_str().unwrap(), "--runs", "3", "-j", "2"];
    let (code, r, stderr) = stderr_of(&sb, &args);
    assert_eq!(code, 1, "only `broken` fails the gate\n{stderr}\n{r:#}");
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "{r:#}");
    for c in cells {
        let case = c["case"].as_str().unwrap();
        match case {
            "broken" => {
                assert_eq!(c["verdict"], "fail", "{c:#}");
                assert_eq!(c["counts"]["exit"], 3, "{c:#}");
            }
            _ => assert_all(c, "pass", 3),
        }
        // Each cell says what it wrote, and only that.
        let findings = strings(&c["findings"]);
        let said: Vec<_> = findings
            .iter()
            .filter(|f| f.contains("its runs write into the shared directory"))
            .collect();
        assert_eq!(said.len(), 1, "{case}: {findings:?}");
        assert!(said[0].contains("(shader.comp)"), "{case}: {said:?}");
    }
    // The writers are said once for the directory on stderr, not once a test.
    let written = "tests write into the shared directory";
    assert_eq!(stderr.matches(written).count(), 1, "{stderr}");
}

#[test]
fn vkexits_own_output_and_other_processes_files_are_not_the_runs_writes() {
    let sb = Sandbox::new();
    let program =
        vkexit_testkit::cc::program(sb.path(), "quiet", "int main(void) { return 0; }\n", &[]);
    // Another process writes into the directory while the runs run, as `tee` or an editor
    // would; vkexit's own standard output and error go to files there too.
    let mut noise = Command::new("sh")
        .current_dir(sb.path())
        .args(["-c", "while :; do date >> noise.txt; sleep 0.02; done"])
        .spawn()
        .unwrap();
    let out = std::fs::File::create(sb.path().join("out.txt")).unwrap();
    let err = std::fs::File::create(sb.path().join("err.txt")).unwrap();
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let status = Command::new(vkexit_program())
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", &xdg)
        .env_remove("COLUMNS")
        .args([
            "run", "--driver", "lavapipe", "--runs", "4", "-j", "2", "--json",
        ])
        .arg(sb.results())
        .args(["--", program.to_str().unwrap()])
        .stdout(out)
        .stderr(err)
        .status()
        .expect("vkexit starts");
    let _ = noise.kill();
    let _ = noise.wait();
    let stderr = std::fs::read_to_string(sb.path().join("err.txt")).unwrap();
    let stdout = std::fs::read_to_string(sb.path().join("out.txt")).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}\n{stdout}");
    assert!(std::fs::metadata(sb.path().join("noise.txt")).is_ok());
    assert!(!stderr.contains("shared directory"), "{stderr}");
    assert!(!stdout.contains("shared directory"), "{stdout}");
    let r = sb.read_results();
    assert_all(only_cell(&r), "no-vulkan", 4);
    let findings = only_cell(&r)["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(findings.is_empty(), "{r:#}");
}
