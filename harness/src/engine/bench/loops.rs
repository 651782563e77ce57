//! The same runs three ways: a plain loop, CTest, and `vkexit run`. Each is timed from its
//! first spawn to its last exit; what is prepared before (run directories, a CTest file) is
//! not timed, since a user's loop would not make it either.

use crate::plan::Plan;
use crate::run::cost::children_cpu_ms;
use crate::run::{self, unix::CommandSpec};
use crate::support::errors::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// Milliseconds per run of a loop that spawns the command and waits for it, `jobs` at a
/// time, each loop in a run directory of its own that it reuses.
pub fn bare(
    plan: &Plan,
    options: &run::Options,
    work: &Path,
    runs: u32,
    jobs: u32,
) -> Result<Timing> {
    let specs: Vec<CommandSpec> = (0..jobs)
        .map(|j| spec_in(plan, options, &work.join(format!("bare-j{jobs}-{j}"))))
        .collect::<Result<_>>()?;
    let next = AtomicU32::new(0);
    let failed = AtomicU32::new(0);
    let start = Clock::start();
    std::thread::scope(|scope| {
        for spec in &specs {
            let (next, failed) = (&next, &failed);
            scope.spawn(move || {
                while next.fetch_add(1, Ordering::Relaxed) < runs {
                    let ok = command(spec)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success());
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let ms = start.per_run(runs);
    note_failures("bare loop", failed.into_inner(), runs);
    Ok(ms)
}

/// `ctest` on PATH.
pub fn ctest_program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ctest"))
        .find(|p| p.is_file())
}

/// Milliseconds per run of `ctest -j JOBS` over a generated CTestTestfile.cmake of `runs`
/// tests, each the command in a run directory of its own.
pub fn ctest(
    ctest: &Path,
    plan: &Plan,
    options: &run::Options,
    work: &Path,
    runs: u32,
    jobs: u32,
) -> Result<Timing> {
    let dir = work.join(format!("ctest-j{jobs}"));
    let mut text = String::from("# written by vkexit bench\n");
    let mut removed: Vec<String> = Vec::new();
    for i in 0..runs {
        let spec = spec_in(plan, options, &dir.join(format!("run-{i}")))?;
        text.push_str(&ctest_entry(i, &spec));
        removed = spec.env_remove;
    }
    let file = dir.join("CTestTestfile.cmake");
    std::fs::write(&file, text).map_err(|e| Error::io("cannot write", &file, e))?;
    let mut command = Command::new(ctest);
    command
        .arg("--test-dir")
        .arg(&dir)
        .args(["--parallel", &jobs.to_string(), "--quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for key in &removed {
        command.env_remove(key);
    }
    let start = Clock::start();
    let status = command
        .status()
        .map_err(|e| Error::io("cannot start", ctest, e))?;
    let ms = start.per_run(runs);
    if !status.success() {
        println!("  note: ctest -j {jobs} reported failing tests ({status})");
    }
    Ok(ms)
}

/// One test of a CTestTestfile: the program, its arguments, its directory and environment.
fn ctest_entry(i: u32, spec: &CommandSpec) -> String {
    let mut args = vec![quote_cmake(&spec.program.display().to_string())];
    args.extend(spec.args.iter().map(|a| quote_cmake(&a.to_string_lossy())));
    let env: Vec<String> = spec
        .env_set
        .iter()
        .map(|(k, v)| format!("{k}={v}").replace(';', "\\;"))
        .collect();
    format!(
        "add_test(run-{i} {})\nset_tests_properties(run-{i} PROPERTIES WORKING_DIRECTORY {} ENVIRONMENT {})\n",
        args.join(" "),
        quote_cmake(&spec.cwd.display().to_string()),
        quote_cmake(&env.join(";")),
    )
}

/// A CMake quoted argument.
fn quote_cmake(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if matches!(c, '\\' | '"' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Milliseconds per run of `vkexit run SELECT --runs RUNS -j JOBS`, start-up included.
pub fn vkexit(select: &[OsString], work: &Path, runs: u32, jobs: u32) -> Result<Timing> {
    let exe = super::vkexit_exe()?;
    let artifacts = work.join(format!("vkexit-j{jobs}"));
    let mut command = Command::new(&exe);
    command
        .arg("run")
        .args(["--runs", &runs.to_string(), "-j", &jobs.to_string()])
        .arg("--artifacts")
        .arg(&artifacts);
    // The selection ends with `-- CMD` when there is one, so it goes last.
    command
        .args(select)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let start = Clock::start();
    let status = command
        .status()
        .map_err(|e| Error::io("cannot start", &exe, e))?;
    let ms = start.per_run(runs);
    if !status.success() {
        println!("  note: vkexit run -j {jobs} exited {status}: the cell is not green");
    }
    Ok(ms)
}

fn spec_in(plan: &Plan, options: &run::Options, dir: &Path) -> Result<CommandSpec> {
    // A repeat of the loop starts from an empty directory, as the first did.
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io("cannot clear", dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    run::command_in(plan, &plan.cells[0], dir, options)
        .map_err(|e| Error::io("cannot prepare a run directory", dir, e))
}

/// The command as vkexit spawns it, less the process group and supervision.
fn command(spec: &CommandSpec) -> Command {
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::null());
    for key in &spec.env_remove {
        command.env_remove(key);
    }
    for (key, value) in &spec.env_set {
        command.env(key, value);
    }
    command
}

/// Wall time and CPU time (of every process the loop waited for) per run, in ms.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub wall: f64,
    pub cpu: f64,
}

struct Clock {
    wall: Instant,
    cpu: f64,
}

impl Clock {
    fn start() -> Self {
        Clock {
            wall: Instant::now(),
            cpu: children_cpu_ms(),
        }
    }

    fn per_run(&self, runs: u32) -> Timing {
        let runs = f64::from(runs);
        Timing {
            wall: self.wall.elapsed().as_secs_f64() * 1000.0 / runs,
            cpu: (children_cpu_ms() - self.cpu) / runs,
        }
    }
}

fn note_failures(what: &str, failed: u32, runs: u32) {
    if failed > 0 {
        println!("  note: {failed} of {runs} runs of the {what} did not exit 0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmake_arguments_are_quoted_and_escaped() {
        assert_eq!(quote_cmake("/a b/c"), "\"/a b/c\"");
        assert_eq!(quote_cmake("x\"$y\\"), "\"x\\\"\\$y\\\\\"");
    }

    #[test]
    fn a_ctest_entry_names_program_directory_and_environment() {
        let spec = CommandSpec {
            program: "/bin/prog".into(),
            args: vec!["--runtime".into(), "refrt:never".into()],
            cwd: "/r/0".into(),
            env_set: vec![("A".into(), "1".into()), ("B".into(), "x;y".into())],
            env_remove: Vec::new(),
        };
        assert_eq!(
            ctest_entry(3, &spec),
            "add_test(run-3 \"/bin/prog\" \"--runtime\" \"refrt:never\")\n\
             set_tests_properties(run-3 PROPERTIES WORKING_DIRECTORY \"/r/0\" ENVIRONMENT \"A=1;B=x\\\\;y\")\n"
        );
    }
}
