//! No false green: when validation is asked for and is not there, or not
//! really active, vkexit says so and never passes.

use predicates::str::contains;
use std::path::Path;
use vkexit_testkit::results::{assert_all, run_record, the_cell, CellResult, RunVerdict};
use vkexit_testkit::vkexit::*;

#[test]
fn a_missing_validation_layer_stops_vkexit_with_what_to_install() {
    let sb = Sandbox::new();
    let empty = sb.path().join("no-layers");
    std::fs::create_dir_all(&empty).unwrap();
    sb.vkexit()
        .env("VK_LAYER_PATH", &empty)
        .args(["run", "--runs", "1", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("apt-get install vulkan-validationlayers"));
}

#[test]
fn a_validation_manifest_whose_library_is_missing_is_named() {
    let sb = Sandbox::new();
    let layers = sb.path().join("layers");
    std::fs::create_dir_all(&layers).unwrap();
    std::fs::write(
        layers.join("VkLayer_khronos_validation.json"),
        r#"{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_KHRONOS_validation","type":"GLOBAL","library_path":"./libVkLayer_gone.so","api_version":"1.3.239","implementation_version":"1","description":"x"}}"#,
    )
    .unwrap();
    sb.vkexit()
        .env("VK_LAYER_PATH", &layers)
        .args(["run", "--runs", "1", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("libVkLayer_gone.so"));
}

/// A manifest that calls itself the validation layer but loads another
/// layer's library: the loader loads it, the program runs and exits 0, yet
/// no validation happened. The per-run proof (the layer's own log, created
/// with our settings) is missing, so every run is an error.
#[test]
fn an_impostor_validation_layer_is_caught_per_run() {
    let Some(other) = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .map(|d| std::path::Path::new(d).join("libVkLayer_MESA_overlay.so"))
    .find(|p| p.exists()) else {
        panic!("libVkLayer_MESA_overlay.so (mesa-vulkan-drivers) is not installed");
    };
    let sb = Sandbox::new();
    let layers = sb.path().join("layers");
    std::fs::create_dir_all(&layers).unwrap();
    std::fs::write(
        layers.join("VkLayer_khronos_validation.json"),
        format!(
            r#"{{"file_format_version":"1.0.0","layer":{{"name":"VK_LAYER_KHRONOS_validation","type":"GLOBAL","library_path":"{}","api_version":"1.3.239","implementation_version":"1","description":"impostor"}}}}"#,
            other.display()
        ),
    )
    .unwrap();
    let mut cmd = sb.vkexit();
    cmd.env("VK_LAYER_PATH", &layers)
        .args(["run", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(sb.results())
        .arg("--")
        .arg(mock());
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.gate_results();
    let cell = the_cell(&r);
    assert_eq!(cell.counts.error, 2, "{cell:#?}");
    assert_eq!(cell.counts.pass, 0);
}

/// The check a leaked `VkBuffer` at `vkDestroyDevice` fails, under whichever name the layer
/// logs it (1.3.268 renamed 00378 to 05137).
const CHILDREN: &str = "VUID-vkDestroyDevice-device-00378";

/// How many times the cell's runs logged `CHILDREN`, under any of its names.
fn children_reported(cell: &CellResult) -> u64 {
    vkexit::host::vuid::names(CHILDREN)
        .find_map(|name| cell.vuid_counts.get(name).copied())
        .unwrap_or(0)
}

/// Runs the mock with `args` twice, every run kept; its only cell.
fn mock_cell(sb: &Sandbox, vkexit_args: &[&str], args: &[&str]) -> CellResult {
    let mut all = vec!["--keep-passing"];
    all.extend_from_slice(vkexit_args);
    let (_, results) = sb.gate_mock(2, &all, args);
    the_cell(&results).clone()
}

/// The per-instance logs of one kept run, by file name.
fn instance_logs(run: &str) -> Vec<String> {
    let dir = std::path::Path::new(run).join("validation.d");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Layer 1.3.239 opens its log with `fopen(path, "w")` for every instance: the second
/// instance truncated the report of the first, and the run passed.
#[test]
fn a_leak_then_a_second_instance_is_a_vuid() {
    let sb = Sandbox::new();
    let cell = mock_cell(&sb, &[], &["--vuid", "--second-instance"]);
    assert_all(&cell, RunVerdict::Vuid, 2);
    assert_eq!(children_reported(&cell), 2, "{cell:#?}");
    for run in &cell.artifacts {
        assert_eq!(instance_logs(run).len(), 2, "{run}");
        // The combined log at the configured path holds both instances' logs.
        let log = std::fs::read_to_string(Path::new(run).join("validation.log")).unwrap();
        assert!(log.contains(&format!("[ {CHILDREN} ]")), "{log}");
        assert_eq!(log.matches("# ---- validation.d/").count(), 2, "{log}");
    }
}

#[test]
fn a_leak_while_a_second_instance_comes_and_goes_is_a_vuid() {
    let sb = Sandbox::new();
    let cell = mock_cell(&sb, &[], &["--vuid", "--overlapping-instance"]);
    assert_all(&cell, RunVerdict::Vuid, 2);
    assert_eq!(children_reported(&cell), 2, "{cell:#?}");
    // The second instance's open truncated the first one's log while it was open; each has a
    // file of its own now.
    for run in &cell.artifacts {
        assert_eq!(instance_logs(run).len(), 2, "{run}");
    }
}

/// The exec'd image keeps the pid and opens the log again.
#[test]
fn a_leak_then_an_exec_of_a_clean_program_is_a_vuid() {
    let sb = Sandbox::new();
    let mock = mock();
    let cell = mock_cell(
        &sb,
        &[],
        &["--vuid", "--exec-after", mock.to_str().unwrap()],
    );
    assert_all(&cell, RunVerdict::Vuid, 2);
    assert_eq!(children_reported(&cell), 2, "{cell:#?}");
    for run in &cell.artifacts {
        let logs = instance_logs(run);
        let pids: std::collections::BTreeSet<&str> =
            logs.iter().map(|l| l.split('-').next().unwrap()).collect();
        assert_eq!((logs.len(), pids.len()), (2, 1), "{logs:?}");
    }
}

#[test]
fn a_clean_program_that_execs_a_leaking_one_is_a_vuid() {
    let sb = Sandbox::new();
    let mock = mock();
    let cell = mock_cell(
        &sb,
        &[],
        &["--exec-after", mock.to_str().unwrap(), "--vuid"],
    );
    assert_all(&cell, RunVerdict::Vuid, 2);
    assert_eq!(children_reported(&cell), 2, "{cell:#?}");
    // Each image's log is its own, so the clean image's status message proves it was validated
    // too: the leaker's open no longer replaces it.
    for run in &cell.artifacts {
        assert_eq!(instance_logs(run).len(), 2, "{run}");
        let log = std::fs::read_to_string(Path::new(run).join("validation.log")).unwrap();
        let status = [
            "[ UNASSIGNED-khronos-validation-createinstance-status-message ]",
            "[ WARNING-CreateInstance-status-message ]",
            "[ CURRENT-VALIDATION-ENABLED ]",
        ];
        let shown: usize = status.iter().map(|s| log.matches(s).count()).sum();
        assert_eq!(shown, 2, "{log}");
    }
}

/// Both processes have the log open at once: the child's open truncated the parent's file,
/// and the parent then wrote over the child's report.
#[test]
fn a_parent_and_a_child_leaking_at_once_are_both_counted() {
    let sb = Sandbox::new();
    let cell = mock_cell(&sb, &[], &["--vuid", "--leaking-child"]);
    assert_all(&cell, RunVerdict::Vuid, 2);
    assert_eq!(children_reported(&cell), 4, "{cell:#?}");
    for run in &cell.artifacts {
        let logs = instance_logs(run);
        let pids: std::collections::BTreeSet<&str> =
            logs.iter().map(|l| l.split('-').next().unwrap()).collect();
        assert_eq!((logs.len(), pids.len()), (2, 2), "{logs:?}");
        let reason = run_record(Path::new(run)).reason;
        assert!(
            reason.ends_with("×2, from the logs of 2 instances"),
            "{reason}"
        );
    }
}

#[test]
fn a_clean_program_with_two_instances_passes() {
    let sb = Sandbox::new();
    let cell = mock_cell(&sb, &[], &["--second-instance", "--overlapping-instance"]);
    assert_all(&cell, RunVerdict::Pass, 2);
    for run in &cell.artifacts {
        assert_eq!(instance_logs(run).len(), 3, "{run}");
        let result = run_record(Path::new(run));
        assert!(
            result
                .reason
                .contains("validation clean in each of 3 instances"),
            "{result:#?}"
        );
    }
}

/// A process image without the preload writes the configured log itself, where an instance
/// truncates the one before: vkexit cannot prove that log whole, so a clean one is an error.
/// Here the leaking image clears LD_PRELOAD, and its second instance hides the leak.
#[test]
fn a_log_no_preload_saw_is_never_a_pass() {
    let sb = Sandbox::new();
    let mock = mock();
    let mock = mock.to_str().unwrap();
    let cell = mock_cell(
        &sb,
        &[],
        &[
            "--exec-after",
            "/usr/bin/env",
            "-u",
            "LD_PRELOAD",
            mock,
            "--vuid",
            "--second-instance",
        ],
    );
    assert_all(&cell, RunVerdict::Error, 2);
    for run in &cell.artifacts {
        let logs = instance_logs(run);
        assert!(logs.contains(&"unwatched.log".to_string()), "{logs:?}");
    }
    // With --no-diagnostics every log is one no preload saw: a clean run is an error, and what
    // the log still shows fails the run.
    let cell = mock_cell(&sb, &["--no-diagnostics"], &[]);
    assert_all(&cell, RunVerdict::Error, 2);
    let result = run_record(Path::new(&cell.artifacts[0]));
    assert!(
        result
            .reason
            .contains("without vkexit's diagnostics preload"),
        "{result:#?}"
    );
    let cell = mock_cell(&sb, &["--no-diagnostics"], &["--vuid"]);
    assert_all(&cell, RunVerdict::Vuid, 2);
}

/// Layer 1.2.162 writes its log only while the application has no debug messenger of its own:
/// a program whose messenger swallows every message leaves a clean log behind a leaked buffer.
/// vkexit's trace layer witnesses the application's messengers under such a layer, so the run
/// is the `vuid` it is, the application's messenger still gets what it asked for, a clean
/// program with a messenger still passes, and under the current layer nothing is witnessed.
#[test]
fn a_finding_the_application_messenger_swallows_under_layer_1_2_is_a_vuid() {
    let debian11 = vkexit_testkit::or_skip!(vkexit_testkit::debian11::Debian11::find());
    let sb = Sandbox::new();
    let mock = mock();
    let config = sb.path().join("old-layer.toml");
    std::fs::write(
        &config,
        format!(
            "runs = 2\n[env]\nLD_LIBRARY_PATH = \"{dir}\"\n\
             [[external]]\nname = \"swallowed\"\nargv = [\"{mock}\", \"--silent-messenger\", \"--vuid\"]\n\
             [[external]]\nname = \"clean\"\nargv = [\"{mock}\", \"--silent-messenger\"]\n\
             [[layers]]\nvalidation_manifest = \"{manifest}\"\n",
            dir = debian11.lib_dir().display(),
            manifest = debian11.layer_manifest().display(),
            mock = mock.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let (_, results) = sb.gate_run(&["--config", config, "--keep-passing"]);
    let cell = |case: &str| {
        results
            .cells
            .iter()
            .find(|c| c.case == case)
            .unwrap_or_else(|| panic!("no cell {case}: {results:#?}"))
    };
    let swallowed = cell("swallowed");
    assert_eq!(swallowed.layers, ["validation@1.2.162"]);
    assert_all(swallowed, RunVerdict::Vuid, 2);
    assert_eq!(children_reported(swallowed), 2, "{swallowed:#?}");
    assert_all(cell("clean"), RunVerdict::Pass, 2);
    // Nothing above information reached the clean program's messenger: no witness file.
    for run in &cell("clean").artifacts {
        let witnessed = Path::new(run).join("validation.d/app-messengers.txt");
        assert!(!witnessed.exists(), "{}", witnessed.display());
    }
    for run in &swallowed.artifacts {
        let run = Path::new(run);
        let stdout = std::fs::read_to_string(run.join("stdout.txt")).unwrap();
        assert!(
            stdout.contains("it swallowed 1 validation error(s)"),
            "the application's messenger lost its message: {stdout}"
        );
        let reason = run_record(run).reason;
        assert!(
            reason.contains("reached only the application's own debug messenger"),
            "{reason}"
        );
        let log = std::fs::read_to_string(run.join("validation.log")).unwrap();
        assert!(log.contains(&format!("[ {CHILDREN} ]")), "{log}");
    }
    // The current layer logs beside the application's messenger: nothing is witnessed.
    let current = mock_cell(&sb, &[], &["--silent-messenger", "--vuid"]);
    assert_all(&current, RunVerdict::Vuid, 2);
    for run in &current.artifacts {
        let witnessed = Path::new(run).join("validation.d/app-messengers.txt");
        assert!(!witnessed.exists(), "{}", witnessed.display());
    }
}

/// Debian's manifest names its library by file name, so the dynamic loader's search chooses
/// the file: an `LD_LIBRARY_PATH` of the run that holds another `libVkLayer_khronos_validation.so`
/// (a Vulkan SDK's, another build's) loads that one under the manifest's version. The run is an
/// `error` naming both files, whatever it would have been.
#[test]
fn a_validation_layer_library_other_than_the_manifests_is_an_error() {
    let installed = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .map(|d| std::path::Path::new(d).join("libVkLayer_khronos_validation.so"))
    .find(|p| p.exists())
    .expect("vulkan-validationlayers is installed");
    let sb = Sandbox::new();
    let other = sb.path().join("other-build");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(&installed, other.join("libVkLayer_khronos_validation.so")).unwrap();
    let config = sb.path().join("m.toml");
    std::fs::write(
        &config,
        format!(
            "runs = 1\n[env]\nLD_LIBRARY_PATH = \"{}\"\n[[external]]\nname = \"clean\"\nargv = [\"{}\"]\n",
            other.display(),
            mock().display()
        ),
    )
    .unwrap();
    let (_, results) = sb.gate_run(&["--config", config.to_str().unwrap()]);
    let cell = the_cell(&results);
    assert_all(cell, RunVerdict::Error, 1);
    let reason = cell.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("is not the one its manifest names") && reason.contains("other-build"),
        "{reason}"
    );
}
