//! Whose crash is it: a crash with its pc in a layer's library says so, and
//! the cell is run again without that layer to tell whether the application
//! crashes on its own. The layer that crashes is real: the trace layer with
//! its test-only fault at exit (`VKEXIT_TRACE_FAULT_AT_EXIT=1`), on lavapipe
//! under the real validation layer.

use std::path::Path;
use vkexit_testkit::results::{run_record, the_cell, Results};
use vkexit_testkit::vkexit::*;

const FAULT: &str = "VKEXIT_TRACE_FAULT_AT_EXIT";

fn run_faulting_trace(sb: &Sandbox, runs: &str, extra: &[&str], mock_args: &[&str]) -> Results {
    let mock = mock();
    let mut args = vec!["run", "--driver", "lavapipe", "--trace", "--runs", runs];
    args.extend_from_slice(extra);
    args.extend(["--json", "r.json", "--"]);
    args.push(mock.to_str().unwrap());
    args.extend_from_slice(mock_args);
    sb.vkexit().env(FAULT, "1").args(&args).output().unwrap();
    sb.gate_results()
}

#[test]
fn a_crash_in_a_layer_is_named_and_the_cell_run_again_without_it() {
    let sb = Sandbox::new();
    let r = run_faulting_trace(&sb, "2", &[], &[]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 2, "{cell:#?}");
    let layer = cell.crash_in_layer.as_ref().expect("crash_in_layer");
    assert_eq!(layer.layer, "trace", "{cell:#?}");
    assert_eq!(layer.crashed_runs, 2);
    let without = layer.without.as_ref().expect("without");
    assert_eq!(without.runs, 2);
    assert_eq!(without.counts.pass, 2, "{layer:#?}");
    assert_eq!(
        layer.summary,
        "crash in the trace layer; without trace: pass 2/2"
    );
    assert_eq!(cell.findings[0], layer.summary);
    let run = &cell.artifacts[0];
    let result = run_record(Path::new(run));
    assert_eq!(result.crash_layer.as_deref(), Some("trace"));
    assert!(
        result
            .reason
            .starts_with("killed by SIGSEGV, in the trace layer"),
        "{result:#?}"
    );
    // The story shows the layer's own exit handler running, then the crash inside it.
    let out = sb.vkexit().args(["explain", run]).output().unwrap();
    let story = String::from_utf8_lossy(&out.stdout);
    let handler = story
        .lines()
        .position(|l| l.contains("registered by libVkLayer_vkexit_trace.so, the trace layer) runs"))
        .unwrap_or_else(|| panic!("{story}"));
    let crash = story
        .lines()
        .position(|l| l.contains("CRASH SIGSEGV") && l.contains("libVkLayer_vkexit_trace.so"))
        .unwrap_or_else(|| panic!("{story}"));
    assert!(handler < crash, "{story}");
}

#[test]
fn the_rerun_can_be_turned_off() {
    let sb = Sandbox::new();
    let r = run_faulting_trace(&sb, "1", &["--no-rerun-without-layer"], &[]);
    let layer = the_cell(&r)
        .crash_in_layer
        .as_ref()
        .expect("crash_in_layer");
    assert_eq!(layer.summary, "crash in the trace layer", "{layer:#?}");
    // Not written at all: the file itself, not its typed reading (which reads absent as none).
    let raw = sb.read_results();
    let layer = &only_cell(&raw)["crash_in_layer"];
    assert!(layer.get("without").is_none(), "{layer:#}");
    assert!(!sb.path().join("vkexit-artifacts/without-trace").exists());
}

#[test]
fn the_applications_own_crash_is_not_put_on_a_layer() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(1, &["--trace"], &["--crash-at-exit"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 1, "{cell:#?}");
    let raw = sb.read_results();
    let cell = only_cell(&raw);
    assert!(cell.get("crash_in_layer").is_none(), "{cell:#}");
}

#[test]
fn the_tegra_emulations_fault_is_never_run_away() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(1, &["--emulate", "tegra"], &["--keep-vulkan"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.crash, 1, "{cell:#?}");
    let raw = sb.read_results();
    let cell = only_cell(&raw);
    assert!(cell.get("crash_in_layer").is_none(), "{cell:#}");
    assert!(!sb
        .path()
        .join("vkexit-artifacts/without-tegra-exit")
        .exists());
}

#[test]
fn repro_says_whether_the_application_crashes_without_the_layer() {
    let sb = Sandbox::new();
    let mock = mock();
    let out = sb
        .vkexit()
        .env(FAULT, "1")
        .args(["repro", "--driver", "lavapipe", "--trace", "-j", "1", "--"])
        .arg(&mock)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l == "crash in the trace layer; without trace: pass 5/5"),
        "{text}"
    );
}
