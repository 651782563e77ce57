//! `vkexit` itself, run in a sandbox directory of its own, and the results file it writes.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The build directory, checked to hold vkexit and what its runs start: the mock, the
/// scenarios and refrt.
pub fn bin_dir() -> PathBuf {
    let vkexit = vkexit_program();
    let dir = vkexit
        .parent()
        .expect("vkexit has a directory")
        .to_path_buf();
    for name in ["mock", "clean-exit", "libvkexit_refrt.so"] {
        assert!(
            dir.join(name).exists(),
            "{} is missing: build the workspace first (cargo build --release --workspace, or ci/setup-tests.sh)",
            dir.join(name).display()
        );
    }
    dir
}

/// The vkexit binary cargo built for the harness's tests.
pub fn vkexit_program() -> PathBuf {
    assert_cmd::cargo::cargo_bin("vkexit")
}

/// The mock scenario program.
pub fn mock() -> PathBuf {
    bin_dir().join("mock")
}

/// A private working directory for vkexit commands.
pub struct Sandbox {
    /// The directory, removed when the sandbox is dropped.
    pub dir: tempfile::TempDir,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    /// A fresh, empty sandbox.
    pub fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// The sandbox's directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// vkexit, working in the sandbox, with a runtime directory of its own for lavapipe.
    pub fn vkexit(&self) -> Command {
        let xdg = self.path().join("xdg");
        std::fs::create_dir_all(&xdg).expect("the sandbox's runtime directory");
        let mut cmd = Command::new(vkexit_program());
        // Not a terminal: its reports keep to the width vkexit uses then, whatever the shell
        // that started the tests has in $COLUMNS.
        cmd.current_dir(self.path())
            .env("XDG_RUNTIME_DIR", &xdg)
            .env_remove("COLUMNS");
        cmd
    }

    /// Where [`Sandbox::run`] has vkexit write its results.
    pub fn results(&self) -> PathBuf {
        self.path().join("r.json")
    }

    /// The results file a command run in this sandbox wrote.
    pub fn read_results(&self) -> Value {
        let text = std::fs::read_to_string(self.results()).expect("a results file");
        serde_json::from_str(&text).expect("results are JSON")
    }

    /// vkexit with `args` ([`Args`](crate::results::Args)): its exit code, and the results
    /// file `file` it wrote, typed.
    pub fn gate(&self, args: &crate::results::Args, file: &str) -> (i32, crate::results::Results) {
        let out = self.vkexit().args(args).output().expect("vkexit starts");
        let code = out.status.code().expect("vkexit exits normally");
        let path = self.path().join(file);
        assert!(
            path.exists(),
            "no {file}: exit {code}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (code, crate::results::read(&path))
    }

    /// The results file a command run in this sandbox wrote ([`Sandbox::results`]), typed.
    pub fn gate_results(&self) -> crate::results::Results {
        crate::results::read(&self.results())
    }

    /// `vkexit run --driver lavapipe --json r.json ARGS` ([`Sandbox::run`]): its exit code and
    /// its results, typed. `ARGS` may end with `-- PROGRAM …`.
    pub fn gate_run(&self, args: &[&str]) -> (i32, crate::results::Results) {
        let args = crate::results::Args::run().json("r.json").flags(args);
        self.gate(&args, "r.json")
    }

    /// The mock scenario as an external case, `runs` runs ([`Sandbox::run_mock`]): the exit
    /// code and the results, typed.
    pub fn gate_mock(
        &self,
        runs: u32,
        vkexit_args: &[&str],
        mock_args: &[&str],
    ) -> (i32, crate::results::Results) {
        let args = crate::results::Args::run()
            .json("r.json")
            .runs(runs)
            .flags(vkexit_args)
            .program(&mock(), mock_args);
        self.gate(&args, "r.json")
    }

    /// `vkexit run --driver lavapipe --json r.json ARGS`; returns the exit code and the
    /// results.
    pub fn run(&self, args: &[&str]) -> (i32, Value) {
        let out = self
            .vkexit()
            .args(["run", "--driver", "lavapipe", "--json"])
            .arg(self.results())
            .args(args)
            .output()
            .expect("vkexit starts");
        let code = out.status.code().expect("vkexit exits normally");
        let text = std::fs::read_to_string(self.results()).unwrap_or_else(|e| {
            panic!(
                "no results file ({e}); exit {code}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (code, serde_json::from_str(&text).expect("results are JSON"))
    }

    /// Runs the mock scenario as an external case.
    pub fn run_mock(&self, runs: u32, vkexit_args: &[&str], mock_args: &[&str]) -> (i32, Value) {
        let runs = runs.to_string();
        let mock = mock();
        let mut args: Vec<&str> = vec!["--runs", &runs];
        args.extend_from_slice(vkexit_args);
        args.push("--");
        args.push(mock.to_str().expect("a UTF-8 path"));
        args.extend_from_slice(mock_args);
        self.run(&args)
    }
}

/// The only cell of a results file.
pub fn only_cell(results: &Value) -> &Value {
    let cells = results["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1, "{results:#}");
    &cells[0]
}

/// How many runs of `cell` were judged `verdict`.
pub fn count(cell: &Value, verdict: &str) -> u64 {
    cell["counts"][verdict].as_u64().expect("a count")
}

/// Asserts that all `runs` runs of `cell` were judged `verdict`.
pub fn assert_all(cell: &Value, verdict: &str, runs: u64) {
    assert_eq!(count(cell, verdict), runs, "{cell:#}");
}

/// A JSON array of strings.
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// Mock processes whose command line holds every one of `words` (vkexit's own command line
/// may hold them too, so only programs named `mock` count).
pub fn mock_processes_with(words: &[&str]) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_mock = args[0].ends_with("/mock");
        if is_mock && words.iter().all(|w| args.iter().any(|a| a == w)) {
            found.push(pid);
        }
    }
    found
}
