//! `vkexit exec` inside the real test runners: CTest's `CMAKE_TEST_LAUNCHER`, `meson test
//! --wrapper`, Cargo's `target.<triple>.runner` and a pytest run launched through it. Each runs
//! a passing test green and a crashing or validation-failing one red with vkexit's one line.
//! The programs create a Vulkan instance on lavapipe under the real validation layer. Then
//! what a runner relies on: output passed through unchanged and as it comes, the exit codes,
//! many execs at once, and a driver probe kept between vkexits that a changed manifest undoes.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use vkexit_testkit::vkexit::{bin_dir, vkexit_program, Sandbox};
use vkexit_testkit::{skip, vulkan};

/// A C program that creates a Vulkan instance, then does what its first argument says:
/// `pass`, `crash` (SIGSEGV), `vuid` (a device destroyed with a buffer alive), `skip` (exit 77),
/// `wait FILE` (prints `ready`, then waits for FILE to exist).
const PROGRAM: &str = r#"
#include <vulkan/vulkan.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "pass";
    VkInstanceCreateInfo info = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO };
    VkInstance instance;
    if (vkCreateInstance(&info, NULL, &instance) != VK_SUCCESS) {
        fprintf(stderr, "no instance\n");
        return 3;
    }
    printf("instance created\n");
    fprintf(stderr, "a line on stderr\n");
    fflush(stdout);
    if (!strcmp(mode, "wait") && argc > 2) {
        printf("ready\n");
        fflush(stdout);
        struct stat st;
        for (int i = 0; i < 6000 && stat(argv[2], &st) != 0; i++) usleep(10000);
        if (stat(argv[2], &st) != 0) return 4;
    }
    if (!strcmp(mode, "crash")) raise(SIGSEGV);
    if (!strcmp(mode, "vuid")) {
        /* A device destroyed with a buffer alive: the layer reports it, lavapipe copes. */
        uint32_t n = 1;
        VkPhysicalDevice physical;
        vkEnumeratePhysicalDevices(instance, &n, &physical);
        float priority = 1.0f;
        VkDeviceQueueCreateInfo queue = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            .queueCount = 1, .pQueuePriorities = &priority };
        VkDeviceCreateInfo device_info = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
            .queueCreateInfoCount = 1, .pQueueCreateInfos = &queue };
        VkDevice device;
        vkCreateDevice(physical, &device_info, NULL, &device);
        VkBufferCreateInfo buffer_info = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .size = 64, .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT };
        VkBuffer buffer;
        vkCreateBuffer(device, &buffer_info, NULL, &buffer);
        vkDestroyDevice(device, NULL);
    }
    vkDestroyInstance(instance, NULL);
    if (!strcmp(mode, "skip")) return 77;
    printf("no newline at the end");
    return 0;
}
"#;

/// Builds [`PROGRAM`] as `dir/vk`.
fn build_program(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("vk.c"), PROGRAM).unwrap();
    let out = Command::new("cc")
        .current_dir(dir)
        .args(["-o", "vk", "vk.c", "-lvulkan"])
        .output()
        .expect("these tests build programs with the C compiler `cc` (apt-get install gcc)");
    assert!(out.status.success(), "cc: {}", text(&out.stderr));
    dir.join("vk")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The words a runner is given to launch a test through vkexit.
fn launcher() -> Vec<String> {
    let _ = bin_dir();
    vec![
        vkexit_program().display().to_string(),
        "exec".into(),
        "--driver".into(),
        "lavapipe".into(),
        "--".into(),
    ]
}

/// A runner's command, in `dir`, with the sandbox's runtime and cache directories.
fn runner(sb: &Sandbox, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let xdg = sb.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    let mut command = Command::new(program);
    command
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("XDG_CACHE_HOME", sb.path().join("cache"));
    command
}

fn run(command: &mut Command) -> (i32, String) {
    let out = command.output().expect("the runner starts");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    (out.status.code().unwrap_or(-1), all)
}

/// `vkexit exec --driver lavapipe ARGS -- CMD` in the sandbox.
fn exec(sb: &Sandbox, args: &[&str], command: &[&str]) -> Output {
    sb.vkexit()
        .env("XDG_CACHE_HOME", sb.path().join("cache"))
        .args(["exec", "--driver", "lavapipe"])
        .args(args)
        .arg("--")
        .args(command)
        .output()
        .expect("vkexit starts")
}

/// The line vkexit adds: the last on stderr.
fn verdict_line(out: &Output) -> String {
    text(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// A CMake new enough for `CMAKE_TEST_LAUNCHER` (3.29): ci/setup-tests.sh's, or one on PATH.
fn cmake() -> Option<PathBuf> {
    let candidates = [
        vkexit_testkit::paths::workspace().join("target/test-tools/bin/cmake"),
        PathBuf::from("cmake"),
    ];
    candidates.into_iter().find(|c| {
        let Ok(out) = Command::new(c).arg("--version").output() else {
            return false;
        };
        let version = text(&out.stdout);
        let numbers: Vec<u32> = version
            .split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .split('.')
            .take(2)
            .filter_map(|n| n.parse().ok())
            .collect();
        numbers.as_slice() >= [3, 29].as_slice()
    })
}

#[test]
fn ctest_runs_each_test_through_the_launcher() {
    vulkan::require_vulkan();
    let Some(cmake) = cmake() else {
        skip!("no CMake 3.29 or newer (ci/setup-tests.sh installs one into target/test-tools)");
    };
    let ctest = cmake.with_file_name("ctest");
    let ctest = match cmake.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
        true => ctest,
        false => PathBuf::from("ctest"),
    };
    let sb = Sandbox::new();
    let src = sb.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("vk.c"), PROGRAM).unwrap();
    std::fs::write(
        src.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.29)\nproject(t C)\nfind_package(Vulkan REQUIRED)\n\
         add_executable(vk vk.c)\ntarget_link_libraries(vk Vulkan::Vulkan)\nenable_testing()\n\
         add_test(NAME passes COMMAND vk pass)\nadd_test(NAME crashes COMMAND vk crash)\n\
         add_test(NAME breaks_a_rule COMMAND vk vuid)\n",
    )
    .unwrap();
    let build = sb.path().join("build");
    let (code, out) = run(runner(&sb, &cmake, sb.path())
        .arg("-S")
        .arg(&src)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_TEST_LAUNCHER={}", launcher().join(";"))));
    assert_eq!(code, 0, "{out}");
    let (code, out) = run(runner(&sb, &cmake, sb.path()).arg("--build").arg(&build));
    assert_eq!(code, 0, "{out}");
    let ctest_run = |regex: &str| {
        run(runner(&sb, &ctest, &build).args(["--output-on-failure", "-V", "-R", regex]))
    };
    let (code, out) = ctest_run("^passes$");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("vkexit: pass"), "{out}");
    assert!(out.contains("instance created"), "{out}");
    let (code, out) = ctest_run("^crashes$");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("vkexit: crash: "), "{out}");
    assert!(
        out.contains("SIGSEGV") && out.contains("evidence: "),
        "{out}"
    );
    let (code, out) = ctest_run("^breaks_a_rule$");
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("vkexit: vuid: ") && out.contains("VUID-vkDestroyDevice-device-00378"),
        "{out}"
    );
}

#[test]
fn meson_test_runs_each_test_through_the_wrapper() {
    vulkan::require_vulkan();
    if Command::new("meson").arg("--version").output().is_err() {
        skip!("meson is not installed (apt-get install meson; ci/setup-tests.sh installs it)");
    }
    let sb = Sandbox::new();
    let src = sb.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("vk.c"), PROGRAM).unwrap();
    std::fs::write(
        src.join("meson.build"),
        "project('t', 'c')\nvk = executable('vk', 'vk.c', dependencies: dependency('vulkan'))\n\
         test('passes', vk, args: ['pass'])\ntest('crashes', vk, args: ['crash'])\n\
         test('skips', vk, args: ['skip'])\n",
    )
    .unwrap();
    let build = sb.path().join("build");
    let (code, out) = run(runner(&sb, "meson", sb.path())
        .arg("setup")
        .arg(&build)
        .arg(&src));
    assert_eq!(code, 0, "{out}");
    let meson_test = |name: &str| {
        run(runner(&sb, "meson", &build)
            .args(["test", "--print-errorlogs", "--wrapper"])
            .arg(launcher().join(" "))
            .arg(name))
    };
    let (code, out) = meson_test("passes");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Ok:                 1") || out.contains("Ok: 1"),
        "{out}"
    );
    let (code, out) = meson_test("crashes");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("vkexit: crash: "), "{out}");
    // The program's own exit code passes through: meson's 77 is still a skipped test.
    let (code, out) = meson_test("skips");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SKIP"), "{out}");
}

#[test]
fn cargo_runs_a_test_binary_through_the_runner() {
    vulkan::require_vulkan();
    let sb = Sandbox::new();
    let project = sb.path().join("t");
    std::fs::create_dir_all(project.join("tests")).unwrap();
    std::fs::create_dir_all(project.join(".cargo")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"t\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/lib.rs"), "").unwrap();
    // A test that creates and destroys an instance through the loader's C interface, and one
    // that aborts.
    std::fs::write(
        project.join("tests/vk.rs"),
        r#"
#[repr(C)]
struct InstanceCreateInfo {
    s_type: u32, p_next: *const u8, flags: u32, app: *const u8,
    layer_count: u32, layers: *const u8, extension_count: u32, extensions: *const u8,
}
#[link(name = "vulkan")]
extern "C" {
    fn vkCreateInstance(info: *const InstanceCreateInfo, alloc: *const u8, out: *mut usize) -> i32;
    fn vkDestroyInstance(instance: usize, alloc: *const u8);
}
fn instance() -> usize {
    let info = InstanceCreateInfo {
        s_type: 1, p_next: std::ptr::null(), flags: 0, app: std::ptr::null(),
        layer_count: 0, layers: std::ptr::null(), extension_count: 0, extensions: std::ptr::null(),
    };
    let mut instance = 0;
    assert_eq!(unsafe { vkCreateInstance(&info, std::ptr::null(), &mut instance) }, 0);
    instance
}
#[test]
fn passing() { unsafe { vkDestroyInstance(instance(), std::ptr::null()) } }
#[test]
fn aborting() { let _ = instance(); std::process::abort(); }
"#,
    )
    .unwrap();
    let host = text(
        &Command::new("rustc")
            .arg("-vV")
            .output()
            .expect("rustc")
            .stdout,
    );
    let triple = host
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let words: Vec<String> = launcher().iter().map(|w| format!("{w:?}")).collect();
    std::fs::write(
        project.join(".cargo/config.toml"),
        format!("[target.{triple}]\nrunner = [{}]\n", words.join(", ")),
    )
    .unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let cargo_test = |filter: &str| {
        run(runner(&sb, &cargo, &project)
            .args([
                "test",
                "--offline",
                "--quiet",
                "--test",
                "vk",
                filter,
                "--",
                "--exact",
            ])
            .env("CARGO_TARGET_DIR", project.join("target"))
            .env_remove("RUSTFLAGS"))
    };
    let (code, out) = cargo_test("passing");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("vkexit: pass"), "{out}");
    let (code, out) = cargo_test("aborting");
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("vkexit: crash: ") && out.contains("SIGABRT"),
        "{out}"
    );
}

/// An interpreter with pytest: python3 on PATH, or Debian's.
fn python_with_pytest() -> Option<PathBuf> {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| {
            Command::new(p)
                .args(["-m", "pytest", "--version"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn pytest_runs_under_exec() {
    vulkan::require_vulkan();
    let Some(python) = python_with_pytest() else {
        skip!("no python3 with pytest (apt-get install python3-pytest)");
    };
    let sb = Sandbox::new();
    std::fs::write(
        sb.path().join("test_vk.py"),
        r#"
import ctypes, os, signal

def instance():
    vk = ctypes.CDLL("libvulkan.so.1")
    info = (ctypes.c_uint64 * 8)()
    info[0] = 1  # sType VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, the rest zero
    handle = ctypes.c_void_p()
    assert vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(handle)) == 0
    return vk, handle

def test_passing():
    vk, handle = instance()
    vk.vkDestroyInstance(handle, None)

def test_crashing():
    instance()
    os.kill(os.getpid(), signal.SIGSEGV)
"#,
    )
    .unwrap();
    let pytest = |test: &str| {
        let mut command = runner(&sb, vkexit_program(), sb.path());
        command
            .args(&launcher()[1..])
            .arg(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(format!("test_vk.py::{test}"));
        run(&mut command)
    };
    let (code, out) = pytest("test_passing");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("1 passed") && out.contains("vkexit: pass"),
        "{out}"
    );
    let (code, out) = pytest("test_crashing");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("vkexit: crash: ") && out.contains("SIGSEGV"),
        "{out}"
    );
}

/// The program's stdout is vkexit's, byte for byte; its stderr comes before vkexit's line;
/// a passing run leaves no directory behind.
#[test]
fn output_passes_through_unchanged_and_a_pass_leaves_nothing() {
    vulkan::require_vulkan();
    let sb = Sandbox::new();
    let vk = build_program(sb.path());
    let out = exec(&sb, &[], &[vk.to_str().unwrap(), "pass"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "instance created\nno newline at the end");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("a line on stderr\n"), "{stderr}");
    assert!(verdict_line(&out).starts_with("vkexit: pass: "), "{stderr}");
    assert!(!sb.path().join("vkexit-artifacts").exists());
}

/// The runner sees the output while the program runs: the program waits for a file that the
/// test makes only once it has read the program's `ready` from vkexit's stdout.
#[test]
fn output_passes_through_as_it_comes() {
    vulkan::require_vulkan();
    let sb = Sandbox::new();
    let vk = build_program(sb.path());
    let go = sb.path().join("go");
    std::fs::create_dir_all(sb.path().join("xdg")).unwrap();
    let mut child = Command::new(vkexit_program());
    child
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", sb.path().join("xdg"))
        .env("XDG_CACHE_HOME", sb.path().join("cache"))
        .args(["exec", "--driver", "lavapipe", "--"])
        .arg(&vk)
        .arg("wait")
        .arg(&go)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = child.spawn().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let ready = line == "ready";
        seen.push(line);
        if ready {
            std::fs::write(&go, b"").unwrap();
        }
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{seen:?}");
    assert!(seen.iter().any(|l| l == "ready"), "{seen:?}");
}

/// The exit codes: the program's own when it failed by its exit code, 1 for a crash, and the
/// failing run's evidence kept where vkexit's line says.
#[test]
fn exit_codes_and_evidence_follow_the_verdict() {
    vulkan::require_vulkan();
    let sb = Sandbox::new();
    let vk = build_program(sb.path());
    let vk = vk.to_str().unwrap();
    let out = exec(&sb, &[], &[vk, "skip"]);
    assert_eq!(out.status.code(), Some(77), "{}", text(&out.stderr));
    assert!(verdict_line(&out).starts_with("vkexit: exit: "));
    let out = exec(&sb, &["--artifacts", "ev"], &[vk, "crash"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let line = verdict_line(&out);
    let dir = line
        .split("; evidence: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no evidence in {line}"));
    assert!(dir.contains("/ev/exec/vk-"), "{line}");
    assert!(Path::new(dir).join("result.json").is_file(), "{line}");
    assert!(Path::new(dir).join("stdout.txt").is_file(), "{line}");
}

/// Many execs at once, as `ctest -j` starts them: no lock to wait on, each its own verdict
/// and its own evidence directory.
#[test]
fn many_execs_at_once_each_keep_their_own() {
    vulkan::require_vulkan();
    let sb = Sandbox::new();
    let vk = build_program(sb.path());
    let children: Vec<(bool, std::process::Child)> = (0..12)
        .map(|i| {
            let crash = i % 3 == 0;
            let mut command = Command::new(vkexit_program());
            command
                .current_dir(sb.path())
                .env("XDG_RUNTIME_DIR", sb.path().join("xdg"))
                .env("XDG_CACHE_HOME", sb.path().join("cache"))
                .args(["exec", "--driver", "lavapipe", "--"])
                .arg(&vk)
                .arg(if crash { "crash" } else { "pass" })
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            std::fs::create_dir_all(sb.path().join("xdg")).unwrap();
            (crash, command.spawn().unwrap())
        })
        .collect();
    let mut kept = std::collections::BTreeSet::new();
    for (crash, child) in children {
        let out = child.wait_with_output().unwrap();
        let line = verdict_line(&out);
        match crash {
            true => {
                assert_eq!(out.status.code(), Some(1), "{line}");
                assert!(line.starts_with("vkexit: crash: "), "{line}");
                kept.insert(line.split("; evidence: ").nth(1).unwrap().to_string());
            }
            false => assert_eq!(out.status.code(), Some(0), "{line}"),
        }
    }
    assert_eq!(kept.len(), 4, "{kept:?}");
}

/// A driver probe is kept in the user's cache; a changed manifest is probed again, so its
/// answer is never stale.
#[test]
fn a_changed_manifest_is_probed_again() {
    vulkan::require_vulkan();
    let sb = Sandbox::new();
    let vk = build_program(sb.path());
    let manifest = sb.path().join("lvp_icd.json");
    let library = vulkan::lavapipe_library();
    let write = |library: &str| {
        let text = format!(
            r#"{{"file_format_version": "1.0.0", "ICD": {{"library_path": "{library}", "api_version": "1.3.0"}}}}"#
        );
        std::fs::write(&manifest, text).unwrap();
    };
    write(&library);
    let exec = |args: &[&str]| {
        sb.vkexit()
            .env("XDG_CACHE_HOME", sb.path().join("cache"))
            .args(["exec", "--no-validation", "--driver"])
            .arg(&manifest)
            .arg("--")
            .arg(&vk)
            .args(args)
            .output()
            .unwrap()
    };
    let out = exec(&["pass"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kept: Vec<_> = std::fs::read_dir(sb.path().join("cache/vkexit/probes"))
        .expect("the probe is kept")
        .collect();
    assert_eq!(kept.len(), 1);
    // Kept again: the same answer.
    let out = exec(&["pass"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // A library that is not there: the driver shows no device now, and the kept probe, which
    // said it did, must not be believed.
    write("/nonexistent/libvulkan_lvp.so");
    let out = exec(&["pass"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("shows no device") || stderr.contains("could not be probed"),
        "{stderr}"
    );
}
