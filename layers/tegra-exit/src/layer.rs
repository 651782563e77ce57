//! The layer's process-wide settings, read once from the environment, and its evidence file.

use crate::mode::{Mode, ModeChoice};
use std::sync::OnceLock;
use std::time::Duration;
use vkexit_evidence::tegra::{field, Event};
use vkexit_evidence::{files, EvidenceLog, Record};

/// The layer's name, as in its manifest.
pub const LAYER_NAME: &str = "VK_LAYER_VKEXIT_tegra_exit";

/// Selects the mode: `deterministic` (default), `racy` or `off`.
pub const MODE_VAR: &str = "VKEXIT_TEGRA_MODE";
/// Names the evidence file (JSON lines, appended).
pub const LOG_VAR: &str = files::TEGRA.var;
/// Overrides the workers' sleep between rounds, in microseconds (for tuning the racy mode).
pub const SLEEP_VAR: &str = "VKEXIT_TEGRA_WORKER_SLEEP_US";

/// Sleep between a worker's rounds in deterministic mode: short, so the fault follows the
/// unmap within about a millisecond.
pub const DETERMINISTIC_SLEEP: Duration = Duration::from_millis(1);
/// Sleep between a worker's rounds in racy mode, tuned on lavapipe so that about 45 % of the
/// runs with a device alive at exit crash, near the Orin's 2 of 5 (measured in README.md).
pub const RACY_SLEEP: Duration = Duration::from_millis(15);

/// Settings and evidence file, for the life of the loaded library.
pub struct Layer {
    /// How the emulated driver thread meets exit (`VKEXIT_TEGRA_MODE`).
    pub mode: Mode,
    /// A `VKEXIT_TEGRA_MODE` value that was not understood (the mode fell back to deterministic).
    pub unknown_mode: Option<String>,
    /// A `VKEXIT_TEGRA_WORKER_SLEEP_US` value that was not understood.
    pub bad_sleep: Option<String>,
    /// The worker's sleep between rounds.
    pub worker_sleep: Duration,
    log: Option<EvidenceLog>,
}

static LAYER: OnceLock<Layer> = OnceLock::new();

impl Layer {
    /// The settings, read from the environment on first use.
    pub fn get() -> &'static Layer {
        LAYER.get_or_init(Layer::from_env)
    }

    /// The settings if they were read already; never blocks (for the exit handler).
    pub fn get_if_read() -> Option<&'static Layer> {
        LAYER.get()
    }

    fn from_env() -> Layer {
        let mode_value = std::env::var(MODE_VAR).ok();
        let ModeChoice { mode, unknown } = Mode::parse(mode_value.as_deref());
        let sleep_value = std::env::var(SLEEP_VAR).ok().filter(|v| !v.is_empty());
        let default_sleep = match mode {
            Mode::Racy => RACY_SLEEP,
            Mode::Deterministic | Mode::Off => DETERMINISTIC_SLEEP,
        };
        let parsed_sleep = sleep_value.as_deref().map(|v| v.trim().parse::<u64>());
        let (worker_sleep, bad_sleep) = match parsed_sleep {
            Some(Ok(us)) if us > 0 => (Duration::from_micros(us), None),
            Some(_) => (default_sleep, sleep_value),
            None => (default_sleep, None),
        };
        Layer {
            mode,
            unknown_mode: unknown,
            bad_sleep,
            worker_sleep,
            log: EvidenceLog::from_env(LOG_VAR, LAYER_NAME),
        }
    }

    /// Appends `record` to the evidence file, if there is one. Allocation-free: usable from the
    /// exit handler.
    pub fn write(&self, record: Record) {
        if let Some(log) = &self.log {
            let _ = log.write(record);
        }
    }

    /// Records a `warning` with `message`.
    pub fn warn(&self, message: &str) {
        let mut record = Record::new(Event::Warning.as_str());
        record
            .str(field::LAYER, LAYER_NAME)
            .str(field::MESSAGE, message);
        self.write(record);
    }
}
