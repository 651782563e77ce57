//! A test that cannot run here (a runtime that only a download brings, a kernel feature the
//! machine lacks) skips visibly: it prints `SKIPPED: <test>: <reason>` straight to the
//! process's stderr, past the test runner's output capture, and returns. cargo test and
//! nextest have no way to mark a test skipped at run time, so they count it as passed; CI,
//! where everything must run, sets `VKEXIT_TEST_SKIP=fail` to make a skip fail instead.

use std::io::Write;

/// What `VKEXIT_TEST_SKIP` must say for a skip to fail the test.
pub const FAIL_ON_SKIP: &str = "fail";

/// Reports the skip of the test whose item path is `here` (see [`skip!`](crate::skip!)).
#[track_caller]
pub fn report(here: &str, reason: &str) {
    let fail = std::env::var("VKEXIT_TEST_SKIP").is_ok_and(|v| v == FAIL_ON_SKIP);
    // Not eprintln!: the test runner captures that, and shows it only when a test fails.
    write_report(&mut std::io::stderr(), fail, here, reason);
}

/// Writes the skip's line to `out`, or fails the test when skips must `fail`.
#[track_caller]
fn write_report(out: &mut dyn Write, fail: bool, here: &str, reason: &str) {
    let test = test_name(here);
    if fail {
        panic!("{test} cannot run here, and VKEXIT_TEST_SKIP=fail forbids skipping: {reason}");
    }
    let _ = writeln!(out, "SKIPPED: {test}: {reason}");
}

/// `crate::module::test::here` (with `{{closure}}` parts inside closures) → `module::test`.
fn test_name(here: &str) -> String {
    let parts: Vec<&str> = here.split("::").filter(|p| *p != "{{closure}}").collect();
    let inner = match parts.as_slice() {
        [_crate, path @ .., _here] if !path.is_empty() => path,
        _ => &parts[..],
    };
    inner.join("::")
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
    use super::test_name;

    #[test]
    fn the_test_is_named_without_its_crate_and_the_marker() {
        assert_eq!(
            test_name("ncnn_wgpu::ncnn_clean_exit_passes::here"),
            "ncnn_clean_exit_passes"
        );
        assert_eq!(
            test_name("faults::limits::a_fork_bomb_is_bounded::{{closure}}::here"),
            "limits::a_fork_bomb_is_bounded"
        );
    }

    #[test]
    fn a_skip_is_one_line_naming_the_test_and_why() {
        let mut out = Vec::new();
        super::write_report(
            &mut out,
            false,
            "ncnn_wgpu::ncnn_clean_exit_passes::here",
            "no wheel",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED: ncnn_clean_exit_passes: no wheel\n"
        );
    }

    #[test]
    #[should_panic(expected = "ncnn_clean_exit_passes cannot run here, and VKEXIT_TEST_SKIP=fail")]
    fn where_skips_must_fail_a_skip_fails() {
        super::write_report(
            &mut Vec::new(),
            true,
            "ncnn_wgpu::ncnn_clean_exit_passes::here",
            "no wheel",
        );
    }

    #[test]
    fn or_skip_passes_an_ok_value_through() {
        let result: Result<u32, String> = Ok(7);
        let got = crate::or_skip!(result);
        assert_eq!(got, 7);
    }
}
