//! libtest (Rust's `cargo test` binaries): `PROGRAM --list --format terse ARGS` prints
//! `name: test` (and `name: benchmark`) lines; one test runs as `PROGRAM --exact NAME`.
//! A `#[ignore]` test run that way is reported ignored and exits 0, so the ignored ones,
//! listed again with `--ignored`, are skipped unless the arguments hold `--include-ignored`
//! or `--ignored`, which the runs then get too.

use super::{command_line, run_listing, ListingError, Suite, Test};
use crate::plan::NotRun;
use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

pub(super) fn list(
    suite: &Suite,
    tool: &mut Duration,
) -> Result<(String, Vec<Test>), (String, ListingError)> {
    let mut listing = |extra: &[&str]| {
        let mut args: Vec<String> = ["--list", "--format", "terse"].map(String::from).to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(
            suite
                .args
                .iter()
                .filter(|a| !matches!(a.as_str(), "--ignored" | "--include-ignored"))
                .cloned(),
        );
        let command = command_line(&suite.target, &args);
        let mut libtest = Command::new(&suite.target);
        libtest.args(&args);
        let text =
            run_listing(&mut libtest, &suite.env, tool).map_err(|why| (command.clone(), why))?;
        let names = parse(&text).map_err(|why| (command.clone(), ListingError::Libtest(why)))?;
        Ok::<_, (String, ListingError)>((command, names))
    };
    let (command, names) = listing(&[])?;
    let (_, ignored) = listing(&["--ignored"])?;
    let run_ignored: Vec<&String> = suite
        .args
        .iter()
        .filter(|a| matches!(a.as_str(), "--ignored" | "--include-ignored"))
        .collect();
    let tests = names
        .into_iter()
        .filter(|(_, kind)| kind == "test")
        .map(|(name, _)| {
            let mut argv: Vec<OsString> = vec![suite.target.clone().into_os_string()];
            argv.extend(run_ignored.iter().map(OsString::from));
            argv.extend([OsString::from("--exact"), OsString::from(&name)]);
            let is_ignored = ignored.iter().any(|(n, _)| n == &name);
            let not_run = (is_ignored && run_ignored.is_empty()).then(|| {
                NotRun::Skipped(
                    "#[ignore] in the test binary (runs with --include-ignored in the arguments)"
                        .into(),
                )
            });
            Test::listed(name, argv, not_run)
        })
        .collect();
    Ok((command, tests))
}

/// A line of a listing that `--list --format terse` does not print: its number, from 1, and
/// what it says.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: `{text}` is not `NAME: test` as `--list --format terse` prints")]
pub(super) struct BadLine {
    line: usize,
    text: String,
}

/// `(name, kind)` of every `name: kind` line; the summary line (`N tests, M benchmarks`)
/// of older toolchains is not a test.
pub(super) fn parse(text: &str) -> Result<Vec<(String, String)>, BadLine> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match line.rsplit_once(": ") {
            Some((name, kind @ ("test" | "benchmark"))) => {
                out.push((name.to_string(), kind.to_string()))
            }
            _ if line.ends_with(" tests, 0 benchmarks") || line.contains(" benchmarks") => {}
            _ => {
                return Err(BadLine {
                    line: n + 1,
                    text: line.to_string(),
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_colons_and_benchmarks_are_told_apart() {
        let text = "gpu::teardown::keeps_buffer: test\nclean: test\nbench_alloc: benchmark\n";
        let got = parse(text).unwrap();
        assert_eq!(
            got[0],
            ("gpu::teardown::keeps_buffer".into(), "test".into())
        );
        assert_eq!(got[2].1, "benchmark");
        let e = parse("running 2 tests\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: `running 2 tests` is not `NAME: test` as `--list --format terse` prints"
        );
    }
}
