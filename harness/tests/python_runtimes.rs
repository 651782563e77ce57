//! IREE, Taichi and wgpu-py (their PyPI wheels, from the runtime cache) through the
//! exit-ordering scripts of scenarios/python/, as external cases on lavapipe under the real
//! validation layer. Each gives the verdicts recorded in ci/baselines/real-runtimes-ext.toml.
//!
//! The wheels are what ci/setup-python-more.sh puts into the runtime cache; when a runtime is
//! missing the tests run that script, and are skipped, saying why, only if it cannot get it.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The scripts' interpreter (their `#!` line).
const PYTHON: &str = "/usr/bin/python3";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness is in the workspace")
        .to_path_buf()
}

/// Where the setup unpacks `runtime`'s wheels for the scripts' interpreter, as the scripts
/// look for it: the runtime cache vkexit uses, then `cpXY`.
fn unpacked(runtime: &str) -> Result<PathBuf, String> {
    let cache = vkexit::plan::runtime_cache()
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

/// The script `name` of `runtime`, or None (with the reason printed) when the runtime's
/// wheels are not in the cache and the setup cannot put them there.
fn script(runtime: &str, name: &str) -> Option<String> {
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
        return Some(path);
    }
    let said = setup();
    if present(&dir) {
        return Some(path);
    }
    let why = match (&dir, said) {
        (Err(e), _) | (_, Err(e)) => e.clone(),
        (Ok(d), Ok(out)) => format!(
            "{} is missing after ci/setup-python-more.sh:\n{out}",
            d.display()
        ),
    };
    println!("SKIPPED: the {runtime} wheels are not in the runtime cache: {why}");
    None
}

/// `vkexit run --driver lavapipe --runs N --emulate MODE [--trace] -- PROGRAM`: its only cell.
fn run(runs: u32, emulate: &str, trace: bool, program: &str) -> Value {
    let sb = Sandbox::new();
    let runs = runs.to_string();
    let mut args = vec!["--runs", &runs, "--emulate", emulate];
    if trace {
        args.push("--trace");
    }
    args.extend(["--", program]);
    let (_, r) = sb.run(&args);
    only_cell(&r).clone()
}

fn assert_all(cell: &Value, verdict: &str, runs: u64) {
    assert_eq!(count(cell, verdict), runs, "{cell:#}");
}

/// Whether the trace layer saw an object of `kind` alive at exit in some run of the cell.
fn alive_at_exit(cell: &Value, kind: &str) -> bool {
    // A cell without findings has no `findings` key.
    cell["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|f| f.starts_with(&format!("{kind} ")) && f.contains("alive at exit"))
}

#[test]
fn iree_clean_exit_passes_with_and_without_the_tegra_exit_handler() {
    let Some(script) = script("iree", "clean-exit.py") else {
        return;
    };
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, true, &script);
        assert_all(&c, "pass", 2);
        assert!(!alive_at_exit(&c, "VkDevice"), "{c:#}");
        assert!(!alive_at_exit(&c, "VkInstance"), "{c:#}");
    }
}

#[test]
fn taichi_clean_exit_passes_with_and_without_the_tegra_exit_handler() {
    let Some(script) = script("taichi", "clean-exit.py") else {
        return;
    };
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, true, &script);
        assert_all(&c, "pass", 2);
        assert!(!alive_at_exit(&c, "VkDevice"), "{c:#}");
    }
}

#[test]
fn wgpu_py_clean_exit_passes_but_never_destroys_its_instance() {
    let Some(script) = script("wgpu-py", "clean-exit.py") else {
        return;
    };
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, true, &script);
        assert_all(&c, "pass", 2);
        // wgpu-py's process-wide instance lives in a module global that nothing releases.
        assert!(alive_at_exit(&c, "VkInstance"), "{c:#}");
        assert!(!alive_at_exit(&c, "VkDevice"), "{c:#}");
    }
}

#[test]
fn taichi_ndarray_freed_after_ti_reset_is_harmless() {
    // The ordering of Taichi #3258: an ndarray outliving the program. Fixed by PR #5227.
    let Some(script) = script("taichi", "freed-after-teardown.py") else {
        return;
    };
    let c = run(2, "none", true, &script);
    assert_all(&c, "pass", 2);
    assert!(strings(&c["vuids"]).is_empty(), "{c:#}");
}

#[test]
fn iree_device_held_by_a_daemon_thread_crashes_under_the_tegra_exit_handler() {
    let Some(script) = script("iree", "daemon-thread-holds-device.py") else {
        return;
    };
    let desktop = run(2, "none", true, &script);
    assert_all(&desktop, "pass", 2);
    assert!(alive_at_exit(&desktop, "VkDevice"), "{desktop:#}");
    let tegra = run(2, "tegra", false, &script);
    assert_all(&tegra, "crash", 2);
    assert_eq!(strings(&tegra["signals"]), ["SIGSEGV"]);
}

#[test]
fn wgpu_py_device_held_by_a_daemon_thread_crashes_under_the_tegra_exit_handler() {
    let Some(script) = script("wgpu-py", "daemon-thread-holds-device.py") else {
        return;
    };
    let desktop = run(2, "none", true, &script);
    assert_all(&desktop, "pass", 2);
    assert!(alive_at_exit(&desktop, "VkDevice"), "{desktop:#}");
    let tegra = run(2, "tegra", false, &script);
    assert_all(&tegra, "crash", 2);
    assert_eq!(strings(&tegra["signals"]), ["SIGSEGV"]);
}

#[test]
fn the_python_cases_of_the_real_runtimes_matrix_are_green_against_its_baseline() {
    // The matrix names its scripts relative to the repository, as CI runs it.
    let runtimes = ["iree", "taichi", "wgpu-py"];
    if runtimes
        .iter()
        .any(|r| script(r, "clean-exit.py").is_none())
    {
        return;
    }
    let matrix = std::fs::read_to_string(repo().join("ci/matrix/real-runtimes.toml")).unwrap();
    let cases: Vec<&str> = matrix
        .lines()
        .filter_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
        .filter(|name| runtimes.iter().any(|r| name.starts_with(&format!("{r}-"))))
        .filter(|name| !name.starts_with("wgpu-") || name.starts_with("wgpu-py-"))
        .collect();
    assert_eq!(
        cases.len(),
        21,
        "6 IREE, 8 Taichi and 7 wgpu-py cases: {cases:?}"
    );
    let sb = Sandbox::new();
    let mut cmd = sb.vkexit();
    cmd.current_dir(repo()).args([
        "run",
        "--config",
        "ci/matrix/real-runtimes.toml",
        "--baseline",
        "ci/baselines/real-runtimes-ext.toml",
        "--driver",
        "lavapipe",
        "--runs",
        "1",
    ]);
    for case in &cases {
        cmd.args(["--case", case]);
    }
    let out = cmd
        .arg("--json")
        .arg(sb.results())
        .arg("--artifacts")
        .arg(sb.path().join("artifacts"))
        .output()
        .unwrap();
    let r = sb.read_results();
    let cells = r["cells"].as_array().expect("cells");
    assert_eq!(
        cells.len(),
        2 * cases.len(),
        "each case × 2 layer sets: {r:#}"
    );
    for c in cells {
        let source = c["expectation"].as_str().unwrap_or_default();
        assert!(
            source.starts_with("ci/baselines/real-runtimes-ext.toml:"),
            "every cell is judged by the baseline file: {c:#}"
        );
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
