//! The real runtimes of the runtime cache (`ci/setup-runtimes.sh`) on lavapipe under validation:
//! ggml 0.20's Vulkan backend and Halide 21's Vulkan runtime, each through a clean exit and
//! through the ordering it is known to fail. A runtime missing from the cache skips its test
//! with a message, since only a download can bring it.

use std::path::PathBuf;
use vkexit_testkit::or_skip;
use vkexit_testkit::results::{CellResult, CellVerdict, Results};
use vkexit_testkit::vkexit::*;

/// The runtime cache as vkexit resolves it, if `runtime` is in it; else why not.
fn cached(runtime: &str) -> Result<PathBuf, String> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = var("VKEXIT_RUNTIME_CACHE")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("vkexit/runtimes")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/vkexit/runtimes")))
        .ok_or("no runtime cache: none of VKEXIT_RUNTIME_CACHE, XDG_CACHE_HOME and HOME is set")?;
    let dir = cache.join(runtime);
    if dir.join("VERSION").exists() {
        return Ok(dir);
    }
    Err(format!(
        "{runtime} is not in the runtime cache ({}); run ci/setup-runtimes.sh \
         (it downloads it from PyPI) to test it",
        dir.display()
    ))
}

fn cell<'a>(r: &'a Results, case: &str) -> &'a CellResult {
    r.cells
        .iter()
        .find(|c| c.case == case)
        .unwrap_or_else(|| panic!("no cell {case} in {r:#?}"))
}

/// What a cell says in words: its reason, then its findings, a line each.
fn said(cell: &CellResult) -> String {
    let reason = cell.reason.iter();
    reason
        .chain(&cell.findings)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn ggml_exits_cleanly_and_crashes_when_freed_after_the_driver_tore_down() {
    let dir = or_skip!(cached("ggml"));
    let sb = Sandbox::new();
    let runtime = format!("ggml:{}", dir.display());
    let (code, r) = sb.gate_run(&[
        "--runtime",
        &runtime,
        "--case",
        "clean-exit",
        "--case",
        "handler-before-load",
        "--runs",
        "2",
        "--keep-passing",
    ]);
    assert_eq!(code, 0, "{r:#?}");

    let clean = cell(&r, "clean-exit");
    assert_eq!(clean.counts.pass, 2, "{clean:#?}");
    assert_eq!(clean.verdict, CellVerdict::Pass);
    // ggml really ran on lavapipe: the run's story names the device ggml chose.
    let run = PathBuf::from(&clean.artifacts[0]);
    let run = if run.is_absolute() {
        run
    } else {
        sb.path().join(run)
    };
    let stdout = std::fs::read_to_string(run.join("stdout.txt")).unwrap();
    assert!(stdout.contains("ggml shows 1 Vulkan device(s)"), "{stdout}");
    assert!(
        stdout.contains("backend ready on device 0: llvmpipe"),
        "{stdout}"
    );

    // The cleanup registered before ggml loaded runs after lavapipe's own exit handlers;
    // ggml_backend_free then faults inside the driver.
    let late = cell(&r, "handler-before-load");
    assert_eq!(late.counts.crash, 2, "{late:#?}");
    assert_eq!(late.signals, ["SIGSEGV"]);
    assert_eq!(late.verdict, CellVerdict::ExpectedFail, "{late:#?}");
    let summary = said(late);
    assert!(summary.contains("libvulkan_lvp.so"), "{summary}");
}

#[test]
fn halide_destroys_its_device_from_fini_array_with_kept_buffers_alive() {
    let dir = or_skip!(cached("halide"));
    let sb = Sandbox::new();
    let runtime = format!("halide:{}", dir.display());
    let (code, r) = sb.gate_run(&[
        "--runtime",
        &runtime,
        "--runs",
        "2",
        "--trace",
        "--keep-passing",
    ]);
    assert_eq!(code, 0, "{r:#?}");

    let clean = cell(&r, "clean-exit");
    assert_eq!(clean.counts.pass, 2, "{clean:#?}");
    // The device goes in the loader's finalization, after main and every exit handler.
    let run = PathBuf::from(&clean.artifacts[0]);
    let run = if run.is_absolute() {
        run
    } else {
        sb.path().join(run)
    };
    let story = sb.vkexit().arg("explain").arg(&run).output().unwrap();
    let story = String::from_utf8_lossy(&story.stdout);
    let at = |what: &str| {
        story
            .find(what)
            .unwrap_or_else(|| panic!("no `{what}` in\n{story}"))
    };
    assert!(
        at("main returned 0") < at("loader finalization starts"),
        "{story}"
    );
    assert!(
        at("loader finalization starts") < at("vkDestroyDevice"),
        "{story}"
    );

    let kept = cell(&r, "buffer-kept-at-exit");
    assert_eq!(kept.counts.vuid, 2, "{kept:#?}");
    assert_eq!(kept.vuids, ["VUID-vkDestroyDevice-device-00378"]);
    assert_eq!(kept.verdict, CellVerdict::ExpectedFail);

    assert_eq!(cell(&r, "handler-before-load").counts.pass, 2);
    let events = cell(&r, "events-freed-after-teardown");
    assert_eq!(events.verdict, CellVerdict::Skipped, "{events:#?}");
    assert!(said(events).contains("no event object"), "{events:#?}");
}

#[test]
fn halides_fini_array_cleanup_runs_after_the_tegra_drivers_exit_handler() {
    let dir = or_skip!(cached("halide"));
    let sb = Sandbox::new();
    let runtime = format!("halide:{}", dir.display());
    let (code, r) = sb.gate_run(&[
        "--runtime",
        &runtime,
        "--case",
        "clean-exit",
        "--emulate",
        "tegra",
        "--runs",
        "2",
    ]);
    assert_eq!(code, 0, "{r:#?}");
    let clean = cell(&r, "clean-exit");
    assert_eq!(clean.counts.crash, 2, "{clean:#?}");
    assert_eq!(clean.verdict, CellVerdict::ExpectedFail);
    assert!(said(clean).contains("vkexit-tegra-0"), "{clean:#?}");
}

/// A `GGML_BACKEND_DL` module that ggml refuses is an `error` naming ggml's own reason: nothing
/// of the exit path was checked. The module is built here and lies beside the cache's ggml 0.20.
#[test]
fn a_ggml_module_that_does_not_load_is_an_error_in_ggmls_words() {
    let wheel = or_skip!(cached("ggml"));
    let sb = Sandbox::new();
    let dir = sb.path().join("backends");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&wheel).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    std::fs::write(dir.join("m.c"), "int not_a_backend(void) { return 0; }\n").unwrap();
    let module = dir.join("libggml-fake.so");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&module)
        .arg(dir.join("m.c"))
        .arg("-Wl,--no-as-needed")
        .arg("-L")
        .arg(&dir)
        .arg("-l:libggml-base.so.0")
        .output()
        .expect("this test builds a module with the C compiler `cc` (apt-get install gcc)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let runtime = format!("ggml:{}", module.display());
    let (code, r) = sb.gate_run(&["--runtime", &runtime, "--case", "clean-exit", "--runs", "1"]);
    assert_ne!(code, 0, "{r:#?}");
    let clean = cell(&r, "clean-exit");
    assert_eq!(clean.counts.error, 1, "{clean:#?}");
    assert_eq!(clean.verdict, CellVerdict::Error, "{clean:#?}");
    let summary = said(clean);
    assert!(
        summary.contains("could not set up")
            && summary.contains("ggml said: load_backend: failed to find ggml_backend_init"),
        "{summary}"
    );
}
