//! The real-runtimes matrix (`ci/matrix/real-runtimes.toml`), judged by its baseline
//! (`ci/baselines/real-runtimes-ext.toml`), as CI runs it: from the workspace's root, which its
//! program paths are relative to (or a view of it with the build directory as `target/release`,
//! [`crate::paths::matrix_root`]).

use crate::results::{CellResult, Results};
use crate::vkexit::Sandbox;

/// The matrix, relative to the workspace.
pub const MATRIX: &str = "ci/matrix/real-runtimes.toml";
/// The baseline that judges it, relative to the workspace.
pub const BASELINE: &str = "ci/baselines/real-runtimes-ext.toml";

/// The names of the matrix's cases that `keep` keeps, in the matrix's order.
pub fn cases(keep: impl Fn(&str) -> bool) -> Vec<String> {
    let path = crate::workspace().join(MATRIX);
    let matrix = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    matrix
        .lines()
        .filter_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
        .filter(|name| keep(name))
        .map(str::to_string)
        .collect()
}

/// Runs `cases` of the matrix once each on lavapipe against the baseline, and asserts that
/// they make `cells` cells, that the baseline file judged every one, and that the gate is
/// green. Returns the results.
pub fn assert_green(cases: &[String], cells: usize) -> Results {
    let sb = Sandbox::new();
    let mut cmd = sb.vkexit();
    cmd.current_dir(crate::paths::matrix_root()).args([
        "run",
        "--config",
        MATRIX,
        "--baseline",
        BASELINE,
        "--driver",
        "lavapipe",
        "--runs",
        "1",
    ]);
    for case in cases {
        cmd.args(["--case", case]);
    }
    let out = cmd
        .arg("--json")
        .arg(sb.results())
        .arg("--artifacts")
        .arg(sb.path().join("artifacts"))
        .output()
        .expect("vkexit starts");
    assert!(
        sb.results().is_file(),
        "no results file; vkexit exited {:?}:\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.gate_results();
    assert_eq!(r.cells.len(), cells, "{} cases: {r:#?}", cases.len());
    for c in &r.cells {
        let source = c.expectation.as_deref().unwrap_or_default();
        assert!(
            source.starts_with(&format!("{BASELINE}:")),
            "every cell is judged by the baseline file: {c:#?}"
        );
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    r
}

/// `vkexit run --driver lavapipe --runs N --emulate MODE [--trace] -- PROGRAM`: its only cell.
pub fn cell(runs: u32, emulate: &str, trace: bool, program: &str) -> CellResult {
    let runs = runs.to_string();
    let mut args = vec!["--runs", runs.as_str(), "--emulate", emulate];
    if trace {
        args.push("--trace");
    }
    args.extend(["--", program]);
    let (_, r) = Sandbox::new().gate_run(&args);
    crate::results::the_cell(&r).clone()
}
