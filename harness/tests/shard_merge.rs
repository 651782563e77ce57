//! `--shard K/N` splits a plan by cell identity, and `vkexit merge` joins
//! the shards back into the whole plan, on lavapipe with real scenarios.

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use vkexit_testkit::vkexit::*;

type Id = (String, String, String, String, String);

fn ids(results: &Value) -> Vec<Id> {
    results["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| {
            (
                c["case"].as_str().unwrap().to_string(),
                c["runtime"].as_str().unwrap().to_string(),
                c["driver"].as_str().unwrap().to_string(),
                strings(&c["layers"]).join("+"),
                c["emulation"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `vkexit run --driver lavapipe --runs 1 ARGS --json FILE`; its exit code.
fn run_to(sb: &Sandbox, file: &str, args: &[&str]) -> i32 {
    let out = sb
        .vkexit()
        .args(["run", "--driver", "lavapipe", "--runs", "1", "--json", file])
        .args(args)
        .output()
        .unwrap();
    assert!(
        sb.path().join(file).exists(),
        "no {file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.code().unwrap()
}

#[test]
fn two_shards_merged_are_the_unsharded_plan_cell_for_cell() {
    let sb = Sandbox::new();
    assert_eq!(run_to(&sb, "all.json", &[]), 0);
    assert_eq!(run_to(&sb, "s1.json", &["--shard", "1/2"]), 0);
    assert_eq!(run_to(&sb, "s2.json", &["--shard", "2/2"]), 0);
    let all = read(&sb.path().join("all.json"));
    let s1 = ids(&read(&sb.path().join("s1.json")));
    let s2 = ids(&read(&sb.path().join("s2.json")));
    assert_eq!(ids(&all).len(), 20);
    assert!(!s1.is_empty() && !s2.is_empty(), "{s1:?} {s2:?}");
    assert!(s1.iter().all(|id| !s2.contains(id)), "shards overlap");

    assert_eq!(read(&sb.path().join("s1.json"))["shard"], "1/2");
    // A shard whose job failed to upload would leave part of the matrix ungated.
    sb.vkexit()
        .args(["merge", "s1.json", "--json", "merged.json"])
        .assert()
        .code(2)
        .stderr(contains("shard 2/2 missing").and(contains("s1.json (1/2)")));
    sb.vkexit()
        .args([
            "merge",
            "s1.json",
            "s2.json",
            "./s1.json",
            "--json",
            "merged.json",
        ])
        .assert()
        .code(2)
        .stderr(contains("./s1.json: given twice"));
    sb.vkexit()
        .args(["merge", "s1.json", "s2.json", "--json", "merged.json"])
        .assert()
        .code(0)
        .stdout(contains("20 cells, 20 runs"));
    let merged = read(&sb.path().join("merged.json"));
    assert_eq!(merged["schema"], "vkexit.results/1");
    assert!(
        merged.get("shard").is_none(),
        "the merge is the whole matrix"
    );
    // Every cell of the unsharded plan exactly once, in the plan's order.
    assert_eq!(ids(&merged), ids(&all));
    let unique: BTreeSet<Id> = ids(&merged).into_iter().collect();
    assert_eq!(unique.len(), 20);
    for (m, a) in merged["cells"]
        .as_array()
        .unwrap()
        .iter()
        .zip(all["cells"].as_array().unwrap())
    {
        assert_eq!(m["verdict"], a["verdict"], "{m:#}");
        assert_eq!(m["runs"], 1);
        assert_eq!(m["counts"], a["counts"], "{m:#}");
    }
}

#[test]
fn the_same_cell_from_two_files_is_one_cell_with_the_runs_of_both() {
    let sb = Sandbox::new();
    let args = [
        "--case",
        "buffer-kept-at-exit",
        "--runtime",
        "refrt:guarded",
    ];
    assert_eq!(run_to(&sb, "a.json", &args), 0);
    // A second machine: its own artifacts directory.
    let mut more = args.to_vec();
    more.extend(["--artifacts", "elsewhere"]);
    assert_eq!(run_to(&sb, "b.json", &more), 0);
    sb.vkexit()
        .args(["merge", "a.json", "b.json", "--json", "m.json"])
        .assert()
        .code(0)
        .stdout(contains("expectations:").not());
    let m = read(&sb.path().join("m.json"));
    let c = only_cell(&m);
    assert_eq!(c["runs"], 2);
    assert_eq!(count(c, "vuid"), 2);
    assert_eq!(c["verdict"], "expected-fail", "{c:#}");
    let artifacts = strings(&c["artifacts"]);
    assert_eq!(artifacts.len(), 2, "{c:#}");
    assert!(artifacts[0].contains("vkexit-artifacts") && artifacts[1].contains("elsewhere"));
    let id = "VUID-vkDestroyDevice-device-00378";
    assert_eq!(strings(&c["vuids"]), [id]);
    assert_eq!(c["vuid_counts"][id], 8, "{c:#}");
}

#[test]
fn a_merge_with_a_failing_cell_is_red() {
    let sb = Sandbox::new();
    let args = [
        "--no-validation",
        "--case",
        "handler-before-load",
        "--runtime",
        "refrt:never",
    ];
    assert_eq!(run_to(&sb, "red.json", &args), 1);
    sb.vkexit()
        .args(["merge", "red.json", "--json", "m.json"])
        .assert()
        .code(1);
    assert_eq!(
        only_cell(&read(&sb.path().join("m.json")))["verdict"],
        "fail"
    );
}

#[test]
fn bad_shard_arguments_are_usage_errors() {
    let sb = Sandbox::new();
    for bad in ["0/2", "3/2", "1/0", "half"] {
        sb.vkexit()
            .args(["run", "--shard", bad])
            .assert()
            .code(2)
            .stderr(contains("1 ≤ K ≤ N").and(contains("panicked").not()));
    }
}

#[test]
fn files_that_are_not_results_are_named_with_line_and_column() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.path().join("broken.json"),
        "{\n  \"schema\": \"vkexit.results/1\",\n  \"cells\": [ oops ]\n}",
    )
    .unwrap();
    sb.vkexit()
        .args(["merge", "broken.json", "--json", "m.json"])
        .assert()
        .code(2)
        .stderr(contains("broken.json").and(contains("line 3 column")));
    std::fs::write(
        sb.path().join("other.json"),
        r#"{"schema": "junit/9", "cells": []}"#,
    )
    .unwrap();
    sb.vkexit()
        .args(["merge", "other.json", "--json", "m.json"])
        .assert()
        .code(2)
        .stderr(contains("other.json").and(contains("\"junit/9\", expected \"vkexit.results/1\"")));
    sb.vkexit()
        .args(["merge", "missing.json", "--json", "m.json"])
        .assert()
        .code(2)
        .stderr(contains("missing.json").and(contains("panicked").not()));
    assert!(
        !sb.path().join("m.json").exists(),
        "nothing written on bad input"
    );
    // --json is required, and so is at least one file.
    sb.vkexit().args(["merge", "x.json"]).assert().code(2);
    sb.vkexit()
        .args(["merge", "--json", "m.json"])
        .assert()
        .code(2);
}

#[test]
fn a_check_logged_under_its_new_name_is_judged_as_under_its_old_one() {
    let sb = Sandbox::new();
    let args = [
        "--case",
        "buffer-kept-at-exit",
        "--runtime",
        "refrt:guarded",
    ];
    assert_eq!(run_to(&sb, "a.json", &args), 0);
    // The same cell on a machine whose layer (1.3.268 or newer) logs 00378 as 05137.
    let (old, new) = (
        "VUID-vkDestroyDevice-device-00378",
        "VUID-vkDestroyDevice-device-05137",
    );
    let text = std::fs::read_to_string(sb.path().join("a.json")).unwrap();
    let mut b: Value = serde_json::from_str(&text.replace(old, new)).unwrap();
    let cell = &mut b["cells"][0];
    cell.as_object_mut().unwrap().remove("vuid_names");
    cell["provenance"]["validation_layer"] = "1.4.309".into();
    std::fs::write(sb.path().join("b.json"), b.to_string()).unwrap();

    // Judged again against a baseline entry written for the old name.
    std::fs::write(
        sb.path().join("old.toml"),
        format!("[[expect]]\ncase = \"buffer-kept-at-exit\"\nexpect = \"fail\"\nvuids = [\"{old}\"]\nreason = \"written under layer 1.3.239\"\n"),
    )
    .unwrap();
    sb.vkexit()
        .args([
            "merge",
            "b.json",
            "--baseline",
            "old.toml",
            "--json",
            "m.json",
        ])
        .assert()
        .code(0)
        // As `run` says it: what judged the cells.
        .stdout(contains(
            "expectations: 1 cell judged by the baseline files, 0 by the built-in baseline",
        ));
    let m = read(&sb.path().join("m.json"));
    let c = only_cell(&m);
    assert_eq!(c["verdict"], "expected-fail", "{c:#}");
    assert_eq!(c["expectation"], "old.toml:1");
    assert_eq!(strings(&c["vuids"]), [new]);

    // Both machines joined: one cell, judged by the built-in baseline (written for 00378).
    sb.vkexit()
        .args(["merge", "a.json", "b.json", "--json", "m.json"])
        .assert()
        .code(0)
        .stdout(contains("expectations:").not());
    let m = read(&sb.path().join("m.json"));
    let c = only_cell(&m);
    assert_eq!(c["verdict"], "expected-fail", "{c:#}");
    assert_eq!(c["expectation"], "built-in");
    assert_eq!(strings(&c["vuids"]), [old, new]);
    assert_eq!(c["vuid_names"][old], new);
}

/// A merge that holds no run is refused as `run` refuses it, by the same rule and with the
/// same words, unless `--allow-no-runs`: an empty shard, a cell its machine left out.
#[test]
fn a_merge_of_files_that_hold_no_run_exits_2_unless_allowed() {
    let sb = Sandbox::new();
    let args = ["--case", "clean-exit", "--runtime", "refrt:guarded"];
    let codes = [
        run_to(&sb, "s1.json", &[&args[..], &["--shard", "1/2"]].concat()),
        run_to(&sb, "s2.json", &[&args[..], &["--shard", "2/2"]].concat()),
    ];
    let (full, empty) = match read(&sb.path().join("s1.json"))["cells"][0].is_null() {
        true => ("s2.json", "s1.json"),
        false => ("s1.json", "s2.json"),
    };
    assert_eq!(codes.iter().filter(|c| **c == 2).count(), 1, "{codes:?}");
    let merge = |files: &[&str], allow: bool| {
        let mut cmd = sb.vkexit();
        cmd.arg("merge").args(files).args(["--json", "m.json"]);
        if allow {
            cmd.arg("--allow-no-runs");
        }
        cmd.assert()
    };
    merge(&[full, empty], false).code(0);
    // The empty shard, as a selection that matches nothing writes it: no cell.
    let mut nothing = read(&sb.path().join(empty));
    nothing.as_object_mut().unwrap().remove("shard");
    std::fs::write(sb.path().join("nothing.json"), nothing.to_string()).unwrap();
    merge(&["nothing.json"], false)
        .code(2)
        .stderr(contains("no run started: the selection has no cell"));
    merge(&["nothing.json"], true).code(0);

    // The cell as a machine without the driver records it: skipped, no run.
    let mut skipped = read(&sb.path().join(full));
    skipped.as_object_mut().unwrap().remove("shard");
    let cell = &mut skipped["cells"][0];
    cell["verdict"] = "skipped".into();
    cell["reason"] = "driver radv shows no device on this machine".into();
    cell["runs"] = 0.into();
    for (_, n) in cell["counts"].as_object_mut().unwrap() {
        *n = 0.into();
    }
    std::fs::write(sb.path().join("skipped.json"), skipped.to_string()).unwrap();
    merge(&["skipped.json"], false).code(2).stderr(contains(
        "no run started: the one cell was left out: driver radv shows no device on this machine",
    ));
    merge(&["skipped.json"], true).code(0);
}
