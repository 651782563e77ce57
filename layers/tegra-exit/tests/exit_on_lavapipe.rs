//! Real processes on lavapipe, under the real Khronos validation layer, with
//! `VK_LAYER_VKEXIT_tegra_exit` next to the driver, as vkexit enables it:
//! the refrt `clean-exit` scenario under each teardown policy, and `mock`.
//!
//! These tests fail, never skip, when lavapipe, the validation layer or the built programs are
//! missing; the message says what to install or build.

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use vkexit_testkit::{built, under_test, Launch};

const LAYER: &str = "VK_LAYER_VKEXIT_tegra_exit";

/// What the tests need from the machine and the build, found once per test.
struct Setup {
    layer_lib: PathBuf,
    clean_exit: PathBuf,
    buffer_kept: PathBuf,
    mock: PathBuf,
}

fn setup() -> Setup {
    vkexit_testkit::vulkan::require_vulkan();
    Setup {
        // The layer as `cargo test` built it for this test run, so the processes always load
        // the code under test.
        layer_lib: under_test("libVkLayer_vkexit_tegra_exit.so", "vkexit-layer-tegra-exit"),
        clean_exit: built("clean-exit"),
        buffer_kept: built("buffer-kept-at-exit"),
        mock: built("mock"),
    }
}

/// How a run is set up.
#[derive(Clone, Copy)]
struct Plan<'a> {
    program: &'a Path,
    args: &'a [&'a str],
    /// `None` → the tegra layer is not enabled (validation only).
    mode: Option<&'a str>,
}

/// What a run left behind.
struct Run {
    status: ExitStatus,
    records: Vec<Value>,
    validation_log: Option<String>,
    output: String,
}

impl Run {
    fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    fn events(&self) -> Vec<&str> {
        self.records
            .iter()
            .filter_map(|r| r["ev"].as_str())
            .collect()
    }

    fn record(&self, ev: &str) -> &Value {
        self.records
            .iter()
            .find(|r| r["ev"] == ev)
            .unwrap_or_else(|| panic!("no {ev:?} record in {:?}\n{}", self.events(), self.output))
    }

    /// Every message id in the validation log, with its count; the log must exist, which
    /// proves that validation was active with this run's settings.
    fn vuids(&self) -> BTreeMap<String, usize> {
        let log = self.validation_log.as_deref().unwrap_or_else(|| {
            panic!(
                "the validation log was not created: validation was not active\n{}",
                self.output
            )
        });
        vkexit_testkit::vulkan::vuids(log)
    }

    fn describe(&self) -> String {
        format!(
            "status {:?}, events {:?}\n{}",
            self.status,
            self.events(),
            self.output
        )
    }
}

/// Runs `plan` on lavapipe under validation, with the tegra layer below it (next to the driver,
/// as vkexit enables it) unless the plan has no mode.
fn run(setup: &Setup, plan: Plan<'_>) -> Run {
    let mut launch = Launch::new(plan.program)
        .args(plan.args)
        .refrt()
        .validation();
    let evidence = launch.dir().join("tegra.jsonl");
    launch = launch.env("VKEXIT_TEGRA_LOG", &evidence);
    if let Some(mode) = plan.mode {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("VkLayer_vkexit_tegra_exit.json");
        launch = launch
            .layer(LAYER, &manifest, &setup.layer_lib)
            .env("VKEXIT_TEGRA_MODE", mode);
    }
    let ran = launch.run();
    Run {
        status: ran.status,
        records: ran.json_lines("tegra.jsonl").unwrap_or_default(),
        validation_log: ran.read("validation.log"),
        output: format!("--- stdout\n{}--- stderr\n{}", ran.stdout, ran.stderr),
    }
}

fn clean_exit<'a>(setup: &'a Setup, policy: &'a str, mode: Option<&'a str>) -> Plan<'a> {
    let args: &'static [&'static str] = match policy {
        "never" => &["--runtime", "refrt:never"],
        "static-destructor" => &["--runtime", "refrt:static-destructor"],
        "atexit-after-init" => &["--runtime", "refrt:atexit-after-init"],
        "guarded" => &["--runtime", "refrt:guarded"],
        "release-children" => &["--runtime", "refrt:release-children"],
        other => panic!("no such policy {other}"),
    };
    Plan {
        program: &setup.clean_exit,
        args,
        mode,
    }
}

fn assert_crashed_in_the_unmapped_region(run: &Run) {
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    let mapped = run.record("region-mapped");
    let unmapped = run.record("region-unmapped");
    assert_eq!(
        (&mapped["start"], &mapped["end"]),
        (&unmapped["start"], &unmapped["end"])
    );
    let start = run.record("exit-handler-start");
    assert!(
        start["live_workers"].as_u64().unwrap() >= 1,
        "{}",
        run.describe()
    );
    assert!(run.events().contains(&"worker-started"));
    assert!(
        !run.events().contains(&"worker-stopped"),
        "{}",
        run.describe()
    );
    assert!(
        !run.events().contains(&"exit-handler-end"),
        "the handler outlived the fault: {}",
        run.describe()
    );
}

fn assert_clean_exit(run: &Run) {
    assert!(run.status.success(), "{}", run.describe());
    let started = run.record("worker-started");
    let stopped = run.record("worker-stopped");
    assert_eq!(started["worker"], stopped["worker"]);
    assert_eq!(started["worker_tid"], stopped["worker_tid"]);
    assert_eq!(run.record("exit-handler-start")["live_workers"], 0);
    assert!(run.events().contains(&"region-unmapped"));
    assert!(!run.events().contains(&"waiting-for-fault"));
    assert_eq!(
        run.events().last(),
        Some(&"exit-handler-end"),
        "{}",
        run.describe()
    );
}

fn assert_loaded(run: &Run, mode: &str) {
    let loaded = run.record("loaded");
    assert_eq!(loaded["layer"], LAYER);
    assert_eq!(loaded["mode"], mode);
    assert!(
        loaded["instance"]
            .as_str()
            .is_some_and(|h| h.starts_with("0x")),
        "{loaded}"
    );
}

#[test]
fn clean_exit_under_never_crashes_with_sigsegv_in_the_unmapped_region() {
    let setup = setup();
    let run = run(&setup, clean_exit(&setup, "never", Some("deterministic")));
    assert_loaded(&run, "deterministic");
    assert_crashed_in_the_unmapped_region(&run);
    assert!(run.events().contains(&"waiting-for-fault"));
    let worker = run.record("worker-started");
    assert_eq!(worker["worker"], "vkexit-tegra-0");
    assert!(worker["worker_tid"].as_i64().unwrap() > 0);
    assert!(
        run.output.contains("vkexit-step: main returns"),
        "{}",
        run.output
    );
    assert_eq!(run.vuids(), BTreeMap::new());
}

#[test]
fn clean_exit_under_static_destructor_crashes_too() {
    let setup = setup();
    let run = run(
        &setup,
        clean_exit(&setup, "static-destructor", Some("deterministic")),
    );
    assert_crashed_in_the_unmapped_region(&run);
    assert_eq!(run.vuids(), BTreeMap::new());
}

#[test]
fn clean_exit_under_teardown_registered_after_init_exits_0() {
    let setup = setup();
    for policy in ["atexit-after-init", "guarded", "release-children"] {
        let run = run(&setup, clean_exit(&setup, policy, Some("deterministic")));
        assert_loaded(&run, "deterministic");
        assert_clean_exit(&run);
        assert_eq!(run.vuids(), BTreeMap::new(), "{policy}");
    }
}

#[test]
fn mock_with_clean_teardown_exits_0_in_every_mode() {
    let setup = setup();
    for mode in ["deterministic", "racy", "off"] {
        let run = run(
            &setup,
            Plan {
                program: &setup.mock,
                args: &[],
                mode: Some(mode),
            },
        );
        assert!(run.status.success(), "{mode}: {}", run.describe());
        assert_loaded(&run, mode);
        assert_eq!(run.vuids(), BTreeMap::new(), "{mode}");
        if mode != "off" {
            assert_clean_exit(&run);
        }
    }
}

#[test]
fn mock_keeping_vulkan_alive_crashes_deterministically() {
    let setup = setup();
    let run = run(
        &setup,
        Plan {
            program: &setup.mock,
            args: &["--keep-vulkan"],
            mode: Some("deterministic"),
        },
    );
    assert_crashed_in_the_unmapped_region(&run);
}

#[test]
fn off_is_a_pure_pass_through_that_never_crashes() {
    let setup = setup();
    let plans = [
        Plan {
            program: &setup.mock,
            args: &["--keep-vulkan"],
            mode: Some("off"),
        },
        clean_exit(&setup, "never", Some("off")),
        clean_exit(&setup, "static-destructor", Some("off")),
    ];
    for plan in plans {
        let run = run(&setup, plan);
        assert!(run.status.success(), "{:?}: {}", plan.args, run.describe());
        assert_loaded(&run, "off");
        assert_eq!(run.events(), ["loaded"], "{}", run.describe());
    }
}

#[test]
fn racy_mode_never_waits_and_ends_in_sigsegv_or_exit_0() {
    let setup = setup();
    let run = run(&setup, clean_exit(&setup, "never", Some("racy")));
    assert_loaded(&run, "racy");
    assert!(
        run.status.success() || run.signal() == Some(libc::SIGSEGV),
        "{}",
        run.describe()
    );
    assert!(
        !run.events().contains(&"waiting-for-fault"),
        "{}",
        run.describe()
    );
    assert_eq!(run.record("exit-handler-start")["live_workers"], 1);
}

#[test]
fn an_unknown_mode_is_deterministic_with_a_warning() {
    let setup = setup();
    let run = run(
        &setup,
        Plan {
            program: &setup.mock,
            args: &["--keep-vulkan"],
            mode: Some("sometimes"),
        },
    );
    assert_loaded(&run, "deterministic");
    let warning = run.record("warning");
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("\"sometimes\""),
        "{warning}"
    );
    assert_crashed_in_the_unmapped_region(&run);
}

/// The layer adds no validation message, and hides none: the same ids, the same counts, with
/// and without it, in runs that have messages and runs that have none.
#[test]
fn validation_reports_the_same_with_and_without_the_layer() {
    let setup = setup();
    let cases: [(&Path, &[&str]); 3] = [
        (&setup.buffer_kept, &["--runtime", "refrt:guarded"]),
        (&setup.clean_exit, &["--runtime", "refrt:release-children"]),
        (&setup.mock, &["--vuid"]),
    ];
    for (program, args) in cases {
        let with = run(
            &setup,
            Plan {
                program,
                args,
                mode: Some("deterministic"),
            },
        );
        let without = run(
            &setup,
            Plan {
                program,
                args,
                mode: None,
            },
        );
        assert!(
            with.status.success() && without.status.success(),
            "{args:?}: {}",
            with.describe()
        );
        assert_eq!(
            with.vuids(),
            without.vuids(),
            "{} {args:?}",
            program.display()
        );
        assert!(without.records.is_empty());
    }
    let kept = run(
        &setup,
        Plan {
            program: &setup.buffer_kept,
            args: &["--runtime", "refrt:guarded"],
            mode: Some("deterministic"),
        },
    );
    assert!(
        !kept.vuids().is_empty(),
        "buffer-kept-at-exit under guarded should report 00378"
    );
}
