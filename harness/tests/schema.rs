//! The results file's JSON Schema: committed as docs/results.schema.json,
//! equal to what vkexit's own types generate and printed by `vkexit schema`, and met by
//! a fresh run on lavapipe, by every committed results file and by the
//! README's example.

use serde_json::Value;
use std::path::{Path, PathBuf};
use vkexit_testkit::vkexit::*;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn committed_schema() -> Value {
    let path = repo("docs/results.schema.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every way `results` breaks the schema, one line each (empty: it meets it).
fn violations(results: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&committed_schema()).expect("a valid JSON Schema");
    validator
        .iter_errors(results)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The committed schema is what the evidence crate's types generate, byte for byte, and
/// `vkexit schema` prints it. `VKEXIT_UPDATE_GOLDEN=1` writes it again.
#[test]
fn the_committed_schema_is_what_the_types_generate() {
    let generated = format!("{:#}\n", vkexit_evidence::results::json_schema());
    // As the report snapshots are written again: review the diff before committing it.
    if std::env::var_os("VKEXIT_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(repo("docs/results.schema.json"), &generated).unwrap();
    }
    let text = std::fs::read_to_string(repo("docs/results.schema.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&generated).unwrap(),
        committed_schema(),
        "docs/results.schema.json is stale: write the evidence crate's json_schema() there"
    );
    assert_eq!(text, generated, "same bytes too");
    let sb = Sandbox::new();
    let out = sb.vkexit().arg("schema").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
}

#[test]
fn the_schema_refuses_what_a_results_file_cannot_hold() {
    let text = std::fs::read_to_string(repo("ci/results/lavapipe.json")).unwrap();
    let good: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(violations(&good), Vec::<String>::new());
    for (pointer, bad) in [
        ("/schema", Value::from("vkexit.results/2")),
        ("/cells/0/verdict", Value::from("maybe")),
        ("/cells/0/counts/pass", Value::from(-1)),
        ("/cells/0/runs", Value::from("5")),
        ("/cells/0/pass_rate_95", serde_json::json!([0.1])),
    ] {
        let mut results = good.clone();
        *results.pointer_mut(pointer).unwrap() = bad.clone();
        let found = violations(&results);
        assert!(
            found.iter().any(|v| v.starts_with(pointer)),
            "{pointer} = {bad}: {found:?}"
        );
    }
    let mut results = good.clone();
    results["cells"][0]
        .as_object_mut()
        .unwrap()
        .remove("verdict");
    assert!(!violations(&results).is_empty(), "a cell without a verdict");
}

#[test]
fn every_committed_results_file_meets_the_schema() {
    let mut checked = 0;
    for entry in std::fs::read_dir(repo("ci/results")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let results: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            violations(&results),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} results files in ci/results");
}

/// A run with every optional field there: the trace layer (findings), a
/// baseline that knows the cell is flaky and allows its VUID.
#[test]
fn a_fresh_run_with_every_field_meets_the_schema() {
    let sb = Sandbox::new();
    let baseline = sb.path().join("known.toml");
    std::fs::write(
        &baseline,
        "[[expect]]\ncase = \"mock\"\nruntime = \"external\"\nflaky = true\n\
         reason = \"leaves its VkBuffer alive when it destroys the device\"\n\
         [[allow]]\nallow_vuids = [\"VUID-vkDestroyDevice-device-00378\"]\n\
         reason = \"the buffer is left on purpose\"\n",
    )
    .unwrap();
    let (code, r) = sb.run_mock(
        2,
        &[
            "--trace",
            "-j",
            "1",
            "--baseline",
            baseline.to_str().unwrap(),
        ],
        &["--vuid"],
    );
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(violations(&r), Vec::<String>::new(), "{r:#}");
    let cell = only_cell(&r);
    for field in [
        "/counts/leak",
        "/duration_ms",
        "/provenance/validation_layer",
        "/expectation",
        "/flaky_expected",
        "/allowed_vuids/0",
        "/findings/0",
        "/device",
        "/driver_manifest",
        "/reason",
    ] {
        assert!(cell.pointer(field).is_some(), "no {field} in {cell:#}");
    }
    // And a red run: crash, signals, VUIDs, artifacts.
    let (code, r) = sb.run_mock(2, &["-j", "1"], &["--vuid", "--crash-at-exit"]);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(violations(&r), Vec::<String>::new(), "{r:#}");
}

#[test]
fn the_readme_example_meets_the_schema_and_shows_every_cell_field() {
    let readme = std::fs::read_to_string(repo("docs/reference.md")).unwrap();
    let section = readme
        .split("## Results file (`--json`, schema `vkexit.results/1`)")
        .nth(1)
        .expect("docs/reference.md has a results file section");
    let block = section
        .split("```json\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a json block in that section");
    let example: Value = serde_json::from_str(block).unwrap_or_else(|e| panic!("{e}\n{block}"));
    assert_eq!(violations(&example), Vec::<String>::new());
    let schema = committed_schema();
    let cells = example["cells"].as_array().unwrap();
    let counts: Vec<Value> = cells.iter().map(|c| c["counts"].clone()).collect();
    for (def, values) in [("CellResult", cells), ("Counts", &counts)] {
        let fields = schema["$defs"][def]["properties"].as_object().unwrap();
        for field in fields.keys() {
            assert!(
                values.iter().any(|value| value.get(field).is_some()),
                "the example's cells lack {def}.{field}"
            );
        }
    }
}
