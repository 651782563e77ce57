//! `vkexit bench` end to end, scaled down to seconds: it runs every loop and writes every
//! figure. Nothing here judges a figure: timing depends on the machine.

use serde_json::Value;
use vkexit_testkit::vkexit::{self as kit, Sandbox};

#[test]
fn a_tiny_bench_writes_every_figure() {
    kit::bin_dir();
    let sandbox = Sandbox::new();
    let json = sandbox.path().join("b.json");
    let out = sandbox
        .vkexit()
        .args([
            "bench",
            "--driver",
            "lavapipe",
            "--runs",
            "2",
            "--repeats",
            "2",
        ])
        .args(["--rss-runs", "10", "--pairs", "10", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("overhead vs bare"), "{stdout}");
    assert!(stdout.contains("each loop 2 time(s)"), "{stdout}");
    assert!(
        stdout.contains("load average")
            && stdout.contains(" before, ")
            && stdout.contains(" after"),
        "{stdout}"
    );
    let figures: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut keys: Vec<&str> = figures
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    let mut expected = [
        "load_average",
        "repeats",
        "bare_ms_per_run",
        "ctest_ms_per_run",
        "vkexit_ms_per_run",
        "bare_ms_spread",
        "ctest_ms_spread",
        "vkexit_ms_spread",
        "startup_ms",
        "startup",
        "fixed_ms_per_run",
        "fixed_cpu_ms_per_run",
        "fixed_breakdown_cpu_ms",
        "overhead_vs_bare",
        "ratio_vs_ctest",
        "speedup_j2",
        "trace_ns_per_call",
        "tegra_ns_per_call",
        "peak_rss_mb_10k",
    ];
    expected.sort();
    assert_eq!(keys, expected);
    // The start-up of one exec and one run, each timed against the bare program.
    let starts = figures["startup"].as_array().expect("startup figures");
    assert!(starts.len() >= 2, "{figures}");
    for f in starts {
        assert!(f["wall_ms"].as_f64().unwrap() > 0.0, "{f}");
        assert!(!f["command"].as_str().unwrap().is_empty(), "{f}");
    }
    for key in ["bare_ms_per_run", "vkexit_ms_per_run", "overhead_vs_bare"] {
        for j in ["j1", "j2"] {
            assert!(
                figures[key][j].as_f64().unwrap() > 0.0,
                "{key}.{j}: {figures}"
            );
        }
    }
    for key in ["bare_ms_spread", "vkexit_ms_spread"] {
        for j in ["j1", "j2"] {
            assert!(
                figures[key][j].as_f64().unwrap() >= 0.0,
                "{key}.{j}: {figures}"
            );
        }
    }
    assert_eq!(figures["repeats"], 2);
    assert_eq!(
        figures["ctest_ms_per_run"].is_null(),
        figures["ctest_ms_spread"].is_null()
    );
    let load = &figures["load_average"];
    assert!(load["before"].as_f64().unwrap() >= 0.0 && load["after"].as_f64().unwrap() >= 0.0);
    assert!(load["busy"].is_boolean(), "{figures}");
    assert!(figures["startup_ms"].is_number() && figures["fixed_ms_per_run"].is_number());
    // CTest is there when ci/setup-tests.sh installed cmake; without it both are null.
    assert_eq!(
        figures["ctest_ms_per_run"].is_null(),
        figures["ratio_vs_ctest"].is_null()
    );
    for key in ["trace_ns_per_call", "tegra_ns_per_call"] {
        for call in ["intercepted", "untracked"] {
            assert!(figures[key][call].is_number(), "{key}.{call}: {figures}");
        }
    }
    // The fixed cost in CPU time is the sum of its breakdown, each part measured.
    let b = &figures["fixed_breakdown_cpu_ms"];
    let part = |key: &str| b[key].as_f64().unwrap_or_else(|| panic!("{key}: {b}"));
    let sum = part("preload") + part("child") + part("supervisor");
    let total = figures["fixed_cpu_ms_per_run"].as_f64().unwrap();
    assert!((total - sum).abs() < 1e-9, "{total} vs {sum}: {b}");
    assert!(part("bare") > 0.0, "{b}");
    for key in [
        "spawn_and_supervise",
        "spawn",
        "cgroup",
        "cgroup_made_per_run",
        "reaper",
        "run_directory",
        "evidence",
        "child",
    ] {
        assert!(
            b["parts"][key].as_f64().is_some_and(|v| v >= 0.0),
            "parts.{key}: {b}"
        );
    }
    assert!(stdout.contains("in CPU time"), "{stdout}");
    assert!(figures["speedup_j2"].as_f64().unwrap() > 0.0);
    assert!(figures["peak_rss_mb_10k"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_help_names_its_knobs() {
    let out = Sandbox::new()
        .vkexit()
        .args(["bench", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--runs",
        "--repeats",
        "--json",
        "--rss-runs",
        "--pairs",
        "--case",
        "--driver",
    ] {
        assert!(text.contains(flag), "{flag} in {text}");
    }
}
