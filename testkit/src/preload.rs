//! Runs with the preloaded diagnostics library (`libvkexit_preload.so`, as `cargo test -p
//! vkexit-preload` built it for this run), and the crash and timeline files it writes.

use crate::launch::Launch;
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

/// The backtrace's time limit in these runs (a plan's own setting comes after it). The library
/// under test may be a debug build, whose unoptimised symbolizer is several times slower than
/// the release one; parallel tests on two cores slow it down further.
pub const BACKTRACE_MS: u64 = 20_000;

/// `libvkexit_preload.so` as `cargo test` built it for this run.
pub fn preload() -> PathBuf {
    crate::under_test("libvkexit_preload.so", "vkexit-preload")
}

/// A program to run: what it is, and how the preload and its files are set up.
pub struct Plan {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set after the preload's own.
    pub env: Vec<(String, String)>,
    /// Whether `LD_PRELOAD` names the library under test.
    pub preload: bool,
    /// Whether VKEXIT_CRASH_FILE and VKEXIT_TIMELINE_FILE are set (to files in the run's own
    /// directory).
    pub files: bool,
    /// Whether lavapipe is the only driver.
    pub lavapipe: bool,
    /// Kill the process once its stdout holds this text.
    pub kill_when: Option<String>,
}

impl Plan {
    /// Runs `program args` preloaded, with the crash and timeline files set.
    pub fn new(program: impl Into<PathBuf>, args: &[&str]) -> Self {
        Plan {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            preload: true,
            files: true,
            lavapipe: false,
            kill_when: None,
        }
    }

    /// Sets a variable, after the plan's own.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.env.push((
            key.to_owned(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    /// Runs the program as it is, for a comparison.
    pub fn without_preload(mut self) -> Self {
        self.preload = false;
        self
    }

    /// Leaves `VKEXIT_CRASH_FILE` and `VKEXIT_TIMELINE_FILE` unset.
    pub fn without_files(mut self) -> Self {
        self.files = false;
        self
    }

    /// Lavapipe as the only driver.
    pub fn lavapipe(mut self) -> Self {
        self.lavapipe = true;
        self
    }

    /// Kills the program once its stdout holds `text`.
    pub fn kill_when(mut self, text: &str) -> Self {
        self.kill_when = Some(text.to_owned());
        self
    }
}

/// What a run left behind.
pub struct Run {
    /// The run itself, with its directory.
    pub ran: crate::Ran,
    /// The program's process id.
    pub pid: u32,
    /// How the program ended.
    pub status: ExitStatus,
    /// What it wrote on stdout.
    pub stdout: String,
    /// What it wrote on stderr.
    pub stderr: String,
    /// The crash file's records; `None` when the file does not exist.
    pub crash: Option<Vec<Value>>,
    /// The timeline's records of this process (children may append theirs too).
    pub timeline: Option<Vec<Value>>,
}

/// Runs `plan` to its end (at most [`crate::launch::RUN_TIMEOUT`]).
pub fn run(plan: Plan) -> Run {
    let mut launch = Launch::new(&plan.program).args(&plan.args);
    if plan.lavapipe {
        launch = launch.lavapipe();
    }
    if plan.preload {
        launch = launch.env("LD_PRELOAD", preload());
    }
    if plan.files {
        let (crash, timeline) = (
            launch.dir().join("crash.jsonl"),
            launch.dir().join("timeline.jsonl"),
        );
        launch = launch
            .env("VKEXIT_CRASH_FILE", crash)
            .env("VKEXIT_TIMELINE_FILE", timeline);
    }
    launch = launch.env("VKEXIT_CRASH_BACKTRACE_MS", BACKTRACE_MS.to_string());
    for (key, value) in &plan.env {
        launch = launch.env(key, value);
    }
    if let Some(text) = &plan.kill_when {
        launch = launch.kill_when(text);
    }
    let ran = launch.run();
    let pid = ran.pid;
    let of_this_process =
        |records: Vec<Value>| records.into_iter().filter(|r| r["pid"] == pid).collect();
    Run {
        pid,
        status: ran.status,
        stdout: ran.stdout.clone(),
        stderr: ran.stderr.clone(),
        crash: ran.json_lines("crash.jsonl").map(of_this_process),
        timeline: ran.json_lines("timeline.jsonl").map(of_this_process),
        ran,
    }
}

impl Run {
    /// The signal that ended the program, if one did.
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    /// The crash file's records; fails when there is no crash file.
    pub fn crash_records(&self) -> &[Value] {
        self.crash
            .as_deref()
            .unwrap_or_else(|| panic!("no crash file\n{}", self.describe()))
    }

    /// The one record `ev` of the crash file.
    pub fn crash_record(&self, ev: &str) -> &Value {
        let found: Vec<&Value> = self
            .crash_records()
            .iter()
            .filter(|r| r["ev"] == ev)
            .collect();
        assert_eq!(found.len(), 1, "one {ev:?} record\n{}", self.describe());
        found[0]
    }

    /// The timeline's records; fails when there is no timeline.
    pub fn events(&self) -> &[Value] {
        self.timeline
            .as_deref()
            .unwrap_or_else(|| panic!("no timeline file\n{}", self.describe()))
    }

    /// Every timeline record `ev`.
    pub fn all(&self, ev: &str) -> Vec<&Value> {
        self.events().iter().filter(|r| r["ev"] == ev).collect()
    }

    /// The one timeline record `ev`.
    pub fn one(&self, ev: &str) -> &Value {
        let found = self.all(ev);
        assert_eq!(found.len(), 1, "one {ev:?} record\n{}", self.describe());
        found[0]
    }

    /// Whether the timeline holds a record `ev`.
    pub fn has(&self, ev: &str) -> bool {
        !self.all(ev).is_empty()
    }

    /// The handler registration of `registrant` (a file name suffix), with `kind`.
    pub fn registered_by(&self, registrant: &str, kind: &str) -> Vec<&Value> {
        self.all("handler-registered")
            .into_iter()
            .filter(|r| {
                r["kind"] == kind
                    && r["registrant"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(registrant))
            })
            .collect()
    }

    /// The `ev` record (`handler-start`, `handler-end`) of handler `id`, if any.
    pub fn of_handler(&self, ev: &str, id: &Value) -> Option<&Value> {
        self.events()
            .iter()
            .find(|r| r["ev"] == ev && r["id"] == *id)
    }

    /// How the run ended, its output and its records, for assertion messages.
    pub fn describe(&self) -> String {
        let show = |records: &Option<Vec<Value>>| match records {
            None => "(no file)".to_owned(),
            Some(records) => records
                .iter()
                .filter(|r| r["kind"] != "cxa-atexit")
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        format!(
            "status {:?}\n--- stdout\n{}--- stderr\n{}--- crash\n{}\n--- timeline (C++ static destructor registrations left out)\n{}",
            self.status,
            self.stdout,
            self.stderr,
            show(&self.crash),
            show(&self.timeline)
        )
    }
}

/// A `"0x…"` field as a number.
pub fn hex(value: &Value) -> u64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a hex string: {value}"));
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A record's `t_ns` field.
pub fn t_ns(record: &Value) -> u64 {
    record["t_ns"]
        .as_u64()
        .unwrap_or_else(|| panic!("no t_ns in {record}"))
}
