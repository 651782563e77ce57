//! Why a cell failed, in the words of its first kept run: the validation
//! layer's first message of each id (call, objects, text), the exit code and
//! the last lines of stderr. Every report shows it beside the cell, so a reader
//! need not open the run directory to see what went wrong.
//!
//! It is read from the run directory when that is on this machine; a results
//! file merged from elsewhere keeps only ids and counts, and the reports then
//! show those.

use crate::host::messages::{first_messages, LayerMessage};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use vkexit_evidence::files;
use vkexit_evidence::results::CellResult;

/// Messages shown per cell: the first of each id, up to this many ids.
const MAX_MESSAGES: usize = 8;
/// Lines of stderr shown for a run that exited nonzero.
const STDERR_LINES: usize = 5;
/// A line of stderr is cut at this many characters.
const STDERR_LINE_CHARS: usize = 200;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FirstRun {
    /// The run directory.
    pub(crate) dir: PathBuf,
    /// The layer's first message of each id, in the order logged.
    pub(crate) messages: Vec<LayerMessage>,
    /// The exit code, when the run exited with one other than 0.
    pub(crate) exit_code: Option<i64>,
    /// The last lines of stderr, for a run that exited nonzero.
    pub(crate) stderr_tail: Vec<String>,
    /// The last lines of stdout, for a run that exited nonzero with nothing on stderr
    /// (GoogleTest writes its failures on stdout).
    pub(crate) stdout_tail: Vec<String>,
    /// The C library's last word before it aborted the process ("free(): invalid pointer",
    /// "*** stack smashing detected ***"), from stderr.
    pub(crate) c_library: Option<String>,
}

/// How the C library's fatal messages begin: glibc's heap checks, its fortify and stack
/// protector reports, and `assert`.
const C_LIBRARY_FATAL: [&str; 14] = [
    "free(): ",
    "malloc(): ",
    "malloc_consolidate(): ",
    "realloc(): ",
    "munmap_chunk(): ",
    "double free or corruption",
    "corrupted size vs. prev_size",
    "corrupted double-linked list",
    "tcache_thread_shutdown(): ",
    "_int_malloc(): ",
    "*** stack smashing detected ***",
    "*** buffer overflow detected ***",
    "Fatal glibc error: ",
    "Assertion `",
];

impl FirstRun {
    /// The first kept run of a cell, when its directory is here.
    pub(crate) fn of(c: &CellResult) -> Option<FirstRun> {
        let dir = Path::new(c.artifacts.first()?);
        dir.is_dir().then(|| FirstRun::read(dir))
    }

    pub(crate) fn read(dir: &Path) -> FirstRun {
        let messages = std::fs::File::open(dir.join(files::VALIDATION_LOG))
            .map(|f| first_messages(f, MAX_MESSAGES))
            .unwrap_or_default();
        let exit_code = std::fs::read_to_string(dir.join(files::RESULT))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|r| {
                let t = &r["termination"];
                (t["kind"] == "exited")
                    .then(|| t["code"].as_i64())
                    .flatten()
            })
            .filter(|&code| code != 0);
        let stderr = tail_lines(&dir.join(files::STDERR), STDERR_LINES);
        let c_library = stderr.iter().rev().find_map(|l| c_library_message(l));
        let (stderr_tail, stdout_tail) = match (exit_code, stderr.is_empty()) {
            (Some(_), false) => (stderr, Vec::new()),
            (Some(_), true) => (
                Vec::new(),
                tail_lines(&dir.join(files::STDOUT), STDERR_LINES),
            ),
            (None, _) => (Vec::new(), Vec::new()),
        };
        FirstRun {
            dir: dir.to_path_buf(),
            messages,
            exit_code,
            stderr_tail,
            stdout_tail,
            c_library,
        }
    }

    /// "exit code 127 (command not found)".
    pub(crate) fn exit_line(&self) -> Option<String> {
        let code = self.exit_code?;
        let meaning = match code {
            126 => " (found but not executable)",
            127 => " (command not found)",
            _ => "",
        };
        Some(format!("exit code {code}{meaning}"))
    }

    /// Everything on one line, for the terminal table: the first message (and how many
    /// other ids), or the exit code and stderr's last line.
    pub(crate) fn one_line(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(first) = self.messages.first() {
            let mut line = first.line();
            if self.messages.len() > 1 {
                line.push_str(&format!(" (+{} more ids)", self.messages.len() - 1));
            }
            parts.push(line);
        }
        if let Some(exit) = self.exit_line() {
            match (self.stderr_tail.last(), self.stdout_tail.last()) {
                (Some(last), _) => parts.push(format!("{exit}, stderr: {last}")),
                (None, Some(last)) => parts.push(format!("{exit}, stderr empty, stdout: {last}")),
                (None, None) => parts.push(format!("{exit}, stderr and stdout empty")),
            }
        }
        if let Some(said) = &self.c_library {
            parts.push(format!("the C library: {said}"));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// One fact a line, for the body of a JUnit failure and the HTML report.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .messages
            .iter()
            .map(|m| format!("validation: {}", m.line()))
            .collect();
        if let Some(exit) = self.exit_line() {
            lines.push(exit);
            for l in &self.stderr_tail {
                lines.push(format!("stderr: {l}"));
            }
            for l in &self.stdout_tail {
                lines.push(format!("stdout: {l}"));
            }
        }
        if let Some(said) = &self.c_library {
            lines.push(format!("the C library: {said}"));
        }
        lines
    }
}

/// The C library's fatal message a line of stderr holds, from where it begins.
fn c_library_message(line: &str) -> Option<String> {
    C_LIBRARY_FATAL
        .iter()
        .filter_map(|start| line.find(start))
        .min()
        .map(|at| line[at..].trim().to_string())
}

/// The last `n` lines of a file that are not blank, each cut to a readable length; only its
/// end is read.
fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(16 * 1024);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if f.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = text
        .lines()
        .skip(usize::from(from > 0))
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            if l.chars().count() > STDERR_LINE_CHARS {
                l.chars().take(STDERR_LINE_CHARS).collect::<String>() + "…"
            } else {
                l.to_string()
            }
        })
        .collect();
    let keep = lines.len().saturating_sub(n);
    lines.drain(..keep);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_failure_gives_its_code_and_the_end_of_stderr() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("result.json"),
            r#"{"termination": {"kind": "exited", "code": 127}}"#,
        )
        .unwrap();
        let stderr: String = (1..=9).map(|i| format!("line {i}\n\n")).collect();
        std::fs::write(dir.path().join("stderr.txt"), stderr).unwrap();
        let run = FirstRun::read(dir.path());
        assert_eq!(run.exit_code, Some(127));
        assert_eq!(
            run.stderr_tail,
            ["line 5", "line 6", "line 7", "line 8", "line 9"]
        );
        assert_eq!(
            run.one_line().unwrap(),
            "exit code 127 (command not found), stderr: line 9"
        );
    }

    #[test]
    fn stdout_speaks_when_stderr_is_silent_and_the_c_library_is_heard() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("result.json"),
            r#"{"termination": {"kind": "exited", "code": 1}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("stdout.txt"),
            "[ RUN      ] Suite.Test\nx.cc:9: Failure\n[  FAILED  ] Suite.Test (1 ms)\n",
        )
        .unwrap();
        let run = FirstRun::read(dir.path());
        assert_eq!(
            run.one_line().unwrap(),
            "exit code 1, stderr empty, stdout: [  FAILED  ] Suite.Test (1 ms)"
        );
        assert!(run.lines().contains(&"stdout: x.cc:9: Failure".to_string()));
        std::fs::write(
            dir.path().join("stderr.txt"),
            "malloc_consolidate(): unaligned fastbin chunk detected\n",
        )
        .unwrap();
        let run = FirstRun::read(dir.path());
        assert_eq!(
            run.c_library.as_deref(),
            Some("malloc_consolidate(): unaligned fastbin chunk detected")
        );
        assert!(run.stdout_tail.is_empty());
    }

    #[test]
    fn a_clean_exit_and_no_log_say_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("result.json"),
            r#"{"termination": {"kind": "exited", "code": 0}}"#,
        )
        .unwrap();
        let run = FirstRun::read(dir.path());
        assert_eq!(run.one_line(), None);
        assert!(run.lines().is_empty());
    }
}
