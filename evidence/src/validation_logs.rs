//! The validation layer's log, one file per instance.
//!
//! Every layer from 1.3.239 to 1.4.363 opens `log_filename` with `fopen(path, "w")` at each
//! `vkCreateInstance`: a second instance, an exec'd program or a child process truncates what
//! an earlier instance reported. The preloaded library therefore sends each open of the
//! configured path ([`LOG_VAR`]) to a new file of its own in [`DIR_VAR`], created exclusively,
//! whose first line is a [`Header`]: which process opened it, when, and which program it was.
//! An open that no preloaded library saw (`--no-diagnostics`, a static program, one that
//! cleared `LD_PRELOAD`) still lands on the configured path, where the harness finds it and
//! knows that it cannot prove that log is whole.

/// The path the layer's settings name as `log_filename`: each open of it for writing is
/// redirected.
pub const LOG_VAR: &str = "VKEXIT_VALIDATION_LOG";
/// The directory that gets one file per open of [`LOG_VAR`].
pub const DIR_VAR: &str = "VKEXIT_VALIDATION_LOGS";
/// That directory's name in the run directory.
pub const DIR: &str = "validation.d";
/// What the harness calls the configured log, once it moved it into [`DIR`]: the log of
/// instances no preloaded library saw.
pub const UNWATCHED: &str = "unwatched.log";
/// The file, in [`DIR`], where vkexit's trace layer writes each message the validation layer gave
/// the application's own debug messengers (`VKEXIT_APP_MESSAGES` names it; unset, nothing is
/// witnessed). Layers before 1.3.239 write their log only while the application has no messenger
/// of its own: every finding after `vkCreateDebugUtilsMessengerEXT` then reaches only the
/// application's callback, which may swallow it.
pub const APP_MESSAGES_VAR: &str = "VKEXIT_APP_MESSAGES";
/// That file's name in [`DIR`]: one message a line, `[ ID ] (SEVERITY / TYPE): MESSAGE`, the
/// message on one line; a line starting `# unwitnessed ` says a messenger could not be watched.
pub const APP_MESSAGES: &str = "app-messengers.txt";
/// How a line of [`APP_MESSAGES`] starts that names a messenger the trace layer could not watch.
pub const UNWITNESSED: &str = "# unwitnessed ";
/// The first line of the combined log the harness writes at the configured path after a run.
pub const COMBINED_HEADER: &str =
    "# vkexit: the validation layer's log of each instance of this run, in the order they were opened (one file each in validation.d/)";

/// How each per-instance file's first line starts; `pid=… t_ns=… program=…` follow.
const HEADER_START: &str = "# vkexit-instance-log ";

/// Who opened one per-instance log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The process that opened it.
    pub pid: i64,
    /// When (CLOCK_MONOTONIC nanoseconds, the evidence files' clock).
    pub t_ns: u64,
    /// The program (`/proc/self/exe`); empty when unknown.
    pub program: String,
}

impl Header {
    /// The line, with its newline: the program last, since a path may hold spaces.
    pub fn line(&self) -> String {
        format!(
            "{HEADER_START}pid={} t_ns={} program={}\n",
            self.pid, self.t_ns, self.program
        )
    }

    /// Reads a file's first line (without its newline); `None` for any other line.
    pub fn parse(line: &str) -> Option<Header> {
        let rest = line.strip_prefix(HEADER_START)?;
        let rest = rest.strip_prefix("pid=")?;
        let (pid, rest) = rest.split_once(" t_ns=")?;
        let (t_ns, program) = rest.split_once(" program=")?;
        Some(Header {
            pid: pid.parse().ok()?,
            t_ns: t_ns.parse().ok()?,
            program: program.to_string(),
        })
    }
}

/// The name of the `index`th file process `pid` tries: `PID-INDEX.log`. Indices go on across
/// an exec (the file is created exclusively, so a taken name is skipped).
pub fn file_name(pid: i64, index: u32) -> String {
    format!("{pid}-{index}.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_with_a_program_path_that_holds_spaces() {
        let header = Header {
            pid: 41,
            t_ns: 123_456,
            program: "/opt/my app/bin/t est".into(),
        };
        let line = header.line();
        assert!(line.ends_with('\n'));
        assert_eq!(Header::parse(line.trim_end_matches('\n')), Some(header));
        for other in [
            "",
            "# vkexit-instance-log pid=x t_ns=1 program=",
            "Validation Error: [ X ]",
        ] {
            assert_eq!(Header::parse(other), None, "{other}");
        }
    }
}
