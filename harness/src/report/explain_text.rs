//! What `vkexit explain` says of one kept run before its story: its verdict, command, the
//! layer's messages, how it ended and where its validation log is; and its story.

use super::first_run::FirstRun;
use crate::support::errors::{Error, Result};
use std::fmt::Write;
use std::path::Path;
use vkexit_evidence::files;

/// The text `vkexit explain RUN_DIR` prints: the run's header, then its story, as two parts
/// (a picture of it may be drawn between). A directory that holds no run's evidence is an
/// error saying where runs keep theirs.
pub(crate) fn text(run_dir: &Path) -> Result<(String, String)> {
    if !run_dir.is_dir() {
        return Err(Error::bad_input(
            run_dir,
            "not a run directory (failing runs keep theirs under vkexit-artifacts/CELL/run-K)",
        ));
    }
    let evidence = [
        files::RESULT,
        files::COMMAND,
        files::TIMELINE.name,
        files::TRACE.name,
        files::TEGRA.name,
        files::CRASH.name,
    ];
    if !evidence.iter().any(|f| run_dir.join(f).is_file()) {
        let has_runs = std::fs::read_dir(run_dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("run-"));
        let hint = match has_runs {
            false => "failing runs keep theirs under vkexit-artifacts/CELL/run-K",
            true => "it is a cell's directory: explain one of its run-K directories",
        };
        return Err(Error::bad_input(
            run_dir,
            format!(
                "no evidence to explain (none of {}); {hint}",
                evidence.join(", ")
            ),
        ));
    }
    let mut out = String::new();
    match read_if_there(run_dir, files::RESULT).and_then(|text| {
        text.map(|t| serde_json::from_str::<serde_json::Value>(&t))
            .transpose()
            .map_err(|source| Unreadable::NotJson {
                name: files::RESULT,
                source,
            })
    }) {
        Ok(Some(result)) => {
            let verdict = result["verdict"].as_str().unwrap_or("?");
            let reason = result["reason"].as_str().unwrap_or("");
            let _ = writeln!(out, "verdict: {verdict}: {reason}");
        }
        Ok(None) => {}
        Err(why) => {
            let _ = writeln!(out, "could not read {why}");
        }
    }
    match read_if_there(run_dir, files::COMMAND) {
        Ok(Some(command)) => {
            if let Some(line) = command.lines().last() {
                let _ = writeln!(out, "command: {line}");
            }
        }
        Ok(None) => {}
        Err(why) => {
            let _ = writeln!(out, "could not read {why}");
        }
    }
    // What the layer said and how the program ended, before the timeline.
    let run = FirstRun::read(run_dir);
    for m in &run.messages {
        let _ = writeln!(out, "validation: {}", m.line());
        if !m.objects.is_empty() {
            let _ = writeln!(out, "  objects: {}", m.objects.join(", "));
        }
    }
    let story = crate::explain::Story::read(run_dir);
    if let Some(exit) = run.exit_line() {
        let _ = writeln!(out, "{exit}");
        match (run.stderr_tail.is_empty(), run.stdout_tail.is_empty()) {
            (true, true) => {
                let _ = writeln!(out, "stderr: (empty)\nstdout: (empty)");
            }
            (true, false) => {
                let _ = writeln!(out, "stderr: (empty)");
            }
            (false, _) => {}
        }
        for line in &run.stderr_tail {
            let _ = writeln!(out, "stderr: {line}");
        }
        for line in &run.stdout_tail {
            let _ = writeln!(out, "stdout: {line}");
        }
    }
    // The first fatal signal is the headline; what came after it, and the C library's
    // last word, follow.
    if let Some(first) = story.first_crash() {
        let _ = writeln!(out, "crash: {first}");
        for later in story.later() {
            let _ = writeln!(out, "  then: {later}");
        }
    }
    if let Some(said) = &run.c_library {
        let indent = if story.first_crash().is_some() {
            "  "
        } else {
            ""
        };
        let _ = writeln!(out, "{indent}the C library said: {said}");
    }
    if let Some(why) = story.backtrace_why_not() {
        let _ = writeln!(out, "  no backtrace: {why}");
    }
    let log = run_dir.join(files::VALIDATION_LOG);
    if log.is_file() {
        let _ = writeln!(out, "validation log: {}", log.display());
    }
    out.push('\n');
    Ok((out, story.render()))
}

/// A file of the run directory that is there but cannot be read: its name and why.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    /// It cannot be read as text.
    #[error("{name}: {source}")]
    Io {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// It is not the JSON it should be.
    #[error("{name}: {source}")]
    NotJson {
        name: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// A file of the run directory: `None` when it is not there, the reason when it is there but
/// cannot be read.
fn read_if_there(
    dir: &Path,
    name: &'static str,
) -> std::result::Result<Option<String>, Unreadable> {
    match std::fs::read_to_string(dir.join(name)) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Unreadable::Io { name, source }),
    }
}
