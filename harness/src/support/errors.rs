//! Every error the harness reports to its user, in one place.

use std::path::PathBuf;

/// A failure that stops vkexit before or while it runs cases. Each one says
/// what was wrong and what to do; none is a panic.
// Each variant's `#[error]` text is its documentation: what went wrong, and what to do.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag's value that cannot be used: `--FLAG VALUE: why`.
    #[error("{flag}{}: {why}", value.as_ref().map(|v| format!(" {v}")).unwrap_or_default())]
    BadFlag {
        flag: &'static str,
        value: Option<String>,
        why: String,
    },

    /// A file vkexit reads (matrix, baseline, results) that says something it cannot use,
    /// at a line and column counted from 1.
    #[error("{}:{line}:{column}: {why}", path.display())]
    BadFileAt {
        path: PathBuf,
        line: usize,
        column: usize,
        why: String,
    },

    /// A file or directory given on the command line that cannot be used as it is.
    #[error("{}: {why}", path.display())]
    BadInput { path: PathBuf, why: String },

    #[error("{}: given twice; its runs would count twice", path.display())]
    GivenTwice { path: PathBuf },

    #[error("shard {missing} missing: the files given are {given}; a merge without it would gate part of the matrix")]
    ShardMissing { missing: String, given: String },

    /// The cases of a selection or matrix that cannot be made into cells.
    #[error("{0}")]
    BadSelection(BadSelection),

    /// A gate in which no run started: green it would prove nothing.
    #[error("no run started: {why}; a gate that ran nothing is not green (--allow-no-runs, or allow_no_runs = true in the matrix, accepts it)")]
    NoRuns { why: String },

    /// Nothing to run on: no driver shows a device.
    #[error("no Vulkan driver with a device was found; for the CPU driver lavapipe: apt-get install mesa-vulkan-drivers")]
    NoDevice,

    /// A program vkexit needs for a step (objcopy, apt-get, dpkg-deb) is missing or failed.
    #[error("{step}: {why}")]
    ToolFailed { step: String, why: String },

    /// The limit on a run's processes (`VKEXIT_MAX_PROCESSES`) is not one: every run would fail.
    #[error("{0}")]
    ProcessLimit(crate::support::env::BadVariable),

    /// vkexit cannot take over Ctrl-C and SIGTERM, so a stopped vkexit could leave runs behind.
    #[error("cannot install signal handlers: {0}")]
    SignalHandlers(#[source] std::io::Error),

    /// A probe of a driver or loader, in vkexit's own child process, that failed.
    #[error("{0}")]
    Probe(#[from] ProbeError),

    /// A program `vkexit bench` measures with that failed: how it ended and what it printed.
    #[error("{}: failed ({status}): {output}", program.display())]
    BenchProgram {
        program: PathBuf,
        status: std::process::ExitStatus,
        output: String,
    },

    /// The child vkexit `vkexit bench` measures memory with reported nothing.
    #[error("vkexit run --runs {runs} -j {jobs} -- /bin/true, in a child vkexit, reported nothing ({status})")]
    BenchChild {
        runs: u32,
        jobs: u32,
        status: std::process::ExitStatus,
    },

    /// The spec a bench child was given is not one.
    #[error("bench --rss-child {}: {source}", path.display())]
    BenchSpec {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// Standard output, or a file the output goes to, that cannot be written.
    #[error("{what}: {source}")]
    Output {
        what: String,
        #[source]
        source: std::io::Error,
    },

    /// A report that could not be written at the end, and where it was kept instead.
    #[error("{0}")]
    NotWritten(String),

    #[error("no Vulkan loader: {detail}\n  install it with: apt-get install libvulkan1")]
    NoLoader { detail: String },

    #[error(
        "the Khronos validation layer is not installed (searched {searched}).\n  install it with: apt-get install vulkan-validationlayers\n  or run without validation: --no-validation"
    )]
    NoValidationLayer { searched: String },

    #[error("the validation layer manifest {manifest} names a library that cannot be found: {library}\n  reinstall it with: apt-get install --reinstall vulkan-validationlayers")]
    ValidationLibraryMissing { manifest: PathBuf, library: String },

    #[error("no Vulkan driver matches {wanted}; drivers found: {found}")]
    UnknownDriver { wanted: String, found: String },

    #[error("unknown case `{name}`; built-in cases: {valid}")]
    UnknownCase { name: String, valid: String },

    #[error("bad runtime spec `{spec}`: {reason}")]
    BadRuntime { spec: String, reason: String },

    #[error("{path} is missing: vkexit carries it unless VKEXIT_HELPERS_DIR names a directory without it")]
    ScenarioMissing { path: PathBuf },

    /// The helpers vkexit carries could not be unpacked, or where they go is not safe.
    #[error("vkexit's helpers: {why}")]
    Helpers { why: String },

    #[error("{context}: {path}: {source}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a probe of a driver or a loader gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No Vulkan loader could be loaded (the dynamic linker's reason).
    #[error("no Vulkan loader: {0}")]
    NoLoader(String),
    /// The loader at a path could not be loaded.
    #[error("cannot load {}: {reason}", path.display())]
    LoaderNotLoaded {
        /// The loader's path.
        path: std::path::PathBuf,
        /// The dynamic loader's reason.
        reason: String,
    },
    /// A Vulkan call failed.
    #[error("{call}: {result}")]
    Vulkan {
        /// The call, `vkCreateInstance`.
        call: &'static str,
        /// What it returned.
        result: VkResult,
    },
    /// vkexit cannot find its own binary to start the probe with.
    #[error("cannot find vkexit itself: {0}")]
    NoSelf(#[source] std::io::Error),
    /// The directory for the probe's report cannot be made.
    #[error("cannot make a directory for the probe report: {0}")]
    NoScratch(#[source] std::io::Error),
    /// The probe's process cannot be started.
    #[error("cannot start the driver probe: {0}")]
    NotStarted(#[source] std::io::Error),
    /// The probe's process failed: how it ended and the last line it wrote on stderr.
    #[error("probe {status}: {last}")]
    Failed {
        /// `exited with code 1`, `killed by SIGSEGV`.
        status: String,
        /// The last line of its stderr.
        last: String,
    },
    /// The probe exited 0 without its report.
    #[error("probe exited 0 but wrote no report: {0}")]
    NoReport(#[source] std::io::Error),
    /// The probe's report is not a report.
    #[error("probe wrote a broken report: {0}")]
    BrokenReport(#[source] serde_json::Error),
}

/// A `VkResult` a Vulkan command returned (`host::vk` calls them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct VkResult(pub i32);

impl VkResult {
    pub(crate) const SUCCESS: VkResult = VkResult(0);
    pub(crate) const INCOMPLETE: VkResult = VkResult(5);
    /// What the loader answers when no driver has hardware to drive.
    pub(crate) const ERROR_INITIALIZATION_FAILED: VkResult = VkResult(-3);
    /// No result of Vulkan's: the loader has no such command.
    pub(crate) const NO_COMMAND: VkResult = VkResult(i32::MIN);

    fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "VK_SUCCESS",
            5 => "VK_INCOMPLETE",
            -1 => "VK_ERROR_OUT_OF_HOST_MEMORY",
            -2 => "VK_ERROR_OUT_OF_DEVICE_MEMORY",
            -3 => "VK_ERROR_INITIALIZATION_FAILED",
            -4 => "VK_ERROR_DEVICE_LOST",
            -6 => "VK_ERROR_LAYER_NOT_PRESENT",
            -7 => "VK_ERROR_EXTENSION_NOT_PRESENT",
            -9 => "VK_ERROR_INCOMPATIBLE_DRIVER",
            -13 => "VK_ERROR_UNKNOWN",
            i32::MIN => "no such command in the loader",
            _ => return None,
        })
    }

    pub(crate) fn check(self) -> std::result::Result<(), VkResult> {
        match self {
            VkResult::SUCCESS => Ok(()),
            other => Err(other),
        }
    }
}

impl std::fmt::Display for VkResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "VkResult {}", self.0),
        }
    }
}

impl ProbeError {
    /// A Vulkan call that returned `result`.
    pub fn vulkan(call: &'static str, result: VkResult) -> Self {
        ProbeError::Vulkan { call, result }
    }
}

/// Why a validation layer manifest a matrix pins cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PinnedLayer {
    /// Its path cannot be made absolute.
    #[error("{}: {source}", manifest.display())]
    Unresolved {
        /// The path as given.
        manifest: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No file is there.
    #[error("{}: no such file", .0.display())]
    NoSuchFile(PathBuf),
    /// It is no layer manifest of the Khronos validation layer.
    #[error("{}: not a layer manifest (JSON) that names VK_LAYER_KHRONOS_validation", .0.display())]
    NotTheLayer(PathBuf),
    /// It names the layer, but its library cannot be used.
    #[error("{0}")]
    Unusable(Box<Error>),
}

/// The cells a command was given that it cannot work with: each says what to choose instead.
// Each variant's `#[error]` text is its documentation: what went wrong, and what to do.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum BadSelection {
    #[error("`{command}` would be named `{name}`, the name of a built-in case: give it another with --name")]
    BuiltinName { command: String, name: String },

    #[error("two cases would be named `{name}`: `{first}` and `{second}`; give the command another with --name")]
    SameName {
        name: String,
        first: String,
        second: String,
    },

    #[error("external case `{case}`: cannot start its program: {why}")]
    ProgramNotFound { case: String, why: String },

    #[error("the matrix's validation_manifest {why}")]
    ValidationManifest { why: PinnedLayer },

    #[error("two [[layers]] sets give cells the same layers `{layers}` (validation layers {first} and {second}): their cells could not be told apart; name builds of different versions")]
    SameLayers {
        layers: String,
        first: String,
        second: String,
    },

    #[error("{cell} cannot run here: {why}")]
    CannotRun { cell: String, why: String },

    #[error("repro runs one cell; this selection has {count} ({some}): choose one with --case, --runtime and --driver, or give -- CMD")]
    NotOneCell { count: usize, some: String },

    #[error("vkexit bench times one cell; the selection gives {count} runnable cells: pick one with --driver")]
    BenchNotOneCell { count: usize },
}

/// The exit code of a run that could not start or was given what it cannot use (the
/// reference's exit codes: 0 green, 1 red, 2 usage or setup error, 130 interrupted).
pub const EXIT_USAGE: u8 = vkexit_evidence::exit_code::USAGE;

impl Error {
    /// The documented exit code of this error: every one is a usage or setup error.
    pub fn exit_code(&self) -> u8 {
        EXIT_USAGE
    }

    /// A file that could not be read or written, with what vkexit was doing.
    pub fn io(context: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            context,
            path: path.into(),
            source,
        }
    }

    /// A flag's value that cannot be used, and why.
    pub fn bad_flag(
        flag: &'static str,
        value: impl std::fmt::Display,
        why: impl std::fmt::Display,
    ) -> Self {
        Error::BadFlag {
            flag,
            value: Some(value.to_string()),
            why: why.to_string(),
        }
    }

    /// A file given that is not what it must be, and why.
    pub fn bad_input(path: impl Into<PathBuf>, why: impl std::fmt::Display) -> Self {
        Error::BadInput {
            path: path.into(),
            why: why.to_string(),
        }
    }

    /// A program vkexit needs for `step` that is missing or failed.
    pub fn tool(step: impl Into<String>, why: impl std::fmt::Display) -> Self {
        Error::ToolFailed {
            step: step.into(),
            why: why.to_string(),
        }
    }
}

/// vkexit's results: its errors are [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_as_the_message_users_know() {
        let cases: [(Error, &str); 5] = [
            (
                Error::bad_flag(
                    "--emulate",
                    "tegar",
                    "expected one of none, tegra, tegra-racy",
                ),
                "--emulate tegar: expected one of none, tegra, tegra-racy",
            ),
            (
                Error::BadFlag {
                    flag: "--timeout",
                    value: None,
                    why: "0 is not in (0, 86400] seconds".into(),
                },
                "--timeout: 0 is not in (0, 86400] seconds",
            ),
            (
                Error::BadFileAt {
                    path: "m.toml".into(),
                    line: 3,
                    column: 1,
                    why: "unknown field `rnus`".into(),
                },
                "m.toml:3:1: unknown field `rnus`",
            ),
            (
                Error::BadSelection(BadSelection::CannotRun {
                    cell: "clean-exit × refrt:guarded × nvidia".into(),
                    why: "no device".into(),
                }),
                "clean-exit × refrt:guarded × nvidia cannot run here: no device",
            ),
            (
                Error::tool("objcopy --strip-debug x failed", "no such file"),
                "objcopy --strip-debug x failed: no such file",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
            assert_eq!(error.exit_code(), 2, "{text}");
        }
    }
}
