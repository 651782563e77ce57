//! Bad input gets a clear error naming what was wrong and what is valid,
//! with exit code 2 and no panic.

use predicates::prelude::*;
use predicates::str::contains;
use vkexit_testkit::vkexit::*;

fn no_panic() -> impl Predicate<str> {
    contains("panicked").not()
}

#[test]
fn an_unknown_case_lists_the_built_in_ones() {
    let sb = Sandbox::new();
    sb.vkexit()
        .args(["run", "--case", "buffer-kept"])
        .assert()
        .code(2)
        .stderr(
            contains("unknown case `buffer-kept`")
                .and(contains("handler-before-load"))
                .and(no_panic()),
        );
}

#[test]
fn an_unknown_policy_lists_the_policies() {
    let sb = Sandbox::new();
    sb.vkexit()
        .args(["run", "--runtime", "refrt:sometimes"])
        .assert()
        .code(2)
        .stderr(
            contains("refrt:sometimes")
                .and(contains("release-children"))
                .and(no_panic()),
        );
}

#[test]
fn an_unknown_driver_lists_the_drivers_found() {
    let sb = Sandbox::new();
    sb.vkexit()
        .args(["run", "--driver", "warp-drive"])
        .assert()
        .code(2)
        .stderr(
            contains("warp-drive")
                .and(contains("lavapipe"))
                .and(no_panic()),
        );
}

#[test]
fn an_icd_manifest_that_is_not_json_is_named_with_line_and_column() {
    let sb = Sandbox::new();
    let bad = sb.path().join("broken_icd.json");
    std::fs::write(&bad, "{ \"ICD\": \n  oops }").unwrap();
    sb.vkexit()
        .args(["run", "--driver"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(
            contains("broken_icd.json")
                .and(contains("line 2"))
                .and(no_panic()),
        );
}

#[test]
fn an_unwritable_results_path_fails_before_running() {
    let sb = Sandbox::new();
    sb.vkexit()
        .args(["run", "--json", "/proc/vkexit-results.json", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("/proc/vkexit-results.json").and(no_panic()));
}

#[test]
fn bad_numbers_are_usage_errors() {
    let sb = Sandbox::new();
    sb.vkexit().args(["run", "--runs", "0"]).assert().code(2);
    sb.vkexit()
        .args(["run", "--timeout=0", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("--timeout").and(no_panic()));
}

#[test]
fn list_and_doctor_describe_this_machine() {
    let sb = Sandbox::new();
    sb.vkexit().arg("list").assert().success().stdout(
        contains("handler-before-load")
            .and(contains("refrt:release-children"))
            .and(contains("lavapipe")),
    );
    sb.vkexit().arg("doctor").assert().success().stdout(
        contains("llvmpipe")
            .and(contains("VK_LAYER_KHRONOS_validation 1.3"))
            .and(contains("ready")),
    );
}

#[test]
fn a_named_driver_that_cannot_load_gives_error_cells_never_green() {
    let sb = Sandbox::new();
    let icd = sb.path().join("gone_icd.json");
    std::fs::write(
        &icd,
        r#"{"file_format_version":"1.0.0","ICD":{"library_path":"/nonexistent/libvulkan_gone.so","api_version":"1.3.0"}}"#,
    )
    .unwrap();
    let out = sb
        .vkexit()
        .args(["run", "--runs", "1", "--json"])
        .arg(sb.results())
        .arg("--driver")
        .arg(&icd)
        .arg("--")
        .arg(mock())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = sb.read_results();
    let cell = only_cell(&r);
    assert_eq!(cell["verdict"], "error", "{cell:#}");
    assert_eq!(cell["runs"], 0);
    assert!(
        cell["reason"]
            .as_str()
            .unwrap()
            .contains("could not be probed"),
        "{cell:#}"
    );
}

/// What `run` makes of a validation log as a dying process leaves it: bytes
/// that are not UTF-8 and a last line cut short still yield their VUIDs and
/// the run is a `vuid`, never a pass.
#[test]
fn a_validation_log_that_is_not_utf8_or_cut_mid_line_is_still_a_vuid() {
    use vkexit::judge::run::{classify, Rules, RunEvidence, Termination, Validation};
    use vkexit_evidence::verdict::RunVerdict;
    let logs: [&[u8]; 3] = [
        b"\xff\xfe garbage \x00\nValidation Error: [ VUID-vkDestroyDevice-device-00378 ] \xc3\n",
        b"Validation Error: [ VUID-vkDestroyDevice-device-00378 ] Object 0: handle = 0x",
        b"\xc3\x28\n\xe2\x82Validation Error: [ VUID-vkDestroyDevice-device-00378 ] cut\xf0\x9f",
    ];
    for log in logs {
        let report = vkexit::host::vuid::scan(log).unwrap();
        let c = classify(
            &RunEvidence {
                termination: Termination::Exited { code: 0 },
                validation: Validation::Active(
                    vkexit::host::validation::ValidationLogs::single_instance(report),
                ),
                trace: None,
                tegra: None,
                tree: Default::default(),
                setup_failure: None,
            },
            &Rules::default(),
        );
        assert_eq!(
            c.verdict,
            RunVerdict::Vuid,
            "{:?}",
            String::from_utf8_lossy(log)
        );
        assert_eq!(c.vuids, ["VUID-vkDestroyDevice-device-00378"]);
    }
    // A log that exists but cannot be read is no proof of anything.
    let c = classify(
        &RunEvidence {
            termination: Termination::Exited { code: 0 },
            validation: Validation::Unreadable("Is a directory".into()),
            trace: None,
            tegra: None,
            tree: Default::default(),
            setup_failure: None,
        },
        &Rules::default(),
    );
    assert_eq!(c.verdict, RunVerdict::Error);
}

#[test]
fn unwritable_report_paths_fail_before_running() {
    let sb = Sandbox::new();
    for (flag, path) in [
        ("--junit", "/proc/vkexit-junit.xml"),
        ("--markdown", "/proc/vkexit-summary.md"),
        ("--html", "/proc/vkexit-html"),
    ] {
        sb.vkexit()
            .args([
                "run",
                "--no-validation",
                flag,
                path,
                "--",
                "sh",
                "-c",
                "exit 0",
            ])
            .assert()
            .code(2)
            .stderr(contains(path).and(no_panic()));
    }
}

#[test]
fn an_artifacts_path_that_is_a_file_is_an_error_naming_it() {
    let sb = Sandbox::new();
    let file = sb.path().join("not-a-directory");
    std::fs::write(&file, "x").unwrap();
    sb.vkexit()
        .args(["run", "--no-validation", "--runs", "1", "--artifacts"])
        .arg(&file)
        .args(["--", "sh", "-c", "exit 0"])
        .assert()
        .code(2)
        .stderr(contains("not-a-directory").and(no_panic()));
}

#[test]
fn an_artifacts_path_with_a_colon_is_refused_before_any_run() {
    let sb = Sandbox::new();
    sb.vkexit()
        .args([
            "run",
            "--no-validation",
            "--runs",
            "1",
            "--artifacts",
            "runs:1",
        ])
        .args(["--", "sh", "-c", "exit 0"])
        .assert()
        .code(2)
        .stderr(contains("--artifacts").and(contains("`:`")).and(no_panic()));
}

#[test]
fn an_icd_manifest_without_a_library_says_what_is_missing() {
    let sb = Sandbox::new();
    let icd = sb.path().join("no_library_icd.json");
    std::fs::write(
        &icd,
        r#"{"file_format_version":"1.0.0","ICD":{"api_version":"1.3.0"}}"#,
    )
    .unwrap();
    sb.vkexit()
        .args(["run", "--driver"])
        .arg(&icd)
        .assert()
        .code(2)
        .stderr(
            contains("no_library_icd.json")
                .and(contains("library_path"))
                .and(no_panic()),
        );
}

#[test]
fn a_bad_process_limit_is_refused_before_any_run() {
    let sb = Sandbox::new();
    sb.vkexit()
        .env("VKEXIT_MAX_PROCESSES", "lots")
        .args(["run", "--no-validation", "--runs", "2", "--json"])
        .arg(sb.results())
        .args(["--", "sh", "-c", "exit 0"])
        .assert()
        .code(2)
        .stderr(contains("VKEXIT_MAX_PROCESSES=\"lots\" is not a positive number").and(no_panic()));
    assert!(!sb.results().exists(), "no run, no results");
}

/// `vkexit ARGS` exits 2 before any run, naming each of `words`.
fn refused(args: &[&str], words: &[&str]) {
    let sb = Sandbox::new();
    let out = sb.vkexit().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    for w in words {
        assert!(stderr.contains(w), "{args:?}: no `{w}` in: {stderr}");
    }
    assert!(
        !sb.path().join("vkexit-artifacts").exists(),
        "{args:?}: runs started"
    );
}

#[test]
fn a_timeout_out_of_range_names_the_flag_and_the_range() {
    for t in ["1e20", "inf", "NaN", "-1", "0", "86401", "soon"] {
        // `--timeout=-1`: a bare `-1` would read as a flag.
        refused(
            &["run", &format!("--timeout={t}"), "--", "/bin/true"],
            &["--timeout", "(0, 86400]"],
        );
    }
    refused(
        &["repro", "--timeout", "1e20", "--", "/bin/true"],
        &["--timeout", "(0, 86400]"],
    );
}

#[test]
fn a_run_count_out_of_range_names_the_flag_and_the_range() {
    for n in ["1000000000000", "1000001", "0", "-3"] {
        refused(
            &["run", &format!("--runs={n}"), "--", "/bin/true"],
            &["--runs", "1..=1000000"],
        );
    }
    refused(
        &["repro", "--max-runs", "1000000000000", "--", "/bin/true"],
        &["--max-runs", "1..=1000000000"],
    );
}

#[test]
fn a_job_count_out_of_range_names_the_flag_and_the_range() {
    for n in ["100000", "1025", "0"] {
        refused(
            &["run", "-j", n, "--", "/bin/true"],
            &["--jobs", "1..=1024"],
        );
    }
    refused(
        &["repro", "--jobs", "100000", "--", "/bin/true"],
        &["--jobs", "1..=1024"],
    );
}

#[test]
fn matrix_file_numbers_out_of_range_name_the_file_line_and_range() {
    for (text, want) in [
        (
            "runs = 1000001\n",
            "m.toml:1:8: `runs` must be in 1..=1000000",
        ),
        ("jobs = 100000\n", "m.toml:1:8: `jobs` must be in 1..=1024"),
        (
            "timeout = 1e20\n",
            "m.toml:1:11: `timeout`: 100000000000000000000 is not in (0, 86400] seconds",
        ),
    ] {
        let sb = Sandbox::new();
        std::fs::write(sb.path().join("m.toml"), text).unwrap();
        sb.vkexit()
            .args(["run", "--config", "m.toml"])
            .assert()
            .code(2)
            .stderr(contains(want).and(no_panic()));
    }
}

#[test]
fn a_missing_external_program_is_refused_before_any_run() {
    refused(
        &["run", "--", "./missing-program", "--flag"],
        &[
            "missing-program",
            "cannot start its program",
            "No such file",
        ],
    );
    refused(
        &["run", "--", "no-such-program-anywhere"],
        &["no-such-program-anywhere", "not found in PATH"],
    );
    refused(
        &["repro", "--", "./missing-program"],
        &["missing-program", "No such file"],
    );
    // A file that is there but cannot be executed, and a directory.
    let sb = Sandbox::new();
    std::fs::write(sb.path().join("script"), "#!/bin/sh\nexit 0\n").unwrap();
    sb.vkexit()
        .args(["run", "--", "./script"])
        .assert()
        .code(2)
        .stderr(contains("./script: not executable").and(no_panic()));
    sb.vkexit()
        .args(["run", "--", "/tmp"])
        .assert()
        .code(2)
        .stderr(contains("/tmp: is a directory").and(no_panic()));
    assert!(!sb.path().join("vkexit-artifacts").exists());
    // A matrix file's [[external]] case, too.
    std::fs::write(
        sb.path().join("m.toml"),
        "[[external]]\nname = \"gone\"\nargv = [\"build/gone\", \"-x\"]\n",
    )
    .unwrap();
    sb.vkexit()
        .args(["run", "--config", "m.toml"])
        .assert()
        .code(2)
        .stderr(
            contains("external case `gone`")
                .and(contains("build/gone"))
                .and(no_panic()),
        );
    assert!(!sb.path().join("vkexit-artifacts").exists());
}

#[test]
fn explain_on_a_directory_without_evidence_fails_with_the_reason() {
    let sb = Sandbox::new();
    let empty = sb.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    sb.vkexit()
        .arg("explain")
        .arg(&empty)
        .assert()
        .code(2)
        .stderr(
            contains("no evidence to explain")
                .and(contains("result.json"))
                .and(no_panic()),
        );
    // A cell's directory: it names the run directories inside.
    let cell = sb.path().join("cell");
    std::fs::create_dir_all(cell.join("run-0")).unwrap();
    std::fs::write(cell.join("run-0/result.json"), "{}").unwrap();
    sb.vkexit()
        .arg("explain")
        .arg(&cell)
        .assert()
        .code(2)
        .stderr(contains("explain one of its run-K directories").and(no_panic()));
    sb.vkexit()
        .arg("explain")
        .arg(cell.join("run-0"))
        .assert()
        .success();
}
