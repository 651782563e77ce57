//! How a test's own runner tells that a run of it was skipped, read from what the run printed
//! and how it exited: pytest's outcome, GoogleTest's `[  SKIPPED ]`, CTest's
//! `SKIP_RETURN_CODE` and `SKIP_REGULAR_EXPRESSION`. A skipped test exits 0 (pytest,
//! GoogleTest) or with the code it names, and has run nothing it came for: it is no pass.

/// A test's runner's rule for a skipped run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SkipRule {
    /// pytest: the summary line's outcome (`1 skipped in 0.01s`, `1 xfailed …`), the reason
    /// from its `-rsx` line (`SKIPPED [1] test_x.py:4: no GPU`).
    Pytest,
    /// GoogleTest: `[  SKIPPED ] Suite.Name`, the reason from what `GTEST_SKIP()` printed
    /// between it and `[ RUN      ] Suite.Name`.
    Gtest(String),
    /// CTest: the exit status `SKIP_RETURN_CODE` names, or output that matches one of the
    /// `SKIP_REGULAR_EXPRESSION`s.
    Ctest {
        return_code: Option<i32>,
        patterns: Vec<String>,
    },
}

impl SkipRule {
    /// The runner's reason, when a run that exited with `code` (`None`: killed by a signal)
    /// and printed `stdout` and `stderr` was skipped.
    pub(crate) fn skipped(&self, code: Option<i32>, stdout: &str, stderr: &str) -> Option<String> {
        match self {
            SkipRule::Pytest => pytest(stdout).filter(|_| code == Some(0)),
            SkipRule::Gtest(name) => gtest(stdout, name).filter(|_| code == Some(0)),
            SkipRule::Ctest {
                return_code,
                patterns,
            } => {
                if code.is_some() && code == *return_code {
                    return Some(format!(
                        "CTest: exit status {} is its SKIP_RETURN_CODE",
                        code.unwrap_or_default()
                    ));
                }
                let pattern = patterns.iter().find(|p| {
                    regex_lite::Regex::new(p)
                        .is_ok_and(|re| re.is_match(stdout) || re.is_match(stderr))
                })?;
                Some(format!(
                    "CTest: its output matched SKIP_REGULAR_EXPRESSION `{pattern}`"
                ))
            }
        }
    }
}

/// Whether `pattern` is a regular expression vkexit can match CTest's output with.
pub(crate) fn readable_pattern(pattern: &str) -> bool {
    regex_lite::Regex::new(pattern).is_ok()
}

/// pytest's reason when the summary says each test it ran was skipped (or failed as expected:
/// `xfailed`, which pytest's own JUnit report counts as skipped).
fn pytest(stdout: &str) -> Option<String> {
    let summary = stdout.lines().rev().find(|l| !l.trim().is_empty())?;
    let summary = summary.trim().trim_matches('=').trim();
    let (outcomes, _) = summary.rsplit_once(" in ")?;
    let mut skipped = false;
    for outcome in outcomes.split(", ") {
        let (count, word) = outcome.trim().split_once(' ')?;
        count.parse::<u64>().ok()?;
        match word {
            "skipped" | "xfailed" => skipped = true,
            "deselected" | "warning" | "warnings" => {}
            _ => return None,
        }
    }
    if !skipped {
        return None;
    }
    let reason = stdout.lines().find_map(|l| {
        l.strip_prefix("SKIPPED ")
            .map(|r| r.split_once("] ").map_or(r, |(_, why)| why))
            .or_else(|| l.strip_prefix("XFAIL "))
    });
    Some(match reason {
        Some(why) => format!("pytest: skipped: {}", why.trim()),
        None => "pytest: skipped".to_string(),
    })
}

/// GoogleTest's reason when `name` ended `[  SKIPPED ]` and did not fail.
fn gtest(stdout: &str, name: &str) -> Option<String> {
    let is = |line: &str, tag: &str| {
        line.strip_prefix(tag)
            .and_then(|rest| rest.strip_prefix(name))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    };
    let lines: Vec<&str> = stdout.lines().collect();
    let end = lines.iter().position(|l| is(l, "[  SKIPPED ] "))?;
    if lines.iter().any(|l| is(l, "[  FAILED  ] ")) {
        return None;
    }
    let start = lines[..end]
        .iter()
        .rposition(|l| is(l, "[ RUN      ] "))
        .map_or(end, |i| i + 1);
    let mut place = None;
    let mut message = Vec::new();
    for line in &lines[start..end] {
        match line.strip_suffix(": Skipped") {
            Some(at) if place.is_none() => place = Some(at.rsplit('/').next().unwrap_or(at)),
            _ if !line.trim().is_empty() => message.push(line.trim()),
            _ => {}
        }
    }
    let mut reason = String::from("GoogleTest: GTEST_SKIP()");
    if !message.is_empty() {
        reason.push_str(&format!(": {}", message.join(" ")));
    }
    if let Some(at) = place {
        reason.push_str(&format!(" ({at})"));
    }
    Some(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_summaries_tell_a_skip_from_a_pass() {
        let skipped = "s\n=== short test summary info ===\nSKIPPED [1] tests/test_gpu.py:7: needs a discrete GPU\n1 skipped in 0.01s\n";
        assert_eq!(
            SkipRule::Pytest.skipped(Some(0), skipped, ""),
            Some("pytest: skipped: tests/test_gpu.py:7: needs a discrete GPU".into())
        );
        let boxed =
            "======================== 1 skipped, 2 warnings in 0.02s ========================\n";
        assert!(SkipRule::Pytest.skipped(Some(0), boxed, "").is_some());
        let xfail = "x\nXFAIL tests/t.py::test_x - known\n1 xfailed in 0.01s\n";
        assert_eq!(
            SkipRule::Pytest.skipped(Some(0), xfail, ""),
            Some("pytest: skipped: tests/t.py::test_x - known".into())
        );
        for not_a_skip in [
            "1 passed in 0.01s\n",
            "1 failed in 0.01s\n",
            "1 passed, 1 skipped in 0.01s\n",
            "1 xpassed in 0.01s\n",
            "no tests ran in 0.01s\n",
            "",
        ] {
            assert_eq!(
                SkipRule::Pytest.skipped(Some(0), not_a_skip, ""),
                None,
                "{not_a_skip:?}"
            );
        }
        assert_eq!(SkipRule::Pytest.skipped(Some(1), skipped, ""), None);
    }

    #[test]
    fn googletest_skips_are_read_with_their_message() {
        let out = "[==========] Running 1 test from 1 test suite.\n\
            [ RUN      ] Gpu.Compute\n\
            /src/tests/gpu.cpp:12: Skipped\n\
            no device here\n\
            \n\
            [  SKIPPED ] Gpu.Compute (0 ms)\n\
            [==========] 1 test from 1 test suite ran. (0 ms total)\n\
            [  PASSED  ] 0 tests.\n\
            [  SKIPPED ] 1 test, listed below:\n\
            [  SKIPPED ] Gpu.Compute\n";
        let rule = SkipRule::Gtest("Gpu.Compute".into());
        assert_eq!(
            rule.skipped(Some(0), out, ""),
            Some("GoogleTest: GTEST_SKIP(): no device here (gpu.cpp:12)".into())
        );
        assert_eq!(
            SkipRule::Gtest("Gpu.Comp".into()).skipped(Some(0), out, ""),
            None
        );
        let bare = "[ RUN      ] A.B\n[  SKIPPED ] A.B (0 ms)\n";
        assert_eq!(
            SkipRule::Gtest("A.B".into()).skipped(Some(0), bare, ""),
            Some("GoogleTest: GTEST_SKIP()".into())
        );
        let passed = "[ RUN      ] A.B\n[       OK ] A.B (0 ms)\n";
        assert_eq!(
            SkipRule::Gtest("A.B".into()).skipped(Some(0), passed, ""),
            None
        );
    }

    #[test]
    fn ctest_skips_by_exit_status_or_by_output() {
        let rule = SkipRule::Ctest {
            return_code: Some(77),
            patterns: vec!["^SKIP: ".into(), "no (GPU|device)".into()],
        };
        assert_eq!(
            rule.skipped(Some(77), "", ""),
            Some("CTest: exit status 77 is its SKIP_RETURN_CODE".into())
        );
        assert_eq!(
            rule.skipped(Some(0), "", "there is no device\n"),
            Some("CTest: its output matched SKIP_REGULAR_EXPRESSION `no (GPU|device)`".into())
        );
        assert_eq!(rule.skipped(Some(1), "ran\n", ""), None);
        assert_eq!(rule.skipped(None, "", ""), None);
        assert!(!readable_pattern("(unclosed"));
    }
}
