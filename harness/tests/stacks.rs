//! What differs between Vulkan stacks: a validation layer that prints on stdout (1.4 does by
//! default) must not break driver probing, and a matrix may name which validation layer build
//! its cells run under. Real layers, real lavapipe.

use serde_json::Value;
use std::path::{Path, PathBuf};
use vkexit_testkit::vkexit::*;
use vkexit_testkit::vulkan::{lavapipe_icd, validation_manifest};

fn system_manifest() -> Value {
    let text = std::fs::read_to_string(validation_manifest()).expect("Debian's validation layer");
    serde_json::from_str(&text).expect("a JSON manifest")
}

/// The system validation layer as an implicit layer (found under `XDG_CONFIG_HOME`, so every
/// instance loads it), with a settings file that makes it print its status message on stdout
/// at `vkCreateInstance`: what layer 1.4 does with no settings of its own.
fn layer_printing_on_stdout(sb: &Sandbox) -> [(&'static str, PathBuf); 2] {
    let config = sb.path().join("config");
    let dir = config.join("vulkan/implicit_layer.d");
    std::fs::create_dir_all(&dir).unwrap();
    let mut manifest = system_manifest();
    manifest["layer"]["disable_environment"] = serde_json::json!({ "VKEXIT_TEST_LAYER_OFF": "1" });
    std::fs::write(
        dir.join("VkLayer_khronos_validation.json"),
        manifest.to_string(),
    )
    .unwrap();
    let settings = sb.path().join("stdout_settings.txt");
    std::fs::write(
        &settings,
        "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
         khronos_validation.log_filename = stdout\n\
         khronos_validation.report_flags = info,warn,perf,error\n\
         khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_BEST_PRACTICES_EXT\n",
    )
    .unwrap();
    [
        ("XDG_CONFIG_HOME", config),
        ("VK_LAYER_SETTINGS_PATH", settings),
    ]
}

#[test]
fn doctor_is_ready_when_a_layer_prints_on_stdout() {
    let sb = Sandbox::new();
    let env = layer_printing_on_stdout(&sb);

    // The layer really prints on stdout, before the report, where the probe once read its report.
    let mut probe = sb.vkexit();
    probe
        .arg("probe-driver")
        .env("VK_ICD_FILENAMES", lavapipe_icd());
    for (k, v) in &env {
        probe.env(k, v);
    }
    let out = probe.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.starts_with("UNASSIGNED-khronos-validation-createinstance-status-message")
            && stdout.contains("Khronos Validation Layer Active"),
        "the layer printed nothing on stdout:\n{stdout}"
    );

    let mut doctor = sb.vkexit();
    doctor.arg("doctor");
    for (k, v) in &env {
        doctor.env(k, v);
    }
    let out = doctor.output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("lavapipe    device 0    llvmpipe"),
        "{report}"
    );
    assert!(!report.contains("probe failed"), "{report}");
    assert!(
        report.contains("loads and logs to its settings file: yes"),
        "{report}"
    );
    assert!(report.contains("status      ready"), "{report}");
}

/// A copy of Debian's validation layer, manifest and library, under `sdk/`, as a second SDK
/// would lie beside the system's; `api_version` as given, `library` the library file to copy.
fn layer_build(sb: &Sandbox, name: &str, api_version: &str, library: &Path) -> PathBuf {
    let root = sb.path().join(name);
    let manifests = root.join("share/vulkan/explicit_layer.d");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::copy(library, root.join("lib/libVkLayer_khronos_validation.so")).unwrap();
    let mut manifest = system_manifest();
    manifest["layer"]["library_path"] = "../../../lib/libVkLayer_khronos_validation.so".into();
    manifest["layer"]["api_version"] = api_version.into();
    let path = manifests.join("VkLayer_khronos_validation.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    path
}

fn system_library() -> PathBuf {
    let name = system_manifest()["layer"]["library_path"]
        .as_str()
        .unwrap()
        .to_string();
    ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]
        .iter()
        .map(|d| Path::new(d).join(&name))
        .find(|p| p.exists())
        .expect("the validation layer's library")
}

#[test]
fn a_layer_set_may_name_the_validation_layer_build_its_cells_run_under() {
    let sb = Sandbox::new();
    let good = layer_build(&sb, "sdk-a", "1.3.239", &system_library());
    // The same manifest over a file that is no library: if runs used the system layer instead
    // of the one named, this column would pass.
    let junk = sb.path().join("not-a-library.so");
    std::fs::write(&junk, b"not an ELF file").unwrap();
    let broken = layer_build(&sb, "sdk-b", "1.3.240", &junk);
    let matrix = format!(
        r#"drivers = ["lavapipe"]
runs = 2
jobs = 2

[[external]]
name = "live-buffer"
argv = ["{mock}", "--vuid"]

[[layers]]

[[layers]]
validation_manifest = "{good}"

[[layers]]
validation_manifest = "{broken}"
"#,
        mock = mock().display(),
        good = good.display(),
        broken = broken.display(),
    );
    std::fs::write(sb.path().join("m.toml"), matrix).unwrap();
    let (code, results) = sb.run(&["--config", "m.toml"]);
    assert_eq!(code, 1, "{results:#}");
    let cells = results["cells"].as_array().unwrap();
    let cell = |label: &str| {
        cells
            .iter()
            .find(|c| c["layers"] == serde_json::json!([label]))
            .unwrap_or_else(|| panic!("no cell labelled {label}: {results:#}"))
    };
    for label in ["validation", "validation@1.3.239"] {
        let c = cell(label);
        assert_eq!(c["counts"]["vuid"], 2, "{c:#}");
        assert!(
            strings(&c["vuids"]).contains(&"VUID-vkDestroyDevice-device-00378".to_string()),
            "{c:#}"
        );
    }
    // The named layer cannot load: no run may pass unchecked.
    let c = cell("validation@1.3.240");
    assert_eq!(c["counts"]["error"], 2, "{c:#}");
    assert_eq!(c["verdict"], "error", "{c:#}");
    assert_eq!(cells.len(), 3, "{results:#}");
}

#[test]
fn two_builds_of_one_version_are_refused_before_any_run() {
    let sb = Sandbox::new();
    let a = layer_build(&sb, "sdk-a", "1.3.239", &system_library());
    let b = layer_build(&sb, "sdk-b", "1.3.239", &system_library());
    std::fs::write(
        sb.path().join("m.toml"),
        format!(
            "drivers = [\"lavapipe\"]\ncases = [\"clean-exit\"]\nruntimes = [\"refrt:never\"]\n\
             [[layers]]\nvalidation_manifest = \"{}\"\n[[layers]]\nvalidation_manifest = \"{}\"\n",
            a.display(),
            b.display()
        ),
    )
    .unwrap();
    let out = sb
        .vkexit()
        .args(["run", "--config", "m.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("validation@1.3.239") && err.contains("sdk-a") && err.contains("sdk-b"),
        "{err}"
    );
}

/// `vkexit run` of the mock, 2 runs, with the fork path forced or not: each run's verdict.
fn mock_verdicts(sb: &Sandbox, without_clone3: bool, mock_args: &[&str]) -> Vec<String> {
    let mut cmd = sb.vkexit();
    cmd.args([
        "run",
        "--driver",
        "lavapipe",
        "--runs",
        "2",
        "--timeout",
        "30",
    ])
    .arg("--json")
    .arg(sb.results())
    .arg("--")
    .arg(mock())
    .args(mock_args);
    if without_clone3 {
        cmd.env("VKEXIT_SPAWN_WITHOUT_CLONE3", "1");
    }
    let out = cmd.output().unwrap();
    assert!(
        sb.results().exists(),
        "no results for {mock_args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cell = only_cell(&sb.read_results()).clone();
    std::fs::remove_file(sb.results()).unwrap();
    let mut verdicts: Vec<String> = cell["counts"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
        .map(|(verdict, n)| format!("{verdict} {n}"))
        .collect();
    verdicts.push(format!("cell {}", cell["verdict"]));
    verdicts
}

/// Where `clone3` is refused (qemu-user answers it with ENOSYS, as do old kernels and some
/// seccomp filters) a run is forked and moves itself into its cgroup. Forced here on a machine
/// that has `clone3`, that path gives every verdict the clone3 path gives, and a detached
/// grandchild is still killed with its run: the cgroup still holds the whole tree.
#[test]
fn without_clone3_the_forked_runs_get_the_same_verdicts() {
    let sb = Sandbox::new();
    for args in [
        &[][..],
        &["--signal", "SIGSEGV"],
        &["--exit-code", "7"],
        &["--vuid"],
        &["--child-crash"],
        &["--crash-at-exit"],
    ] {
        let with = mock_verdicts(&sb, false, args);
        let without = mock_verdicts(&sb, true, args);
        assert_eq!(with, without, "mock {args:?}: clone3 vs fork");
    }
    let detached = ["--grandchild-holds-pipes", "89"];
    assert_eq!(
        mock_verdicts(&sb, true, &detached),
        ["pass 2", "cell \"pass\""]
    );
    let left = mock_processes_with(&detached);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// Where the system refuses vkexit as the reaper of orphans (qemu-user answers EINVAL), the
/// doctor says what goes unseen then, and is still ready; where it is the reaper, it says so.
#[test]
fn the_doctor_says_whether_vkexit_reaps_orphans_here() {
    let sb = Sandbox::new();
    let doctor = |refused: bool| {
        let mut cmd = sb.vkexit();
        cmd.arg("doctor");
        if refused {
            cmd.env("VKEXIT_NO_SUBREAPER", "1");
        }
        let out = cmd.output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{report}");
        assert!(report.contains("status      ready"), "{report}");
        report
    };
    let here = doctor(false);
    assert!(
        here.contains("orphans     reaped by vkexit: a detached process's death is seen"),
        "{here}"
    );
    let refused = doctor(true);
    assert!(
        refused.contains("orphans     NOT seen: this system refuses vkexit as their reaper")
            && refused.contains("goes unseen"),
        "{refused}"
    );
}
