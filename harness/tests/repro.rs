//! `vkexit repro` on lavapipe: stops at the first failure with its evidence
//! kept, or after exactly the clean runs the exact (Clopper–Pearson) bound
//! needs.

use predicates::prelude::*;
use predicates::str::contains;
use std::path::Path;
use vkexit_testkit::vkexit::*;

/// 0 failures in n runs: the one-sided 95 % Clopper–Pearson upper bound of
/// the failure rate.
fn upper_bound_of_no_failure(n: u64) -> f64 {
    1.0 - 0.05f64.powf(1.0 / n as f64)
}

#[test]
fn a_flaky_crash_is_caught_with_its_evidence() {
    let sb = Sandbox::new();
    let out = sb
        .vkexit()
        .args(["repro", "--driver", "lavapipe", "-j", "2", "--"])
        .arg(mock())
        .args(["--crash-probability", "0.3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("repro: mock × external × lavapipe [validation, emulation none]"),
        "{stdout}"
    );
    // "run N failed: crash: killed by SIGSEGV …" then its evidence directory.
    let failed = stdout
        .lines()
        .find(|l| l.starts_with("run ") && l.contains(" failed: crash: killed by SIGSEGV"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let run: u64 = failed["run ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{failed}"));
    assert!(run >= 1, "{failed}");
    let evidence = stdout
        .lines()
        .find_map(|l| l.strip_prefix("  evidence: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let dir = Path::new(evidence);
    let result = std::fs::read_to_string(dir.join("result.json")).unwrap();
    assert!(result.contains("\"verdict\": \"crash\""), "{result}");
    assert!(dir.join("validation.log").exists() && dir.join("command.txt").exists());
    // The summary: how many runs it took, the failures, the interval.
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("failed: ")
            && last.contains(" runs; failure rate ")
            && last.contains("95 % interval"),
        "{last}"
    );
}

#[test]
fn a_clean_program_stops_when_the_bound_is_below_the_rate() {
    let needed = (1..)
        .find(|&n| upper_bound_of_no_failure(n) < 0.10)
        .unwrap();
    assert_eq!(needed, 29);
    let sb = Sandbox::new();
    let out = sb
        .vkexit()
        .args([
            "repro",
            "--driver",
            "lavapipe",
            "-j",
            "2",
            "--max-rate",
            "10%",
            "--",
        ])
        .arg(mock())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "no failure in {needed} runs: the failure rate is below 10 % (95 % upper bound 9."
        )),
        "{last}"
    );
}

#[test]
fn bad_input_is_refused_before_any_run() {
    let sb = Sandbox::new();
    // Many cells: repro runs one.
    sb.vkexit()
        .args(["repro", "--driver", "lavapipe", "--case", "clean-exit"])
        .assert()
        .code(2)
        .stderr(
            contains("repro runs one cell; this selection has 5").and(contains("panicked").not()),
        );
    // A bound that the cap cannot reach.
    sb.vkexit()
        .args(["repro", "--max-rate", "0.1%", "--max-runs", "100", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains(
            "takes 2995 runs without a failure, more than --max-runs 100",
        ));
    for bad in ["1", "0%", "ten"] {
        sb.vkexit()
            .args(["repro", "--max-rate", bad, "--"])
            .arg(mock())
            .assert()
            .code(2)
            .stderr(contains("such as 1%"));
    }
    assert!(!sb.path().join("vkexit-artifacts").exists());
}

/// With one run at a time, the run after a failure used to start before the failure was
/// judged ("failed: 2 of 2"). Four repros of a program that fails every run: each stops after
/// its first.
#[test]
fn repro_at_one_job_starts_no_run_after_the_first_failure() {
    let sb = Sandbox::new();
    for _ in 0..4 {
        let out = sb
            .vkexit()
            .args(["repro", "--driver", "lavapipe", "-j", "1", "--"])
            .arg(mock())
            .args(["--exit-code", "3"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        let failed: Vec<&str> = stdout.lines().filter(|l| l.contains(" failed: ")).collect();
        assert_eq!(failed.len(), 1, "{stdout}");
        assert!(
            failed[0].starts_with("run 1 failed: exit: exited with code 3"),
            "{stdout}"
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("failed: 1 of 1 runs;")),
            "{stdout}"
        );
    }
}

/// `run` and `repro` judge one cell alike: the allow-lists of the built-in baseline apply to
/// repro's runs too. A program that chains VkLayerSettingsCreateInfoEXT into vkCreateInstance
/// (as ggml does) draws VUID-VkInstanceCreateInfo-pNext-pNext from a validation layer older
/// than 1.3.268, which the built-in baseline allows: `run` passes the cell, and `repro` finds
/// no failure in it either.
#[test]
fn repro_applies_the_allow_lists_run_applies() {
    const ALLOWED: &str = "VUID-VkInstanceCreateInfo-pNext-pNext";
    let sb = Sandbox::new();
    let (code, results) = sb.run_mock(2, &[], &["--layer-settings"]);
    let cell = only_cell(&results);
    assert_eq!(code, 0, "{cell:#}");
    assert_eq!(count(cell, "pass"), 2, "{cell:#}");
    assert!(
        cell["allowed_vuids"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|id| id == ALLOWED)),
        "the layer here reports no {ALLOWED}, or the built-in baseline no longer allows it: {cell:#}"
    );
    let out = sb
        .vkexit()
        .args(["repro", "--driver", "lavapipe", "--max-rate", "50%", "--"])
        .arg(mock())
        .arg("--layer-settings")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(" failed: "), "{stdout}");
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("no failure in 5 runs"),
        "{stdout}"
    );
}
