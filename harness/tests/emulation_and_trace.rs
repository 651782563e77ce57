//! The vkexit layers in real runs on lavapipe under validation: the Tegra
//! emulation turns "a device alive at exit" into the Jetson crash, and the
//! trace layer shows what is alive; neither adds a VUID of its own, and a
//! layer that does not prove it loaded never lets a run pass.

use vkexit_testkit::results::{the_cell, CellResult, CellVerdict, Results};
use vkexit_testkit::vkexit::*;

fn cell<'a>(r: &'a Results, runtime: &str) -> &'a CellResult {
    r.cells
        .iter()
        .find(|c| c.runtime == runtime)
        .unwrap_or_else(|| panic!("no cell for {runtime}: {r:#?}"))
}

#[test]
fn tegra_emulation_crashes_a_device_left_alive_and_spares_a_timely_teardown() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate_run(&["--emulate", "tegra", "--case", "clean-exit", "--runs", "20"]);
    for policy in ["never", "static-destructor"] {
        let c = cell(&r, &format!("refrt:{policy}"));
        assert!(c.counts.crash >= 19, "{c:#?}");
        assert_eq!(c.signals, ["SIGSEGV"]);
        assert_eq!(c.verdict, CellVerdict::ExpectedFail);
        assert_eq!(c.emulation, "tegra");
    }
    for policy in ["atexit-after-init", "guarded", "release-children"] {
        let c = cell(&r, &format!("refrt:{policy}"));
        assert_eq!(c.counts.pass, 20, "{c:#?}");
        assert!(c.vuids.is_empty(), "the layer added a VUID: {c:#?}");
    }
    assert_eq!(code, 0, "{r:#?}");
}

#[test]
fn tegra_emulation_judges_any_program_by_whether_it_destroys_its_device() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(3, &["--emulate", "tegra"], &["--keep-vulkan"]);
    let c = the_cell(&r);
    assert_eq!(c.counts.crash, 3, "{c:#?}");
    assert_eq!(c.signals, ["SIGSEGV"]);
    let findings = &c.findings;
    assert!(
        findings.iter().any(|f| f.contains("still running")),
        "{c:#?}"
    );

    let sb = Sandbox::new();
    let (code, r) = sb.gate_mock(3, &["--emulate", "tegra"], &[]);
    assert_eq!(the_cell(&r).counts.pass, 3, "{r:#?}");
    assert_eq!(code, 0);
}

#[test]
fn the_trace_shows_what_never_leaves_alive_and_fails_it_only_when_asked() {
    let args = [
        "--trace",
        "--case",
        "clean-exit",
        "--runtime",
        "refrt:never",
        "--runs",
        "2",
    ];
    let sb = Sandbox::new();
    let (code, r) = sb.gate_run(&args);
    let c = the_cell(&r);
    assert_eq!(c.counts.pass, 2, "validation cannot see it: {c:#?}");
    assert_eq!(c.layers, ["trace", "validation"]);
    let findings = &c.findings;
    assert!(
        findings.contains(&"VkDevice 0x… alive at exit (created on thread main)".to_string()),
        "{c:#?}"
    );
    assert_eq!(code, 0);

    let sb = Sandbox::new();
    let mut strict = args.to_vec();
    strict.push("--fail-on-leak");
    let (code, r) = sb.gate_run(&strict);
    let c = the_cell(&r);
    assert_eq!(c.counts.leak, 2, "{c:#?}");
    assert_eq!(c.verdict, CellVerdict::Fail);
    assert_eq!(code, 1);
}

#[test]
fn a_call_on_a_destroyed_device_is_recorded_before_the_crash() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_run(&[
        "--trace",
        "--case",
        "events-freed-after-teardown",
        "--runtime",
        "refrt:atexit-after-init",
        "--runs",
        "2",
    ]);
    let c = the_cell(&r);
    assert_eq!(c.counts.crash, 2, "{c:#?}");
    assert!(
        c.vuids.contains(&"VKEXIT-trace-dead-handle".to_string()),
        "{c:#?}"
    );
    let findings = &c.findings;
    assert!(
        findings
            .iter()
            .any(|f| f.contains("on a destroyed VkDevice")),
        "{c:#?}"
    );
}

/// vkexit's trace manifest points at a library that is another layer: the
/// loader loads it, the program exits 0, but no `loaded` record proves the
/// trace was in the chain, so every run is an error.
#[test]
fn an_impostor_trace_layer_never_lets_a_run_pass() {
    let overlay = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"]
        .iter()
        .map(|d| std::path::Path::new(d).join("libVkLayer_MESA_overlay.so"))
        .find(|p| p.exists())
        .expect("libVkLayer_MESA_overlay.so (mesa-vulkan-drivers) is not installed");
    let sb = Sandbox::new();
    let fake = sb.path().join("bin");
    std::fs::create_dir_all(&fake).unwrap();
    for name in [
        "mock",
        "libvkexit_refrt.so",
        "libVkLayer_vkexit_tegra_exit.so",
        "libvkexit_preload.so",
    ] {
        std::os::unix::fs::symlink(bin_dir().join(name), fake.join(name)).unwrap();
    }
    std::os::unix::fs::symlink(&overlay, fake.join("libVkLayer_vkexit_trace.so")).unwrap();
    let out = sb
        .vkexit()
        .env("VKEXIT_HELPERS_DIR", &fake)
        .args([
            "run", "--driver", "lavapipe", "--trace", "--runs", "2", "--json",
        ])
        .arg(sb.results())
        .arg("--")
        .arg(mock())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.gate_results();
    let c = the_cell(&r);
    assert_eq!(c.counts.error, 2, "{c:#?}");
    assert!(
        c.reason
            .as_deref()
            .is_some_and(|r| r.contains("trace layer was not active")),
        "{c:#?}"
    );
}

/// The Jetson diagnosis, from a real emulated run with no debugger: the
/// summary names the signal, the driver worker thread, the unmapped region
/// and the driver's exit handler as the last to run; `vkexit explain` tells
/// the whole story, down to the runtime's load-time destructor that never ran.
#[test]
fn an_emulated_jetson_crash_is_explained_from_its_run_directory() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_run(&[
        "--emulate",
        "tegra",
        "--case",
        "clean-exit",
        "--runtime",
        "refrt:never",
        "--runs",
        "1",
    ]);
    let c = the_cell(&r);
    let summary = &c.findings[0];
    for piece in [
        "SIGSEGV (SEGV_MAPERR) on thread vkexit-tegra-0",
        "in an unmapped region",
        "during exit (main had returned)",
        "last exit handler to run: exit handler #",
        "(atexit, registered by libVkLayer_vkexit_tegra_exit.so)",
    ] {
        assert!(summary.contains(piece), "{piece} not in {summary}");
    }
    let run = &c.artifacts[0];
    let out = sb.vkexit().args(["explain", run]).output().unwrap();
    assert!(out.status.success());
    let story = String::from_utf8_lossy(&out.stdout);
    let order = [
        "main returned 0",
        "(atexit, registered by libVkLayer_vkexit_tegra_exit.so) runs",
        "driver exit handler runs with 1 live worker(s)",
        "unmapped",
        "CRASH SIGSEGV",
        "never ran, cut off by the crash:",
        "(atexit, registered by libvkexit_refrt.so)",
    ];
    let mut at = 0;
    for piece in order {
        at += story[at..]
            .find(piece)
            .unwrap_or_else(|| panic!("{piece:?} missing after byte {at}:\n{story}"));
    }
}

#[test]
fn a_crash_in_an_exit_handler_of_any_program_is_reported_through_the_preload() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(1, &[], &["--crash-at-exit"]);
    let c = the_cell(&r);
    let summary = &c.findings[0];
    assert!(
        summary.starts_with("SIGSEGV (SEGV_MAPERR) on thread mock at pc 0x…"),
        "{summary}"
    );
    assert!(
        summary.contains("address 0x…, during exit (main had returned)"),
        "{summary}"
    );
    assert!(
        summary.contains("(atexit, registered by mock)"),
        "{summary}"
    );
}

#[test]
fn explain_refuses_what_is_not_a_run_directory() {
    let sb = Sandbox::new();
    sb.vkexit()
        .args(["explain", "/nonexistent/run-0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not a run directory"));
}

/// A kept run whose timeline is there but cannot be read: `explain` names the file and why,
/// instead of telling a story without it as if the run had left none.
#[test]
fn explain_names_the_evidence_it_could_not_read() {
    let sb = Sandbox::new();
    let (_, r) = sb.gate_mock(1, &[], &["--crash-at-exit"]);
    let run = std::path::PathBuf::from(&the_cell(&r).artifacts[0]);
    std::fs::write(
        run.join("timeline.jsonl"),
        "\u{0}\u{1} cut by a full disk\n",
    )
    .unwrap();
    std::fs::write(run.join("result.json"), "{ not json").unwrap();
    let out = sb.vkexit().arg("explain").arg(&run).output().unwrap();
    assert!(out.status.success());
    let story = String::from_utf8_lossy(&out.stdout);
    assert!(story.contains("could not read result.json: "), "{story}");
    assert!(
        story.contains("could not read timeline.jsonl: 1 line(s), none of them a record"),
        "{story}"
    );
    // The crash record is still read and told.
    assert!(story.contains("CRASH SIGSEGV"), "{story}");
}
