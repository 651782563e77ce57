//! `--shard K/N` splits a plan by cell identity, and `vkexit merge` joins
//! the shards back into the whole plan, on lavapipe with real scenarios.

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;
use std::collections::BTreeSet;
use vkexit_testkit::results::{id, read, the_cell, Args, CellVerdict, Results, RunVerdict};
use vkexit_testkit::vkexit::*;

type Id = (String, String, String, String, String);

fn ids(results: &Results) -> Vec<Id> {
    results.cells.iter().map(id).collect()
}

/// `vkexit run --driver lavapipe --runs 1 ARGS --json FILE`; its exit code and its results.
fn run_to(sb: &Sandbox, file: &str, args: Args) -> (i32, Results) {
    sb.gate(&args.runs(1).json(file), file)
}

/// `vkexit merge FILES --json m.json` with `more` after the files.
fn merge(sb: &Sandbox, files: &[&str], more: &[&str]) -> assert_cmd::assert::Assert {
    sb.vkexit()
        .args(&Args::merge(files).json("m.json").flags(more))
        .assert()
}

#[test]
fn two_shards_merged_are_the_unsharded_plan_cell_for_cell() {
    let sb = Sandbox::new();
    let (code, all) = run_to(&sb, "all.json", Args::run());
    assert_eq!(code, 0);
    let (code, s1) = run_to(&sb, "s1.json", Args::run().shard("1/2"));
    assert_eq!(code, 0);
    let (code, s2) = run_to(&sb, "s2.json", Args::run().shard("2/2"));
    assert_eq!(code, 0);
    let (s1, s2, shard) = (ids(&s1), ids(&s2), s1.shard);
    assert_eq!(ids(&all).len(), 20);
    assert!(!s1.is_empty() && !s2.is_empty(), "{s1:?} {s2:?}");
    assert!(s1.iter().all(|id| !s2.contains(id)), "shards overlap");

    assert_eq!(shard.as_deref(), Some("1/2"));
    // A shard whose job failed to upload would leave part of the matrix ungated.
    merge(&sb, &["s1.json"], &[])
        .code(2)
        .stderr(contains("shard 2/2 missing").and(contains("s1.json (1/2)")));
    merge(&sb, &["s1.json", "s2.json", "./s1.json"], &[])
        .code(2)
        .stderr(contains("./s1.json: given twice"));
    merge(&sb, &["s1.json", "s2.json"], &[])
        .code(0)
        .stdout(contains("20 cells, 20 runs"));
    let merged = read(&sb.path().join("m.json"));
    assert_eq!(merged.schema, "vkexit.results/1");
    assert_eq!(merged.shard, None, "the merge is the whole matrix");
    // Every cell of the unsharded plan exactly once, in the plan's order.
    assert_eq!(ids(&merged), ids(&all));
    let unique: BTreeSet<Id> = ids(&merged).into_iter().collect();
    assert_eq!(unique.len(), 20);
    for (m, a) in merged.cells.iter().zip(&all.cells) {
        assert_eq!(m.verdict, a.verdict, "{m:#?}");
        assert_eq!(m.runs, 1);
        assert_eq!(m.counts, a.counts, "{m:#?}");
    }
}

#[test]
fn the_same_cell_from_two_files_is_one_cell_with_the_runs_of_both() {
    let sb = Sandbox::new();
    let cell = || {
        Args::run()
            .case("buffer-kept-at-exit")
            .runtime("refrt:guarded")
    };
    assert_eq!(run_to(&sb, "a.json", cell()).0, 0);
    // A second machine: its own artifacts directory.
    assert_eq!(
        run_to(&sb, "b.json", cell().opt("--artifacts", "elsewhere")).0,
        0
    );
    merge(&sb, &["a.json", "b.json"], &[])
        .code(0)
        .stdout(contains("expectations:").not());
    let m = read(&sb.path().join("m.json"));
    let c = the_cell(&m);
    assert_eq!(c.runs, 2);
    assert_eq!(c.counts.get(RunVerdict::Vuid), 2);
    assert_eq!(c.verdict, CellVerdict::ExpectedFail, "{c:#?}");
    assert_eq!(c.artifacts.len(), 2, "{c:#?}");
    assert!(c.artifacts[0].contains("vkexit-artifacts") && c.artifacts[1].contains("elsewhere"));
    let id = "VUID-vkDestroyDevice-device-00378";
    assert_eq!(c.vuids, [id]);
    assert_eq!(c.vuid_counts[id], 8, "{c:#?}");
}

#[test]
fn a_merge_with_a_failing_cell_is_red() {
    let sb = Sandbox::new();
    let args = Args::run()
        .flags(&["--no-validation"])
        .case("handler-before-load")
        .runtime("refrt:never");
    assert_eq!(run_to(&sb, "red.json", args).0, 1);
    merge(&sb, &["red.json"], &[]).code(1);
    assert_eq!(
        the_cell(&read(&sb.path().join("m.json"))).verdict,
        CellVerdict::Fail
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
    let cell = Args::run()
        .case("buffer-kept-at-exit")
        .runtime("refrt:guarded");
    assert_eq!(run_to(&sb, "a.json", cell).0, 0);
    // The same cell on a machine whose layer (1.3.268 or newer) logs 00378 as 05137.
    let (old, new) = (
        "VUID-vkDestroyDevice-device-00378",
        "VUID-vkDestroyDevice-device-05137",
    );
    let text = std::fs::read_to_string(sb.path().join("a.json")).unwrap();
    // Edited as another machine's file would differ, field by field of its JSON.
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
    merge(&sb, &["b.json"], &["--baseline", "old.toml"])
        .code(0)
        // As `run` says it: what judged the cells.
        .stdout(contains(
            "expectations: 1 cell judged by the baseline files, 0 by the built-in baseline",
        ));
    let m = read(&sb.path().join("m.json"));
    let c = the_cell(&m);
    assert_eq!(c.verdict, CellVerdict::ExpectedFail, "{c:#?}");
    assert_eq!(c.expectation.as_deref(), Some("old.toml:1"));
    assert_eq!(c.vuids, [new]);

    // Both machines joined: one cell, judged by the built-in baseline (written for 00378).
    merge(&sb, &["a.json", "b.json"], &[])
        .code(0)
        .stdout(contains("expectations:").not());
    let m = read(&sb.path().join("m.json"));
    let c = the_cell(&m);
    assert_eq!(c.verdict, CellVerdict::ExpectedFail, "{c:#?}");
    assert_eq!(c.expectation.as_deref(), Some("built-in"));
    assert_eq!(c.vuids, [old, new]);
    assert_eq!(c.vuid_names[old], new);
}

/// A merge that holds no run is refused as `run` refuses it, by the same rule and with the
/// same words, unless `--allow-no-runs`: an empty shard, a cell its machine left out.
#[test]
fn a_merge_of_files_that_hold_no_run_exits_2_unless_allowed() {
    let sb = Sandbox::new();
    let cell = || Args::run().case("clean-exit").runtime("refrt:guarded");
    let (c1, s1) = run_to(&sb, "s1.json", cell().shard("1/2"));
    let (c2, _) = run_to(&sb, "s2.json", cell().shard("2/2"));
    let (full, empty) = match s1.cells.is_empty() {
        true => ("s2.json", "s1.json"),
        false => ("s1.json", "s2.json"),
    };
    assert_eq!([c1, c2].iter().filter(|c| **c == 2).count(), 1, "{c1} {c2}");
    merge(&sb, &[full, empty], &[]).code(0);
    // The empty shard, as a selection that matches nothing writes it: no cell.
    let mut nothing = read(&sb.path().join(empty));
    nothing.shard = None;
    write(&sb, "nothing.json", &nothing);
    merge(&sb, &["nothing.json"], &[])
        .code(2)
        .stderr(contains("no run started: the selection has no cell"));
    merge(&sb, &["nothing.json"], &["--allow-no-runs"]).code(0);

    // The cell as a machine without the driver records it: skipped, no run.
    let mut skipped = read(&sb.path().join(full));
    skipped.shard = None;
    let cell = &mut skipped.cells[0];
    cell.verdict = CellVerdict::Skipped;
    cell.reason = Some("driver radv shows no device on this machine".into());
    cell.runs = 0;
    cell.counts = Default::default();
    write(&sb, "skipped.json", &skipped);
    merge(&sb, &["skipped.json"], &[]).code(2).stderr(contains(
        "no run started: the one cell was left out: driver radv shows no device on this machine",
    ));
    merge(&sb, &["skipped.json"], &["--allow-no-runs"]).code(0);
}

fn write(sb: &Sandbox, file: &str, results: &Results) {
    std::fs::write(
        sb.path().join(file),
        serde_json::to_string(results).unwrap(),
    )
    .unwrap();
}
