//! Real runtimes as external cases on lavapipe under validation: ncnn (its Python wheel,
//! through the scripts of scenarios/ncnn/) and wgpu (the bins of scenarios/wgpu). Each gives
//! the verdicts recorded in ci/baselines/real-runtimes-ext.toml.
//!
//! The ncnn tests need the wheel that ci/setup-python-runtimes.sh unpacks; when it is missing
//! they run that script, and are skipped, saying why, only if it cannot get the wheel.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness is in the workspace")
        .to_path_buf()
}

fn wgpu_bin(name: &str) -> String {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (cargo build --release --workspace)",
        path.display()
    );
    path.display().to_string()
}

/// The ncnn script, or None (with the reason printed) when the wheel cannot be had.
fn ncnn_script(name: &str) -> Option<String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let setup = repo().join("ci/setup-python-runtimes.sh");
        let out = Command::new(&setup)
            .output()
            .map_err(|e| format!("{} could not start: {e}", setup.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} failed ({}):\n{}",
                setup.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    match ready {
        Ok(()) => Some(
            repo()
                .join("scenarios/ncnn")
                .join(name)
                .display()
                .to_string(),
        ),
        Err(why) => {
            println!("SKIPPED: the ncnn wheel cannot be obtained here: {why}");
            None
        }
    }
}

/// The unpacked wheel for /usr/bin/python3, to put on PYTHONPATH of a script that does a
/// plain `import ncnn`, or None (with the reason printed).
fn ncnn_wheel() -> Option<PathBuf> {
    ncnn_script("clean-exit.py")?;
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')",
        ])
        .output()
        .expect("python3 runs");
    let tag = String::from_utf8(out.stdout).unwrap();
    let dir = repo().join("target/real-runtimes/ncnn").join(tag.trim());
    assert!(dir.join("ncnn").is_dir(), "{} has no ncnn", dir.display());
    Some(dir)
}

/// A user's own ncnn script, written as ncnn's Python documentation shows it (no loader
/// argument, nothing from this repository), run by a relative path from its directory:
/// `vkexit run --runs N -- python3 NAME.py`. Returns the only cell.
fn run_plain_script(runs: u32, name: &str, body: &str) -> Value {
    let wheel = ncnn_wheel().expect("checked by the caller");
    let sb = Sandbox::new();
    std::fs::write(sb.path().join(name), body).unwrap();
    let out = sb
        .vkexit()
        .env("PYTHONPATH", &wheel)
        .args([
            "run",
            "--driver",
            "lavapipe",
            "--runs",
            &runs.to_string(),
            "--json",
        ])
        .arg(sb.results())
        .args(["--", "python3", name])
        .output()
        .unwrap();
    assert!(
        sb.results().exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.read_results();
    let cell = only_cell(&r).clone();
    assert_eq!(cell["case"], name, "named after the script: {cell:#}");
    cell
}

const PLAIN_START: &str = "import ncnn\n\
ncnn.create_gpu_instance()\n\
device = ncnn.get_gpu_device(0)\n\
print(device.info().device_name())\n\
allocator = ncnn.VkBlobAllocator(device)\n\
buffer = allocator.fastMalloc(1 << 20)\n";

#[test]
fn a_plain_ncnn_script_passes_under_validation_through_the_loader() {
    if ncnn_wheel().is_none() {
        return;
    }
    let body = format!("{PLAIN_START}del buffer, allocator\nncnn.destroy_gpu_instance()\n");
    let c = run_plain_script(3, "plain_clean.py", &body);
    assert_all(&c, "pass", 3);
    // The run went through the system loader, which read VK_LOADER_DRIVERS_SELECT.
    let provenance = &c["provenance"];
    assert!(
        provenance["driver_selection"]
            .as_str()
            .unwrap()
            .starts_with("VK_LOADER_DRIVERS_SELECT"),
        "{c:#}"
    );
    let loaders = strings(&provenance["loaders_used"]);
    assert_eq!(loaders.len(), 1, "{c:#}");
    assert!(
        loaders[0].contains("libvulkan.so") && loaders[0].ends_with(": 3 runs"),
        "{c:#}"
    );
}

#[test]
fn a_plain_ncnn_script_that_frees_after_teardown_crashes_with_00378_logged() {
    if ncnn_wheel().is_none() {
        return;
    }
    // destroy_gpu_instance with the allocator and its buffer alive in module globals; Python
    // frees them afterwards, on a device that is gone.
    let body = format!("{PLAIN_START}ncnn.destroy_gpu_instance()\n");
    let c = run_plain_script(2, "plain_freed_late.py", &body);
    assert_all(&c, "crash", 2);
    assert_eq!(strings(&c["signals"]), ["SIGSEGV"]);
    assert!(
        c["vuid_counts"]["VUID-vkDestroyDevice-device-00378"]
            .as_u64()
            .unwrap_or(0)
            >= 2,
        "00378 in every run: {c:#}"
    );
}

#[test]
fn ncnn_opening_the_driver_itself_is_an_error_never_a_pass() {
    if ncnn_wheel().is_none() {
        return;
    }
    // Given a driver's library, ncnn's built-in loader opens it itself: no layer sees a call.
    let lavapipe = lavapipe_library();
    let body = format!(
        "import ncnn\n\
ncnn.create_gpu_instance('{lavapipe}')\n\
print(ncnn.get_gpu_device(0).info().device_name())\n\
ncnn.destroy_gpu_instance()\n"
    );
    let c = run_plain_script(1, "plain_bypass.py", &body);
    assert_all(&c, "error", 1);
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.contains("ncnn.cpython")
            && reason.contains(&format!("loaded the driver {lavapipe} itself"))
            && reason.contains("no layer can see its calls"),
        "{reason}"
    );
}

/// `vkexit run --driver lavapipe --runs N [--emulate MODE] -- PROGRAM`: its only cell.
fn run(runs: u32, emulate: &str, program: &str) -> Value {
    let sb = Sandbox::new();
    let runs = runs.to_string();
    let (_, r) = sb.run(&["--runs", &runs, "--emulate", emulate, "--", program]);
    only_cell(&r).clone()
}

fn assert_all(cell: &Value, verdict: &str, runs: u64) {
    assert_eq!(count(cell, verdict), runs, "{cell:#}");
}

#[test]
fn ncnn_clean_exit_passes() {
    let Some(script) = ncnn_script("clean-exit.py") else {
        return;
    };
    let c = run(2, "none", &script);
    assert_all(&c, "pass", 2);
    assert_eq!(c["verdict"], "pass");
}

#[test]
fn ncnn_exit_without_destroy_is_torn_down_before_the_tegra_exit_handler() {
    // ncnn registers its own teardown with atexit after vkCreateInstance, so it runs before
    // the exit handler the (emulated) Tegra driver registered when the loader loaded it.
    let Some(script) = ncnn_script("exit-without-destroy.py") else {
        return;
    };
    let c = run(2, "tegra", &script);
    assert_all(&c, "pass", 2);
}

#[test]
fn ncnn_allocator_freed_after_teardown_crashes_after_00378() {
    let Some(script) = ncnn_script("allocator-freed-after-teardown.py") else {
        return;
    };
    let c = run(2, "none", &script);
    assert_all(&c, "crash", 2);
    assert_eq!(strings(&c["signals"]), ["SIGSEGV"]);
    assert!(
        strings(&c["vuids"]).contains(&"VUID-vkDestroyDevice-device-00378".to_string()),
        "{c:#}"
    );
}

#[test]
fn ncnn_pool_allocator_reclaimed_is_deleted_twice() {
    let Some(script) = ncnn_script("pool-allocator-reclaimed.py") else {
        return;
    };
    let c = run(2, "none", &script);
    assert_all(&c, "crash", 2);
    assert_eq!(strings(&c["signals"]), ["SIGSEGV"]);
}

#[test]
fn wgpu_clean_exit_passes_with_and_without_the_tegra_exit_handler() {
    let program = wgpu_bin("wgpu-clean-exit");
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, &program);
        assert_all(&c, "pass", 2);
    }
}

#[test]
fn wgpu_device_in_a_static_is_never_destroyed() {
    let program = wgpu_bin("wgpu-device-in-static");
    // Desktop exit behaviour: the leak is unseen.
    assert_all(&run(2, "none", &program), "pass", 2);
    // The Tegra driver's exit handler runs with the device alive.
    let c = run(2, "tegra", &program);
    assert_all(&c, "crash", 2);
    assert_eq!(strings(&c["signals"]), ["SIGSEGV"]);
}

#[test]
fn wgpu_process_exit_with_a_live_device_crashes_under_the_tegra_exit_handler() {
    let c = run(2, "tegra", &wgpu_bin("wgpu-process-exit-live-device"));
    assert_all(&c, "crash", 2);
    assert_eq!(strings(&c["signals"]), ["SIGSEGV"]);
}

#[test]
fn the_real_runtimes_matrix_is_green_against_its_baseline() {
    // The matrix names its programs relative to the repository, as CI runs it.
    if ncnn_script("clean-exit.py").is_none() {
        return;
    }
    wgpu_bin("wgpu-clean-exit");
    // The matrix's Python-runtime cases (IREE, Taichi, wgpu-py) are tests/python_runtimes.rs's.
    let matrix = std::fs::read_to_string(repo().join("ci/matrix/real-runtimes.toml")).unwrap();
    let cases: Vec<&str> = matrix
        .lines()
        .filter_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
        .filter(|name| {
            name.starts_with("ncnn-") || name.starts_with("wgpu-") && !name.starts_with("wgpu-py-")
        })
        .collect();
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
    assert_eq!(cells.len(), 20, "10 cases × 2 layer sets: {r:#}");
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
