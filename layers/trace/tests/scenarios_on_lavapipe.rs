//! The trace layer in real processes: the scenario programs and mock on lavapipe, with the
//! real validation layer below the trace layer. Each traced run is repeated with validation
//! alone, to prove the trace layer adds no message id and does not change how the program ends.

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use vkexit_testkit::{under_test, Launch};

const TRACE_LAYER: &str = "VK_LAYER_VKEXIT_trace";
const SIGSEGV: i32 = 11;

/// Which layers a run enables, from the application down; validation always.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layers {
    TraceAndValidation,
    /// The trace layer without `VKEXIT_TRACE_FILE`.
    TraceWithoutFileAndValidation,
    ValidationOnly,
}

/// What a run left behind.
struct Outcome {
    dir: tempfile::TempDir,
    status: ExitStatus,
    stdout: String,
    stderr: String,
    trace_path: PathBuf,
    /// The trace, one JSON object per line (empty without a trace file).
    trace: Vec<Value>,
    /// Message ids in the validation log, with their counts.
    vuids: BTreeMap<String, usize>,
}

/// Runs `program` (a name in the build directory) with `args` on lavapipe under validation,
/// the trace layer above it (its committed manifest pointing at the library under test) as
/// `layers` says.
fn run(program: &str, args: &[&str], layers: Layers, env: &[(&str, &str)]) -> Outcome {
    let mut launch = Launch::built(program).args(args).refrt();
    let trace_path = launch.dir().join("trace.jsonl");
    if layers != Layers::ValidationOnly {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("VkLayer_vkexit_trace.json");
        let library = under_test("libVkLayer_vkexit_trace.so", "vkexit-layer-trace");
        launch = launch.layer(TRACE_LAYER, &manifest, &library);
    }
    if layers == Layers::TraceAndValidation {
        launch = launch.env("VKEXIT_TRACE_FILE", &trace_path);
    }
    for (key, value) in env {
        launch = launch.env(key, value);
    }
    let ran = launch.validation().run();
    // The layer creates its log when it loads: proof that validation was active.
    let vuids = ran.vuids();
    Outcome {
        trace: vkexit_testkit::launch::json_lines(&trace_path).unwrap_or_default(),
        trace_path,
        vuids,
        status: ran.status,
        stdout: ran.stdout,
        stderr: ran.stderr,
        dir: ran.dir,
    }
}

impl Outcome {
    fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    /// What to print when an assertion fails.
    fn explain(&self) -> String {
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

    fn records(&self, ev: &str) -> Vec<&Value> {
        self.trace.iter().filter(|r| r["ev"] == ev).collect()
    }

    /// `alive` records of `when`.
    fn alive(&self, when: &str) -> Vec<&Value> {
        self.records("alive")
            .into_iter()
            .filter(|r| r["when"] == when)
            .collect()
    }

    /// The types of `records`, sorted.
    fn types(records: &[&Value]) -> Vec<String> {
        let mut types: Vec<String> = records
            .iter()
            .map(|r| r["type"].as_str().unwrap().to_string())
            .collect();
        types.sort();
        types
    }

    /// The handle of the only created object of type `ty`.
    fn created_handle(&self, ty: &str) -> String {
        let created: Vec<&Value> = self
            .records("create")
            .into_iter()
            .filter(|r| r["type"] == ty)
            .collect();
        assert_eq!(created.len(), 1, "one {ty}\n{}", self.explain());
        created[0]["handle"].as_str().unwrap().to_string()
    }

    /// Index of the first record matching `pred`.
    fn position(&self, pred: impl Fn(&Value) -> bool) -> Option<usize> {
        self.trace.iter().position(pred)
    }

    /// Asserts that the trace layer added no message id: each id and count seen here is also
    /// seen in `without`, the same program run with validation alone.
    fn adds_no_vuid_to(&self, without: &Outcome) {
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
fn traced_and_compared(program: &str, args: &[&str]) -> Outcome {
    let traced = run(program, args, Layers::TraceAndValidation, &[]);
    let plain = run(program, args, Layers::ValidationOnly, &[]);
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

fn refrt(policy: &str) -> String {
    format!("refrt:{policy}")
}

/// The `loaded` record comes first, and every record carries the writer's stamps.
fn assert_well_formed(run: &Outcome) {
    let first = run
        .trace
        .first()
        .unwrap_or_else(|| panic!("empty trace\n{}", run.explain()));
    assert_eq!(first["ev"], "loaded", "{}", run.explain());
    assert_eq!(first["layer"], TRACE_LAYER);
    assert_eq!(first["version"], env!("CARGO_PKG_VERSION"));
    for record in &run.trace {
        for stamp in ["t_ns", "pid", "tid"] {
            assert!(record[stamp].is_u64(), "{stamp} in {record}");
        }
        assert!(record["thread"].is_string(), "thread in {record}");
    }
    let times: Vec<u64> = run
        .trace
        .iter()
        .map(|r| r["t_ns"].as_u64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "one thread, so in time order"
    );
}

/// Every object created was destroyed, by a record that follows its creation.
fn assert_all_destroyed(run: &Outcome) {
    for create in run.records("create") {
        let destroyed = run.trace.iter().any(|r| {
            r["ev"] == "destroy" && r["type"] == create["type"] && r["handle"] == create["handle"]
        });
        assert!(destroyed, "{create} never destroyed\n{}", run.explain());
    }
}

fn assert_no_dead_handle(run: &Outcome) {
    assert!(run.records("dead-handle").is_empty(), "{}", run.explain());
}

fn assert_created_on_main(alive: &[&Value]) {
    for record in alive {
        assert_eq!(record["created_thread"], "main", "{record}");
        assert!(record["created_t_ns"].is_u64(), "{record}");
    }
}

#[test]
fn clean_exit_with_release_children_leaves_nothing_alive() {
    let run = traced_and_compared("clean-exit", &["--runtime", &refrt("release-children")]);
    assert_eq!(run.status.code(), Some(0), "{}", run.explain());
    assert_well_formed(&run);
    assert!(run.vuids.is_empty(), "{}", run.explain());
    let start = run.records("exit-handler-start");
    assert_eq!(start.len(), 1, "{}", run.explain());
    assert_eq!(start[0]["live"], 0);
    assert!(run.records("alive").is_empty(), "{}", run.explain());
    assert!(run.records("orphaned").is_empty(), "{}", run.explain());
    assert_no_dead_handle(&run);
    assert_all_destroyed(&run);
    assert_eq!(run.records("create").len(), run.records("destroy").len());
}

#[test]
fn clean_exit_with_never_leaves_the_device_and_instance_alive_at_exit() {
    let run = traced_and_compared("clean-exit", &["--runtime", &refrt("never")]);
    assert_eq!(run.status.code(), Some(0), "{}", run.explain());
    assert_well_formed(&run);
    let alive = run.alive("exit");
    let types = Outcome::types(&alive);
    for ty in ["VkDevice", "VkInstance"] {
        assert!(
            types.iter().any(|t| t == ty),
            "{ty} alive\n{}",
            run.explain()
        );
    }
    assert_created_on_main(&alive);
    let device = run.created_handle("VkDevice");
    let instance = run.created_handle("VkInstance");
    let alive_device = alive.iter().find(|r| r["type"] == "VkDevice").unwrap();
    assert_eq!(alive_device["handle"], device.as_str());
    assert_eq!(alive_device["parent"], instance.as_str());
    assert_eq!(alive_device["call"], "vkCreateDevice");
    let start = run.records("exit-handler-start");
    assert_eq!(start[0]["live"], alive.len());
    // Reported exactly once, just before the driver's own handlers would run.
    let at = run.position(|r| r["ev"] == "exit-handler-start").unwrap();
    assert!(run.trace[at + 1..]
        .iter()
        .all(|r| r["ev"] == "alive" || r["ev"] == "exit-handler-end"));
    assert_no_dead_handle(&run);
}

#[test]
fn buffer_kept_at_exit_with_never_leaves_the_buffer_and_its_memory_alive() {
    let run = traced_and_compared("buffer-kept-at-exit", &["--runtime", &refrt("never")]);
    assert_eq!(run.status.code(), Some(0), "{}", run.explain());
    assert_well_formed(&run);
    // Validation cannot see it: leak checks run only in vkDestroyDevice.
    assert!(run.vuids.is_empty(), "{}", run.explain());
    let alive = run.alive("exit");
    let types = Outcome::types(&alive);
    let count = |ty: &str| types.iter().filter(|t| *t == ty).count();
    // The device buffer and the pinned host buffer, each with its memory.
    assert_eq!(count("VkBuffer"), 2, "{}", run.explain());
    assert_eq!(count("VkDeviceMemory"), 2, "{}", run.explain());
    assert_eq!(count("VkDevice"), 1);
    let device = run.created_handle("VkDevice");
    for record in alive.iter().filter(|r| r["type"] == "VkBuffer") {
        assert_eq!(record["parent"], device.as_str());
        assert_eq!(record["call"], "vkCreateBuffer");
    }
    assert_created_on_main(&alive);
    assert_no_dead_handle(&run);
}

#[test]
fn buffer_kept_at_exit_with_guarded_orphans_what_validation_reports() {
    let run = traced_and_compared("buffer-kept-at-exit", &["--runtime", &refrt("guarded")]);
    assert_well_formed(&run);
    let orphaned = run.records("orphaned");
    let reported = run
        .vuids
        .get("VUID-vkDestroyDevice-device-00378")
        .copied()
        .unwrap_or(0)
        + run
            .vuids
            .get("VUID-vkDestroyDevice-device-05137")
            .copied()
            .unwrap_or(0);
    assert!(reported > 0, "{}", run.explain());
    assert_eq!(orphaned.len(), reported, "{}", run.explain());
    assert!(orphaned.iter().all(|r| r["when"] == "destroy-device"));
    // The teardown ran before the layer's exit handler: nothing is left at exit.
    assert!(run.alive("exit").is_empty(), "{}", run.explain());
}

#[test]
fn events_freed_after_teardown_records_the_dead_device_before_the_crash() {
    let run = traced_and_compared(
        "events-freed-after-teardown",
        &["--runtime", &refrt("atexit-after-init")],
    );
    assert_eq!(run.signal(), Some(SIGSEGV), "{}", run.explain());
    assert_well_formed(&run);
    let device = run.created_handle("VkDevice");
    let dead = run.records("dead-handle");
    assert!(!dead.is_empty(), "{}", run.explain());
    let first = dead[0];
    assert_eq!(first["type"], "VkDevice");
    assert_eq!(first["handle"], device.as_str());
    assert_eq!(first["destroyed_by"], "vkDestroyDevice");
    let call = first["call"].as_str().unwrap();
    assert!(
        ["vkDestroySemaphore", "vkDestroyEvent"].contains(&call),
        "{first}"
    );
    assert_eq!(
        first["message"],
        format!("{call} on a destroyed VkDevice {device}").as_str()
    );
    let destroyed_at = run
        .position(|r| r["ev"] == "destroy" && r["handle"] == device.as_str())
        .expect("the device's destroy record");
    let dead_at = run.position(|r| r["ev"] == "dead-handle").unwrap();
    assert!(destroyed_at < dead_at);
    // The events and their semaphores were still alive when the teardown destroyed the device.
    let orphaned = Outcome::types(&run.records("orphaned"));
    assert_eq!(
        orphaned,
        ["VkEvent", "VkEvent", "VkSemaphore", "VkSemaphore"]
    );
}

#[test]
fn handler_before_load_with_guarded_frees_nothing_on_the_destroyed_device() {
    let run = traced_and_compared("handler-before-load", &["--runtime", &refrt("guarded")]);
    assert_eq!(run.status.code(), Some(0), "{}", run.explain());
    assert_well_formed(&run);
    assert_no_dead_handle(&run);
    assert!(run.alive("exit").is_empty(), "{}", run.explain());
    assert!(!run.records("orphaned").is_empty(), "{}", run.explain());
}

#[test]
fn mock_keep_vulkan_leaves_its_instance_and_device_alive() {
    let run = traced_and_compared("mock", &["--keep-vulkan"]);
    assert_eq!(run.status.code(), Some(0), "{}", run.explain());
    assert_well_formed(&run);
    let alive = run.alive("exit");
    assert_eq!(Outcome::types(&alive), ["VkDevice", "VkInstance"]);
    assert_created_on_main(&alive);
}

#[test]
fn mock_vuid_orphans_the_buffer_its_device_still_had() {
    let run = traced_and_compared("mock", &["--vuid"]);
    assert_well_formed(&run);
    assert!(!run.vuids.is_empty(), "{}", run.explain());
    let orphaned = Outcome::types(&run.records("orphaned"));
    assert!(
        orphaned.iter().any(|t| t == "VkBuffer"),
        "{}",
        run.explain()
    );
    assert!(run.alive("exit").is_empty(), "{}", run.explain());
}

#[test]
fn without_a_trace_file_the_layer_loads_and_writes_nothing() {
    let outcome = run(
        "mock",
        &["--keep-vulkan"],
        Layers::TraceWithoutFileAndValidation,
        &[("VK_LOADER_DEBUG", "layer")],
    );
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.explain());
    assert!(
        outcome.stderr.contains(TRACE_LAYER),
        "the loader's log names the layer\n{}",
        outcome.explain()
    );
    assert!(!outcome.trace_path.exists());
    let files: Vec<_> = std::fs::read_dir(outcome.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !files
            .iter()
            .any(|f| f.to_string_lossy().ends_with(".jsonl")),
        "{files:?}"
    );
}
