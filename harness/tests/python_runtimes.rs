//! IREE, Taichi and wgpu-py (their PyPI wheels, from the runtime cache) through the
//! exit-ordering scripts of scenarios/python/, as external cases on lavapipe under the real
//! validation layer. Each gives the verdicts recorded in ci/baselines/real-runtimes-ext.toml.
//!
//! The wheels are what ci/setup-python-more.sh puts into the runtime cache; when a runtime is
//! missing the tests run that script, and skip, saying why, only if it cannot get it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use vkexit_testkit::real_runtimes::{self, cell as run};
use vkexit_testkit::results::{assert_all, CellResult, RunVerdict};
use vkexit_testkit::{or_skip, workspace as repo};

/// The scripts' interpreter (their `#!` line).
const PYTHON: &str = "/usr/bin/python3";

/// Where the setup unpacks `runtime`'s wheels for the scripts' interpreter, as the scripts
/// look for it: the runtime cache vkexit uses, then `cpXY`.
fn unpacked(runtime: &str) -> Result<PathBuf, String> {
    let cache = vkexit::support::env::Environment::get()
        .runtime_cache
        .clone()
        .ok_or("no runtime cache: none of VKEXIT_RUNTIME_CACHE, XDG_CACHE_HOME and HOME is set")?;
    let out = Command::new(PYTHON)
        .args([
            "-c",
            "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')",
        ])
        .output()
        .map_err(|e| format!("{PYTHON} could not start: {e}"))?;
    let tag = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(cache.join(runtime).join(tag))
}

/// The setup script's output, run at most once per test process.
fn setup() -> &'static Result<String, String> {
    static SETUP: OnceLock<Result<String, String>> = OnceLock::new();
    SETUP.get_or_init(|| {
        let script = repo().join("ci/setup-python-more.sh");
        let out = Command::new(&script)
            .output()
            .map_err(|e| format!("{} could not start: {e}", script.display()))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })
}

/// The script `name` of `runtime`, or why not: the runtime's wheels are not in the cache and
/// the setup cannot put them there.
fn script(runtime: &str, name: &str) -> Result<String, String> {
    let path = repo()
        .join("scenarios/python")
        .join(runtime)
        .join(name)
        .display()
        .to_string();
    let present =
        |dir: &Result<PathBuf, String>| dir.as_ref().is_ok_and(|d| d.join("PINS").is_file());
    let dir = unpacked(runtime);
    if present(&dir) {
        return Ok(path);
    }
    let said = setup();
    if present(&dir) {
        return Ok(path);
    }
    let why = match (&dir, said) {
        (Err(e), _) | (_, Err(e)) => e.clone(),
        (Ok(d), Ok(out)) => format!(
            "{} is missing after ci/setup-python-more.sh:\n{out}",
            d.display()
        ),
    };
    Err(format!(
        "the {runtime} wheels are not in the runtime cache: {why}"
    ))
}

/// Whether the trace layer saw an object of `kind` alive at exit in some run of the cell.
fn alive_at_exit(cell: &CellResult, kind: &str) -> bool {
    cell.findings
        .iter()
        .any(|f| f.starts_with(&format!("{kind} ")) && f.contains("alive at exit"))
}

#[test]
fn iree_clean_exit_passes_with_and_without_the_tegra_exit_handler() {
    let script = or_skip!(script("iree", "clean-exit.py"));
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, true, &script);
        assert_all(&c, RunVerdict::Pass, 2);
        assert!(!alive_at_exit(&c, "VkDevice"), "{c:#?}");
        assert!(!alive_at_exit(&c, "VkInstance"), "{c:#?}");
    }
}

#[test]
fn taichi_clean_exit_passes_with_and_without_the_tegra_exit_handler() {
    let script = or_skip!(script("taichi", "clean-exit.py"));
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, true, &script);
        assert_all(&c, RunVerdict::Pass, 2);
        assert!(!alive_at_exit(&c, "VkDevice"), "{c:#?}");
    }
}

#[test]
fn wgpu_py_clean_exit_passes_but_never_destroys_its_instance() {
    let script = or_skip!(script("wgpu-py", "clean-exit.py"));
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, true, &script);
        assert_all(&c, RunVerdict::Pass, 2);
        // wgpu-py's process-wide instance lives in a module global that nothing releases.
        assert!(alive_at_exit(&c, "VkInstance"), "{c:#?}");
        assert!(!alive_at_exit(&c, "VkDevice"), "{c:#?}");
    }
}

#[test]
fn taichi_ndarray_freed_after_ti_reset_is_harmless() {
    // The ordering of Taichi #3258: an ndarray outliving the program. Fixed by PR #5227.
    let script = or_skip!(script("taichi", "freed-after-teardown.py"));
    let c = run(2, "none", true, &script);
    assert_all(&c, RunVerdict::Pass, 2);
    assert!(c.vuids.is_empty(), "{c:#?}");
}

#[test]
fn iree_device_held_by_a_daemon_thread_crashes_under_the_tegra_exit_handler() {
    let script = or_skip!(script("iree", "daemon-thread-holds-device.py"));
    let desktop = run(2, "none", true, &script);
    assert_all(&desktop, RunVerdict::Pass, 2);
    assert!(alive_at_exit(&desktop, "VkDevice"), "{desktop:#?}");
    let tegra = run(2, "tegra", false, &script);
    assert_all(&tegra, RunVerdict::Crash, 2);
    assert_eq!(tegra.signals, ["SIGSEGV"]);
}

#[test]
fn wgpu_py_device_held_by_a_daemon_thread_crashes_under_the_tegra_exit_handler() {
    let script = or_skip!(script("wgpu-py", "daemon-thread-holds-device.py"));
    let desktop = run(2, "none", true, &script);
    assert_all(&desktop, RunVerdict::Pass, 2);
    assert!(alive_at_exit(&desktop, "VkDevice"), "{desktop:#?}");
    let tegra = run(2, "tegra", false, &script);
    assert_all(&tegra, RunVerdict::Crash, 2);
    assert_eq!(tegra.signals, ["SIGSEGV"]);
}

#[test]
fn the_python_cases_of_the_real_runtimes_matrix_are_green_against_its_baseline() {
    // The matrix names its scripts relative to the repository, as CI runs it.
    let runtimes = ["iree", "taichi", "wgpu-py"];
    for runtime in runtimes {
        or_skip!(script(runtime, "clean-exit.py"));
    }
    let cases = real_runtimes::cases(|name| {
        runtimes.iter().any(|r| name.starts_with(&format!("{r}-")))
            && (!name.starts_with("wgpu-") || name.starts_with("wgpu-py-"))
    });
    assert_eq!(
        cases.len(),
        21,
        "6 IREE, 8 Taichi and 7 wgpu-py cases: {cases:?}"
    );
    // Each case × 2 layer sets.
    real_runtimes::assert_green(&cases, 2 * cases.len());
}
