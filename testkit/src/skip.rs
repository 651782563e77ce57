//! A test that cannot run here (a runtime that only a download brings, a kernel feature the
//! machine lacks) skips visibly: it prints `SKIPPED: <test>: <reason>` straight to the
//! process's stderr, past the test runner's output capture, and returns. cargo test and
//! nextest have no way to mark a test skipped at run time, so they count it as passed; CI,
//! where everything must run, sets `VKEXIT_TEST_SKIP=fail` to make a skip fail instead.
//!
//! Where skips must fail, the tests listed in `testkit/skip-allowed.txt` still skip: each
//! line there names a requirement CI cannot meet, the test (or the prefix of the tests) that
//! needs it, and why (see [`allow_list`]).

use std::io::Write;

/// What `VKEXIT_TEST_SKIP` must say for a skip to fail the test.
pub const FAIL_ON_SKIP: &str = "fail";

/// Where the allow-list is, from the workspace's root, for messages.
pub const ALLOW_LIST_FILE: &str = "testkit/skip-allowed.txt";

/// The allow-list's text, built into the test kit (cargo rebuilds it when the file changes).
const ALLOW_LIST: &str = include_str!("../skip-allowed.txt");

/// One line of the allow-list: the tests it lets skip and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// A test's name, or a prefix of names when it ends in `*`.
    pub test: String,
    /// Why CI cannot meet what the test needs.
    pub reason: String,
}

impl Allowed {
    /// Whether this line lets the test skip: its name, with or without the test binary's
    /// name in front (`module::test`, `binary::module::test`), is the line's name, or begins
    /// with its prefix.
    pub fn matches(&self, test: &str, qualified: &str) -> bool {
        let fits = |name: &str| match self.test.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == self.test,
        };
        fits(test) || fits(qualified)
    }
}

/// What separates a line's test from its reason (an em dash, spaces around it).
const SEPARATOR: char = '\u{2014}';

/// Reads an allow-list: `<test> — <reason>` per line; empty lines and lines that start with
/// `#` are ignored. `Err` names the first line that is not of that shape.
pub fn parse_allow_list(text: &str) -> Result<Vec<Allowed>, String> {
    let mut list = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let shape = |what: &str| {
            format!(
                "line {}: {what}: expected `<test or prefix*> {SEPARATOR} <reason>`, got `{line}`",
                n + 1
            )
        };
        let Some((test, reason)) = line.split_once(SEPARATOR) else {
            return Err(shape("no `\u{2014}` between the test and the reason"));
        };
        let (test, reason) = (test.trim(), reason.trim());
        if test.is_empty() || test == "*" || test.contains(char::is_whitespace) {
            return Err(shape("the test must be one name, or a prefix before `*`"));
        }
        if test.strip_suffix('*').unwrap_or(test).contains('*') {
            return Err(shape("`*` may only end the name"));
        }
        if reason.is_empty() {
            return Err(shape("the reason is empty"));
        }
        list.push(Allowed {
            test: test.into(),
            reason: reason.into(),
        });
    }
    Ok(list)
}

/// The allow-list of `testkit/skip-allowed.txt`. Panics when the file is not of its shape
/// (the test kit's own tests read it too, so that does not wait for a skip).
pub fn allow_list() -> Vec<Allowed> {
    parse_allow_list(ALLOW_LIST).unwrap_or_else(|e| panic!("{ALLOW_LIST_FILE}: {e}"))
}

/// The line of `list` that lets the test whose item path is `here` skip, if any.
fn allowance<'a>(list: &'a [Allowed], here: &str) -> Option<&'a Allowed> {
    let (test, qualified) = (test_name(here), qualified_name(here));
    list.iter().find(|a| a.matches(&test, &qualified))
}

/// Reports the skip of the test whose item path is `here` (see [`skip!`](crate::skip!)).
#[track_caller]
pub fn report(here: &str, reason: &str) {
    let fail = std::env::var("VKEXIT_TEST_SKIP").is_ok_and(|v| v == FAIL_ON_SKIP);
    let list = if fail { allow_list() } else { Vec::new() };
    let allowed = allowance(&list, here);
    // Not eprintln!: the test runner captures that, and shows it only when a test fails.
    write_report(
        &mut std::io::stderr(),
        fail,
        here,
        reason,
        allowed.map(|a| a.reason.as_str()),
    );
}

/// Writes the skip's line to `out`, or fails the test when skips must `fail` and the
/// allow-list does not let it skip (`allowed`: the allow-list's reason, where it does).
#[track_caller]
fn write_report(out: &mut dyn Write, fail: bool, here: &str, reason: &str, allowed: Option<&str>) {
    let test = test_name(here);
    match (fail, allowed) {
        (true, None) => panic!(
            "{test} cannot run here, and VKEXIT_TEST_SKIP=fail forbids skipping a test that \
             {ALLOW_LIST_FILE} does not list: {reason}"
        ),
        (true, Some(why)) => {
            let _ = writeln!(
                out,
                "SKIPPED: {test}: {reason} (allowed by {ALLOW_LIST_FILE}: {why})"
            );
        }
        (false, _) => {
            let _ = writeln!(out, "SKIPPED: {test}: {reason}");
        }
    }
}

/// The parts of `here` that name the test: no `{{closure}}` parts, no `here` at the end.
fn parts(here: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = here.split("::").filter(|p| *p != "{{closure}}").collect();
    if parts.len() > 1 {
        parts.pop();
    }
    parts
}

/// `crate::module::test::here` (with `{{closure}}` parts inside closures) → `module::test`.
fn test_name(here: &str) -> String {
    match parts(here).as_slice() {
        [_crate, path @ ..] if !path.is_empty() => path.join("::"),
        all => all.join("::"),
    }
}

/// `crate::module::test::here` → `crate::module::test`: the test binary's name in front.
fn qualified_name(here: &str) -> String {
    parts(here).join("::")
}

/// Skips the running test: prints `SKIPPED: <test>: <reason>` and returns from the test
/// function. The arguments are those of `format!`.
#[macro_export]
macro_rules! skip {
    ($($reason:tt)+) => {{
        fn here() {}
        $crate::skip::report(
            ::std::any::type_name_of_val(&here),
            &::std::format!($($reason)+),
        );
        return;
    }};
}

/// The value of an `Ok`; on `Err(why)` the running test skips with `why` as its reason.
#[macro_export]
macro_rules! or_skip {
    ($result:expr) => {
        match $result {
            ::std::result::Result::Ok(value) => value,
            ::std::result::Result::Err(why) => $crate::skip!("{}", why),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::{allow_list, allowance, parse_allow_list, qualified_name, test_name, Allowed};
    use std::path::{Path, PathBuf};

    const HERE: &str = "ncnn_wgpu::ncnn_clean_exit_passes::here";

    fn allowed(test: &str) -> Allowed {
        Allowed {
            test: test.into(),
            reason: "why".into(),
        }
    }

    #[test]
    fn the_test_is_named_without_its_crate_and_the_marker() {
        assert_eq!(test_name(HERE), "ncnn_clean_exit_passes");
        assert_eq!(
            test_name("faults::limits::a_fork_bomb_is_bounded::{{closure}}::here"),
            "limits::a_fork_bomb_is_bounded"
        );
        assert_eq!(qualified_name(HERE), "ncnn_wgpu::ncnn_clean_exit_passes");
        assert_eq!(
            qualified_name("faults::limits::a_fork_bomb_is_bounded::{{closure}}::here"),
            "faults::limits::a_fork_bomb_is_bounded"
        );
    }

    #[test]
    fn a_skip_is_one_line_naming_the_test_and_why() {
        let mut out = Vec::new();
        super::write_report(&mut out, false, HERE, "no wheel", None);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED: ncnn_clean_exit_passes: no wheel\n"
        );
    }

    #[test]
    #[should_panic(
        expected = "ncnn_clean_exit_passes cannot run here, and VKEXIT_TEST_SKIP=fail forbids \
                    skipping a test that testkit/skip-allowed.txt does not list: no wheel"
    )]
    fn where_skips_must_fail_a_skip_fails() {
        super::write_report(&mut Vec::new(), true, HERE, "no wheel", None);
    }

    #[test]
    fn where_skips_must_fail_an_allowed_skip_still_skips_saying_why_it_may() {
        let mut out = Vec::new();
        super::write_report(&mut out, true, HERE, "no wheel", Some("CI has no network"));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED: ncnn_clean_exit_passes: no wheel \
             (allowed by testkit/skip-allowed.txt: CI has no network)\n"
        );
    }

    #[test]
    fn the_allow_list_is_read_line_by_line_past_comments_and_empty_lines() {
        let text = "# a comment\n\n\
                    ncnn_wgpu::ncnn_clean_exit_passes \u{2014} no wheel in CI\n  \
                    limits::* \u{2014}   cgroups: a container \u{2014} read-only  \n";
        assert_eq!(
            parse_allow_list(text).unwrap(),
            [
                Allowed {
                    test: "ncnn_wgpu::ncnn_clean_exit_passes".into(),
                    reason: "no wheel in CI".into(),
                },
                Allowed {
                    test: "limits::*".into(),
                    reason: "cgroups: a container \u{2014} read-only".into(),
                },
            ]
        );
        assert_eq!(parse_allow_list("").unwrap(), []);
    }

    #[test]
    fn a_line_of_the_wrong_shape_is_refused_naming_it() {
        for (text, says) in [
            ("a_test - a hyphen\n", "line 1: no `\u{2014}`"),
            ("# c\na_test\n", "line 2: no `\u{2014}`"),
            ("a_test \u{2014} \n", "line 1: the reason is empty"),
            ("a_test \u{2014}   \n", "line 1: the reason is empty"),
            (
                "two names \u{2014} why\n",
                "line 1: the test must be one name",
            ),
            ("* \u{2014} why\n", "line 1: the test must be one name"),
            (" \u{2014} why\n", "line 1: the test must be one name"),
            ("a_test\u{2014}\n", "line 1: the reason is empty"),
            ("a*b \u{2014} why\n", "line 1: `*` may only end the name"),
        ] {
            let e = parse_allow_list(text).unwrap_err();
            assert!(e.starts_with(says), "{text:?}: {e}");
            assert!(e.contains("expected `<test or prefix*>"), "{e}");
        }
    }

    #[test]
    fn a_name_matches_itself_with_or_without_the_test_binary_and_a_prefix_what_begins_with_it() {
        let (test, qualified) = ("limits::a_fork_bomb", "faults::limits::a_fork_bomb");
        for name in [
            "limits::a_fork_bomb",
            "faults::limits::a_fork_bomb",
            "limits::*",
            "faults::*",
            "faults::limits::a_fork*",
        ] {
            assert!(allowed(name).matches(test, qualified), "{name}");
        }
        for name in [
            "limits::a_fork",
            "a_fork_bomb",
            "faults",
            "limits::a_fork_bomb_is_bounded",
            "other::*",
            "faults::limits::a_fork_bomb::*",
        ] {
            assert!(!allowed(name).matches(test, qualified), "{name}");
        }
    }

    #[test]
    fn a_skip_is_allowed_by_the_first_line_that_names_its_test() {
        let list = [
            allowed("ncnn_wgpu::other"),
            Allowed {
                test: "ncnn_clean*".into(),
                reason: "first".into(),
            },
            allowed("ncnn_clean_exit_passes"),
        ];
        assert_eq!(allowance(&list, HERE).unwrap().reason, "first");
        assert_eq!(allowance(&list, "ncnn_wgpu::gone::here"), None);
        assert_eq!(allowance(&[], HERE), None);
    }

    /// The allow-list of the workspace reads, and each of its lines names a test that exists:
    /// a test binary (a file `tests/<binary>.rs` of a crate) or a module holding a function
    /// that is, or begins with, the last part of the name.
    #[test]
    fn each_line_of_the_allow_list_names_a_test_of_the_workspace() {
        let list = allow_list();
        let root = crate::workspace();
        let files = test_files(&root);
        assert!(!files.is_empty(), "no test files under {}", root.display());
        for a in &list {
            let (name, prefix) = match a.test.strip_suffix('*') {
                Some(p) => (p, true),
                None => (a.test.as_str(), false),
            };
            let parts: Vec<&str> = name.split("::").collect();
            let (first, last) = (parts[0], parts[parts.len() - 1]);
            let function = format!("fn {last}{}", if prefix { "" } else { "(" });
            let found = files.iter().any(|f| {
                let text = std::fs::read_to_string(f).unwrap_or_default();
                let stem = f.file_stem().unwrap().to_string_lossy();
                let module =
                    parts.len() == 1 || stem == first || text.contains(&format!("mod {first} "));
                module && (text.contains(&function) || prefix && last.is_empty())
            });
            assert!(
                found,
                "{}: no test `{}` in the workspace",
                super::ALLOW_LIST_FILE,
                a.test
            );
        }
    }

    /// The `tests/*.rs` files of the workspace's crates, at the top (`harness/`) or one level
    /// down (`layers/trace/`).
    fn test_files(root: &Path) -> Vec<PathBuf> {
        let dirs = |dir: &Path| -> Vec<PathBuf> {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        };
        let crates = dirs(root)
            .into_iter()
            .filter(|d| !d.ends_with("target"))
            .flat_map(|d| std::iter::once(d.clone()).chain(dirs(&d)));
        crates
            .flat_map(|c| dirs_files(&c.join("tests")))
            .filter(|f| f.extension().is_some_and(|e| e == "rs"))
            .collect()
    }

    fn dirs_files(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    }

    #[test]
    fn or_skip_passes_an_ok_value_through() {
        let result: Result<u32, String> = Ok(7);
        let got = crate::or_skip!(result);
        assert_eq!(got, 7);
    }
}
