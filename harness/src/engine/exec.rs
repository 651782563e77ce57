//! `vkexit exec`: one program run once under vkexit, inside another test runner (CTest's
//! launcher, `meson test --wrapper`, Cargo's runner), the way a sanitizer wrapper is used. The
//! run is made and judged as every `vkexit run` run is ([`super::invocation::Invocation`], `run::execute`,
//! `judge::run`); its output passes through as it comes, and its exit code becomes the
//! verdict's.
//!
//! Hundreds may start at once: each takes a directory of its own under
//! `<artifacts>/exec/` and no lock, and keeps it only when the run failed.

use super::invocation::Resolved;
use super::runs::{judged_runs, Judged};
use crate::judge::run::RunRecord;
use crate::run::observed::Termination;
use crate::run::{self, Flow};
use crate::support::errors::{Error, Result};
use std::path::{Path, PathBuf};
use vkexit_evidence::exit_code;
use vkexit_evidence::verdict::RunVerdict;

/// The folder under the artifacts directory that holds every exec's own directory.
pub(crate) const EXEC_DIR: &str = "exec";

/// Runs the program once, with its output passed through; says the verdict in one line on
/// stderr and gives the exit code ([`exit_code_of`]).
/// `resolved` is a matrix of one external case; its `artifacts` is the parent of this exec's
/// own directory.
pub(crate) fn exec(mut resolved: Resolved) -> Result<u8> {
    let name = resolved
        .matrix
        .externals
        .first()
        .map(|e| e.name.clone())
        .unwrap_or_default();
    let settings = &mut resolved.settings;
    let own = own_dir(&settings.artifacts.join(EXEC_DIR), &name)?;
    settings.artifacts = own.clone();
    settings.keep_passing = false;
    // Another run of the program would print its output again: the runner sees one run.
    settings.rerun_without_layer = false;
    let outcome = judged_once(&resolved);
    let record = match outcome {
        Ok(Some(record)) => record,
        Ok(None) | Err(_) => {
            remove_own(&own);
            return match outcome {
                Err(e) => Err(e),
                _ => Err(Error::NoRuns {
                    why: "the run did not start".into(),
                }),
            };
        }
    };
    let verdict = record.classification.verdict;
    let code = match run::interrupt::interrupted() {
        true => exit_code::INTERRUPTED,
        false => exit_code_of(verdict, &record.termination),
    };
    let evidence = match &record.kept {
        Some(dir) => format!("; evidence: {}", dir.display()),
        None => {
            remove_own(&own);
            String::new()
        }
    };
    eprintln!(
        "vkexit: {verdict}: {}{evidence}",
        record.classification.reason
    );
    Ok(code)
}

/// The one run of the matrix's one cell, judged; `None` when no cell could run (the
/// reason is the error then).
fn judged_once(resolved: &Resolved) -> Result<Option<RunRecord>> {
    let mut invocation = resolved.invocation()?.with_runs(1);
    if invocation.runnable_cells() == 0 {
        // A driver that could not be probed is red for `run`; here it is what stops the one run.
        let broken = invocation.cells().find_map(|c| match &c.not_run {
            Some(crate::plan::NotRun::Broken(why)) => Some(why.clone()),
            _ => None,
        });
        let why = invocation.why_no_runs().or(broken);
        return Err(Error::NoRuns {
            why: why.unwrap_or_else(|| "the selection has no cell".into()),
        });
    }
    // One run: the first driver with a device when none was named.
    let first = std::cell::Cell::new(true);
    invocation.retain_cells(|c| c.not_run.is_none() && first.replace(false));
    invocation.parts.retain(|p| !p.plan.cells.is_empty());
    invocation.jobs = 1;
    invocation.echo = true;
    let Some(part) = invocation.parts.first() else {
        return Ok(None);
    };
    let options = invocation.options(part);
    let mut record = None;
    judged_runs(
        &invocation,
        part,
        &options,
        |_| {},
        |_, Judged { record: r, .. }| {
            record = Some(r);
            Flow::Stop
        },
    )?;
    Ok(record)
}

/// The exit code of a run judged `verdict`: 0 for a green run; the program's own code when it
/// failed by its exit code alone (a runner's own meaning of it, such as meson's 77 for a
/// skipped test, is kept); 2 when the run could not be judged; 1 for every other failure
/// (a crash, a validation message, a hang, a leak), as `vkexit run` is red.
pub(crate) fn exit_code_of(verdict: RunVerdict, termination: &Termination) -> u8 {
    if verdict.is_success() {
        return exit_code::GREEN;
    }
    match (verdict, termination) {
        (RunVerdict::Exit, Termination::Exited { code }) if (1..=255).contains(code) => *code as u8,
        (RunVerdict::Error, _) => exit_code::USAGE,
        _ => exit_code::RED,
    }
}

/// Creates this exec's own directory, `<parent>/<name>-<pid>[-<n>]`: never one that another
/// exec (of another pid namespace, say) made.
fn own_dir(parent: &Path, name: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let name: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || "-_.+".contains(c) {
            true => c,
            false => '_',
        })
        .take(64)
        .collect();
    let pid = std::process::id();
    let mut last = None;
    for n in 0..100u32 {
        let leaf = match n {
            0 => format!("{name}-{pid}"),
            n => format!("{name}-{pid}-{n}"),
        };
        let dir = parent.join(leaf);
        // The parent may be removed by another exec that found it empty: make it again.
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .and_then(|()| std::fs::DirBuilder::new().mode(0o700).create(&dir));
        match made {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(e),
        }
    }
    let e = last.unwrap_or_else(|| std::io::Error::other("no free name"));
    Err(Error::io(
        "cannot create the exec's evidence directory (--artifacts)",
        parent,
        e,
    ))
}

/// Removes a passing exec's directory, then its parents (`exec/`, the artifacts directory)
/// when that leaves them empty, so that a green test leaves nothing behind.
fn remove_own(own: &Path) {
    let _ = std::fs::remove_dir_all(own);
    let mut dir = own.parent();
    for _ in 0..2 {
        let Some(d) = dir else { return };
        if std::fs::remove_dir(d).is_err() {
            return;
        }
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_verdict() {
        let exited = |code| Termination::Exited { code };
        assert_eq!(exit_code_of(RunVerdict::Pass, &exited(0)), 0);
        assert_eq!(exit_code_of(RunVerdict::Exit, &exited(77)), 77);
        assert_eq!(exit_code_of(RunVerdict::Exit, &exited(1)), 1);
        assert_eq!(exit_code_of(RunVerdict::Vuid, &exited(0)), 1);
        assert_eq!(exit_code_of(RunVerdict::Leak, &exited(0)), 1);
        let signaled = Termination::Signaled {
            signal: libc::SIGSEGV,
            core_dumped: false,
        };
        assert_eq!(exit_code_of(RunVerdict::Crash, &signaled), 1);
        assert_eq!(exit_code_of(RunVerdict::Timeout, &exited(0)), 1);
        assert_eq!(exit_code_of(RunVerdict::Error, &exited(0)), 2);
    }

    #[test]
    fn each_exec_gets_a_directory_of_its_own() {
        let root = tempfile::tempdir().unwrap();
        let parent = root.path().join("a/exec");
        let first = own_dir(&parent, "t est").unwrap();
        let second = own_dir(&parent, "t est").unwrap();
        assert_ne!(first, second);
        assert!(first
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("t_est-"));
        remove_own(&first);
        assert!(!first.exists() && second.exists());
        remove_own(&second);
        assert!(!root.path().join("a").exists());
    }
}
