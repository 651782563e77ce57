//! A project's own test suite as cases: CTest, GoogleTest, pytest and libtest. Each suite is
//! listed once, by its own tool, and every test becomes an external case run in a process of
//! its own, as the tool itself would start it for that test alone. One adapter per kind
//! (`ctest`, `gtest`, `pytest`, `libtest`) knows how to list it and how to start one test;
//! nothing else here knows any kind.
//!
//! A listing that fails or gives no test is one `error` case that carries the tool's stderr,
//! never an empty, green suite. A property of a test that vkexit cannot honour is said in
//! that test's notes, which its cell's findings repeat.

mod ctest;
mod gtest;
mod libtest;
mod pytest;
mod skips;

pub(crate) use skips::SkipRule;

use crate::plan::matrix::{find_program, is_reserved_variable, NoProgram};
use crate::plan::NotRun;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// The test tools vkexit can list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ctest,
    Gtest,
    Pytest,
    Libtest,
}

impl Kind {
    pub(crate) const NAMES: [&'static str; 4] = ["ctest", "gtest", "pytest", "libtest"];

    pub(crate) fn parse(name: &str) -> Option<Kind> {
        match name {
            "ctest" => Some(Kind::Ctest),
            "gtest" => Some(Kind::Gtest),
            "pytest" => Some(Kind::Pytest),
            "libtest" => Some(Kind::Libtest),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        Kind::NAMES[self as usize]
    }
}

/// One suite as a matrix's `[[suite]]` or a flag (`--ctest DIR`, …) gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suite {
    pub(crate) kind: Kind,
    /// CTest's build directory, or the test program (gtest, libtest); unused for pytest.
    pub(crate) target: PathBuf,
    /// Passed to the listing: CTest's selection (`-R`, `-E`, `-L`, `-LE`, `-C`), a
    /// `--gtest_filter`, pytest's paths and `-k`/`-m`, a libtest filter.
    pub(crate) args: Vec<String>,
    /// pytest's interpreter.
    pub(crate) python: String,
    /// Added to the listing's and every test's environment (a matrix's `[[suite]] env`).
    pub(crate) env: Vec<(String, String)>,
}

/// One test of a suite, as a case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Test {
    /// As the tool names it: reports and baselines use it as written.
    pub(crate) name: String,
    pub(crate) argv: Vec<OsString>,
    /// Where it starts (CTest's `WORKING_DIRECTORY`, or the directory of its
    /// `CTestTestfile.cmake`); `None`: where vkexit runs.
    pub(crate) workdir: Option<PathBuf>,
    pub(crate) props: Props,
}

impl Test {
    /// A test a program listed: run where vkexit runs, with nothing more than its command,
    /// unless the listing said it is not run (GoogleTest's `DISABLED_`, libtest's `#[ignore]`).
    pub(crate) fn listed(name: String, argv: Vec<OsString>, not_run: Option<NotRun>) -> Test {
        Test {
            name,
            argv,
            workdir: None,
            props: Props {
                not_run,
                ..Props::default()
            },
        }
    }
}

/// What a suite says of one test beyond its command, for its cell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Props {
    /// Set in its runs, after the matrix's own variables.
    pub(crate) env: Vec<(String, String)>,
    /// Taken out of its runs' environment (CTest's `unset:`).
    pub(crate) env_remove: Vec<String>,
    /// Its own limit (CTest's `TIMEOUT`), over the matrix's.
    pub(crate) timeout: Option<Duration>,
    /// A nonzero exit is its pass (CTest's `WILL_FAIL`).
    pub(crate) will_fail: bool,
    /// It is not run: disabled by the suite (skipped), or it cannot start (error).
    pub(crate) not_run: Option<NotRun>,
    /// It runs with nothing else (CTest's `RUN_SERIAL`).
    pub(crate) run_serial: bool,
    /// Tests naming one of these never run at the same time (CTest's `RESOURCE_LOCK`).
    pub(crate) resource_locks: Vec<String>,
    /// What vkexit does not honour of it, one line each.
    pub(crate) notes: Vec<String>,
    /// How its runner tells that a run of it was skipped.
    pub(crate) skip: Option<SkipRule>,
}

/// Why a listing gave no test: its tool could not start or failed, or what it printed is not
/// the listing its kind prints.
#[derive(Debug, thiserror::Error)]
enum ListingError {
    /// The tool cannot be started.
    #[error("cannot start it: {0}")]
    NotStarted(#[source] std::io::Error),
    /// The tool ended other than with exit 0: how, and the end of what it said.
    #[error("{}; it said: {said}", describe(status))]
    Failed { status: ExitStatus, said: String },
    /// The tool listed nothing.
    #[error("`{command}` listed no test")]
    NoTest { command: String },
    /// CTest's output is not its JSON.
    #[error(transparent)]
    Ctest(ctest::BadJson),
    /// GoogleTest's listing has a line it does not print.
    #[error(transparent)]
    Gtest(gtest::BadLine),
    /// libtest's listing has a line it does not print.
    #[error(transparent)]
    Libtest(libtest::BadLine),
}

/// A suite's tests and what the listing cost.
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) tests: Vec<Test>,
    /// The listing command, as a user would type it.
    pub(crate) command: String,
    pub(crate) took: Duration,
    /// Of which the tool itself, from its start to its exit.
    pub(crate) tool: Duration,
    /// The listing failed or listed nothing: its one test is the error that says so.
    pub(crate) failed: bool,
}

impl Suite {
    /// `ctest:build`, `gtest:teardown-gtest`: the name of the one case a failed listing
    /// becomes.
    pub(crate) fn label(&self) -> String {
        let what = match self.kind {
            Kind::Pytest => self.args.join(" "),
            _ => self.target.display().to_string(),
        };
        format!("{}:{what}", self.kind.name())
    }

    /// Lists the suite's tests, running its tool once. A tool that cannot start, fails or
    /// lists nothing gives one test of the suite's label that is an `error` with what the
    /// tool said.
    pub(crate) fn list(&self) -> Listing {
        let start = Instant::now();
        let mut tool = Duration::ZERO;
        let listed = match self.kind {
            Kind::Ctest => ctest::list(self, &mut tool),
            Kind::Gtest => gtest::list(self, &mut tool),
            Kind::Pytest => pytest::list(self, &mut tool),
            Kind::Libtest => libtest::list(self, &mut tool),
        };
        let took = start.elapsed();
        let (command, tests, failed) = match listed {
            Ok((command, tests)) if tests.is_empty() => {
                let why = ListingError::NoTest {
                    command: command.clone(),
                };
                (command, vec![self.failed(why)], true)
            }
            Ok((command, mut tests)) => {
                for test in &mut tests {
                    self.finish(test);
                }
                (command, tests, false)
            }
            Err((command, why)) => (command, vec![self.failed(why)], true),
        };
        Listing {
            tests,
            command,
            took,
            tool,
            failed,
        }
    }

    fn failed(&self, why: ListingError) -> Test {
        Test {
            name: self.label(),
            argv: vec![OsString::from(self.kind.name())],
            workdir: None,
            props: Props {
                not_run: Some(NotRun::Broken(format!(
                    "the {} listing failed: {why}",
                    self.kind.name()
                ))),
                ..Props::default()
            },
        }
    }

    /// The suite's own variables first, then the test's; variables vkexit sets for every
    /// run are left out, and the test says so; a program that cannot start makes it an error.
    fn finish(&self, test: &mut Test) {
        let mut env = self.env.clone();
        env.append(&mut test.props.env);
        for (key, _) in env.iter().filter(|(k, _)| is_reserved_variable(k)) {
            let note = format!(
                "not honoured: it sets {key}, which vkexit sets itself for every run (driver, layers, run directory)"
            );
            if !test.props.notes.contains(&note) {
                test.props.notes.push(note);
            }
        }
        env.retain(|(k, _)| !is_reserved_variable(k));
        test.props
            .env_remove
            .retain(|k| !is_reserved_variable(k) && !env.iter().any(|(s, _)| s == k));
        test.props.env = env;
        if test.props.not_run.is_none() {
            if let Err(why) = startable(test) {
                test.props.not_run = Some(NotRun::Broken(format!("cannot start: {why}")));
            }
        }
    }
}

/// Why a test of a suite cannot be started.
#[derive(Debug, thiserror::Error)]
enum Unstartable {
    /// The suite gives it no command.
    #[error("it has no command")]
    NoCommand,
    /// Its program cannot be started where it starts.
    #[error(transparent)]
    Program(NoProgram),
}

/// Whether the test's program can be started where it starts.
fn startable(test: &Test) -> Result<(), Unstartable> {
    let Some(program) = test.argv.first() else {
        return Err(Unstartable::NoCommand);
    };
    let path = test
        .props
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| OsString::from(v))
        .or_else(|| std::env::var_os("PATH"));
    let program = Path::new(program);
    let program = match (
        &test.workdir,
        program.is_relative() && program.components().count() > 1,
    ) {
        (Some(dir), true) => dir.join(program),
        _ => program.to_path_buf(),
    };
    find_program(&program, path.as_deref()).map_err(Unstartable::Program)
}

/// Runs a listing command; its stdout when it exits 0, else why not (its stderr, cut).
/// `tool` adds the time it took.
fn run_listing(
    command: &mut Command,
    env: &[(String, String)],
    tool: &mut Duration,
) -> Result<String, ListingError> {
    command.envs(env.iter().map(|(k, v)| (k, v)));
    command.stdin(std::process::Stdio::null());
    let start = Instant::now();
    let out = command.output();
    *tool += start.elapsed();
    let out = out.map_err(ListingError::NotStarted)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    let said = tail(&String::from_utf8_lossy(&out.stderr));
    let said = match said.is_empty() {
        true => tail(&stdout),
        false => said,
    };
    Err(ListingError::Failed {
        status: out.status,
        said,
    })
}

fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited {code}"),
        (None, Some(signal)) => format!("it was killed by signal {signal}"),
        _ => "it failed".into(),
    }
}

/// The last 2,000 bytes of a tool's output, on one line per line as it wrote them.
fn tail(text: &str) -> String {
    let text = text.trim();
    let mut cut = text.len().saturating_sub(2000);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    match cut {
        0 => text.to_string(),
        _ => format!("…{}", &text[cut..]),
    }
}

/// A command as a user would type it, for messages.
pub(super) fn command_line(program: &Path, args: &[String]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}
