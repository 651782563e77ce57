//! Runs real programs with the trace layer on lavapipe, under the real validation layer, each
//! in its own directory, and reads back what they left: the trace and the validation log.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use serde_json::Value;

pub const LAVAPIPE: &str = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
pub const VALIDATION_DIR: &str = "/usr/share/vulkan/explicit_layer.d";
pub const VALIDATION: &str = "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json";
pub const TRACE_LAYER: &str = "VK_LAYER_VKEXIT_trace";
pub const VALIDATION_LAYER: &str = "VK_LAYER_KHRONOS_validation";
pub const SIGSEGV: i32 = 11;

/// `target/<profile>`, where cargo puts the layer, the scenarios, mock and refrt.
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    deps.parent().expect("profile directory").to_path_buf()
}

/// A program or library the workspace builds; fails naming the build command when missing.
pub fn built(name: &str) -> PathBuf {
    let path = build_dir().join(name);
    let release = if build_dir().ends_with("release") {
        " --release"
    } else {
        ""
    };
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (cargo build{release} --workspace)",
        path.display()
    );
    path
}

/// The layer library cargo built for this test run: in `deps/` beside the test executable
/// (`cargo test` does not copy it up), else in the build directory.
pub fn layer_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let fresh = exe
        .parent()
        .expect("deps directory")
        .join("libVkLayer_vkexit_trace.so");
    if fresh.exists() {
        return fresh;
    }
    built("libVkLayer_vkexit_trace.so")
}

/// Fails, naming what to install, when lavapipe or the validation layer is missing.
pub fn require_vulkan() {
    for (path, what) in [
        (LAVAPIPE, "Mesa's lavapipe (mesa-vulkan-drivers)"),
        (VALIDATION, "the validation layer (vulkan-validationlayers)"),
    ] {
        assert!(
            Path::new(path).exists(),
            "{what} is not installed ({path}): run ci/setup.sh"
        );
    }
}

/// Which layers a run enables, from the application down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layers {
    TraceAndValidation,
    ValidationOnly,
}

/// One run of a program: its own directory, the trace layer's manifest there (pointing at the
/// built library), validation settings in a file, lavapipe as the only driver.
pub struct Run {
    dir: tempfile::TempDir,
    layers: Layers,
    trace_file: bool,
}

/// What a run left behind.
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub trace_path: PathBuf,
    /// The trace, one JSON object per line (empty without a trace file).
    pub trace: Vec<Value>,
    /// Message ids in the validation log, with their counts.
    pub vuids: BTreeMap<String, usize>,
}

impl Run {
    pub fn new(layers: Layers) -> Self {
        require_vulkan();
        Run {
            dir: tempfile::tempdir().expect("temp dir"),
            layers,
            trace_file: true,
        }
    }

    /// Leaves `VKEXIT_TRACE_FILE` unset.
    pub fn without_trace_file(mut self) -> Self {
        self.trace_file = false;
        self
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A directory holding only the trace layer's manifest.
    pub fn layer_dir(&self) -> PathBuf {
        let dir = self.dir().join("layers");
        fs::create_dir_all(&dir).unwrap();
        write_manifest(&dir);
        dir
    }

    /// Runs `program` (a name in the build directory) with `args`.
    pub fn program(&self, program: &str, args: &[&str]) -> Outcome {
        self.command(built(program), args, &[])
    }

    /// Runs a program with `args` and extra environment.
    pub fn command(&self, program: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        let dir = self.dir();
        let layer_dir = self.layer_dir();
        let log = dir.join("validation.log");
        let settings = dir.join("vk_layer_settings.txt");
        fs::write(
            &settings,
            format!(
                "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
                 khronos_validation.log_filename = {}\n\
                 khronos_validation.report_flags = error,warn\n",
                log.display()
            ),
        )
        .unwrap();
        let xdg = dir.join("xdg");
        fs::create_dir_all(&xdg).unwrap();
        let trace_path = dir.join("trace.jsonl");
        let layers = match self.layers {
            Layers::TraceAndValidation => format!("{TRACE_LAYER}:{VALIDATION_LAYER}"),
            Layers::ValidationOnly => VALIDATION_LAYER.to_string(),
        };
        let mut command = Command::new(&program);
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("HOME", dir)
            .env("XDG_RUNTIME_DIR", &xdg)
            .env("VK_ICD_FILENAMES", LAVAPIPE)
            .env("VK_DRIVER_FILES", LAVAPIPE)
            .env(
                "VK_LAYER_PATH",
                format!("{}:{VALIDATION_DIR}", layer_dir.display()),
            )
            .env("VK_INSTANCE_LAYERS", layers)
            .env("VK_LAYER_SETTINGS_PATH", &settings)
            .env("VKEXIT_REFRT_LIB", built("libvkexit_refrt.so"));
        if self.trace_file {
            command.env("VKEXIT_TRACE_FILE", &trace_path);
        }
        command.envs(env.iter().copied());
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("{} does not run: {e}", program.display()));
        // The layer creates its log when it loads: proof that validation was active.
        let log = fs::read_to_string(&log).unwrap_or_else(|e| {
            panic!(
                "no validation log ({e}): the validation layer did not load\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        Outcome {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            trace: read_trace(&trace_path),
            trace_path,
            vuids: vuids(&log),
        }
    }
}

/// The committed manifest, with `library_path` pointing at the built library.
fn write_manifest(dir: &Path) {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("VkLayer_vkexit_trace.json");
    let mut manifest: Value =
        serde_json::from_str(&fs::read_to_string(committed).unwrap()).expect("manifest is JSON");
    let library = layer_library();
    manifest["layer"]["library_path"] = Value::from(library.to_str().unwrap());
    fs::write(
        dir.join("VkLayer_vkexit_trace.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// Every line of the trace as JSON; each must be a whole object. NUL bytes (what the mapped
/// writer leaves unused when a process does not exit cleanly) end a line too.
fn read_trace(path: &Path) -> Vec<Value> {
    let Ok(text) = fs::read_to_string(path) else {
        return Vec::new();
    };
    text.split(['\n', '\0'])
        .filter(|line| !line.is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON record ({e}): {line}"))
        })
        .collect()
}

/// `[ VUID-… ]` and `[ UNASSIGNED-… ]` ids, as the harness matches them.
fn vuids(log: &str) -> BTreeMap<String, usize> {
    let mut ids = BTreeMap::new();
    for part in log.split("[ ").skip(1) {
        let Some(end) = part.find(" ]") else { continue };
        let id = &part[..end];
        let valid = id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if valid && (id.starts_with("VUID-") || id.starts_with("UNASSIGNED-")) {
            *ids.entry(id.to_string()).or_insert(0) += 1;
        }
    }
    ids
}

impl Outcome {
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    /// What to print when an assertion fails.
    pub fn explain(&self) -> String {
        let trace: Vec<String> = self.trace.iter().map(Value::to_string).collect();
        format!(
            "status {:?}\nvuids {:?}\nstdout:\n{}\nstderr:\n{}\ntrace:\n{}",
            self.status,
            self.vuids,
            self.stdout,
            self.stderr,
            trace.join("\n")
        )
    }

    pub fn records(&self, ev: &str) -> Vec<&Value> {
        self.trace.iter().filter(|r| r["ev"] == ev).collect()
    }

    /// `alive` records of `when`.
    pub fn alive(&self, when: &str) -> Vec<&Value> {
        self.records("alive")
            .into_iter()
            .filter(|r| r["when"] == when)
            .collect()
    }

    /// The types of `records`, sorted.
    pub fn types(records: &[&Value]) -> Vec<String> {
        let mut types: Vec<String> = records
            .iter()
            .map(|r| r["type"].as_str().unwrap().to_string())
            .collect();
        types.sort();
        types
    }

    /// The handle of the only created object of type `ty`.
    pub fn created_handle(&self, ty: &str) -> String {
        let created: Vec<&Value> = self
            .records("create")
            .into_iter()
            .filter(|r| r["type"] == ty)
            .collect();
        assert_eq!(created.len(), 1, "one {ty}\n{}", self.explain());
        created[0]["handle"].as_str().unwrap().to_string()
    }

    /// Index of the first record matching `pred`.
    pub fn position(&self, pred: impl Fn(&Value) -> bool) -> Option<usize> {
        self.trace.iter().position(pred)
    }

    /// Asserts that the trace layer added no message id: each id and count seen here is also
    /// seen in `without`, the same program run with validation alone.
    pub fn adds_no_vuid_to(&self, without: &Outcome) {
        for (id, &count) in &self.vuids {
            let before = without.vuids.get(id).copied().unwrap_or(0);
            assert!(
                count <= before,
                "{id} ×{count} with the trace layer, ×{before} without\nwith:\n{}\nwithout:\n{}",
                self.explain(),
                without.explain()
            );
        }
    }
}

/// Runs `program args` with the trace layer and validation, then with validation alone, and
/// checks that the trace layer added no message id. Returns the traced run.
pub fn traced_and_compared(program: &str, args: &[&str]) -> Outcome {
    let traced = Run::new(Layers::TraceAndValidation).program(program, args);
    let plain = Run::new(Layers::ValidationOnly).program(program, args);
    traced.adds_no_vuid_to(&plain);
    assert_eq!(
        traced.status.code(),
        plain.status.code(),
        "the trace layer changed how the program ended\nwith:\n{}\nwithout:\n{}",
        traced.explain(),
        plain.explain()
    );
    assert_eq!(traced.signal(), plain.signal());
    traced
}
