//! Each run verdict, provoked on demand by the mock scenario, on lavapipe
//! under the real validation layer, is detected as what it is.

use vkexit_testkit::results::{the_cell, Args, CellVerdict, Results, RunVerdict};
use vkexit_testkit::vkexit::*;

/// `vkexit run --driver lavapipe --runs N VKEXIT_ARGS -- mock MOCK_ARGS`: its exit code and
/// its results.
fn mock_run(sb: &Sandbox, runs: u32, vkexit_args: &[&str], mock_args: &[&str]) -> (i32, Results) {
    let args = Args::run()
        .runs(runs)
        .flags(vkexit_args)
        .program(&mock(), mock_args)
        .json("r.json");
    sb.gate(&args, "r.json")
}

#[test]
fn a_clean_vulkan_program_passes() {
    let sb = Sandbox::new();
    let (code, r) = mock_run(&sb, 3, &[], &[]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Pass), 3, "{cell:#?}");
    assert_eq!(cell.verdict, CellVerdict::Pass);
    assert_eq!(
        (
            cell.case.as_str(),
            cell.runtime.as_str(),
            cell.driver.as_str()
        ),
        ("mock", "external", "lavapipe")
    );
    assert_eq!(code, 0);
    // Where the runs came from, for a result read on another machine.
    let from = cell.provenance.as_ref().expect("provenance");
    assert_eq!(from.driver_name.as_deref(), Some("llvmpipe"), "{from:#?}");
    let version =
        |v: &Option<String>, major: &str| v.as_deref().is_some_and(|v| v.starts_with(major));
    assert!(version(&from.loader, "1."), "{from:#?}");
    assert!(version(&from.validation_layer, "1."), "{from:#?}");
    assert!(from.glibc.starts_with("2."), "{from:#?}");
    assert!(!from.kernel.is_empty(), "{from:#?}");
}

#[test]
fn fatal_signals_are_crashes_named_by_signal() {
    for signal in ["SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE"] {
        let sb = Sandbox::new();
        let (code, r) = mock_run(&sb, 2, &[], &["--signal", signal]);
        let cell = the_cell(&r);
        assert_eq!(cell.counts.get(RunVerdict::Crash), 2, "{signal}: {cell:#?}");
        assert_eq!(cell.signals, [signal]);
        assert_eq!(cell.verdict, CellVerdict::Fail);
        assert_eq!(code, 1);
    }
}

#[test]
fn a_real_segfault_inside_an_exit_handler_is_a_crash() {
    let sb = Sandbox::new();
    let (_, r) = mock_run(&sb, 2, &[], &["--crash-at-exit"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Crash), 2, "{cell:#?}");
    assert_eq!(cell.signals, ["SIGSEGV"]);
}

#[test]
fn a_nonzero_exit_code_is_an_exit_verdict() {
    let sb = Sandbox::new();
    let (code, r) = mock_run(&sb, 2, &[], &["--exit-code", "7"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Exit), 2, "{cell:#?}");
    assert_eq!(code, 1);
}

#[test]
fn a_buffer_alive_at_vk_destroy_device_is_a_vuid_named_00378() {
    let sb = Sandbox::new();
    let (code, r) = mock_run(&sb, 2, &[], &["--vuid"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Vuid), 2, "{cell:#?}");
    assert!(
        cell.vuids
            .contains(&"VUID-vkDestroyDevice-device-00378".to_string()),
        "{cell:#?}"
    );
    assert_eq!(code, 1);
    // The failing runs keep their evidence: the layer's own log among it.
    let runs = &cell.artifacts;
    assert_eq!(runs.len(), 2);
    let log =
        std::fs::read_to_string(std::path::Path::new(&runs[0]).join("validation.log")).unwrap();
    assert!(
        log.contains("[ VUID-vkDestroyDevice-device-00378 ]"),
        "{log}"
    );
}

#[test]
fn a_hang_in_main_and_a_hang_in_an_exit_handler_time_out_with_thread_states() {
    for (option, during_exit) in [("--hang", false), ("--hang-at-exit", true)] {
        let sb = Sandbox::new();
        let (code, r) = mock_run(&sb, 1, &["--timeout", "3"], &[option]);
        let cell = the_cell(&r);
        assert_eq!(
            cell.counts.get(RunVerdict::Timeout),
            1,
            "{option}: {cell:#?}"
        );
        assert_eq!(code, 1);
        let run = std::path::PathBuf::from(&cell.artifacts[0]);
        let hang: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("hang.json")).unwrap()).unwrap();
        assert_eq!(hang["during_exit"], during_exit, "{option}: {hang:#}");
        let threads = hang["threads"].as_array().unwrap();
        assert_eq!(threads[0]["name"], "mock", "{hang:#}");
        let when = if during_exit {
            "hung during exit"
        } else {
            "hung before exit"
        };
        assert!(cell.findings[0].starts_with(when), "{cell:#?}");
    }
}

#[test]
fn a_crash_in_some_runs_only_is_flaky_never_pass() {
    let sb = Sandbox::new();
    let (code, r) = mock_run(&sb, 24, &[], &["--crash-probability", "0.5"]);
    let cell = the_cell(&r);
    let (pass, crash) = (
        cell.counts.get(RunVerdict::Pass),
        cell.counts.get(RunVerdict::Crash),
    );
    assert_eq!(pass + crash, 24, "{cell:#?}");
    assert!(pass > 0 && crash > 0, "{cell:#?}");
    assert_eq!(cell.verdict, CellVerdict::Flaky);
    assert_eq!(code, 1);
}

#[test]
fn an_output_flood_is_kept_bounded_head_and_tail() {
    let sb = Sandbox::new();
    let (_, r) = mock_run(&sb, 1, &["--keep-passing"], &["--flood", "200000000"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Pass), 1, "{cell:#?}");
    let dir = std::path::PathBuf::from(&cell.artifacts[0]);
    let stdout = std::fs::metadata(dir.join("stdout.txt")).unwrap().len();
    assert!(stdout < 2 * 1024 * 1024, "stdout.txt is {stdout} bytes");
    let text = std::fs::read_to_string(dir.join("stdout.txt")).unwrap();
    assert!(text.contains("bytes omitted]"));
}

#[test]
fn a_grandchild_holding_the_pipes_does_not_hang_the_run() {
    // The grandchild keeps stdout and stderr open for 120 s; the run must end
    // at the program's exit plus a short grace, far inside the 30 s limit.
    let sb = Sandbox::new();
    let (_, r) = mock_run(
        &sb,
        1,
        &["--timeout", "30"],
        &["--grandchild-holds-pipes", "120"],
    );
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Pass), 1, "{cell:#?}");
}

#[test]
fn a_program_that_never_uses_vulkan_is_no_vulkan_and_an_error_where_it_must() {
    let sb = Sandbox::new();
    let (code, r) = mock_run(&sb, 2, &[], &["--no-vulkan"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::NoVulkan), 2, "{cell:#?}");
    assert_eq!(cell.counts.get(RunVerdict::Pass), 0);
    assert_eq!(cell.verdict, CellVerdict::NoVulkan);
    assert_eq!(code, 0);
    // Where the case must use Vulkan, the missing validation is an error, never a pass.
    let (code, r) = mock_run(&sb, 2, &["--require-vulkan"], &["--no-vulkan"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Error), 2, "{cell:#?}");
    assert_eq!(cell.verdict, CellVerdict::Error);
    assert!(cell
        .reason
        .as_deref()
        .is_some_and(|r| r.contains("must use it (--require-vulkan")));
    assert_eq!(code, 1);
}

#[test]
fn without_validation_a_vuid_cannot_be_seen_and_no_proof_is_needed() {
    let sb = Sandbox::new();
    let (code, r) = mock_run(&sb, 1, &["--no-validation"], &["--vuid"]);
    let cell = the_cell(&r);
    assert_eq!(cell.counts.get(RunVerdict::Pass), 1, "{cell:#?}");
    assert!(cell.layers.is_empty());
    assert_eq!(code, 0);
}

#[test]
fn a_detached_grandchild_is_killed_when_its_run_ends() {
    // The grandchild calls setsid, so it leaves the run's process group, and
    // holds the output pipes for 97 s. When vkexit returns it must be gone.
    let sb = Sandbox::new();
    let (_, r) = mock_run(
        &sb,
        2,
        &["--timeout", "30"],
        &["--grandchild-holds-pipes", "97"],
    );
    assert_eq!(the_cell(&r).counts.get(RunVerdict::Pass), 2, "{r:#?}");
    let left = mock_processes_with(&["--grandchild-holds-pipes", "97"]);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
