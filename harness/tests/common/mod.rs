//! What the integration tests share: the built binaries, a private working
//! directory per test, and the results file read back as JSON.

#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `target/release` (or debug): vkexit, the scenarios and refrt side by side.
pub fn bin_dir() -> PathBuf {
    let vkexit = assert_cmd::cargo::cargo_bin("vkexit");
    let dir = vkexit
        .parent()
        .expect("vkexit has a directory")
        .to_path_buf();
    for name in ["mock", "clean-exit", "libvkexit_refrt.so"] {
        assert!(
            dir.join(name).exists(),
            "{} is missing: build the workspace first (cargo build --release --workspace, or ci/setup.sh)",
            dir.join(name).display()
        );
    }
    dir
}

pub fn mock() -> PathBuf {
    bin_dir().join("mock")
}

pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// vkexit, working in the sandbox, with lavapipe's runtime dir set.
    pub fn vkexit(&self) -> Command {
        let xdg = self.path().join("xdg");
        std::fs::create_dir_all(&xdg).unwrap();
        let mut cmd = Command::cargo_bin("vkexit").unwrap();
        cmd.current_dir(self.path()).env("XDG_RUNTIME_DIR", &xdg);
        cmd
    }

    pub fn results(&self) -> PathBuf {
        self.path().join("r.json")
    }

    /// The results file a command run in this sandbox wrote.
    pub fn read_results(&self) -> Value {
        let text = std::fs::read_to_string(self.results()).expect("a results file");
        serde_json::from_str(&text).expect("results are JSON")
    }

    /// `vkexit run --driver lavapipe --json r.json ARGS`; returns the exit
    /// code and the results.
    pub fn run(&self, args: &[&str]) -> (i32, Value) {
        let out = self
            .vkexit()
            .args(["run", "--driver", "lavapipe", "--json"])
            .arg(self.results())
            .args(args)
            .output()
            .unwrap();
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
        args.push(mock.to_str().unwrap());
        args.extend_from_slice(mock_args);
        self.run(&args)
    }
}

/// The library of lavapipe's installed ICD manifest.
pub fn lavapipe_library() -> String {
    let dir = std::path::Path::new("/usr/share/vulkan/icd.d");
    let manifest = std::fs::read_dir(dir)
        .expect("the ICD manifests of mesa-vulkan-drivers")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("lvp_icd")
        })
        .expect("lavapipe is installed (apt-get install mesa-vulkan-drivers)");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    json["ICD"]["library_path"].as_str().unwrap().to_string()
}

/// The only cell of a results file.
pub fn only_cell(results: &Value) -> &Value {
    let cells = results["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1, "{results:#}");
    &cells[0]
}

pub fn count(cell: &Value, verdict: &str) -> u64 {
    cell["counts"][verdict].as_u64().expect("a count")
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Mock processes whose command line holds every one of `words` (vkexit's
/// own command line may hold them too, so only programs named `mock` count).
pub fn mock_processes_with(words: &[&str]) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
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
