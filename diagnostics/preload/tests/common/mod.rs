//! Running real processes with the preloaded library, and reading what it wrote.
//!
//! The library under test is the cdylib that `cargo test` built next to this test; the programs
//! (mock, scenarios, refrt, the Tegra layer) come from `cargo build --release --workspace`.
//! Anything missing fails the test with the command that builds it: never a skip.

#![allow(dead_code)] // each test file uses a part

use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// The backtrace's time limit in these tests (a plan's own setting comes after it).
pub const BACKTRACE_MS: u64 = 20_000;

/// `libvkexit_preload.so` as `cargo test` built it for this run.
pub fn preload() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let library = deps.join("libvkexit_preload.so");
    assert!(
        library.is_file(),
        "{} is missing: run `cargo test -p vkexit-preload`, which builds it",
        library.display()
    );
    library
}

/// A program or library of the workspace, from `target/release`.
pub fn built(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/release")
        .join(name);
    let path = path.canonicalize().unwrap_or(path);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --release --workspace`",
        path.display()
    );
    path
}

/// Lavapipe's ICD manifest; the machine must have it.
pub fn lavapipe() -> PathBuf {
    let icd = PathBuf::from(format!(
        "/usr/share/vulkan/icd.d/lvp_icd.{}.json",
        std::env::consts::ARCH
    ));
    assert!(
        icd.is_file(),
        "lavapipe is not installed ({} is missing): run ci/setup.sh or `apt-get install mesa-vulkan-drivers`",
        icd.display()
    );
    icd
}

/// A program to run: what it is, and how the preload and its files are set up.
pub struct Plan {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub preload: bool,
    /// Whether VKEXIT_CRASH_FILE and VKEXIT_TIMELINE_FILE are set (to files in the run's own
    /// directory).
    pub files: bool,
    /// Kill the process once its stdout holds this text.
    pub kill_when: Option<String>,
}

impl Plan {
    pub fn new(program: impl Into<PathBuf>, args: &[&str]) -> Self {
        Plan {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            preload: true,
            files: true,
            kill_when: None,
        }
    }

    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.env.push((
            key.to_owned(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    pub fn without_preload(mut self) -> Self {
        self.preload = false;
        self
    }

    pub fn without_files(mut self) -> Self {
        self.files = false;
        self
    }

    pub fn kill_when(mut self, text: &str) -> Self {
        self.kill_when = Some(text.to_owned());
        self
    }
}

/// What a run left behind.
pub struct Run {
    pub dir: tempfile::TempDir,
    pub pid: u32,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// The crash file's records; `None` when the file does not exist.
    pub crash: Option<Vec<Value>>,
    /// The timeline's records of this process (children may append theirs too).
    pub timeline: Option<Vec<Value>>,
}

impl Run {
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

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

    pub fn events(&self) -> &[Value] {
        self.timeline
            .as_deref()
            .unwrap_or_else(|| panic!("no timeline file\n{}", self.describe()))
    }

    pub fn all(&self, ev: &str) -> Vec<&Value> {
        self.events().iter().filter(|r| r["ev"] == ev).collect()
    }

    /// The one timeline record `ev`.
    pub fn one(&self, ev: &str) -> &Value {
        let found = self.all(ev);
        assert_eq!(found.len(), 1, "one {ev:?} record\n{}", self.describe());
        found[0]
    }

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

pub fn run(plan: Plan) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let runtime_dir = dir.path().join("xdg-runtime");
    std::fs::create_dir(&runtime_dir).unwrap();
    std::fs::set_permissions(
        &runtime_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let crash_file = dir.path().join("crash.jsonl");
    let timeline_file = dir.path().join("timeline.jsonl");
    let mut command = Command::new(&plan.program);
    command
        .args(&plan.args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(file(&dir.path().join("stdout.txt")))
        .stderr(file(&dir.path().join("stderr.txt")));
    if plan.preload {
        command.env("LD_PRELOAD", preload());
    }
    if plan.files {
        command
            .env("VKEXIT_CRASH_FILE", &crash_file)
            .env("VKEXIT_TIMELINE_FILE", &timeline_file);
    }
    // The library under test is a debug build, whose unoptimised symbolizer is several times
    // slower than the release one; parallel tests on two cores slow it down further.
    command.env("VKEXIT_CRASH_BACKTRACE_MS", BACKTRACE_MS.to_string());
    for (key, value) in &plan.env {
        command.env(key, value);
    }
    // SAFETY: setrlimit is async-signal-safe; crashing runs leave no core files.
    unsafe {
        command.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        })
    };
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", plan.program.display()));
    let pid = child.id();
    let status = wait(&mut child, &plan, &dir.path().join("stdout.txt"));
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let records = |path: &Path| {
        std::fs::read_to_string(path).ok().map(|text| {
            text.lines()
                .map(|line| {
                    serde_json::from_str::<Value>(line)
                        .unwrap_or_else(|e| panic!("bad record {line:?}: {e}"))
                })
                .filter(|r| r["pid"] == pid)
                .collect()
        })
    };
    Run {
        pid,
        status,
        stdout: read("stdout.txt"),
        stderr: read("stderr.txt"),
        crash: records(&crash_file),
        timeline: records(&timeline_file),
        dir,
    }
}

fn wait(child: &mut Child, plan: &Plan, stdout: &Path) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if let Some(text) = &plan.kill_when {
            if std::fs::read_to_string(stdout).is_ok_and(|out| out.contains(text.as_str())) {
                child.kill().unwrap();
                return child.wait().unwrap();
            }
        }
        if started.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            panic!(
                "{} {:?} still ran after {RUN_TIMEOUT:?}",
                plan.program.display(),
                plan.args
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn file(path: &Path) -> Stdio {
    Stdio::from(std::fs::File::create(path).unwrap())
}

/// A `"0x…"` field as a number.
pub fn hex(value: &Value) -> u64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a hex string: {value}"));
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{text}: {e}"))
}

pub fn t_ns(record: &Value) -> u64 {
    record["t_ns"].as_u64().unwrap()
}
