//! pytest: `PYTHON -m pytest --collect-only -q ARGS` prints one node id a line
//! (`tests/test_x.py::test_a[1-2]`), then a blank line and a count; one test runs as
//! `PYTHON -m pytest -q NODEID`, in the directory vkexit runs in, where the ids were
//! collected. The cache plugin is off for both, so that no run leaves a cache behind that
//! changes the next one. A run that pytest's summary says was skipped is `skipped`, with the
//! reason its `-rsx` line gives.

use super::{run_listing, ListingError, SkipRule, Suite, Test};
use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

const FLAGS: [&str; 3] = ["-m", "pytest", "-p"];

pub(super) fn list(
    suite: &Suite,
    tool: &mut Duration,
) -> Result<(String, Vec<Test>), (String, ListingError)> {
    let mut args: Vec<String> = FLAGS.map(String::from).to_vec();
    args.extend(["no:cacheprovider", "--collect-only", "-q"].map(String::from));
    args.extend(suite.args.iter().cloned());
    let command = std::iter::once(suite.python.clone())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut pytest = Command::new(&suite.python);
    pytest.args(&args);
    let text = run_listing(&mut pytest, &suite.env, tool).map_err(|why| (command.clone(), why))?;
    let tests = parse(&text)
        .into_iter()
        .map(|id| {
            let mut argv: Vec<OsString> = vec![suite.python.clone().into()];
            argv.extend(FLAGS.map(OsString::from));
            // `-rsx`: the reason of a skip (or an expected failure) in the summary.
            argv.extend(["no:cacheprovider", "-q", "-rsx"].map(OsString::from));
            argv.push(id.clone().into());
            let mut test = Test::listed(id, argv, None);
            test.props.skip = Some(SkipRule::Pytest);
            test
        })
        .collect();
    Ok((command, tests))
}

/// The node ids: the lines before the first blank one that name a test (`::`).
pub(super) fn parse(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.contains("::"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_ids_are_kept_as_written() {
        let text = "t/test_a.py::test_one\nt/test_a.py::TestK::test_two[a b-1]\n\n2 tests collected in 0.01s\n";
        assert_eq!(
            super::parse(text),
            [
                "t/test_a.py::test_one",
                "t/test_a.py::TestK::test_two[a b-1]"
            ]
        );
        assert!(super::parse("\nno tests ran in 0.01s\n").is_empty());
    }
}
