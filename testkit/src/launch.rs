//! One run of a program in its own temporary directory: lavapipe as the only driver, the
//! layers a test enables (the validation layer with its settings file among them), output
//! and evidence files in that directory, read back when the program has ended.

use crate::vulkan;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a run may take before the test fails: far beyond any program's run here, so
/// that only a hang reaches it, even on a loaded machine.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A temporary run directory with a private `XDG_RUNTIME_DIR` (mode 0700, as Mesa wants it).
pub fn run_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let runtime = dir.path().join("xdg-runtime");
    std::fs::create_dir(&runtime).expect("the run's runtime directory");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
        .expect("the runtime directory's mode");
    dir
}

/// A program to run, and how. The environment starts empty but for `PATH`; `HOME`, the
/// working directory and `XDG_RUNTIME_DIR` are the run's own directory.
pub struct Launch {
    dir: tempfile::TempDir,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    lavapipe: bool,
    /// `VK_INSTANCE_LAYERS`, from the application down.
    layers: Vec<String>,
    validation: bool,
    timeout: Duration,
    kill_when: Option<String>,
}

impl Launch {
    /// Runs `program` in a fresh run directory, with no driver or layer chosen yet.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Launch {
            dir: run_dir(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            lavapipe: false,
            layers: Vec::new(),
            validation: false,
            timeout: RUN_TIMEOUT,
            kill_when: None,
        }
    }

    /// A program the workspace builds (see [`crate::built`]).
    pub fn built(name: &str) -> Self {
        Launch::new(crate::built(name))
    }

    /// The run's directory, where its files land; known before the run, for arguments and
    /// environment that name files in it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable, after everything the launch sets itself (so it may override that).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Lavapipe as the only driver (`VK_ICD_FILENAMES` and `VK_DRIVER_FILES`).
    pub fn lavapipe(mut self) -> Self {
        self.lavapipe = true;
        self
    }

    /// The Khronos validation layer, next in the layer order, logging errors and warnings to
    /// `validation.log` through its settings file. Implies lavapipe.
    pub fn validation(mut self) -> Self {
        vulkan::validation_manifest();
        self.validation = true;
        self.layers.push(vulkan::VALIDATION_LAYER.to_string());
        self.lavapipe()
    }

    /// A built layer, next in the layer order: its committed manifest is written into the
    /// run's `layers/` directory, pointing at `library`. Implies lavapipe.
    pub fn layer(mut self, name: &str, committed_manifest: &Path, library: &Path) -> Self {
        let dir = self.layer_dir();
        std::fs::create_dir_all(&dir).expect("the run's layer directory");
        vulkan::write_layer_manifest(committed_manifest, library, &dir);
        self.layers.push(name.to_string());
        self.lavapipe()
    }

    /// `VKEXIT_REFRT_LIB`: the reference runtime the scenarios load.
    pub fn refrt(self) -> Self {
        let library = crate::built("libvkexit_refrt.so");
        self.env("VKEXIT_REFRT_LIB", library)
    }

    /// Fails the test when the program runs longer than this.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// Kills the program once its stdout holds `text` (for a program meant to hang).
    pub fn kill_when(mut self, text: &str) -> Self {
        self.kill_when = Some(text.to_string());
        self
    }

    /// The directory of the manifests [`Launch::layer`] writes.
    pub fn layer_dir(&self) -> PathBuf {
        self.dir().join("layers")
    }

    fn command(&self) -> Command {
        let dir = self.dir();
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("XDG_RUNTIME_DIR", dir.join("xdg-runtime"))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(file(&dir.join("stdout.txt")))
            .stderr(file(&dir.join("stderr.txt")));
        if self.lavapipe {
            let icd = vulkan::lavapipe_icd();
            command
                .env("VK_ICD_FILENAMES", &icd)
                .env("VK_DRIVER_FILES", &icd);
        }
        let mut layer_path = Vec::new();
        if self.layer_dir().is_dir() {
            layer_path.push(self.layer_dir().display().to_string());
        }
        if self.validation {
            layer_path.push(vulkan::VALIDATION_MANIFEST_DIR.to_string());
            let settings = vulkan::write_validation_settings(dir, &dir.join("validation.log"));
            command.env("VK_LAYER_SETTINGS_PATH", settings);
        }
        if !layer_path.is_empty() {
            command.env("VK_LAYER_PATH", layer_path.join(":"));
        }
        if !self.layers.is_empty() {
            command.env("VK_INSTANCE_LAYERS", self.layers.join(":"));
        }
        for (key, value) in &self.env {
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
        command
    }

    /// Runs the program to its end and reads back what it left.
    pub fn run(self) -> Ran {
        let mut child = self
            .command()
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.program.display()));
        let pid = child.id();
        let status = self.wait(&mut child);
        let read = |name: &str| std::fs::read_to_string(self.dir().join(name)).unwrap_or_default();
        Ran {
            pid,
            status,
            stdout: read("stdout.txt"),
            stderr: read("stderr.txt"),
            validation: self.validation,
            dir: self.dir,
        }
    }

    fn wait(&self, child: &mut Child) -> ExitStatus {
        let started = Instant::now();
        let stdout = self.dir().join("stdout.txt");
        loop {
            if let Some(status) = child.try_wait().expect("waiting for the program") {
                return status;
            }
            if let Some(text) = &self.kill_when {
                if std::fs::read_to_string(&stdout).is_ok_and(|out| out.contains(text.as_str())) {
                    child.kill().expect("killing the program");
                    return child.wait().expect("waiting for the killed program");
                }
            }
            if started.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} {:?} still ran after {:?}",
                    self.program.display(),
                    self.args,
                    self.timeout
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn file(path: &Path) -> Stdio {
    Stdio::from(
        std::fs::File::create(path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display())),
    )
}

/// What a run left behind. Its directory lives as long as this value.
pub struct Ran {
    /// The run directory, removed when this value is dropped.
    pub dir: tempfile::TempDir,
    /// The program's process id.
    pub pid: u32,
    /// How the program ended.
    pub status: ExitStatus,
    /// What it wrote on stdout.
    pub stdout: String,
    /// What it wrote on stderr.
    pub stderr: String,
    validation: bool,
}

impl Ran {
    /// The run directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The exit code, unless a signal ended the program.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The signal that ended the program, if one did.
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    /// A file the run left in its directory, if it exists.
    pub fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.path().join(name)).ok()
    }

    /// The validation layer's log. The layer creates it when it loads, so a missing log means
    /// validation was not active, and the test fails saying so.
    pub fn validation_log(&self) -> String {
        assert!(
            self.validation,
            "this run did not enable the validation layer"
        );
        self.read("validation.log").unwrap_or_else(|| {
            panic!(
                "no validation log: the validation layer did not load\n{}",
                self.output()
            )
        })
    }

    /// The message ids of the validation log, with their counts (see [`Ran::validation_log`]).
    pub fn vuids(&self) -> BTreeMap<String, usize> {
        vulkan::vuids(&self.validation_log())
    }

    /// The JSON-lines file `name` of the run directory; `None` when it does not exist.
    pub fn json_lines(&self, name: &str) -> Option<Vec<Value>> {
        json_lines(&self.path().join(name))
    }

    /// How the run ended and its output, for assertion messages.
    pub fn output(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Every line of a JSON-lines file, each a whole JSON value; `None` when the file does not
/// exist. A NUL byte ends a line too: a memory-mapped writer leaves its unused tail as NULs
/// when the process does not exit cleanly.
pub fn json_lines(path: &Path) -> Option<Vec<Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.split(['\n', '\0'])
            .filter(|line| !line.is_empty())
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!("{}: not a JSON record ({e}): {line}", path.display())
                })
            })
            .collect(),
    )
}
