//! Programs that use Vulkan before `main`: a library whose ELF constructor, or a C++ global's
//! constructor, creates the instance and a device while the program loads, before the
//! preloaded library's own constructor has run. They are watched from their first Vulkan call
//! and judged like any other: `pass` when clean, `vuid` when the device goes with a live
//! child. Real programs built here, on lavapipe under the real validation layer.

use std::path::Path;
use vkexit_evidence::results::CellResult;
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};
use vkexit_testkit::cc::cc;
use vkexit_testkit::results::{assert_all, the_cell, Args};
use vkexit_testkit::vkexit::Sandbox;

/// An instance, a device and a fence, made and destroyed by `vk_at_load()`; with `LEAK` the
/// fence stays alive at `vkDestroyDevice`.
const AT_LOAD: &str = r#"#include <stdio.h>
#include <vulkan/vulkan.h>
int made_at_load;
void vk_at_load(void) {
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkInstance instance;
    if (vkCreateInstance(&info, 0, &instance) != VK_SUCCESS) return;
    uint32_t n = 1;
    VkPhysicalDevice gpu;
    if (vkEnumeratePhysicalDevices(instance, &n, &gpu) < 0 || n == 0) return;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    VkDeviceCreateInfo dinfo = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dinfo.queueCreateInfoCount = 1;
    dinfo.pQueueCreateInfos = &queue;
    VkDevice device;
    if (vkCreateDevice(gpu, &dinfo, 0, &device) != VK_SUCCESS) return;
    VkFenceCreateInfo finfo = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    if (vkCreateFence(device, &finfo, 0, &fence) != VK_SUCCESS) return;
#ifndef LEAK
    vkDestroyFence(device, fence, 0);
#endif
    vkDestroyDevice(device, 0);
    vkDestroyInstance(instance, 0);
    made_at_load = 1;
}
"#;

/// The library's ELF constructor calls it.
const CONSTRUCTOR: &str = "void vk_at_load(void);\n\
    __attribute__((constructor)) static void at_load(void) { vk_at_load(); }\n";

/// A C++ global's constructor calls it.
const CXX_GLOBAL: &str = "extern \"C\" void vk_at_load(void);\n\
    struct Runtime { Runtime() { vk_at_load(); } };\n\
    Runtime runtime;\n";

/// The program: it only checks that the library did its work.
const MAIN: &str = "extern int made_at_load;\n\
    int main(void) { return made_at_load ? 0 : 2; }\n";

/// Builds `lib<name>.so` from the Vulkan code and `start` (C or C++), and a program linked
/// with it; the program's path.
fn build(dir: &Path, name: &str, start: (&str, &str), leak: bool) -> std::path::PathBuf {
    let (start_file, start_text) = start;
    let lib = format!("lib{name}.so");
    let mut args = vec!["-shared", "-fPIC", "at_load.c", start_file, "-o", &lib];
    if leak {
        args.push("-DLEAK");
    }
    if start_file.ends_with(".cpp") {
        args.push("-lstdc++");
    }
    args.push("-lvulkan");
    cc(
        dir,
        &[("at_load.c", AT_LOAD), (start_file, start_text)],
        &args,
    );
    let program = format!("{name}-main");
    let link = format!("-l{name}");
    cc(
        dir,
        &[("main.c", MAIN)],
        &["main.c", "-o", &program, "-L.", &link, "-Wl,-rpath,$ORIGIN"],
    );
    dir.join(program)
}

fn run(sb: &Sandbox, program: &Path) -> (i32, CellResult) {
    let args = Args::run().runs(2).json("r.json").program(program, &[]);
    let (code, results) = sb.gate(&args, "r.json");
    (code, the_cell(&results).clone())
}

#[test]
fn a_library_that_makes_its_device_while_loading_is_judged_like_any_program() {
    let sb = Sandbox::new();
    for (kind, start) in [
        ("constructor", ("start.c", CONSTRUCTOR)),
        ("cxx-global", ("start.cpp", CXX_GLOBAL)),
    ] {
        let clean = build(sb.path(), &format!("{kind}-clean"), start, false);
        let (code, cell) = run(&sb, &clean);
        assert_eq!(cell.verdict, CellVerdict::Pass, "{kind}: {cell:#?}");
        assert_all(&cell, RunVerdict::Pass, 2);
        assert_eq!(code, 0, "{kind}");

        let leaky = build(sb.path(), &format!("{kind}-leaky"), start, true);
        let (code, cell) = run(&sb, &leaky);
        assert_eq!(cell.verdict, CellVerdict::Fail, "{kind}: {cell:#?}");
        assert_all(&cell, RunVerdict::Vuid, 2);
        assert!(
            cell.vuids
                .iter()
                .any(|v| v.starts_with("VUID-vkDestroyDevice-device-")),
            "{kind}: {:?}",
            cell.vuids
        );
        assert_eq!(code, 1, "{kind}");
    }
}

/// Redirected (no terminal, no `$COLUMNS`), the failure's reason and the layer's message are
/// each on one line, however long, so that a search of the log finds them whole.
#[test]
fn in_a_log_the_layers_message_is_one_line() {
    let sb = Sandbox::new();
    let leaky = build(sb.path(), "logged", ("start.c", CONSTRUCTOR), true);
    let out = sb
        .vkexit()
        .args(["run", "--driver", "lavapipe", "--runs", "1", "--"])
        .arg(&leaky)
        .output()
        .expect("vkexit starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let failures = stdout
        .split_once("\nfailures:\n")
        .unwrap_or_else(|| panic!("{stdout}"))
        .1;
    let why = failures
        .lines()
        .find(|l| l.contains("VUID-vkDestroyDevice-device-"))
        .unwrap_or_else(|| panic!("{failures}"));
    assert!(why.chars().count() > 100, "{why}");
    assert!(
        why.contains("VkFence") && why.contains("has not been destroyed"),
        "the layer's message, whole: {why}\n{failures}"
    );
}
