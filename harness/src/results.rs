//! The results file, schema `vkexit.results/1`: what CI scripts read.
//! Fields may be added; the ones here keep their meaning.

use crate::verdict::{CellVerdict, RunVerdict};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "vkexit.results/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub schema: String,
    pub vkexit_version: String,
    /// vkexit was stopped (Ctrl-C, SIGTERM) before every run finished.
    #[serde(default)]
    pub interrupted: bool,
    /// The shard of the matrix these results are (`--shard K/N`), as "K/N".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    pub cells: Vec<CellResult>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub pass: u64,
    pub crash: u64,
    pub exit: u64,
    pub vuid: u64,
    pub timeout: u64,
    pub error: u64,
    #[serde(default)]
    pub leak: u64,
}

impl Counts {
    pub fn add(&mut self, verdict: RunVerdict) {
        *self.slot(verdict) += 1;
    }

    pub fn get(&self, verdict: RunVerdict) -> u64 {
        match verdict {
            RunVerdict::Pass => self.pass,
            RunVerdict::Crash => self.crash,
            RunVerdict::Exit => self.exit,
            RunVerdict::Vuid => self.vuid,
            RunVerdict::Timeout => self.timeout,
            RunVerdict::Error => self.error,
            RunVerdict::Leak => self.leak,
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
        }
    }

    /// Saturating: counts read from a results file may be anything.
    pub fn total(&self) -> u64 {
        RunVerdict::ALL
            .iter()
            .fold(0u64, |sum, &v| sum.saturating_add(self.get(v)))
    }

    pub fn failures(&self) -> u64 {
        self.total().saturating_sub(self.pass)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    pub case: String,
    pub runtime: String,
    pub driver: String,
    pub layers: Vec<String>,
    pub emulation: String,
    pub runs: u64,
    pub counts: Counts,
    pub verdict: CellVerdict,
    pub vuids: Vec<String>,
    /// How many messages of each id all runs logged together.
    #[serde(default)]
    pub vuid_counts: std::collections::BTreeMap<String, u64>,
    /// The ids in `vuids` that newer validation layers log under another
    /// name, each with the newest name (`…-device-00378` → `…-device-05137`):
    /// baselines and allow-lists match a check under either name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vuid_names: std::collections::BTreeMap<String, String>,
    pub signals: Vec<String>,
    pub artifacts: Vec<String>,
    /// What the vkexit layers saw, once each, handles elided:
    /// "VkDevice 0x… alive at exit (created on thread main)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// Passing runs over all runs, and its 95 % Wilson interval.
    pub pass_rate: f64,
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
    pub provenance: Option<crate::provenance::Provenance>,
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
}

/// What makes a cell the same cell in another run, shard or results file:
/// case × runtime × driver × layers × emulation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellId {
    pub case: String,
    pub runtime: String,
    pub driver: String,
    pub layers: Vec<String>,
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
        self.verdict.is_success()
            || (self.flaky_expected
                && matches!(self.verdict, CellVerdict::Flaky | CellVerdict::Fail))
    }

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
