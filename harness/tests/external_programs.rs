//! Any program, unmodified, as an external case: where its runs start, what it is named,
//! and a program that goes around the Vulkan loader, which can never pass.

use predicates::prelude::*;
use predicates::str::contains;
use vkexit_testkit::results::the_cell;
use vkexit_testkit::vkexit::*;
use vkexit_testkit::vulkan::lavapipe_library;

#[test]
fn a_script_given_by_a_relative_path_runs_in_the_callers_directory() {
    let sb = Sandbox::new();
    std::fs::write(sb.path().join("data.txt"), "x").unwrap();
    std::fs::write(sb.path().join("check.sh"), "test -f data.txt\n").unwrap();
    let (code, r) = sb.gate_run(&["--runs", "2", "--no-validation", "--", "bash", "check.sh"]);
    let c = the_cell(&r);
    assert_eq!((code, c.case.as_str()), (0, "check.sh"), "{r:#?}");
    // bash never asks the Vulkan loader for a driver: green, and said so.
    assert_eq!(c.counts.no_vulkan, 2, "{c:#?}");

    // In a private directory the relative path names nothing: bash exits 127.
    let (code, r) = sb.gate_run(&[
        "--runs",
        "1",
        "--no-validation",
        "--private-cwd",
        "--name",
        "private",
        "--",
        "bash",
        "check.sh",
    ]);
    let c = the_cell(&r);
    assert_eq!((code, c.case.as_str()), (1, "private"), "{r:#?}");
    assert_eq!(c.counts.exit, 1, "{c:#?}");
}

#[test]
fn a_program_that_opens_the_driver_itself_is_an_error_never_a_pass() {
    // The instance goes through the loader, so validation is active and logs nothing; the
    // program also opens the driver itself, as ncnn's built-in loader does: error.
    let sb = Sandbox::new();
    let script = r#"
import ctypes, sys
class CreateInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint),
                ("pApplicationInfo", ctypes.c_void_p), ("layers", ctypes.c_uint),
                ("ppLayers", ctypes.c_void_p), ("extensions", ctypes.c_uint),
                ("ppExtensions", ctypes.c_void_p)]
loader = ctypes.CDLL("libvulkan.so.1")
instance = ctypes.c_void_p()
assert loader.vkCreateInstance(ctypes.byref(CreateInfo(1)), None, ctypes.byref(instance)) == 0
loader.vkDestroyInstance(instance, None)
if len(sys.argv) > 1:
    ctypes.CDLL(sys.argv[1])
"#;
    std::fs::write(sb.path().join("opens_driver.py"), script).unwrap();
    // Through the loader only, the same program passes: validation was active.
    let (code, r) = sb.gate_run(&["--runs", "1", "--", "python3", "opens_driver.py"]);
    assert_eq!((code, the_cell(&r).counts.pass), (0, 1), "{r:#?}");

    let lavapipe = lavapipe_library();
    let (code, r) = sb.gate_run(&["--runs", "2", "--", "python3", "opens_driver.py", &lavapipe]);
    let c = the_cell(&r);
    assert_eq!(code, 1, "{r:#?}");
    assert_eq!(c.counts.error, 2, "{c:#?}");
    let reason = c.reason.as_deref().expect("a reason");
    assert!(
        reason.contains(&format!("loaded the driver {lavapipe} itself"))
            && reason.contains("no layer can see its calls")
            && reason.contains("the run itself: pass"),
        "{reason}"
    );
}

#[test]
fn two_cases_of_one_name_are_refused_with_both_commands() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.path().join("m.toml"),
        "[[external]]\nname = \"t.py\"\nargv = [\"python3\", \"a/t.py\"]\n",
    )
    .unwrap();
    sb.vkexit()
        .args(["run", "--config", "m.toml", "--", "python3", "b/t.py"])
        .assert()
        .code(2)
        .stderr(
            contains("two cases would be named `t.py`: `python3 a/t.py` and `python3 b/t.py`")
                .and(contains("--name")),
        );
}

#[test]
fn a_manifest_outside_the_search_path_is_chosen_through_the_loader() {
    // A copy of lavapipe's manifest with the installed one's file name, elsewhere: the run
    // adds it and selects it by a name of its own, never through VK_ICD_FILENAMES.
    let sb = Sandbox::new();
    let installed = std::path::Path::new("/usr/share/vulkan/icd.d");
    let original = std::fs::read_dir(installed)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("lvp_icd")
        })
        .unwrap();
    let elsewhere = sb.path().join("icd").join(original.file_name().unwrap());
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    std::fs::copy(&original, &elsewhere).unwrap();
    let manifest = elsewhere.to_str().unwrap();
    let mock = mock();
    let out = sb
        .vkexit()
        .args(["run", "--driver", manifest, "--runs", "1", "--keep-passing"])
        .args(["--json", sb.results().to_str().unwrap(), "--"])
        .arg(&mock)
        .output()
        .unwrap();
    let r = sb.gate_results();
    let c = the_cell(&r);
    assert_eq!((out.status.code(), c.counts.pass), (Some(0), 1), "{c:#?}");
    assert_eq!(c.driver_manifest.as_deref(), Some(manifest));
    let run_dir = &c.artifacts[0];
    let command =
        std::fs::read_to_string(std::path::Path::new(run_dir).join("command.txt")).unwrap();
    assert!(
        command.contains("\nVK_LOADER_DRIVERS_SELECT=vkexit-driver-lavapipe-")
            && command.contains("\nVK_ADD_DRIVER_FILES=")
            && !command.contains("VK_ICD_FILENAMES=")
            && !command.contains("VK_DRIVER_FILES="),
        "{command}"
    );
}
