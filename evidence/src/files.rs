//! The files of a run directory: each evidence file's name, and the environment variable that
//! tells its writer where to write it. The harness sets the variable to `RUN_DIR/name`; a
//! writer whose variable is unset or empty writes nothing.

/// An evidence file: JSON lines, appended by every process of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvidenceFile {
    /// Its name in the run directory.
    pub name: &'static str,
    /// The variable that gives its writer the path.
    pub var: &'static str,
}

/// The exit timeline, from the preloaded library (`libvkexit_preload.so`): `main`, `exit`,
/// exit handlers, `dlopen`/`dlclose`, the Vulkan loader and drivers loaded. Records:
/// [`crate::timeline`].
pub const TIMELINE: EvidenceFile = EvidenceFile {
    name: "timeline.jsonl",
    var: "VKEXIT_TIMELINE_FILE",
};

/// The crash report, from the crash handler (preloaded, or linked into a program). Records:
/// [`crate::crash`].
pub const CRASH: EvidenceFile = EvidenceFile {
    name: "crash.jsonl",
    var: "VKEXIT_CRASH_FILE",
};

/// Vulkan object lifetimes, from `VK_LAYER_VKEXIT_trace`. Records: [`crate::trace`].
pub const TRACE: EvidenceFile = EvidenceFile {
    name: "trace.jsonl",
    var: "VKEXIT_TRACE_FILE",
};

/// The emulated Tegra driver's exit, from `VK_LAYER_VKEXIT_tegra_exit`. Records:
/// [`crate::tegra`].
pub const TEGRA: EvidenceFile = EvidenceFile {
    name: "tegra.jsonl",
    var: "VKEXIT_TEGRA_LOG",
};

/// Every evidence file, in the order a run's story reads them.
pub const EVIDENCE: [EvidenceFile; 4] = [TIMELINE, TRACE, TEGRA, CRASH];

/// The program's standard output, as captured.
pub const STDOUT: &str = "stdout.txt";
/// The program's standard error, as captured.
pub const STDERR: &str = "stderr.txt";
/// The validation layer's log.
pub const VALIDATION_LOG: &str = "validation.log";
/// The validation layer's settings that the harness writes for the run.
pub const LAYER_SETTINGS: &str = "vk_layer_settings.txt";
/// The run's verdict and what it rests on, written by the harness.
pub const RESULT: &str = "result.json";
/// The command line and environment the run was started with, written by the harness.
pub const COMMAND: &str = "command.txt";
/// What the harness saw of a run that hung (its process tree and stacks), written by the harness.
pub const HANG: &str = "hang.json";
