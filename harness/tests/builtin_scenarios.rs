//! The built-in scenarios × refrt policies on lavapipe under validation give
//! the outcomes the built-in baseline records, and a plain run is green.

use serde_json::Value;
use vkexit_testkit::vkexit::*;

fn cell<'a>(r: &'a Value, case: &str, policy: &str) -> &'a Value {
    let runtime = format!("refrt:{policy}");
    r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == case && c["runtime"] == runtime.as_str())
        .unwrap_or_else(|| panic!("no cell {case} × {runtime}"))
}

#[test]
fn every_ordering_under_every_policy_matches_the_baseline() {
    let sb = Sandbox::new();
    let (code, r) = sb.run(&["--runs", "2"]);
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 20, "4 cases × 5 policies on lavapipe");
    for c in cells {
        let v = c["verdict"].as_str().unwrap();
        assert!(v == "pass" || v == "expected-fail", "{c:#}");
        assert_eq!(c["runs"], 2);
    }
    assert_eq!(code, 0, "{r:#}");

    // The final fix is clean in every ordering.
    for case in [
        "clean-exit",
        "buffer-kept-at-exit",
        "handler-before-load",
        "events-freed-after-teardown",
    ] {
        assert_eq!(
            count(cell(&r, case, "release-children"), "pass"),
            2,
            "{case}"
        );
    }
    // A device destroyed with a kept buffer: the layer names the VUID.
    for policy in ["static-destructor", "atexit-after-init", "guarded"] {
        let c = cell(&r, "buffer-kept-at-exit", policy);
        assert_eq!(count(c, "vuid"), 2, "{c:#}");
        assert!(strings(&c["vuids"]).contains(&"VUID-vkDestroyDevice-device-00378".into()));
        assert_eq!(c["verdict"], "expected-fail");
        assert!(!strings(&c["artifacts"]).is_empty());
    }
    // The cleanup handler registered before the load crashes after teardown.
    let c = cell(&r, "handler-before-load", "atexit-after-init");
    assert_eq!(count(c, "crash"), 2, "{c:#}");
    assert_eq!(strings(&c["signals"]), ["SIGSEGV"]);
    // Guards stop the crash, but vkDestroyDevice still sees live children.
    let c = cell(&r, "handler-before-load", "guarded");
    assert_eq!(count(c, "vuid"), 2, "{c:#}");
}

#[test]
fn without_a_baseline_match_a_policy_that_fails_is_reported_as_failing() {
    // `--no-validation` has no built-in baseline: the crashing ordering must
    // make the gate red.
    let sb = Sandbox::new();
    let (code, r) = sb.run(&[
        "--runs",
        "1",
        "--no-validation",
        "--case",
        "handler-before-load",
        "--runtime",
        "refrt:atexit-after-init",
    ]);
    let c = only_cell(&r);
    assert_eq!(count(c, "crash"), 1, "{c:#}");
    assert_eq!(c["verdict"], "fail");
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
    let results = sb.results();
    let out = sb
        .vkexit()
        .env("LD_LIBRARY_PATH", debian11.lib_dir())
        .args(["run", "--runs", "1", "--config"])
        .arg(&config)
        .arg("--driver")
        .arg(debian11.lavapipe_manifest())
        .arg("--json")
        .arg(&results)
        .output()
        .expect("vkexit starts");
    let r = sb.read_results();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 20, "{r:#}");
    for c in cells {
        assert_eq!(strings(&c["layers"]), ["validation@1.2.162"], "{c:#}");
        assert_eq!(c["provenance"]["vulkan"], "1.0.2", "{c:#}");
        let v = c["verdict"].as_str().unwrap();
        assert!(v == "pass" || v == "expected-fail", "{c:#}");
    }
    assert_eq!(out.status.code(), Some(0), "{r:#}");
    let c = cell(&r, "clean-exit", "static-destructor");
    assert_eq!(count(c, "crash"), 1, "{c:#}");
    assert_eq!(c["verdict"], "expected-fail");
    for case in ["clean-exit", "buffer-kept-at-exit", "handler-before-load"] {
        assert_eq!(
            count(cell(&r, case, "release-children"), "pass"),
            1,
            "{case}"
        );
    }
}
