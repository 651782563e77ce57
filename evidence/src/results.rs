//! The results file, schema `vkexit.results/1`: what CI scripts read.
//! Fields may be added; the ones here keep their meaning.

use crate::verdict::{CellVerdict, RunVerdict};
use serde::{Deserialize, Serialize};

/// The results file's `schema`: changes only when a field changes meaning or goes away.
pub const SCHEMA: &str = "vkexit.results/1";

/// The JSON Schema of the results file, from these types; committed as
/// `docs/results.schema.json` and printed by `vkexit schema`.
#[cfg(feature = "schema")]
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Results)).expect("a schema is JSON")
}

/// A vkexit results file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(title = "vkexit results file (vkexit.results/1)")
)]
pub struct Results {
    /// Always "vkexit.results/1".
    #[cfg_attr(feature = "schema", schemars(extend("const" = "vkexit.results/1")))]
    pub schema: String,
    /// The version of the vkexit that wrote the file.
    pub vkexit_version: String,
    /// vkexit was stopped (Ctrl-C, SIGTERM) before every run finished.
    #[serde(default)]
    pub interrupted: bool,
    /// The shard of the matrix these results are (`--shard K/N`), as "K/N".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Every cell of the matrix (of the shard), in the matrix's order.
    pub cells: Vec<CellResult>,
}

impl Results {
    /// Whether the gate is green for these results: the run was not cut short and every
    /// cell keeps it green ([`CellResult::is_green`]).
    pub fn is_green(&self) -> bool {
        !self.interrupted && self.cells.iter().all(CellResult::is_green)
    }
}

/// How many runs of a cell ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Counts {
    /// Runs that exited 0 with nothing found.
    pub pass: u64,
    /// Runs in which a process was killed by a signal.
    pub crash: u64,
    /// Runs whose main process exited nonzero.
    pub exit: u64,
    /// Runs that exited 0 with validation messages or calls on destroyed handles.
    pub vuid: u64,
    /// Runs killed at the time limit.
    pub timeout: u64,
    /// Runs that could not be judged (did not start, a layer not active, evidence missing).
    pub error: u64,
    /// Runs that left Vulkan objects alive at exit, counted only with `--fail-on-leak`;
    /// absent from files older than it (0).
    #[serde(default)]
    pub leak: u64,
    /// Runs that exited 0 without ever using Vulkan; absent from files older than it (0).
    #[serde(default, rename = "no-vulkan")]
    pub no_vulkan: u64,
    /// Runs the test's own runner reported skipped; absent from files older than it (0).
    #[serde(default)]
    pub skipped: u64,
}

impl Counts {
    /// Counts one more run of `verdict`.
    pub fn add(&mut self, verdict: RunVerdict) {
        *self.slot(verdict) += 1;
    }

    /// How many runs ended as `verdict`.
    pub fn get(&self, verdict: RunVerdict) -> u64 {
        match verdict {
            RunVerdict::Pass => self.pass,
            RunVerdict::Crash => self.crash,
            RunVerdict::Exit => self.exit,
            RunVerdict::Vuid => self.vuid,
            RunVerdict::Timeout => self.timeout,
            RunVerdict::Error => self.error,
            RunVerdict::Leak => self.leak,
            RunVerdict::NoVulkan => self.no_vulkan,
            RunVerdict::Skipped => self.skipped,
        }
    }

    fn slot(&mut self, verdict: RunVerdict) -> &mut u64 {
        match verdict {
            RunVerdict::Pass => &mut self.pass,
            RunVerdict::Crash => &mut self.crash,
            RunVerdict::Exit => &mut self.exit,
            RunVerdict::Vuid => &mut self.vuid,
            RunVerdict::Timeout => &mut self.timeout,
            RunVerdict::Error => &mut self.error,
            RunVerdict::Leak => &mut self.leak,
            RunVerdict::NoVulkan => &mut self.no_vulkan,
            RunVerdict::Skipped => &mut self.skipped,
        }
    }

    /// Adds `other`'s counts, saturating; whether a sum overflowed.
    pub fn add_counts(&mut self, other: &Counts) -> bool {
        let mut overflow = false;
        for verdict in RunVerdict::ALL {
            let (sum, n) = (self.slot(verdict), other.get(verdict));
            overflow |= sum.checked_add(n).is_none();
            *sum = sum.saturating_add(n);
        }
        overflow
    }

    /// Saturating: counts read from a results file may be anything.
    pub fn total(&self) -> u64 {
        RunVerdict::ALL
            .iter()
            .fold(0u64, |sum, &v| sum.saturating_add(self.get(v)))
    }

    /// The runs that passed: `pass`, and `no-vulkan` (exited 0 with nothing to check).
    pub fn passed(&self) -> u64 {
        self.pass.saturating_add(self.no_vulkan)
    }

    /// The runs that failed: neither passed nor skipped by their runner (saturating, as
    /// `total`).
    pub fn failures(&self) -> u64 {
        self.total()
            .saturating_sub(self.passed())
            .saturating_sub(self.skipped)
    }
}

/// One cell: case × runtime × driver × layers × emulation, its runs and verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CellResult {
    /// The scenario run: a built-in case's name, or a user program's (`--name`, else its
    /// file's).
    pub case: String,
    /// The compute runtime the case ran on (`refrt:guarded`, `ggml`), or `external` for a
    /// user program.
    pub runtime: String,
    /// The Vulkan driver the runs were pinned to, by name (`lavapipe`) or ICD manifest.
    pub driver: String,
    /// The layers each run had: `trace`, `validation` (`validation@VERSION` when pinned);
    /// empty for none.
    pub layers: Vec<String>,
    /// The driver behaviour emulated by a layer: `none`, `tegra` or `tegra-racy`.
    pub emulation: String,
    /// The exit order every run took instead of its own (`--exit-order`: `module`,
    /// `linked,…`); absent for the program's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_order: Option<String>,
    /// The thread-timing seed of every run (`--chaos-seed`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos_seed: Option<u64>,
    /// Every run had a slower device's teardown at exit (`--slow-teardown`); absent without.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slow_teardown: bool,
    /// How many runs were made: the sum of `counts`.
    pub runs: u64,
    /// How many runs ended with each run verdict.
    pub counts: Counts,
    /// The cell's verdict: the runs judged against the cell's expectation.
    pub verdict: CellVerdict,
    /// The validation message ids any run logged, once each, sorted.
    pub vuids: Vec<String>,
    /// How many messages of each id all runs logged together.
    #[serde(default)]
    pub vuid_counts: std::collections::BTreeMap<String, u64>,
    /// The ids in `vuids` that newer validation layers log under another
    /// name, each with the newest name (`…-device-00378` → `…-device-05137`):
    /// baselines and allow-lists match a check under either name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vuid_names: std::collections::BTreeMap<String, String>,
    /// The signals that killed a process in any run, once each, sorted (`SIGSEGV`).
    pub signals: Vec<String>,
    /// The run directories kept (failing runs, or all with `--keep-passing`), earliest
    /// runs first, at most 100.
    pub artifacts: Vec<String>,
    /// What the vkexit layers saw, once each, handles elided:
    /// "VkDevice 0x… alive at exit (created on thread main)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// Passing runs over all runs, from 0 to 1.
    pub pass_rate: f64,
    /// The 95 % Wilson score interval of the pass rate, `[low, high]`: how sure the runs
    /// make it.
    pub pass_rate_95: [f64; 2],
    /// The wall time of all its runs together, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
    /// Why the verdict: the expectation met or missed, or why skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The physical device the runs used, when the driver was probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Device, driver, loader, validation layer, kernel and glibc of the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// The ICD manifest of the driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_manifest: Option<String>,
    /// Which expectation judged the cell: "built-in", or "FILE:LINE" of the
    /// baseline entry; absent when none applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<String>,
    /// The baseline knows the cell is flaky: it keeps the gate green whether
    /// it passed, was flaky or failed, and its verdict says which.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky_expected: bool,
    /// Message ids the runs logged that an allow-list of the baseline removed
    /// before judging (a layer's known false positive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_vuids: Vec<String>,
    /// The cell's crashes had their pc in a layer's library: which layer, and
    /// what the cell did when run again without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_in_layer: Option<LayerCrash>,
}

/// Where a cell's runs came from: the device and driver, the loader, the validation layer, the
/// kernel and the C library. A result from another machine (a shard, a CI runner) says what it
/// was measured on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Provenance {
    /// The physical device's name (`VkPhysicalDeviceProperties::deviceName`); absent when
    /// the driver was not probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The physical device's type: `CPU`, `DISCRETE_GPU`, `INTEGRATED_GPU`, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_type: Option<String>,
    /// The device's Vulkan version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vulkan: Option<String>,
    /// The driver's name (`VkPhysicalDeviceDriverProperties::driverName`, `llvmpipe`);
    /// absent when the driver does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_name: Option<String>,
    /// The driver's own version text (`VkPhysicalDeviceDriverProperties`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_info: Option<String>,
    /// The driver's version number as the device reports it
    /// (`VkPhysicalDeviceProperties::driverVersion`), encoded as the vendor chooses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<u32>,
    /// The loader vkexit found (`libvulkan.so.1`): it decides how the driver is chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader: Option<String>,
    /// How the runs' driver was chosen (`VK_LOADER_DRIVERS_SELECT + VK_ADD_DRIVER_FILES`,
    /// or `VK_DRIVER_FILES + VK_ICD_FILENAMES` for a loader before 1.3.234).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_selection: Option<String>,
    /// The loaders the runs' programs loaded, each with the number of runs that loaded it:
    /// "1.4.313 (/…/ggml/libvulkan.so.1): 5 runs". "none" for runs that loaded none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaders_used: Vec<String>,
    /// The validation layer's version (its API version), when the cell's runs had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_layer: Option<String>,
    /// The Linux kernel's release (`uname -r`).
    pub kernel: String,
    /// The C library's version (`2.36`).
    pub glibc: String,
    /// The machine's architecture, `x86_64`, `aarch64`.
    pub arch: String,
}

/// Crashes inside a layer that observes the application, and whether the
/// application crashes without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LayerCrash {
    /// `validation`, `trace`, or another layer's file name.
    pub layer: String,
    /// The layer's version, when known (the validation layer's API version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Runs of the cell whose crash was in the layer.
    pub crashed_runs: u64,
    /// The same cell run again without the layer; absent when it was not
    /// (turned off, a layer vkexit does not control, or the emulation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without: Option<WithoutLayer>,
    /// One line: "crash in the validation layer 1.3.239; without validation: pass 5/5".
    pub summary: String,
}

/// The runs of a cell made again without one layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WithoutLayer {
    /// How many runs were made without the layer (as many as the cell's).
    pub runs: u64,
    /// How many of them ended with each run verdict.
    pub counts: Counts,
    /// The signals of its crashed runs, once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// "pass 5/5", "crash SIGSEGV 5/5", "pass 3/5, crash SIGSEGV 2/5".
    pub summary: String,
}

/// What makes a cell the same cell in another run, shard or results file:
/// case × runtime × driver × layers × emulation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellId {
    /// The scenario, as in [`CellResult::case`].
    pub case: String,
    /// The compute runtime, as in [`CellResult::runtime`].
    pub runtime: String,
    /// The driver, as in [`CellResult::driver`].
    pub driver: String,
    /// The layers, as in [`CellResult::layers`]: their order is part of the identity.
    pub layers: Vec<String>,
    /// The emulation, as in [`CellResult::emulation`].
    pub emulation: String,
}

impl CellId {
    /// The identity as one string: the five fields joined by U+001F (the
    /// ASCII unit separator), the layers among themselves by `+`. Sharding
    /// hashes this string, so it must never change.
    pub fn key(&self) -> String {
        [
            self.case.as_str(),
            &self.runtime,
            &self.driver,
            &self.layers.join("+"),
            &self.emulation,
        ]
        .join("\u{1f}")
    }
}

impl CellResult {
    /// Whether this cell keeps the gate green: it met its expectation, or
    /// it is known to be flaky and passed or failed.
    pub fn is_green(&self) -> bool {
        self.verdict.keeps_gate_green(self.flaky_expected)
    }

    /// Its identity across runs, shards and results files.
    pub fn id(&self) -> CellId {
        CellId {
            case: self.case.clone(),
            runtime: self.runtime.clone(),
            driver: self.driver.clone(),
            layers: self.layers.clone(),
            emulation: self.emulation.clone(),
        }
    }
}
