//! The built-in scenarios × refrt policies on lavapipe under validation give
//! the outcomes the built-in baseline records, and a plain run is green.

use vkexit_testkit::results::{cell_of, the_cell, Args, CellResult, CellVerdict, Results};
use vkexit_testkit::results::{RunVerdict::Crash, RunVerdict::Pass, RunVerdict::Vuid};
use vkexit_testkit::vkexit::*;

fn cell<'a>(r: &'a Results, case: &str, policy: &str) -> &'a CellResult {
    cell_of(r, case, &format!("refrt:{policy}"))
}

/// A cell the built-in baseline holds green: it passes, or fails as it knows.
fn green(c: &CellResult) -> bool {
    matches!(c.verdict, CellVerdict::Pass | CellVerdict::ExpectedFail)
}

#[test]
fn every_ordering_under_every_policy_matches_the_baseline() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate(&Args::run().runs(2).json("r.json"), "r.json");
    assert_eq!(r.cells.len(), 20, "4 cases × 5 policies on lavapipe");
    for c in &r.cells {
        assert!(green(c), "{c:#?}");
        assert_eq!(c.runs, 2);
    }
    assert_eq!(code, 0, "{r:#?}");

    // The final fix is clean in every ordering.
    for case in [
        "clean-exit",
        "buffer-kept-at-exit",
        "handler-before-load",
        "events-freed-after-teardown",
    ] {
        let c = cell(&r, case, "release-children");
        assert_eq!(c.counts.get(Pass), 2, "{case}");
    }
    // A device destroyed with a kept buffer: the layer names the VUID.
    for policy in ["static-destructor", "atexit-after-init", "guarded"] {
        let c = cell(&r, "buffer-kept-at-exit", policy);
        assert_eq!(c.counts.get(Vuid), 2, "{c:#?}");
        assert!(c
            .vuids
            .iter()
            .any(|v| v == "VUID-vkDestroyDevice-device-00378"));
        assert_eq!(c.verdict, CellVerdict::ExpectedFail);
        assert!(!c.artifacts.is_empty());
    }
    // The cleanup handler registered before the load crashes after teardown.
    let c = cell(&r, "handler-before-load", "atexit-after-init");
    assert_eq!(c.counts.get(Crash), 2, "{c:#?}");
    assert_eq!(c.signals, ["SIGSEGV"]);
    // Guards stop the crash, but vkDestroyDevice still sees live children.
    let c = cell(&r, "handler-before-load", "guarded");
    assert_eq!(c.counts.get(Vuid), 2, "{c:#?}");
}

#[test]
fn without_a_baseline_match_a_policy_that_fails_is_reported_as_failing() {
    // `--no-validation` has no built-in baseline: the crashing ordering must
    // make the gate red.
    let sb = Sandbox::new();
    let args = Args::run()
        .runs(1)
        .flags(&["--no-validation"])
        .case("handler-before-load")
        .runtime("refrt:atexit-after-init")
        .json("r.json");
    let (code, r) = sb.gate(&args, "r.json");
    let c = the_cell(&r);
    assert_eq!(c.counts.get(Crash), 1, "{c:#?}");
    assert_eq!(c.verdict, CellVerdict::Fail);
    assert_eq!(code, 1);
}

/// Debian 11's stack, on this machine: Mesa 20.3.5's lavapipe is a Vulkan 1.0 device (refrt's
/// events then use fences, not timeline semaphores) and layer 1.2.162 validates. The built-in
/// matrix is green against the built-in baseline there too, where one cell differs: the
/// destructor of `static-destructor` runs after the layer's own exit handlers and faults inside
/// the layer.
#[test]
fn the_builtin_matrix_is_green_on_debian_11s_vulkan_1_0_lavapipe_and_layer_1_2() {
    let debian11 = vkexit_testkit::or_skip!(vkexit_testkit::debian11::Debian11::find());
    let sb = Sandbox::new();
    let config = sb.path().join("layer-1.2.toml");
    std::fs::write(
        &config,
        format!(
            "[[layers]]\nvalidation_manifest = \"{}\"\n",
            debian11.layer_manifest().display()
        ),
    )
    .unwrap();
    let args = Args::command("run")
        .runs(1)
        .opt("--config", config.to_str().unwrap())
        .opt("--driver", debian11.lavapipe_manifest().to_str().unwrap())
        .json("r.json");
    let out = sb
        .vkexit()
        .env("LD_LIBRARY_PATH", debian11.lib_dir())
        .args(&args)
        .output()
        .expect("vkexit starts");
    let r = vkexit_testkit::results::read(&sb.results());
    assert_eq!(r.cells.len(), 20, "{r:#?}");
    for c in &r.cells {
        assert_eq!(c.layers, ["validation@1.2.162"], "{c:#?}");
        let vulkan = c.provenance.as_ref().and_then(|p| p.vulkan.as_deref());
        assert_eq!(vulkan, Some("1.0.2"), "{c:#?}");
        assert!(green(c), "{c:#?}");
    }
    assert_eq!(out.status.code(), Some(0), "{r:#?}");
    let c = cell(&r, "clean-exit", "static-destructor");
    assert_eq!(c.counts.get(Crash), 1, "{c:#?}");
    assert_eq!(c.verdict, CellVerdict::ExpectedFail);
    for case in ["clean-exit", "buffer-kept-at-exit", "handler-before-load"] {
        let c = cell(&r, case, "release-children");
        assert_eq!(c.counts.get(Pass), 1, "{case}");
    }
}
