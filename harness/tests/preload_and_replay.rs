//! What a run gets from its caller and what it leaves for a person: a preload the matrix
//! (`[env] LD_PRELOAD`) or the caller's environment sets is loaded beside vkexit's own, after
//! it; and every kept run has a `replay.sh` that runs it again, with validation active, into
//! a directory of its own, leaving the kept evidence as it was. Real runs on lavapipe under
//! the real validation layer.

use std::path::{Path, PathBuf};
use vkexit_testkit::vkexit::*;

/// A library no program here links, so that it is mapped only when preloaded.
const USER_PRELOAD: &str = "libm.so.6";

/// The program: says its LD_PRELOAD, then lists what it has mapped.
const SHOW_PRELOAD: &str = "echo \"preload=$LD_PRELOAD\"; cat /proc/self/maps";

fn kept_run(results: &serde_json::Value) -> PathBuf {
    let cell = only_cell(results);
    let runs = strings(&cell["artifacts"]);
    assert_eq!(runs.len(), 1, "{cell:#}");
    PathBuf::from(&runs[0])
}

/// Both preloads reached the program, vkexit's first, and both were loaded.
fn assert_both_loaded(run: &Path) {
    let stdout = std::fs::read_to_string(run.join("stdout.txt")).unwrap();
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("preload="))
        .unwrap_or_else(|| panic!("{stdout}"));
    let parts: Vec<&str> = line.split(':').collect();
    assert_eq!(parts.len(), 2, "{line}");
    assert!(parts[0].ends_with("/libvkexit_preload.so"), "{line}");
    assert_eq!(parts[1], USER_PRELOAD, "{line}");
    assert!(stdout.contains("/libvkexit_preload.so"), "{stdout}");
    assert!(stdout.contains("/libm.so.6"), "{stdout}");
    // The crash report and timeline of vkexit's preload are there too.
    assert!(run.join("timeline.jsonl").is_file());
}

#[test]
fn a_preload_set_by_the_matrix_is_kept_beside_vkexits() {
    let sb = Sandbox::new();
    let matrix = sb.path().join("m.toml");
    std::fs::write(&matrix, format!("[env]\nLD_PRELOAD = \"{USER_PRELOAD}\"\n")).unwrap();
    let (code, r) = sb.run(&[
        "--runs",
        "1",
        "--no-validation",
        "--keep-passing",
        "--config",
        matrix.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        SHOW_PRELOAD,
    ]);
    assert_eq!(code, 0, "{r:#}");
    assert_both_loaded(&kept_run(&r));
}

#[test]
fn an_inherited_preload_is_kept_beside_vkexits() {
    let sb = Sandbox::new();
    let out = sb
        .vkexit()
        .env("LD_PRELOAD", USER_PRELOAD)
        .args(["run", "--driver", "lavapipe", "--json"])
        .arg(sb.results())
        .args(["--runs", "1", "--no-validation", "--keep-passing", "--"])
        .args(["/bin/sh", "-c", SHOW_PRELOAD])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_both_loaded(&kept_run(&sb.read_results()));
}

/// The kept files of a run, by name, with their bytes.
fn evidence_files(run: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(run)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn replay_sh_runs_a_kept_run_again_with_validation_into_a_fresh_directory() {
    let sb = Sandbox::new();
    let (code, r) = sb.run_mock(1, &[], &["--vuid"]);
    assert_eq!(code, 1, "{r:#}");
    let run = kept_run(&r);
    let before = evidence_files(&run);
    let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "replay.sh",
        "command.txt",
        "validation.log",
        "timeline.jsonl",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    let out_dir = sb.path().join("replayed");
    // From another directory, in a clean shell environment but for what a user has.
    let out = std::process::Command::new("sh")
        .arg(run.join("replay.sh"))
        .arg(&out_dir)
        .current_dir("/")
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let log = std::fs::read_to_string(out_dir.join("validation.log")).unwrap();
    assert!(log.contains("VUID-vkDestroyDevice-device-00378"), "{log}");
    // The replay's own diagnostics went to its own directory.
    assert!(out_dir.join("timeline.jsonl").is_file());
    // Nothing kept was touched.
    assert_eq!(evidence_files(&run), before);
    // Its output directory may not be the kept run's own.
    let same = std::process::Command::new("sh")
        .arg(run.join("replay.sh"))
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(2), "{same:?}");
    assert_eq!(evidence_files(&run), before);
}
