//! Real processes on lavapipe, under the real Khronos validation layer, with
//! `VK_LAYER_VKEXIT_tegra_exit` next to the driver, as vkexit enables it:
//! the refrt `clean-exit` scenario under each teardown policy, and `mock`.
//!
//! These tests fail, never skip, when lavapipe, the validation layer or the built programs are
//! missing; the message says what to install or build.

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const LAYER: &str = "VK_LAYER_VKEXIT_tegra_exit";
const VALIDATION: &str = "VK_LAYER_KHRONOS_validation";
const VALIDATION_MANIFESTS: &str = "/usr/share/vulkan/explicit_layer.d";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// What the tests need from the machine and the build, found once per test.
struct Setup {
    icd: PathBuf,
    layer_lib: PathBuf,
    clean_exit: PathBuf,
    buffer_kept: PathBuf,
    mock: PathBuf,
    refrt: PathBuf,
}

fn setup() -> Setup {
    let arch = std::env::consts::ARCH;
    let icd = PathBuf::from(format!("/usr/share/vulkan/icd.d/lvp_icd.{arch}.json"));
    assert!(
        icd.is_file(),
        "lavapipe is not installed ({} is missing): run ci/setup.sh or `apt-get install mesa-vulkan-drivers`",
        icd.display()
    );
    let validation = Path::new(VALIDATION_MANIFESTS).join("VkLayer_khronos_validation.json");
    assert!(
        validation.is_file(),
        "the Khronos validation layer is not installed ({} is missing): run ci/setup.sh or `apt-get install vulkan-validationlayers`",
        validation.display()
    );
    Setup {
        icd,
        layer_lib: layer_library(),
        clean_exit: built("clean-exit"),
        buffer_kept: built("buffer-kept-at-exit"),
        mock: built("mock"),
        refrt: built("libvkexit_refrt.so"),
    }
}

/// The layer as `cargo test` built it for this test run (the cdylib next to the rlib the test
/// links), so the processes always load the code under test.
fn layer_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let library = deps.join("libVkLayer_vkexit_tegra_exit.so");
    assert!(
        library.is_file(),
        "{} is missing: run `cargo test -p vkexit-layer-tegra-exit`, which builds it",
        library.display()
    );
    library
}

/// A built program or library of another crate: from this test's own profile directory, else
/// from `target/release`.
fn built(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let release_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release");
    let candidates = [profile_dir.join(name), release_dir.join(name)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
            "{name} is not built (looked at {} and {}): run `cargo build --release --workspace`",
            candidates[0].display(),
            candidates[1].display()
        )
        })
}

/// How a run is set up.
#[derive(Clone, Copy)]
struct Plan<'a> {
    program: &'a Path,
    args: &'a [&'a str],
    /// `None` → the tegra layer is not enabled (validation only).
    mode: Option<&'a str>,
}

/// What a run left behind.
struct Run {
    status: ExitStatus,
    records: Vec<Value>,
    validation_log: Option<String>,
    output: String,
}

impl Run {
    fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    fn events(&self) -> Vec<&str> {
        self.records
            .iter()
            .filter_map(|r| r["ev"].as_str())
            .collect()
    }

    fn record(&self, ev: &str) -> &Value {
        self.records
            .iter()
            .find(|r| r["ev"] == ev)
            .unwrap_or_else(|| panic!("no {ev:?} record in {:?}\n{}", self.events(), self.output))
    }

    /// Every message id in the validation log, with its count; the log must exist, which
    /// proves that validation was active with this run's settings.
    fn vuids(&self) -> BTreeMap<String, usize> {
        let log = self.validation_log.as_deref().unwrap_or_else(|| {
            panic!(
                "the validation log was not created: validation was not active\n{}",
                self.output
            )
        });
        let mut counts = BTreeMap::new();
        for id in log.split("[ ").skip(1).filter_map(|s| s.split(" ]").next()) {
            if id.starts_with("VUID-") || id.starts_with("UNASSIGNED-") {
                *counts.entry(id.to_owned()).or_default() += 1;
            }
        }
        counts
    }

    fn describe(&self) -> String {
        format!(
            "status {:?}, events {:?}\n{}",
            self.status,
            self.events(),
            self.output
        )
    }
}

fn run(setup: &Setup, plan: Plan<'_>) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let layer_dir = dir.path().join("layers");
    std::fs::create_dir(&layer_dir).unwrap();
    write_manifest(&layer_dir, &setup.layer_lib);
    let runtime_dir = dir.path().join("xdg-runtime");
    std::fs::create_dir(&runtime_dir).unwrap();
    std::fs::set_permissions(
        &runtime_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let validation_log = dir.path().join("validation.log");
    let settings = dir.path().join("vk_layer_settings.txt");
    std::fs::write(
        &settings,
        format!(
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
             khronos_validation.log_filename = {}\n\
             khronos_validation.report_flags = error,warn\n",
            validation_log.display()
        ),
    )
    .unwrap();
    let evidence = dir.path().join("tegra.jsonl");
    let layers = match plan.mode {
        Some(_) => format!("{VALIDATION}:{LAYER}"),
        None => VALIDATION.to_owned(),
    };

    let mut command = Command::new(plan.program);
    command
        .args(plan.args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_RUNTIME_DIR", &runtime_dir)
        .env("VK_ICD_FILENAMES", &setup.icd)
        .env("VK_DRIVER_FILES", &setup.icd)
        .env(
            "VK_LAYER_PATH",
            format!("{}:{VALIDATION_MANIFESTS}", layer_dir.display()),
        )
        .env("VK_INSTANCE_LAYERS", layers)
        .env("VK_LAYER_SETTINGS_PATH", &settings)
        .env("VKEXIT_REFRT_LIB", &setup.refrt)
        .env("VKEXIT_TEGRA_LOG", &evidence)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(dir.path().join("stdout.txt").pipe())
        .stderr(dir.path().join("stderr.txt").pipe());
    if let Some(mode) = plan.mode {
        command.env("VKEXIT_TEGRA_MODE", mode);
    }
    // SAFETY: setrlimit is async-signal-safe; no core dumps of crashing runs.
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
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            panic!(
                "{} {:?} still ran after {RUN_TIMEOUT:?}",
                plan.program.display(),
                plan.args
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };

    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let records = read("tegra.jsonl")
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("bad record {line:?}: {e}"))
        })
        .collect();
    Run {
        status,
        records,
        validation_log: std::fs::read_to_string(&validation_log).ok(),
        output: format!(
            "--- stdout\n{}--- stderr\n{}",
            read("stdout.txt"),
            read("stderr.txt")
        ),
    }
}

/// The committed manifest, with the library path made absolute, as vkexit does at run time.
fn write_manifest(dir: &Path, library: &Path) {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("VkLayer_vkexit_tegra_exit.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(committed).unwrap()).unwrap();
    manifest["layer"]["library_path"] = Value::from(library.to_str().unwrap());
    std::fs::write(
        dir.join("VkLayer_vkexit_tegra_exit.json"),
        manifest.to_string(),
    )
    .unwrap();
}

trait Pipe {
    fn pipe(&self) -> Stdio;
}

impl Pipe for PathBuf {
    fn pipe(&self) -> Stdio {
        Stdio::from(std::fs::File::create(self).unwrap())
    }
}

fn clean_exit<'a>(setup: &'a Setup, policy: &'a str, mode: Option<&'a str>) -> Plan<'a> {
    let args: &'static [&'static str] = match policy {
        "never" => &["--runtime", "refrt:never"],
        "static-destructor" => &["--runtime", "refrt:static-destructor"],
        "atexit-after-init" => &["--runtime", "refrt:atexit-after-init"],
        "guarded" => &["--runtime", "refrt:guarded"],
        "release-children" => &["--runtime", "refrt:release-children"],
        other => panic!("no such policy {other}"),
    };
    Plan {
        program: &setup.clean_exit,
        args,
        mode,
    }
}

fn assert_crashed_in_the_unmapped_region(run: &Run) {
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    let mapped = run.record("region-mapped");
    let unmapped = run.record("region-unmapped");
    assert_eq!(
        (&mapped["start"], &mapped["end"]),
        (&unmapped["start"], &unmapped["end"])
    );
    let start = run.record("exit-handler-start");
    assert!(
        start["live_workers"].as_u64().unwrap() >= 1,
        "{}",
        run.describe()
    );
    assert!(run.events().contains(&"worker-started"));
    assert!(
        !run.events().contains(&"worker-stopped"),
        "{}",
        run.describe()
    );
    assert!(
        !run.events().contains(&"exit-handler-end"),
        "the handler outlived the fault: {}",
        run.describe()
    );
}

fn assert_clean_exit(run: &Run) {
    assert!(run.status.success(), "{}", run.describe());
    let started = run.record("worker-started");
    let stopped = run.record("worker-stopped");
    assert_eq!(started["worker"], stopped["worker"]);
    assert_eq!(started["worker_tid"], stopped["worker_tid"]);
    assert_eq!(run.record("exit-handler-start")["live_workers"], 0);
    assert!(run.events().contains(&"region-unmapped"));
    assert!(!run.events().contains(&"waiting-for-fault"));
    assert_eq!(
        run.events().last(),
        Some(&"exit-handler-end"),
        "{}",
        run.describe()
    );
}

fn assert_loaded(run: &Run, mode: &str) {
    let loaded = run.record("loaded");
    assert_eq!(loaded["layer"], LAYER);
    assert_eq!(loaded["mode"], mode);
    assert!(
        loaded["instance"]
            .as_str()
            .is_some_and(|h| h.starts_with("0x")),
        "{loaded}"
    );
}

#[test]
fn clean_exit_under_never_crashes_with_sigsegv_in_the_unmapped_region() {
    let setup = setup();
    let run = run(&setup, clean_exit(&setup, "never", Some("deterministic")));
    assert_loaded(&run, "deterministic");
    assert_crashed_in_the_unmapped_region(&run);
    assert!(run.events().contains(&"waiting-for-fault"));
    let worker = run.record("worker-started");
    assert_eq!(worker["worker"], "vkexit-tegra-0");
    assert!(worker["worker_tid"].as_i64().unwrap() > 0);
    assert!(
        run.output.contains("vkexit-step: main returns"),
        "{}",
        run.output
    );
    assert_eq!(run.vuids(), BTreeMap::new());
}

#[test]
fn clean_exit_under_static_destructor_crashes_too() {
    let setup = setup();
    let run = run(
        &setup,
        clean_exit(&setup, "static-destructor", Some("deterministic")),
    );
    assert_crashed_in_the_unmapped_region(&run);
    assert_eq!(run.vuids(), BTreeMap::new());
}

#[test]
fn clean_exit_under_teardown_registered_after_init_exits_0() {
    let setup = setup();
    for policy in ["atexit-after-init", "guarded", "release-children"] {
        let run = run(&setup, clean_exit(&setup, policy, Some("deterministic")));
        assert_loaded(&run, "deterministic");
        assert_clean_exit(&run);
        assert_eq!(run.vuids(), BTreeMap::new(), "{policy}");
    }
}

#[test]
fn mock_with_clean_teardown_exits_0_in_every_mode() {
    let setup = setup();
    for mode in ["deterministic", "racy", "off"] {
        let run = run(
            &setup,
            Plan {
                program: &setup.mock,
                args: &[],
                mode: Some(mode),
            },
        );
        assert!(run.status.success(), "{mode}: {}", run.describe());
        assert_loaded(&run, mode);
        assert_eq!(run.vuids(), BTreeMap::new(), "{mode}");
        if mode != "off" {
            assert_clean_exit(&run);
        }
    }
}

#[test]
fn mock_keeping_vulkan_alive_crashes_deterministically() {
    let setup = setup();
    let run = run(
        &setup,
        Plan {
            program: &setup.mock,
            args: &["--keep-vulkan"],
            mode: Some("deterministic"),
        },
    );
    assert_crashed_in_the_unmapped_region(&run);
}

#[test]
fn off_is_a_pure_pass_through_that_never_crashes() {
    let setup = setup();
    let plans = [
        Plan {
            program: &setup.mock,
            args: &["--keep-vulkan"],
            mode: Some("off"),
        },
        clean_exit(&setup, "never", Some("off")),
        clean_exit(&setup, "static-destructor", Some("off")),
    ];
    for plan in plans {
        let run = run(&setup, plan);
        assert!(run.status.success(), "{:?}: {}", plan.args, run.describe());
        assert_loaded(&run, "off");
        assert_eq!(run.events(), ["loaded"], "{}", run.describe());
    }
}

#[test]
fn racy_mode_never_waits_and_ends_in_sigsegv_or_exit_0() {
    let setup = setup();
    let run = run(&setup, clean_exit(&setup, "never", Some("racy")));
    assert_loaded(&run, "racy");
    assert!(
        run.status.success() || run.signal() == Some(libc::SIGSEGV),
        "{}",
        run.describe()
    );
    assert!(
        !run.events().contains(&"waiting-for-fault"),
        "{}",
        run.describe()
    );
    assert_eq!(run.record("exit-handler-start")["live_workers"], 1);
}

#[test]
fn an_unknown_mode_is_deterministic_with_a_warning() {
    let setup = setup();
    let run = run(
        &setup,
        Plan {
            program: &setup.mock,
            args: &["--keep-vulkan"],
            mode: Some("sometimes"),
        },
    );
    assert_loaded(&run, "deterministic");
    let warning = run.record("warning");
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("\"sometimes\""),
        "{warning}"
    );
    assert_crashed_in_the_unmapped_region(&run);
}

/// The layer adds no validation message, and hides none: the same ids, the same counts, with
/// and without it, in runs that have messages and runs that have none.
#[test]
fn validation_reports_the_same_with_and_without_the_layer() {
    let setup = setup();
    let cases: [(&Path, &[&str]); 3] = [
        (&setup.buffer_kept, &["--runtime", "refrt:guarded"]),
        (&setup.clean_exit, &["--runtime", "refrt:release-children"]),
        (&setup.mock, &["--vuid"]),
    ];
    for (program, args) in cases {
        let with = run(
            &setup,
            Plan {
                program,
                args,
                mode: Some("deterministic"),
            },
        );
        let without = run(
            &setup,
            Plan {
                program,
                args,
                mode: None,
            },
        );
        assert!(
            with.status.success() && without.status.success(),
            "{args:?}: {}",
            with.describe()
        );
        assert_eq!(
            with.vuids(),
            without.vuids(),
            "{} {args:?}",
            program.display()
        );
        assert!(without.records.is_empty());
    }
    let kept = run(
        &setup,
        Plan {
            program: &setup.buffer_kept,
            args: &["--runtime", "refrt:guarded"],
            mode: Some("deterministic"),
        },
    );
    assert!(
        !kept.vuids().is_empty(),
        "buffer-kept-at-exit under guarded should report 00378"
    );
}
