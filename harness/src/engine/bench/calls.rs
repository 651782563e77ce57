//! What a vkexit layer adds to one Vulkan call: `vk-call-loop` times vkCreateBuffer +
//! vkDestroyBuffer pairs (calls the trace layer intercepts) and vkGetBufferMemoryRequirements
//! (a call neither layer tracks) on the cell's driver, without validation (its own cost would
//! hide the layer's), once without layers and once with the layer writing its evidence. The
//! fastest of a few tries counts: it is the one the rest of the machine disturbed least.

use super::PerCall;
use crate::host::helpers;
use crate::host::layers::{self, Chain, Emulation};
use crate::plan::Cell;
use crate::support::errors::{Error, Result};
use std::path::Path;
use std::process::{Command, Stdio};

pub const PROGRAM: &str = "vk-call-loop";
const TRIES: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Trace,
    Tegra,
}

/// Nanoseconds the layer adds per intercepted call and per untracked call.
pub fn per_call(cell: &Cell, work: &Path, layer: Layer, pairs: u32) -> Result<PerCall> {
    let program = helpers::path(PROGRAM)?;
    let mut chain = Chain {
        slow_teardown: false,
        trace: layer == Layer::Trace,
        validation: None,
        emulation: match layer {
            Layer::Trace => Emulation::None,
            Layer::Tegra => Emulation::Tegra,
        },
        manifests: None,
    };
    let dir = work.join(format!("calls-{layer:?}").to_lowercase());
    chain.write_manifests(&dir.join("layers"))?;
    let mut without = [f64::INFINITY; 4];
    let mut with = [f64::INFINITY; 4];
    for _ in 0..TRIES {
        let plain = time(&program, cell, &dir, None, pairs)?;
        let layered = time(&program, cell, &dir, Some(&chain), pairs)?;
        for i in 0..4 {
            without[i] = without[i].min(plain[i]);
            with[i] = with[i].min(layered[i]);
        }
    }
    println!(
        "  {} layer, CPU time: {:+.0} ns per intercepted call, {:+.0} ns per untracked call",
        match layer {
            Layer::Trace => "trace",
            Layer::Tegra => "tegra-exit",
        },
        with[2] - without[2],
        with[3] - without[3]
    );
    Ok(PerCall {
        intercepted: with[0] - without[0],
        untracked: with[1] - without[1],
    })
}

/// One run of the loop: [tracked, untracked] ns per call, wall then CPU time.
fn time(
    program: &Path,
    cell: &Cell,
    dir: &Path,
    chain: Option<&Chain>,
    pairs: u32,
) -> Result<[f64; 4]> {
    let xdg = dir.join("xdg-runtime");
    std::fs::create_dir_all(&xdg).map_err(|e| Error::io("cannot create", &xdg, e))?;
    let manifest = cell.driver.manifest.display().to_string();
    let mut command = Command::new(program);
    command
        .arg(pairs.to_string())
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("VK_ICD_FILENAMES", &manifest)
        .env("VK_DRIVER_FILES", &manifest)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(layers::is_inherited_layer_setting) {
            command.env_remove(&key);
        }
    }
    command.env_remove("LD_PRELOAD");
    if let Some(chain) = chain {
        // Evidence files of a few MB each: one per try, removed after it.
        let _ = std::fs::remove_file(dir.join(vkexit_evidence::files::TRACE.name));
        let _ = std::fs::remove_file(dir.join(vkexit_evidence::files::TEGRA.name));
        command.envs(chain.env(dir));
    }
    let output = command
        .output()
        .map_err(|e| Error::io("cannot start", program, e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let figure = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let figures = [
        "tracked-ns-per-call:",
        "untracked-ns-per-call:",
        "tracked-cpu-ns-per-call:",
        "untracked-cpu-ns-per-call:",
    ]
    .map(figure);
    match (output.status.success(), figures) {
        (true, [Some(t), Some(u), Some(tc), Some(uc)]) => {
            let _ = std::fs::remove_file(dir.join(vkexit_evidence::files::TRACE.name));
            Ok([t, u, tc, uc])
        }
        _ => Err(Error::BenchProgram {
            program: program.to_path_buf(),
            status: output.status,
            output: stdout.to_string(),
        }),
    }
}
