//! Real runtimes as external cases on lavapipe under validation: ncnn (its Python wheel,
//! through the scripts of scenarios/ncnn/) and wgpu (the bins of scenarios/wgpu). Each gives
//! the verdicts recorded in ci/baselines/real-runtimes-ext.toml.
//!
//! The ncnn tests need the wheel that ci/setup-python-runtimes.sh unpacks; when it is missing
//! they run that script, and skip, saying why, only if it cannot get the wheel.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use vkexit_testkit::real_runtimes::{self, cell as run};
use vkexit_testkit::results::{assert_all, the_cell, CellResult, CellVerdict, RunVerdict};
use vkexit_testkit::vkexit::*;
use vkexit_testkit::vulkan::lavapipe_library;
use vkexit_testkit::{built, or_skip, workspace as repo};

/// The check a buffer alive at `vkDestroyDevice` fails.
const CHILDREN: &str = "VUID-vkDestroyDevice-device-00378";

fn wgpu_bin(name: &str) -> String {
    built(name).display().to_string()
}

/// The ncnn script, or why the wheel cannot be had.
fn ncnn_script(name: &str) -> Result<String, String> {
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
        Ok(()) => Ok(repo()
            .join("scenarios/ncnn")
            .join(name)
            .display()
            .to_string()),
        Err(why) => Err(format!("the ncnn wheel cannot be obtained here: {why}")),
    }
}

/// The unpacked wheel for /usr/bin/python3, to put on PYTHONPATH of a script that does a
/// plain `import ncnn`, or why the wheel cannot be had.
fn ncnn_wheel() -> Result<PathBuf, String> {
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
    Ok(dir)
}

/// A user's own ncnn script, written as ncnn's Python documentation shows it (no loader
/// argument, nothing from this repository), run by a relative path from its directory:
/// `vkexit run --runs N -- python3 NAME.py`. Returns the only cell.
fn run_plain_script(wheel: &Path, runs: u32, name: &str, body: &str) -> CellResult {
    let sb = Sandbox::new();
    std::fs::write(sb.path().join(name), body).unwrap();
    let out = sb
        .vkexit()
        .env("PYTHONPATH", wheel)
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
    let r = sb.gate_results();
    let cell = the_cell(&r).clone();
    assert_eq!(cell.case, name, "named after the script: {cell:#?}");
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
    let wheel = or_skip!(ncnn_wheel());
    let body = format!("{PLAIN_START}del buffer, allocator\nncnn.destroy_gpu_instance()\n");
    let c = run_plain_script(&wheel, 3, "plain_clean.py", &body);
    assert_all(&c, RunVerdict::Pass, 3);
    // The run went through the system loader, which read VK_LOADER_DRIVERS_SELECT.
    let provenance = c.provenance.as_ref().expect("provenance");
    assert!(
        provenance
            .driver_selection
            .as_deref()
            .is_some_and(|s| s.starts_with("VK_LOADER_DRIVERS_SELECT")),
        "{c:#?}"
    );
    let loaders = &provenance.loaders_used;
    assert_eq!(loaders.len(), 1, "{c:#?}");
    assert!(
        loaders[0].contains("libvulkan.so") && loaders[0].ends_with(": 3 runs"),
        "{c:#?}"
    );
}

#[test]
fn a_plain_ncnn_script_that_frees_after_teardown_crashes_with_00378_logged() {
    let wheel = or_skip!(ncnn_wheel());
    // destroy_gpu_instance with the allocator and its buffer alive in module globals; Python
    // frees them afterwards, on a device that is gone.
    let body = format!("{PLAIN_START}ncnn.destroy_gpu_instance()\n");
    let c = run_plain_script(&wheel, 2, "plain_freed_late.py", &body);
    assert_all(&c, RunVerdict::Crash, 2);
    assert_eq!(c.signals, ["SIGSEGV"]);
    assert!(
        c.vuid_counts.get(CHILDREN).copied().unwrap_or(0) >= 2,
        "00378 in every run: {c:#?}"
    );
}

#[test]
fn ncnn_opening_the_driver_itself_is_an_error_never_a_pass() {
    let wheel = or_skip!(ncnn_wheel());
    // Given a driver's library, ncnn's built-in loader opens it itself: no layer sees a call.
    let lavapipe = lavapipe_library();
    let body = format!(
        "import ncnn\n\
ncnn.create_gpu_instance('{lavapipe}')\n\
print(ncnn.get_gpu_device(0).info().device_name())\n\
ncnn.destroy_gpu_instance()\n"
    );
    let c = run_plain_script(&wheel, 1, "plain_bypass.py", &body);
    assert_all(&c, RunVerdict::Error, 1);
    let reason = c.reason.as_deref().expect("a reason");
    assert!(
        reason.contains("ncnn.cpython")
            && reason.contains(&format!("loaded the driver {lavapipe} itself"))
            && reason.contains("no layer can see its calls"),
        "{reason}"
    );
}

#[test]
fn ncnn_clean_exit_passes() {
    let script = or_skip!(ncnn_script("clean-exit.py"));
    let c = run(2, "none", false, &script);
    assert_all(&c, RunVerdict::Pass, 2);
    assert_eq!(c.verdict, CellVerdict::Pass);
}

#[test]
fn ncnn_exit_without_destroy_is_torn_down_before_the_tegra_exit_handler() {
    // ncnn registers its own teardown with atexit after vkCreateInstance, so it runs before
    // the exit handler the (emulated) Tegra driver registered when the loader loaded it.
    let script = or_skip!(ncnn_script("exit-without-destroy.py"));
    let c = run(2, "tegra", false, &script);
    assert_all(&c, RunVerdict::Pass, 2);
}

#[test]
fn ncnn_allocator_freed_after_teardown_crashes_after_00378() {
    let script = or_skip!(ncnn_script("allocator-freed-after-teardown.py"));
    let c = run(2, "none", false, &script);
    assert_all(&c, RunVerdict::Crash, 2);
    assert_eq!(c.signals, ["SIGSEGV"]);
    assert!(c.vuids.contains(&CHILDREN.to_string()), "{c:#?}");
}

#[test]
fn ncnn_pool_allocator_reclaimed_is_deleted_twice() {
    let script = or_skip!(ncnn_script("pool-allocator-reclaimed.py"));
    let c = run(2, "none", false, &script);
    assert_all(&c, RunVerdict::Crash, 2);
    assert_eq!(c.signals, ["SIGSEGV"]);
}

#[test]
fn wgpu_clean_exit_passes_with_and_without_the_tegra_exit_handler() {
    let program = wgpu_bin("wgpu-clean-exit");
    for emulate in ["none", "tegra"] {
        let c = run(2, emulate, false, &program);
        assert_all(&c, RunVerdict::Pass, 2);
    }
}

#[test]
fn wgpu_device_in_a_static_is_never_destroyed() {
    let program = wgpu_bin("wgpu-device-in-static");
    // Desktop exit behaviour: the leak is unseen.
    assert_all(&run(2, "none", false, &program), RunVerdict::Pass, 2);
    // The Tegra driver's exit handler runs with the device alive.
    let c = run(2, "tegra", false, &program);
    assert_all(&c, RunVerdict::Crash, 2);
    assert_eq!(c.signals, ["SIGSEGV"]);
}

#[test]
fn wgpu_process_exit_with_a_live_device_crashes_under_the_tegra_exit_handler() {
    let c = run(
        2,
        "tegra",
        false,
        &wgpu_bin("wgpu-process-exit-live-device"),
    );
    assert_all(&c, RunVerdict::Crash, 2);
    assert_eq!(c.signals, ["SIGSEGV"]);
}

#[test]
fn the_real_runtimes_matrix_is_green_against_its_baseline() {
    // The matrix names its programs relative to the repository, as CI runs it.
    or_skip!(ncnn_script("clean-exit.py"));
    wgpu_bin("wgpu-clean-exit");
    // The matrix's Python-runtime cases (IREE, Taichi, wgpu-py) are tests/python_runtimes.rs's.
    let cases = real_runtimes::cases(|name| {
        name.starts_with("ncnn-") || name.starts_with("wgpu-") && !name.starts_with("wgpu-py-")
    });
    // 10 cases × 2 layer sets.
    real_runtimes::assert_green(&cases, 20);
}
