//! A worker thread asleep when exit begins, on lavapipe under the real validation layer, with
//! programs built here: the natural exit never wakes it (its nap outlasts the teardown), so
//! the thread-timing perturbation has nothing runnable to move, and only a slower device's
//! teardown (`slow-teardown`, replayed by `vkexit run --slow-teardown`) lets it wake into the
//! destroyed buffer. The same program with the worker joined before the teardown raises no
//! alarm under any perturbation.

use std::path::{Path, PathBuf};
use vkexit_testkit::cc::program;
use vkexit_testkit::results::{exploration, the_cell, Exploration, ExploredCell, Perturbation};
use vkexit_testkit::vkexit::Sandbox;

/// A worker that reads a buffer's requirements, then naps 400 ms, and again, until the
/// runtime's guard says the device is gone; `main` returns once the worker has gone to sleep.
/// The teardown, an `atexit` handler registered after the device exists, sets that guard only
/// after it destroyed the buffer and freed its memory: too late, but the natural exit is done
/// with the buffer (and the guard set) within milliseconds, long before the worker wakes. With
/// `-DJOIN_FIRST` the teardown stops and joins the worker first, as a correct program does.
const SLEEPING_WORKER: &str = r#"#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <vulkan/vulkan.h>
static VkInstance instance;
static VkDevice device;
static VkDeviceMemory memory;
static VkBuffer buffer;
static atomic_int asleep, destroyed, stop;
static pthread_t worker;
static void nap(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}
static void *poll_buffer(void *unused) {
    (void)unused;
    for (;;) {
        VkMemoryRequirements r;
        vkGetBufferMemoryRequirements(device, buffer, &r);
        atomic_store(&asleep, 1);
        nap(400);
        if (atomic_load(&destroyed) || atomic_load(&stop)) return 0;
    }
}
static void teardown(void) {
#ifdef JOIN_FIRST
    atomic_store(&stop, 1);
    pthread_join(worker, 0);
#endif
    vkDestroyBuffer(device, buffer, 0);
    vkFreeMemory(device, memory, 0);
    atomic_store(&destroyed, 1);
    vkDestroyDevice(device, 0);
    vkDestroyInstance(instance, 0);
}
int main(void) {
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    if (vkCreateInstance(&info, 0, &instance) != VK_SUCCESS) return 2;
    uint32_t n = 1;
    VkPhysicalDevice gpu;
    if (vkEnumeratePhysicalDevices(instance, &n, &gpu) < 0 || n == 0) return 2;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkDeviceCreateInfo d = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    d.queueCreateInfoCount = 1;
    d.pQueueCreateInfos = &q;
    if (vkCreateDevice(gpu, &d, 0, &device) != VK_SUCCESS) return 2;
    VkBufferCreateInfo b = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    b.size = 4096;
    b.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    if (vkCreateBuffer(device, &b, 0, &buffer) != VK_SUCCESS) return 2;
    VkMemoryRequirements r;
    vkGetBufferMemoryRequirements(device, buffer, &r);
    VkMemoryAllocateInfo a = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    a.allocationSize = r.size;
    for (uint32_t i = 0; i < 32; i++)
        if (r.memoryTypeBits & (1u << i)) { a.memoryTypeIndex = i; break; }
    if (vkAllocateMemory(device, &a, 0, &memory) != VK_SUCCESS) return 2;
    if (vkBindBufferMemory(device, buffer, memory, 0) != VK_SUCCESS) return 2;
    pthread_create(&worker, 0, poll_buffer, 0);
    atexit(teardown);
    while (!atomic_load(&asleep)) nap(1);
    return 0;
}
"#;

/// The program, built in the sandbox as `name` with the C compiler's `extra` flags.
fn build(sb: &Sandbox, name: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["-lvulkan", "-pthread"];
    args.extend_from_slice(extra);
    program(sb.path(), name, SLEEPING_WORKER, &args)
}

/// `vkexit explore --driver lavapipe --runs 2 --json explore.json -- PROGRAM`, under the
/// validation layer: its exit code and the exploration's one cell.
fn explore(sb: &Sandbox, program: &Path) -> (i32, ExploredCell) {
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args(["explore", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(&json)
        .arg("--")
        .arg(program)
        .output()
        .expect("vkexit starts");
    let code = out.status.code().expect("vkexit exits");
    assert!(
        json.exists(),
        "no exploration file; exit {code}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e: Exploration = exploration(&json);
    assert_eq!(e.cells.len(), 1, "{e:#?}");
    (code, e.cells.into_iter().next().unwrap())
}

fn perturbation<'a>(cell: &'a ExploredCell, name: &str) -> &'a Perturbation {
    cell.perturbations
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no perturbation {name} in {cell:#?}"))
}

/// `vkexit run --driver lavapipe --runs 2 ARGS -- PROGRAM`: how many runs passed, of how many.
fn run(sb: &Sandbox, args: &[&str], program: &Path) -> (u64, u64) {
    let mut all = vec!["--runs", "2"];
    all.extend_from_slice(args);
    all.extend(["--", program.to_str().unwrap()]);
    let (_, results) = sb.gate_run(&all);
    let counts = the_cell(&results).counts;
    (counts.passed(), counts.total())
}

#[test]
fn a_worker_asleep_at_exit_wakes_into_a_slow_teardown_which_explore_finds_and_run_replays() {
    vkexit_testkit::vulkan::require_vulkan();
    let sb = Sandbox::new();
    let program = build(&sb, "sleeping-worker", &[]);
    let (code, cell) = explore(&sb, &program);
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}");
    // The worker is alive at the exit handlers, asleep: nothing runnable for thread timing to
    // let run ahead, and the cell says so (never that no other thread was there).
    let threads = perturbation(&cell, "threads:seed=1");
    let said = threads.moved.join("; ");
    assert!(said.contains("asleep"), "{threads:#?}");
    assert!(
        ["pass", "not-applicable"].contains(&threads.verdict.as_str()),
        "{threads:#?}"
    );
    // The slow teardown holds the buffer's destroy call until the worker wakes into it.
    let slow = perturbation(&cell, "slow-teardown");
    assert_eq!(slow.verdict, "fail", "{slow:#?}");
    assert_eq!(slow.counts.passed(), 0, "{slow:#?}");
    let held = slow.moved.join("; ");
    assert!(
        held.contains("held after") && held.contains("asleep") && held.contains("woke"),
        "{slow:#?}"
    );
    assert_eq!(slow.replay, "--slow-teardown");
    let finding = cell
        .findings
        .iter()
        .find(|f| f.contains("under slow-teardown"))
        .unwrap_or_else(|| panic!("no slow-teardown finding: {:#?}", cell.findings));
    assert!(finding.starts_with("passes here; "), "{finding}");
    assert!(finding.contains("asleep"), "{finding}");
    assert!(
        finding.ends_with("replay: vkexit run --slow-teardown"),
        "{finding}"
    );
    assert_eq!(code, 1, "a failing perturbation makes the gate red");
    // The flag the perturbation prints replays it; without it the program passes.
    let replay: Vec<&str> = slow.replay.split_whitespace().collect();
    assert_eq!(run(&sb, &replay, &program), (0, 2));
    assert_eq!(run(&sb, &[], &program), (2, 2));
}

#[test]
fn a_worker_joined_before_the_teardown_raises_no_alarm_under_any_perturbation() {
    vkexit_testkit::vulkan::require_vulkan();
    let sb = Sandbox::new();
    let program = build(&sb, "joined-worker", &["-DJOIN_FIRST"]);
    let (code, cell) = explore(&sb, &program);
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}");
    for p in &cell.perturbations {
        assert!(
            ["pass", "not-applicable"].contains(&p.verdict.as_str()),
            "{p:#?}"
        );
    }
    let slow = perturbation(&cell, "slow-teardown");
    let said = slow.moved.join("; ");
    assert!(
        !said.contains("asleep:") && !said.contains("1 asleep"),
        "{slow:#?}"
    );
    assert!(cell.findings.is_empty(), "{:#?}", cell.findings);
    assert_eq!(code, 0, "{cell:#?}");
    assert_eq!(run(&sb, &["--slow-teardown"], &program), (2, 2));
}

#[test]
fn a_slow_teardown_needs_the_preload_and_is_explores_own_perturbation() {
    let sb = Sandbox::new();
    let out = sb
        .vkexit()
        .args(["run", "--slow-teardown", "--no-diagnostics", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--slow-teardown") && stderr.contains("--no-diagnostics"),
        "{stderr}"
    );
    let out = sb
        .vkexit()
        .args(["explore", "--slow-teardown", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("vkexit run --slow-teardown"), "{stderr}");
}
