//! What the trace layer adds to a tracked call: `examples/buffer_pair_cost.rs` times
//! vkCreateBuffer + vkDestroyBuffer pairs on lavapipe without layers, with the trace layer as a
//! pure pass-through (no trace file), and with it writing a trace. No validation: its own cost
//! would hide the layer's. Timing depends on the machine, so this only prints:
//!
//! ```text
//! cargo test --release -p vkexit-layer-trace --test per_call_cost -- --ignored --nocapture
//! ```

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Layers, Run, TRACE_LAYER};

const PAIRS: &str = "100000";
/// Runs of each setup; the fastest counts, as the least disturbed by the rest of the machine.
const TRIES: usize = 3;

fn example() -> PathBuf {
    let path = common::build_dir()
        .join("examples")
        .join("buffer_pair_cost");
    assert!(
        path.exists(),
        "{} is missing: cargo test builds it, or cargo build --release --examples -p vkexit-layer-trace",
        path.display()
    );
    path
}

/// The fastest ns per pair of `TRIES` runs.
fn ns_per_pair(layers: Option<&str>, trace_file: bool) -> f64 {
    (0..TRIES)
        .map(|_| {
            let run = Run::new(Layers::TraceAndValidation);
            let mut command = Command::new(example());
            command
                .arg(PAIRS)
                .env_clear()
                .env("XDG_RUNTIME_DIR", run.dir())
                .env("VK_ICD_FILENAMES", common::LAVAPIPE)
                .env("VK_DRIVER_FILES", common::LAVAPIPE);
            if let Some(layers) = layers {
                command
                    .env("VK_LAYER_PATH", run.layer_dir())
                    .env("VK_INSTANCE_LAYERS", layers);
            }
            if trace_file {
                command.env("VKEXIT_TRACE_FILE", run.dir().join("trace.jsonl"));
            }
            let output = command.output().expect("buffer_pair_cost runs");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("ns-per-pair: "))
                .expect("a ns-per-pair line")
                .parse::<f64>()
                .unwrap()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn ns_added_per_tracked_call() {
    let none = ns_per_pair(None, false);
    let pass_through = ns_per_pair(Some(TRACE_LAYER), false);
    let traced = ns_per_pair(Some(TRACE_LAYER), true);
    println!("vkCreateBuffer + vkDestroyBuffer on lavapipe, fastest of {TRIES} × {PAIRS} pairs:");
    println!("  no layer:                       {none:>7.0} ns per pair");
    println!(
        "  trace layer, no trace file:     {pass_through:>7.0} ns per pair ({:+.0} ns per call)",
        (pass_through - none) / 2.0
    );
    println!(
        "  trace layer, writing the trace: {traced:>7.0} ns per pair ({:+.0} ns per call)",
        (traced - none) / 2.0
    );
}
