//! GoogleTest: `PROGRAM ARGS --gtest_list_tests` lists suites (`Suite.`, `Typed/0.  #
//! TypeParam = int`) and their tests indented below (`Name/1  # GetParam() = 2`); one test
//! runs as `PROGRAM ARGS --gtest_filter=Suite.Name`, the filter last so that it wins.
//! `DISABLED_` tests are listed but run nothing (GoogleTest exits 0), so they are skipped
//! unless the arguments hold `--gtest_also_run_disabled_tests`. A run that prints
//! `[  SKIPPED ] Suite.Name` (`GTEST_SKIP()`) is `skipped`.

use super::{command_line, run_listing, ListingError, SkipRule, Suite, Test};
use crate::plan::NotRun;
use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

const ALSO_DISABLED: &str = "--gtest_also_run_disabled_tests";

pub(super) fn list(
    suite: &Suite,
    tool: &mut Duration,
) -> Result<(String, Vec<Test>), (String, ListingError)> {
    let mut args = suite.args.clone();
    args.push("--gtest_list_tests".into());
    let command = command_line(&suite.target, &args);
    let mut gtest = Command::new(&suite.target);
    gtest.args(&args);
    let text = run_listing(&mut gtest, &suite.env, tool).map_err(|why| (command.clone(), why))?;
    let names = parse(&text).map_err(|why| (command.clone(), ListingError::Gtest(why)))?;
    let disabled_run = suite.args.iter().any(|a| a == ALSO_DISABLED);
    let tests = names
        .into_iter()
        .map(|name| {
            let mut argv: Vec<OsString> = vec![suite.target.clone().into_os_string()];
            argv.extend(suite.args.iter().map(OsString::from));
            argv.push(format!("--gtest_filter={name}").into());
            let disabled = name.split('.').any(|part| part.starts_with("DISABLED_"));
            let not_run = (disabled && !disabled_run).then(|| {
                NotRun::Skipped(format!(
                    "DISABLED_ in GoogleTest (runs with {ALSO_DISABLED} in the arguments)"
                ))
            });
            let mut test = Test::listed(name.clone(), argv, not_run);
            test.props.skip = Some(SkipRule::Gtest(name));
            test
        })
        .collect();
    Ok((command, tests))
}

/// A line of a listing that GoogleTest does not print: its number, from 1, and what it says.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadLine {
    /// An indented test before any suite.
    #[error("line {line}: a test `{test}` before any suite")]
    TestBeforeSuite { line: usize, test: String },
    /// After the first suite, a line that is neither.
    #[error("line {line}: `{text}` is neither a suite (`Name.`) nor a test (indented)")]
    Neither { line: usize, text: String },
}

/// The full names of a `--gtest_list_tests` listing, in its order. Lines before the first
/// suite (what a `main` prints first) are not part of it.
pub(super) fn parse(text: &str) -> Result<Vec<String>, BadLine> {
    let mut names = Vec::new();
    let mut suite: Option<&str> = None;
    for (n, line) in text.lines().enumerate() {
        let bare = strip_comment(line);
        if bare.trim().is_empty() {
            continue;
        }
        if let Some(name) = bare.strip_prefix("  ") {
            let Some(suite) = suite else {
                return Err(BadLine::TestBeforeSuite {
                    line: n + 1,
                    test: name.trim().to_string(),
                });
            };
            names.push(format!("{suite}.{}", name.trim()));
        } else if let Some(name) = bare.trim_end().strip_suffix('.') {
            if !name.contains(char::is_whitespace) {
                suite = Some(name);
            }
        } else if suite.is_some() {
            return Err(BadLine::Neither {
                line: n + 1,
                text: line.to_string(),
            });
        }
    }
    Ok(names)
}

/// A line without its `  # TypeParam = …` or `  # GetParam() = …` comment.
fn strip_comment(line: &str) -> &str {
    match line.find("  #") {
        Some(at) => &line[..at],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_and_parameterised_names_are_whole() {
        let text = "Running main() from gtest_main.cc\nTeardown.\n  Destroys\n  DISABLED_Later\n\
                    TypedBuffers/0.  # TypeParam = float\n  Destroyed\n\
                    Sizes/BufferSizes.\n  Destroyed/0  # GetParam() = 256\n  Destroyed/1  # GetParam() = (1, \"a.b\")\n";
        assert_eq!(
            parse(text).unwrap(),
            [
                "Teardown.Destroys",
                "Teardown.DISABLED_Later",
                "TypedBuffers/0.Destroyed",
                "Sizes/BufferSizes.Destroyed/0",
                "Sizes/BufferSizes.Destroyed/1"
            ]
        );
    }

    #[test]
    fn a_listing_that_is_not_googletests_is_refused_with_the_line() {
        let e = parse("  Orphan\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: a test `Orphan` before any suite");
        let e = parse("Suite.\n  A\nsomething else\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: `something else` is neither a suite (`Name.`) nor a test (indented)"
        );
        assert!(parse("usage: prog [options]\n").unwrap().is_empty());
    }

    #[test]
    fn five_thousand_tests_parse() {
        let mut text = String::new();
        for s in 0..50 {
            text.push_str(&format!("Suite{s}.\n"));
            for t in 0..100 {
                text.push_str(&format!("  Test{t}/{t}  # GetParam() = {t}\n"));
            }
        }
        let names = parse(&text).unwrap();
        assert_eq!(names.len(), 5000);
        assert_eq!(names[4999], "Suite49.Test99/99");
    }
}
