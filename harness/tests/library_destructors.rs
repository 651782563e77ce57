//! Library destructors (`__attribute__((destructor))`, `.fini_array`) in two link orders, on
//! lavapipe under the real validation layer: `libctx.so` destroys the device in its
//! destructor, `libpool.so` destroys a fence of that device in its own, and neither library
//! needs the other (the program hands the device over). Linked `-lpool -lctx` the loader runs
//! libpool's first and the exit is clean; `-lctx -lpool` destroys the device with the fence
//! alive. Explore must find the latent bug of the first build (its `library-link-order`
//! perturbation is the second build) and the fix of the second, and `vkexit run --exit-order`
//! must replay both.

use std::path::Path;
use vkexit_testkit::cc::cc;
use vkexit_testkit::results::{exploration, the_cell, Args, Exploration};
use vkexit_testkit::vkexit::Sandbox;

const CTX: &str = r#"#include <vulkan/vulkan.h>
static VkInstance instance;
static VkDevice device;
VkDevice ctx_device(void) {
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    if (vkCreateInstance(&info, 0, &instance) != VK_SUCCESS) return 0;
    uint32_t n = 1;
    VkPhysicalDevice gpu;
    if (vkEnumeratePhysicalDevices(instance, &n, &gpu) < 0 || n == 0) return 0;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkDeviceCreateInfo d = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    d.queueCreateInfoCount = 1;
    d.pQueueCreateInfos = &q;
    if (vkCreateDevice(gpu, &d, 0, &device) != VK_SUCCESS) return 0;
    return device;
}
__attribute__((destructor)) static void ctx_fini(void) {
    if (device) vkDestroyDevice(device, 0);
    if (instance) vkDestroyInstance(instance, 0);
}
"#;

const POOL: &str = r#"#include <vulkan/vulkan.h>
static VkDevice device;
static VkFence fence;
void pool_init(VkDevice d) {
    VkFenceCreateInfo info = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    device = d;
    vkCreateFence(d, &info, 0, &fence);
}
__attribute__((destructor)) static void pool_fini(void) {
    if (fence) vkDestroyFence(device, fence, 0);
}
"#;

const MAIN: &str = r#"#include <vulkan/vulkan.h>
VkDevice ctx_device(void);
void pool_init(VkDevice d);
int main(void) {
    VkDevice d = ctx_device();
    if (!d) return 2;
    pool_init(d);
    return 0;
}
"#;

/// Builds both libraries and the program linked with `libs` in that order, as `name`.
fn build(sb: &Sandbox, name: &str, libs: [&str; 2]) -> std::path::PathBuf {
    let dir = sb.path();
    for (lib, source, text) in [("libctx.so", "ctx.c", CTX), ("libpool.so", "pool.c", POOL)] {
        cc(
            dir,
            &[(source, text)],
            &["-g", "-shared", "-fPIC", source, "-o", lib, "-lvulkan"],
        );
    }
    let mut args = vec!["-g", "main.c", "-o", name, "-L."];
    args.extend(libs);
    args.extend(["-lvulkan", "-Wl,-rpath,$ORIGIN"]);
    cc(dir, &[("main.c", MAIN)], &args);
    dir.join(name)
}

fn explore(sb: &Sandbox, program: &Path) -> (Exploration, String) {
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args(["explore", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(&json)
        .arg("--")
        .arg(program)
        .output()
        .unwrap();
    (
        exploration(&json),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `vkexit run --exit-order ORDER` (or the natural exit) on lavapipe under the layer: runs
/// passed, of 2.
fn replay(sb: &Sandbox, program: &Path, order: Option<&str>) -> u64 {
    let mut args = Args::run().runs(2).json("replay.json");
    if let Some(order) = order {
        args = args.opt("--exit-order", order);
    }
    let (_, replay) = sb.gate(&args.program(program, &[]), "replay.json");
    the_cell(&replay).counts.passed()
}

#[test]
fn destructors_that_pass_in_one_link_order_are_found_failing_in_the_other() {
    let sb = Sandbox::new();
    let program = build(&sb, "pool-first", ["-lpool", "-lctx"]);
    let (e, stderr) = explore(&sb, &program);
    let cell = &e.cells[0];
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}\n{stderr}");
    let p = cell
        .perturbations
        .iter()
        .find(|p| p.name == "library-link-order")
        .unwrap_or_else(|| panic!("{cell:#?}"));
    assert_eq!(p.verdict, "fail", "{p:#?}\n{stderr}");
    assert_eq!(
        p.replay, "--exit-order destructors:libctx.so:before:libpool.so",
        "{p:#?}"
    );
    assert!(
        p.moved
            .iter()
            .any(|m| m.contains("libctx.so") && m.contains("before libpool.so")),
        "{p:#?}"
    );
    assert!(
        cell.findings
            .iter()
            .any(|f| f.starts_with("passes here") && f.contains("library-link-order")),
        "{:#?}",
        cell.findings
    );
    // Nothing else of this program moves: no exit handler is its own.
    for name in ["module", "linked", "link-order"] {
        let other = cell.perturbations.iter().find(|p| p.name == name).unwrap();
        assert_eq!(other.verdict, "not-applicable", "{other:#?}");
    }
    // glibc 2.31's library order is a deployment of its own, run with the loader's tunable.
    let older = cell
        .perturbations
        .iter()
        .find(|p| p.name == "glibc-2.31-library-order")
        .unwrap_or_else(|| panic!("{cell:#?}"));
    assert_ne!(older.verdict, "fail", "{older:#?}");
    assert_eq!(older.replay, "--exit-order glibc-2.31-library-order");
    let run = older
        .artifacts
        .first()
        .unwrap_or_else(|| panic!("{older:#?}"));
    let command = std::fs::read_to_string(Path::new(run).join("command.txt")).unwrap();
    assert!(
        command.contains("GLIBC_TUNABLES=glibc.rtld.dynamic_sort=1"),
        "{command}"
    );
    // The perturbation replays; the natural exit stays clean.
    let order = p.replay.strip_prefix("--exit-order ").unwrap();
    assert_eq!(replay(&sb, &program, Some(order)), 0);
    assert_eq!(replay(&sb, &program, None), 2);
}

#[test]
fn destructors_in_the_wrong_link_order_get_a_fix_that_replays() {
    let sb = Sandbox::new();
    let program = build(&sb, "ctx-first", ["-lctx", "-lpool"]);
    let (e, stderr) = explore(&sb, &program);
    let cell = &e.cells[0];
    assert_eq!(cell.natural.counts.passed(), 0, "{cell:#?}\n{stderr}");
    let fix = cell
        .fix
        .as_ref()
        .unwrap_or_else(|| panic!("{cell:#?}\n{stderr}"));
    assert_eq!(fix.exit_order, "destructors:libpool.so:before:libctx.so");
    assert_eq!((fix.counts.passed(), fix.verdict.as_str()), (2, "pass"));
    // In the program's own terms: each library's destructor and its line (built with -g).
    assert!(
        fix.change.contains(
            "make libpool.so's library destructors (`pool_fini`, pool.c:9) run before \
             libctx.so's (`ctx_fini`, ctx.c:20): link libpool.so before libctx.so"
        ),
        "{fix:#?}"
    );
    assert_eq!(replay(&sb, &program, Some(&fix.exit_order)), 2);
    assert_eq!(replay(&sb, &program, None), 0);
}

#[test]
fn a_library_that_needs_the_other_has_no_other_link_order() {
    // libpool linked against libctx: its destructors run first in every build, so no link
    // order moves them and the perturbation says why.
    let sb = Sandbox::new();
    let dir = sb.path();
    cc(
        dir,
        &[("ctx.c", CTX)],
        &["-shared", "-fPIC", "ctx.c", "-o", "libctx.so", "-lvulkan"],
    );
    cc(
        dir,
        &[("pool.c", POOL)],
        &[
            "-shared",
            "-fPIC",
            "pool.c",
            "-o",
            "libpool.so",
            "-L.",
            // It calls nothing of libctx's: without this the linker leaves the need out.
            "-Wl,--no-as-needed",
            "-lctx",
            "-lvulkan",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    cc(
        dir,
        &[("main.c", MAIN)],
        &[
            "main.c",
            "-o",
            "tied",
            "-L.",
            "-lctx",
            "-lpool",
            "-lvulkan",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    let (e, stderr) = explore(&sb, &dir.join("tied"));
    let cell = &e.cells[0];
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}\n{stderr}");
    let p = cell
        .perturbations
        .iter()
        .find(|p| p.name == "library-link-order")
        .unwrap();
    assert_eq!(p.verdict, "not-applicable", "{p:#?}");
    assert!(p.moved[0].contains("one needs the other"), "{p:#?}");
    assert_eq!(p.counts.total(), 0, "nothing ran: {p:#?}");
}
