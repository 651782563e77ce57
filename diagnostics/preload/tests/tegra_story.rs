//! The emulated Jetson crash, told from the preloaded library's two files plus the Tegra
//! layer's evidence: `clean-exit --runtime refrt:never` with `VK_LAYER_VKEXIT_tegra_exit` on
//! lavapipe. Main returns; the exit handler that the layer registered during
//! `vkCreateInstance` runs and unmaps the driver's region; the worker thread `vkexit-tegra-0`
//! faults at a pc inside that region; refrt's handler, registered when the library loaded, has
//! not run yet.

use serde_json::Value;
use vkexit_testkit::preload::{hex, run, t_ns, Plan, Run};
use vkexit_testkit::vulkan::write_layer_manifest;
use vkexit_testkit::{built, workspace};

const LAYER: &str = "VK_LAYER_VKEXIT_tegra_exit";

/// The run, and the Tegra layer's evidence records.
fn run_clean_exit(policy: &str) -> (Run, Vec<Value>) {
    let layers = tempfile::tempdir().unwrap();
    let committed = workspace().join("layers/tegra-exit/VkLayer_vkexit_tegra_exit.json");
    let library = built("libVkLayer_vkexit_tegra_exit.so");
    write_layer_manifest(&committed, &library, layers.path());
    let tegra_log = layers.path().join("tegra.jsonl");
    let run = run(Plan::new(
        built("clean-exit"),
        &["--runtime", &format!("refrt:{policy}")],
    )
    .lavapipe()
    .env("VK_LAYER_PATH", layers.path())
    .env("VK_INSTANCE_LAYERS", LAYER)
    .env("VKEXIT_TEGRA_MODE", "deterministic")
    .env("VKEXIT_TEGRA_LOG", &tegra_log)
    .env("VKEXIT_REFRT_LIB", built("libvkexit_refrt.so")));
    let tegra = std::fs::read_to_string(&tegra_log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (run, tegra)
}

fn record<'a>(records: &'a [Value], ev: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["ev"] == ev)
        .unwrap_or_else(|| panic!("no {ev:?} in {records:?}"))
}

#[test]
fn the_worker_faults_in_the_unmapped_region_after_the_layers_exit_handler() {
    let (run, tegra) = run_clean_exit("never");
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());

    // The crash: on the driver's worker thread, at a pc inside the region that was unmapped.
    let crash = run.crash_record("crash");
    let worker = record(&tegra, "worker-started");
    let unmapped = record(&tegra, "region-unmapped");
    assert_eq!(crash["thread"], "vkexit-tegra-0");
    assert_eq!(crash["tid"], worker["worker_tid"]);
    assert_eq!(crash["si_code_name"], "SEGV_MAPERR");
    assert_eq!(crash["pc_mapping"], "unmapped", "{crash}");
    let pc = hex(&crash["pc"]);
    assert!(
        (hex(&unmapped["start"])..hex(&unmapped["end"])).contains(&pc),
        "pc {pc:#x} outside {unmapped}"
    );
    assert_eq!(crash["main_returned"], true);
    assert_eq!(crash["exiting"], true);
    assert!(t_ns(unmapped) < t_ns(crash));
    let backtrace = run.crash_record("backtrace");
    assert_eq!(backtrace["frames"][0]["ip"], crash["pc"], "{backtrace}");

    // The timeline: main returned, then the layer's handler (registered during
    // vkCreateInstance) started and never ended; refrt's load-time handler never started.
    let returned = run.one("main-returned");
    let layer = run.registered_by("/libVkLayer_vkexit_tegra_exit.so", "atexit");
    assert_eq!(layer.len(), 1, "{}", run.describe());
    let layer_id = &layer[0]["id"];
    let layer_start = run
        .of_handler("handler-start", layer_id)
        .unwrap_or_else(|| panic!("the layer's handler never started\n{}", run.describe()));
    assert!(run.of_handler("handler-end", layer_id).is_none());
    assert!(t_ns(returned) < t_ns(layer_start));
    assert!(t_ns(layer_start) < t_ns(record(&tegra, "exit-handler-start")));
    assert!(t_ns(layer_start) < t_ns(unmapped));

    let refrt = run.registered_by("/libvkexit_refrt.so", "atexit");
    assert!(!refrt.is_empty(), "{}", run.describe());
    for handler in &refrt {
        assert!(
            t_ns(handler) < t_ns(layer[0]),
            "refrt loaded before the layer"
        );
        assert!(run.of_handler("handler-start", &handler["id"]).is_none());
    }
    assert!(!run.has("dl-fini-start"));

    // The layer was loaded by the Vulkan loader, refrt by the scenario.
    let loaded = |suffix: &str| {
        run.all("dlopen")
            .into_iter()
            .find(|r| r["path"].as_str().is_some_and(|p| p.ends_with(suffix)))
            .unwrap_or_else(|| panic!("no dlopen of {suffix}\n{}", run.describe()))
    };
    let layer_open = loaded("/libVkLayer_vkexit_tegra_exit.so");
    assert_eq!(layer_open["ok"], true);
    assert!(layer_open["caller"]
        .as_str()
        .unwrap()
        .contains("libvulkan.so"));
    let refrt_open = loaded("/libvkexit_refrt.so");
    assert_eq!(refrt_open["caller"], built("clean-exit").to_str().unwrap());
}

/// The fix (teardown registered after the device exists): the teardown runs first; its
/// `vkDestroyInstance` makes the loader unload the layer, whose handler runs inside that
/// `dlclose`, after the worker was stopped. Nothing crashes, and refrt's load-time handler and
/// the loader's finalization come after.
#[test]
fn with_teardown_registered_after_init_every_handler_ends() {
    let (run, tegra) = run_clean_exit("atexit-after-init");
    assert!(run.status.success(), "{}", run.describe());
    assert_eq!(run.crash_records(), &[] as &[Value]);
    let layer = run.registered_by("/libVkLayer_vkexit_tegra_exit.so", "atexit");
    let layer_start = run.of_handler("handler-start", &layer[0]["id"]).unwrap();
    let layer_end = run.of_handler("handler-end", &layer[0]["id"]).unwrap();
    let refrt = run.registered_by("/libvkexit_refrt.so", "atexit");
    let (load_time, teardown) = (refrt[0], refrt[refrt.len() - 1]);
    let teardown_start = run.of_handler("handler-start", &teardown["id"]).unwrap();
    let teardown_end = run.of_handler("handler-end", &teardown["id"]).unwrap();
    let unload = run
        .all("dlclose")
        .into_iter()
        .find(|r| {
            r["path"]
                .as_str()
                .unwrap()
                .ends_with("/libVkLayer_vkexit_tegra_exit.so")
        })
        .unwrap_or_else(|| panic!("the layer was not unloaded\n{}", run.describe()));
    let inside = |outer_start: u64, record: &Value, outer_end: u64| {
        assert!(
            outer_start < t_ns(record) && t_ns(record) < outer_end,
            "{record}\n{}",
            run.describe()
        )
    };
    inside(t_ns(teardown_start), layer_start, t_ns(teardown_end));
    inside(
        unload["call_ns"].as_u64().unwrap(),
        layer_start,
        t_ns(unload),
    );
    inside(
        t_ns(layer_start),
        record(&tegra, "exit-handler-end"),
        t_ns(layer_end),
    );
    assert!(t_ns(record(&tegra, "worker-stopped")) < t_ns(layer_start));
    let load_time_start = run.of_handler("handler-start", &load_time["id"]).unwrap();
    assert!(t_ns(teardown_end) < t_ns(load_time_start));
    assert!(t_ns(load_time_start) < t_ns(run.one("dl-fini-start")));
}
