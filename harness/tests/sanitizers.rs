//! Programs built with a sanitizer run under vkexit as they run without it: gcc's address
//! sanitizer (its shared `libasan`, which must come first in the initial library list), clang's
//! with `-shared-libasan` and its default static runtime, UBSan and LeakSanitizer. A clean
//! program passes; a sanitizer's report fails the run with the report's headline as the
//! reason, and UBSan's report fails a run that exited 0. Real programs built here with Debian's
//! gcc and clang, run on lavapipe under the real validation layer and the real preload.

use std::path::{Path, PathBuf};
use std::process::Command;
use vkexit_testkit::results::{first_run, CellResult, CellVerdict, Results};
use vkexit_testkit::vkexit::Sandbox;

/// Makes an instance and a device on the driver the loader gives, does what its argument
/// says (nothing, `use-after-free`, `leak`, `shift`), then destroys both.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

static void *volatile kept;

static int misbehave(const char *what, int argc) {
    if (!strcmp(what, "use-after-free")) {
        volatile int *p = malloc(4 * sizeof *p);
        free((void *)p);
        return p[1];
    }
    if (!strcmp(what, "leak")) {
        kept = malloc(64);
        kept = 0;
        return 0;
    }
    if (!strcmp(what, "shift")) {
        int by = 30 + argc * 5;
        printf("%d\n", 1 << by);
    }
    return 0;
}

int main(int argc, char **argv) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, 0, "sanitized", 1, 0, 0,
                             VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, 0, 0, &app};
    VkInstance instance;
    if (vkCreateInstance(&ici, 0, &instance) != VK_SUCCESS) return 2;
    uint32_t n = 1;
    VkPhysicalDevice physical;
    vkEnumeratePhysicalDevices(instance, &n, &physical);
    if (n == 0) return 2;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, 0, 0, 0, 1,
                                     &priority};
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, 0, 0, 1, &queue};
    VkDevice device;
    if (vkCreateDevice(physical, &dci, 0, &device) != VK_SUCCESS) return 2;
    int status = misbehave(argc > 1 ? argv[1] : "", argc);
    vkDestroyDevice(device, 0);
    vkDestroyInstance(instance, 0);
    return status;
}
"#;

/// Builds [`PROGRAM`] as `dir/name` with `compiler ARGS … -lvulkan`; `None` when the compiler
/// is not installed, panics with the compiler's words when it fails.
fn build(dir: &Path, compiler: &str, name: &str, args: &[&str]) -> Option<PathBuf> {
    let source = dir.join("sanitized.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let program = dir.join(name);
    let out = Command::new(compiler)
        .args(["-g", "-O0"])
        .args(args)
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .arg("-lvulkan")
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{compiler} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(program)
}

/// gcc, or the test skips (CI installs it: ci/setup-tests.sh).
macro_rules! gcc {
    ($dir:expr, $name:expr, $args:expr) => {
        match build($dir, "gcc", $name, $args) {
            Some(program) => program,
            None => vkexit_testkit::skip!("gcc is not installed (apt-get install gcc)"),
        }
    };
}

/// clang with its sanitizer runtimes, or the test skips (CI installs them: ci/setup-tests.sh).
macro_rules! clang {
    ($dir:expr, $name:expr, $args:expr) => {
        match clang_runtime_dir() {
            Some(_) => build($dir, "clang", $name, $args).expect("clang runs"),
            None => vkexit_testkit::skip!(
                "clang or its sanitizer runtimes are not installed \
                 (apt-get install clang libclang-rt-14-dev)"
            ),
        }
    };
}

/// Where clang's shared ASan runtime is, when clang and its runtimes are installed.
fn clang_runtime_dir() -> Option<String> {
    let name = format!("libclang_rt.asan-{}.so", std::env::consts::ARCH);
    let out = Command::new("clang")
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    path.is_absolute()
        .then(|| path.parent().map(|d| d.display().to_string()))
        .flatten()
}

/// LeakSanitizer's options that leave out the driver's own leaks: Debian 12's lavapipe
/// (Mesa 22.3.6-1+deb12u2) leaks 128 bytes it allocates once in a `pthread_once`, and unloads
/// before the check, so its frames show as an unknown module below the Vulkan loader's (seen
/// only with the slow unwinder: the fast one stops in the driver). A leak of the program's own
/// (`leak`) has no loader frame and is still reported. The suppressions file goes into `dir`.
fn without_driver_leaks(dir: &Path) -> String {
    let file = dir.join("lsan-driver.supp");
    std::fs::write(&file, "leak:libvulkan.so.1\n").unwrap();
    format!(
        "suppressions={}:fast_unwind_on_malloc=0:print_suppressions=0",
        file.display()
    )
}

/// `vkexit run --driver lavapipe --runs 2 -- PROGRAM ARGS`: the exit code and the only cell.
fn run(sb: &Sandbox, program: &Path, args: &[&str]) -> (i32, CellResult) {
    run_with(sb, program, args, &[])
}

/// [`run`], with `env` set for vkexit and so for its runs.
fn run_with(
    sb: &Sandbox,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, CellResult) {
    let json = sb.path().join("r.json");
    let out = sb
        .vkexit()
        .env("LSAN_OPTIONS", without_driver_leaks(sb.path()))
        .envs(env.iter().copied())
        .args(["run", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(&json)
        .arg("--")
        .arg(program)
        .args(args)
        .output()
        .expect("vkexit starts");
    let code = out.status.code().expect("vkexit exits");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no results ({e}); exit {code}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut results: Results = serde_json::from_str(&text).expect("a results file");
    assert_eq!(results.cells.len(), 1, "{text}");
    (code, results.cells.remove(0))
}

/// The reason of the first kept run of `cell`, from its `result.json`.
fn first_run_reason(cell: &CellResult) -> String {
    first_run(cell).reason
}

/// The program alone, outside vkexit, on lavapipe: how it runs without it.
fn alone(program: &Path, args: &[&str]) -> (i32, String) {
    alone_with(program, args, &[])
}

/// [`alone`], with `env` set.
fn alone_with(program: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let xdg = tempfile::tempdir().unwrap();
    let out = Command::new(program)
        .args(args)
        .env("LSAN_OPTIONS", without_driver_leaks(xdg.path()))
        .envs(env.iter().copied())
        .env("VK_DRIVER_FILES", lavapipe_manifest())
        .env("XDG_RUNTIME_DIR", xdg.path())
        .output()
        .expect("the program starts");
    (
        out.status.code().expect("it exits"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lavapipe_manifest() -> PathBuf {
    vkexit_testkit::vulkan::lavapipe_icd()
}

/// Asserts that a clean build exits 0 alone and passes both runs under vkexit, with `env`.
fn passes(sb: &Sandbox, program: &Path, env: &[(&str, &str)]) {
    let (code, stderr) = alone_with(program, &[], env);
    assert_eq!(code, 0, "{} alone: {stderr}", program.display());
    let (code, cell) = run_with(sb, program, &[], env);
    assert_eq!(
        (code, cell.counts.pass, cell.verdict),
        (0, 2, CellVerdict::Pass),
        "{}: {cell:#?}\n{}",
        program.display(),
        cell.artifacts
            .first()
            .map(|_| first_run_reason(&cell))
            .unwrap_or_default()
    );
}

#[test]
fn gcc_builds_with_each_sanitizer_pass_when_clean() {
    let sb = Sandbox::new();
    for (name, flag) in [
        ("asan", "-fsanitize=address"),
        ("ubsan", "-fsanitize=undefined"),
        ("lsan", "-fsanitize=leak"),
    ] {
        let program = gcc!(sb.path(), &format!("gcc-{name}"), &[flag]);
        passes(&sb, &program, &[]);
    }
}

#[test]
fn clang_builds_with_a_shared_or_static_runtime_pass_when_clean() {
    let sb = Sandbox::new();
    let static_asan = clang!(sb.path(), "clang-asan-static", &["-fsanitize=address"]);
    let ubsan = clang!(sb.path(), "clang-ubsan", &["-fsanitize=undefined"]);
    let runtimes = clang_runtime_dir().expect("clang's runtimes, found above");
    let rpath = format!("-Wl,-rpath,{runtimes}");
    let shared_rpath = clang!(
        sb.path(),
        "clang-asan-rpath",
        &["-fsanitize=address", "-shared-libasan", &rpath]
    );
    for program in [static_asan, ubsan, shared_rpath] {
        passes(&sb, &program, &[]);
    }
    // Found through the library path alone: the runs get vkexit's.
    let shared = clang!(
        sb.path(),
        "clang-asan-shared",
        &["-fsanitize=address", "-shared-libasan"]
    );
    passes(&sb, &shared, &[("LD_LIBRARY_PATH", &runtimes)]);
}

#[test]
fn a_heap_use_after_free_fails_the_run_with_asans_report() {
    let sb = Sandbox::new();
    let gcc = gcc!(sb.path(), "gcc-asan", &["-fsanitize=address"]);
    let clang = clang!(sb.path(), "clang-asan-static", &["-fsanitize=address"]);
    for program in [gcc, clang] {
        let (code, cell) = run(&sb, &program, &["use-after-free"]);
        assert_eq!((code, cell.counts.exit), (1, 2), "{cell:#?}");
        let reason = first_run_reason(&cell);
        assert!(
            reason.starts_with("AddressSanitizer: heap-use-after-free at ")
                && reason.contains("sanitized.c:")
                && reason.contains("exited with code 1"),
            "{}: {reason}",
            program.display()
        );
    }
}

#[test]
fn a_leak_fails_the_run_with_lsans_report() {
    let sb = Sandbox::new();
    let asan = gcc!(sb.path(), "gcc-asan", &["-fsanitize=address"]);
    let lsan = gcc!(sb.path(), "gcc-lsan", &["-fsanitize=leak"]);
    for (program, code) in [(asan, 1), (lsan, 23)] {
        let (vkexit_code, cell) = run(&sb, &program, &["leak"]);
        assert_eq!((vkexit_code, cell.counts.exit), (1, 2), "{cell:#?}");
        assert_eq!(
            first_run_reason(&cell),
            format!(
                "LeakSanitizer: detected memory leaks: 64 byte(s) leaked in 1 allocation(s).; \
                 exited with code {code}"
            ),
            "{}",
            program.display()
        );
    }
}

#[test]
fn undefined_behaviour_fails_a_run_that_exited_0() {
    let sb = Sandbox::new();
    let gcc = gcc!(sb.path(), "gcc-ubsan", &["-fsanitize=undefined"]);
    let clang = clang!(sb.path(), "clang-ubsan", &["-fsanitize=undefined"]);
    for program in [gcc, clang] {
        // Alone, UBSan reports and the program exits 0.
        let (code, stderr) = alone(&program, &["shift"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stderr.contains("runtime error: shift exponent 40"),
            "{stderr}"
        );
        let (code, cell) = run(&sb, &program, &["shift"]);
        assert_eq!((code, cell.counts.vuid), (1, 2), "{cell:#?}");
        assert_eq!(cell.vuids, ["VKEXIT-sanitizer-report"], "{cell:#?}");
        let reason = first_run_reason(&cell);
        assert!(
            reason.starts_with("UndefinedBehaviorSanitizer: ")
                && reason.contains("sanitized.c:")
                && reason.contains(": runtime error: shift exponent 40 is too large")
                && reason.ends_with("; the program exited 0"),
            "{}: {reason}",
            program.display()
        );
    }
}
