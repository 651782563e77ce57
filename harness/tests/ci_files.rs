//! The CI files the project ships, run as a CI job would run them on lavapipe: the default
//! matrix against the lavapipe baseline with every report, the same in two shards merged, and
//! the expectations of the teardown fix held against a policy without it.

mod common;

use common::Sandbox;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn run(sb: &Sandbox, args: &[&str]) -> (i32, String) {
    let out = sb.vkexit().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap(), format!("{stdout}\n{stderr}"))
}

fn read(sb: &Sandbox, file: &str) -> Value {
    let text = std::fs::read_to_string(sb.path().join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// (case, runtime, driver, emulation, verdict) of every cell, sorted.
fn cells(results: &Value) -> Vec<[String; 5]> {
    let mut cells: Vec<[String; 5]> = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            ["case", "runtime", "driver", "emulation", "verdict"]
                .map(|k| c[k].as_str().unwrap_or_default().to_string())
        })
        .collect();
    cells.sort();
    cells
}

#[test]
fn the_default_matrix_is_green_on_lavapipe_whole_and_in_two_merged_shards() {
    let sb = Sandbox::new();
    let matrix = repo("ci/matrix/default.toml");
    let baseline = repo("ci/baselines/lavapipe.toml");
    let job = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--config",
            matrix.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
            "--driver",
            "lavapipe",
            "--runs",
            "1",
        ];
        args.extend_from_slice(extra);
        run(&sb, &args)
    };
    let (code, out) = job(&[
        "--junit",
        "j.xml",
        "--markdown",
        "s.md",
        "--html",
        "rep",
        "--json",
        "g.json",
    ]);
    assert_eq!(code, 0, "{out}");
    for report in ["j.xml", "s.md", "rep/index.html"] {
        assert!(sb.path().join(report).is_file(), "{report} missing");
    }
    let whole = read(&sb, "g.json");
    assert_eq!(
        cells(&whole).len(),
        4 * 5 * 2,
        "orderings × policies × emulations"
    );

    for (shard, file) in [("1/2", "s1.json"), ("2/2", "s2.json")] {
        let (code, out) = job(&["--shard", shard, "--json", file]);
        assert_eq!(code, 0, "shard {shard}: {out}");
    }
    let (code, out) = run(&sb, &["merge", "s1.json", "s2.json", "--json", "m.json"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(cells(&read(&sb, "m.json")), cells(&whole));
}

#[test]
fn the_teardown_fix_expectations_pass_release_children_and_name_what_guarded_breaks() {
    let sb = Sandbox::new();
    let baseline = repo("ci/baselines/teardown-fixed.toml");
    let job = |runtime: &str| {
        run(
            &sb,
            &[
                "run",
                "--driver",
                "lavapipe",
                "--runs",
                "2",
                "--runtime",
                runtime,
                "--baseline",
                baseline.to_str().unwrap(),
                "--json",
                "r.json",
                "--junit",
                "j.xml",
            ],
        )
    };
    let (code, out) = job("refrt:release-children");
    assert_eq!(code, 0, "{out}");

    let (code, out) = job("refrt:guarded");
    assert_eq!(code, 1, "{out}");
    let results = read(&sb, "r.json");
    let failed: Vec<&Value> = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .collect();
    let mut cases: Vec<&str> = failed.iter().map(|c| c["case"].as_str().unwrap()).collect();
    cases.sort();
    assert_eq!(
        cases,
        [
            "buffer-kept-at-exit",
            "events-freed-after-teardown",
            "handler-before-load"
        ],
        "{out}"
    );
    let junit = std::fs::read_to_string(sb.path().join("j.xml")).unwrap();
    for cell in failed {
        assert!(cell["vuids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "VUID-vkDestroyDevice-device-00378"));
        let dir = cell["artifacts"][0].as_str().unwrap();
        assert!(Path::new(dir).join("validation.log").is_file(), "{dir}");
        assert!(out.contains(cell["case"].as_str().unwrap()));
        assert!(junit.contains(dir), "JUnit names the evidence {dir}");
    }
}
