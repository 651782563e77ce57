//! Programs of a test suite that never use Vulkan (a CPU test, a shader compile) exit 0 with
//! no validation log: `no-vulkan`, green, unless the case must use Vulkan. A program that did
//! ask the loader for a driver and left no validation log stays an `error`: no new false
//! green. Real programs built here with `cc`, run on lavapipe under the real validation layer
//! and the real preload.

use std::path::Path;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};
use vkexit_testkit::cc::program;
use vkexit_testkit::vkexit::Sandbox;

/// `vkexit run --driver lavapipe --runs 2 ARGS -- PROGRAM`: the exit code and the only cell.
fn run(sb: &Sandbox, args: &[&str], program: &Path) -> (i32, CellResult) {
    let json = sb.path().join("r.json");
    let out = sb
        .vkexit()
        .args(["run", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(&json)
        .args(args)
        .arg("--")
        .arg(program)
        .output()
        .expect("vkexit starts");
    let code = out.status.code().expect("vkexit exits");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no results ({e}); exit {code}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut results: Results = serde_json::from_str(&text).expect("a results file");
    assert_eq!(results.cells.len(), 1, "{text}");
    (code, results.cells.remove(0))
}

const CPU_ONLY: &str = "int main(void) { return 0; }\n";

/// Linked with the loader, as a CPU test of a library built with its Vulkan backend is, but
/// never asks it for anything.
const LINKED_UNUSED: &str = "#include <vulkan/vulkan.h>\n\
    int main(int argc, char **argv) {\n\
        if (argc > 5) vkCreateInstance(0, 0, 0);\n\
        return 0;\n\
    }\n";

/// Asks the loader for its instance extensions only: the loader reads the driver manifests.
const ENUMERATES: &str = "#include <vulkan/vulkan.h>\n\
    int main(void) {\n\
        uint32_t n = 0;\n\
        return vkEnumerateInstanceExtensionProperties(0, &n, 0) == VK_SUCCESS ? 0 : 2;\n\
    }\n";

/// Points the loader at a driver manifest that does not exist, fails to make an instance,
/// and exits 0 as a test that skips itself without a device does: it did try Vulkan.
const NO_DRIVER: &str = "#include <stdio.h>\n#include <stdlib.h>\n#include <vulkan/vulkan.h>\n\
    int main(void) {\n\
        setenv(\"VK_DRIVER_FILES\", \"/nonexistent/icd.d/none.json\", 1);\n\
        setenv(\"VK_ICD_FILENAMES\", \"/nonexistent/icd.d/none.json\", 1);\n\
        VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};\n\
        VkInstance instance;\n\
        VkResult r = vkCreateInstance(&info, 0, &instance);\n\
        printf(\"vkCreateInstance: %d; skipping\\n\", r);\n\
        if (r == VK_SUCCESS) vkDestroyInstance(instance, 0);\n\
        return 0;\n\
    }\n";

/// Makes an instance and destroys it: a plain, validated pass.
const INSTANCE: &str = "#include <vulkan/vulkan.h>\n\
    int main(void) {\n\
        VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};\n\
        VkInstance instance;\n\
        if (vkCreateInstance(&info, 0, &instance) != VK_SUCCESS) return 2;\n\
        vkDestroyInstance(instance, 0);\n\
        return 0;\n\
    }\n";

#[test]
fn programs_that_never_use_vulkan_are_green_and_said_so() {
    let sb = Sandbox::new();
    for (name, text, args) in [
        ("cpu-only", CPU_ONLY, &[][..]),
        ("linked-unused", LINKED_UNUSED, &["-lvulkan"][..]),
    ] {
        let program = program(sb.path(), name, text, args);
        let (code, cell) = run(&sb, &[], &program);
        assert_eq!(cell.verdict, CellVerdict::NoVulkan, "{name}: {cell:#?}");
        assert_eq!(
            cell.counts.get(RunVerdict::NoVulkan),
            2,
            "{name}: {cell:#?}"
        );
        assert!(
            cell.reason
                .as_deref()
                .is_some_and(|r| r.contains("used Vulkan")),
            "{name}: {cell:#?}"
        );
        assert_eq!(code, 0, "{name}: a no-vulkan cell keeps the gate green");
        // Also without the validation layer: still nothing was checked.
        let (code, cell) = run(&sb, &["--no-validation"], &program);
        assert_eq!((code, cell.verdict), (0, CellVerdict::NoVulkan), "{name}");
    }
}

#[test]
fn a_case_that_must_use_vulkan_is_an_error_when_it_does_not() {
    let sb = Sandbox::new();
    let program = program(sb.path(), "cpu-only", CPU_ONLY, &[]);
    let (code, cell) = run(&sb, &["--require-vulkan"], &program);
    assert_eq!(cell.verdict, CellVerdict::Error, "{cell:#?}");
    assert!(
        cell.reason
            .as_deref()
            .is_some_and(|r| r.contains("--require-vulkan")),
        "{cell:#?}"
    );
    assert_ne!(code, 0);
    // The matrix says it too.
    let matrix = sb.path().join("m.toml");
    std::fs::write(&matrix, "require_vulkan = true\n").unwrap();
    let (_, cell) = run(&sb, &["--config", matrix.to_str().unwrap()], &program);
    assert_eq!(cell.verdict, CellVerdict::Error, "{cell:#?}");
}

#[test]
fn a_program_that_tried_vulkan_without_validation_stays_an_error() {
    let sb = Sandbox::new();
    for (name, text, witness) in [
        ("enumerates", ENUMERATES, "it loaded the driver"),
        (
            "no-driver",
            NO_DRIVER,
            "it read the driver manifest /nonexistent/icd.d/none.json",
        ),
    ] {
        let program = program(sb.path(), name, text, &["-lvulkan"]);
        let (code, cell) = run(&sb, &[], &program);
        assert_eq!(cell.verdict, CellVerdict::Error, "{name}: {cell:#?}");
        let reason = cell.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("validation layer was not active") && reason.contains(witness),
            "{name}: {reason}"
        );
        assert_ne!(code, 0, "{name}");
    }
    // And a program that makes an instance passes, validated.
    let program = program(sb.path(), "instance", INSTANCE, &["-lvulkan"]);
    let (code, cell) = run(&sb, &[], &program);
    assert_eq!((code, cell.verdict), (0, CellVerdict::Pass), "{cell:#?}");
}
