//! Whole reports pinned: `vkexit merge` of a fixed set of cells writes the results file,
//! JUnit XML, the Markdown summary, the HTML report and the terminal table, and each must
//! equal its golden file under `tests/golden/` byte for byte. A change in what the reports
//! say, or in where they get it from, shows as a diff here.
//!
//! After a change that is meant to alter a report, write the golden files again and review
//! their diff before committing it:
//!
//! ```text
//! VKEXIT_UPDATE_GOLDEN=1 cargo test -p vkexit --test report_snapshots
//! ```
//!
//! The inputs, in `tests/golden/`:
//! - `cells.json` (schema vkexit.results/1) is real runs on lavapipe under validation layer
//!   1.3.239, merged from several `vkexit run`s, so that every branch of the writers has a
//!   cell: `pass` (one with kept runs: an allowed id, `allowed_vuids`), `expected-fail` by a
//!   VUID, by a signal and under the tegra emulation, `fail` by an exit code with stderr, by
//!   a hang (`hang.json`), by leaks (`--fail-on-leak`), by a crash in the trace layer
//!   (`crash_in_layer`) and by VUIDs of two processes (a story longer than the HTML shows),
//!   `flaky` red and known flaky (`flaky = true`), `unexpected-pass`, `error`, `skipped`
//!   (radv, no device here), and one case × runtime under two layer sets.
//! - `interrupted.json` is two of those cells in a file whose run was stopped.
//! - `runs/` holds the first kept run of each cell, with the files the reports read or link
//!   (layer log, exit status, stderr, exit timeline, trace, crash, hang). The machine's paths
//!   in them were made `/home/ci/…`, and the mapped logs' unused NUL space cut to line ends,
//!   as their readers take it; nothing else was changed.
//!
//! In the inputs, `@RUNS@` stands for the copy of `runs/` the test makes. The
//! `validation-off-by-app` cell's run directories are not in it, as if kept on the machine
//! that ran them, for the reports' "not on this machine" branch.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use vkexit_testkit::vkexit::vkexit_program;

/// Set to 1, the snapshot tests write their golden files instead of comparing.
const UPDATE_VAR: &str = "VKEXIT_UPDATE_GOLDEN";
const UPDATE_COMMAND: &str = "VKEXIT_UPDATE_GOLDEN=1 cargo test -p vkexit --test report_snapshots";

/// What the inputs write in place of the test's copy of the fixture runs.
const RUNS: &str = "@RUNS@";
/// What the golden files hold in place of the test's temporary directory.
const TMP: &str = "@TMP@";
/// What the golden files hold in place of vkexit's version.
const VERSION: &str = "@VERSION@";

/// Lines of context before a difference, and lines of each side shown.
const CONTEXT: usize = 3;
const SHOWN: usize = 8;

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[test]
fn the_reports_of_a_fixed_matrix_match_their_golden_files() {
    let (code, files) = merge_reports("cells.json");
    assert_eq!(code, 1, "the gate is red: some cells fail");
    check_or_update(&golden().join("matrix"), &files);
}

#[test]
fn the_reports_of_an_interrupted_run_match_their_golden_files() {
    let (code, files) = merge_reports("interrupted.json");
    assert_eq!(code, 1, "an interrupted run turns the gate red");
    check_or_update(&golden().join("interrupted"), &files);
}

#[test]
fn one_changed_byte_is_reported_with_its_line_and_the_update_command() {
    // The copy plays the golden files; the golden files as they are play the reports.
    let dir = tempfile::tempdir().unwrap();
    let files = read_tree(&golden().join("matrix"));
    write_tree(dir.path(), &files);
    assert_eq!(compare(dir.path(), &files), Ok(()));

    // One byte of the copied summary's fifth line: 'a' for 'e' or the other way round.
    let name = "summary.md";
    let path = dir.path().join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    let report_line = bytes.split(|&b| b == b'\n').nth(4).unwrap().to_vec();
    let start = bytes
        .split(|&b| b == b'\n')
        .take(4)
        .map(|l| l.len() + 1)
        .sum::<usize>();
    let at = start
        + report_line
            .iter()
            .position(|&b| b == b'a' || b == b'e')
            .expect("the fifth line has an a or an e");
    bytes[at] = if bytes[at] == b'a' { b'e' } else { b'a' };
    std::fs::write(&path, &bytes).unwrap();
    let golden_line = bytes.split(|&b| b == b'\n').nth(4).unwrap();

    let report = compare(dir.path(), &files).unwrap_err();
    assert!(report.contains(&format!("{name} differs")), "{report}");
    assert!(report.contains("@@ line 5 @@"), "{report}");
    for (sign, line) in [('-', golden_line), ('+', &report_line[..])] {
        let shown = format!("{sign}    5 {}\n", String::from_utf8_lossy(line));
        assert!(report.contains(&shown), "no {shown:?} in\n{report}");
    }
    assert!(report.contains(UPDATE_COMMAND), "{report}");
    // Only that file is named.
    assert_eq!(report.matches(" differs").count(), 1, "{report}");
}

#[test]
fn a_missing_or_extra_golden_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let files = vec![("a.txt".to_string(), "one\n".to_string())];
    let report = compare(dir.path(), &files).unwrap_err();
    assert!(report.contains("a.txt: no golden file"), "{report}");
    write_tree(dir.path(), &files);
    std::fs::write(dir.path().join("b.txt"), "two\n").unwrap();
    let report = compare(dir.path(), &files).unwrap_err();
    assert!(
        report.contains("b.txt: a golden file no report wrote"),
        "{report}"
    );
}

#[test]
fn the_diff_shows_the_first_differing_lines_with_their_numbers() {
    let golden = "a\nb\nc\nd\ne\nf\n";
    let actual = "a\nb\nc\nd\nE\nf\n";
    assert_eq!(
        diff(golden, actual),
        "@@ line 5 @@\n     2 b\n     3 c\n     4 d\n-    5 e\n+    5 E\n"
    );
    // A missing last line end is a difference too; so is a line added at the end.
    assert_eq!(
        diff("a\n", "a"),
        "@@ line 1 @@\n-    1 a\n+    1 a\n\\ no line end\n"
    );
    assert_eq!(diff("a\n", "a\nb\n"), "@@ line 2 @@\n     1 a\n+    2 b\n");
}

/// Runs `vkexit merge` on one input with every report asked for, in a fresh temporary
/// directory that holds a copy of the fixture runs; returns its exit code and every file it
/// wrote, with stdout and stderr, each made independent of the directory and the version.
fn merge_reports(input: &str) -> (i32, Vec<(String, String)>) {
    let tmp = tempfile::Builder::new()
        .prefix("vkexit-golden-")
        .tempdir()
        .unwrap();
    // Canonical, so that the path the reports print is the one replaced.
    let root = tmp.path().canonicalize().unwrap();
    let runs = root.join("runs");
    write_tree(&runs, &read_tree(&golden().join("runs")));
    let text = std::fs::read_to_string(golden().join(input)).unwrap();
    let results = root.join("input.json");
    std::fs::write(&results, text.replace(RUNS, runs.to_str().unwrap())).unwrap();

    let out = root.join("out");
    std::fs::create_dir(&out).unwrap();
    let output = Command::new(vkexit_program())
        .current_dir(&root)
        // A terminal of 160 columns: the table, its rows cut there.
        .env("COLUMNS", "160")
        .arg("merge")
        .arg(&results)
        .arg("--json")
        .arg(out.join("results.json"))
        .arg("--junit")
        .arg(out.join("junit.xml"))
        .arg("--markdown")
        .arg(out.join("summary.md"))
        .arg("--html")
        .arg(out.join("html"))
        .output()
        .expect("vkexit starts");
    let code = output.status.code().expect("vkexit exits");
    let mut files = read_tree(&out);
    files.push(("stdout.txt".into(), utf8(output.stdout)));
    files.push(("stderr.txt".into(), utf8(output.stderr)));
    files.sort();

    let name = root.file_name().unwrap().to_str().unwrap().to_string();
    for (file, text) in &mut files {
        *text = fixed(text, &root);
        // Any form of the temporary directory left (encoded, escaped) would make the file
        // differ from machine to machine.
        assert!(
            !text.contains(&name),
            "{file} still names the temporary directory {name}:\n{text}"
        );
    }
    (code, files)
}

/// The report's text with what differs between machines and versions replaced: only these,
/// and only where vkexit writes them.
fn fixed(text: &str, root: &Path) -> String {
    let version = env!("CARGO_PKG_VERSION");
    // The temporary directory the inputs' run directories and the reports are in: in the
    // results file's artifacts, the tables' evidence column, JUnit's messages and the HTML's
    // run paths (its links are relative, so they need nothing); percent-encoded in the
    // Markdown's links to the validation logs, which differs only where the path holds
    // more than letters, digits and `-._~/+`.
    let root = root.to_str().unwrap();
    let text = text.replace(root, TMP).replace(&url_path(root), TMP);
    // vkexit's version, which the results file, JUnit's properties and the HTML's totals line
    // carry; the fixture's own version strings (the trace layer's) are its data and stay.
    [
        ("\"vkexit_version\": \"", "\""),
        ("<property name=\"vkexit_version\" value=\"", "\"/>"),
        ("). vkexit ", ".</p>"),
    ]
    .iter()
    .fold(text, |text, (before, after)| {
        text.replace(
            &format!("{before}{version}{after}"),
            &format!("{before}{VERSION}{after}"),
        )
    })
}

/// A path as the Markdown's links write it.
fn url_path(path: &str) -> String {
    path.bytes()
        .map(
            |b| match b.is_ascii_alphanumeric() || b"-._~/+".contains(&b) {
                true => char::from(b).to_string(),
                false => format!("%{b:02X}"),
            },
        )
        .collect()
}

fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("reports are UTF-8")
}

/// Compares the reports with the golden files in `dir`, or writes them there when
/// `VKEXIT_UPDATE_GOLDEN=1`.
fn check_or_update(dir: &Path, files: &[(String, String)]) {
    if std::env::var_os(UPDATE_VAR).is_some_and(|v| v == "1") {
        update(dir, files);
        eprintln!("wrote {} golden files in {}", files.len(), dir.display());
        return;
    }
    if let Err(report) = compare(dir, files) {
        panic!("{report}");
    }
}

/// Every file that differs from its golden copy, missing or left over, with its first
/// differing lines; then how to accept the change.
fn compare(dir: &Path, files: &[(String, String)]) -> Result<(), String> {
    let mut report = String::new();
    for (name, text) in files {
        match std::fs::read(dir.join(name)) {
            Err(e) => {
                let _ = writeln!(report, "{name}: no golden file ({e})\n");
            }
            Ok(golden) if golden == text.as_bytes() => {}
            Ok(golden) => {
                let golden = String::from_utf8_lossy(&golden);
                let _ = writeln!(
                    report,
                    "{name} differs from {} (-: golden, +: now):\n{}",
                    dir.join(name).display(),
                    diff(&golden, text)
                );
            }
        }
    }
    for (name, _) in read_tree(dir) {
        if !files.iter().any(|(n, _)| *n == name) {
            let _ = writeln!(report, "{name}: a golden file no report wrote\n");
        }
    }
    if report.is_empty() {
        return Ok(());
    }
    let _ = write!(
        report,
        "the reports differ from {}; if the change is meant, write them again with\n    {UPDATE_COMMAND}\nand review the golden files' diff",
        dir.display()
    );
    Err(report)
}

/// A short unified-style diff: the first lines where `actual` parts from `golden`, after a
/// few lines of context, each with its number; a last line without a line end says so.
fn diff(golden: &str, actual: &str) -> String {
    let g: Vec<&str> = golden.split_inclusive('\n').collect();
    let a: Vec<&str> = actual.split_inclusive('\n').collect();
    let first = g.iter().zip(&a).take_while(|(x, y)| x == y).count();
    // The lines both end with are not part of the difference.
    let same_end = g[first..]
        .iter()
        .rev()
        .zip(a[first..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut out = format!("@@ line {} @@\n", first + 1);
    for (n, l) in g
        .iter()
        .enumerate()
        .take(first)
        .skip(first.saturating_sub(CONTEXT))
    {
        out.push_str(&numbered(' ', n, l));
    }
    for (sign, side) in [('-', &g), ('+', &a)] {
        let changed = &side[first..side.len() - same_end];
        for (i, l) in changed.iter().enumerate().take(SHOWN) {
            out.push_str(&numbered(sign, first + i, l));
        }
        if changed.len() > SHOWN {
            let _ = writeln!(out, "{sign}      … {} more lines", changed.len() - SHOWN);
        }
    }
    out
}

/// One line of a diff: its sign, its number from 1, its text.
fn numbered(sign: char, index: usize, line: &str) -> String {
    match line.strip_suffix('\n') {
        Some(body) => format!("{sign}{:>5} {body}\n", index + 1),
        None => format!("{sign}{:>5} {line}\n\\ no line end\n", index + 1),
    }
}

/// Every file under `dir`, by its path relative to it, sorted; empty when `dir` is not there.
fn read_tree(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let name = path
                .strip_prefix(dir)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let text = std::fs::read(&path).unwrap();
            files.push((name, utf8(text)));
        }
    }
    files.sort();
    files
}

fn write_tree(dir: &Path, files: &[(String, String)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
}

/// Writes the golden files, each through a temporary file and a rename so that a test
/// reading them meanwhile never sees half of one, and removes those no report writes now.
fn update(dir: &Path, files: &[(String, String)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let partial = path.with_extension("partial");
        std::fs::write(&partial, text).unwrap();
        std::fs::rename(&partial, &path).unwrap();
    }
    for (name, _) in read_tree(dir) {
        if !files.iter().any(|(n, _)| *n == name) {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
    }
}
