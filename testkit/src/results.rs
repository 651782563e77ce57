//! vkexit's results file, its exploration file and a kept run's `result.json` read as typed
//! records (the first two as the types vkexit writes them with, `vkexit-evidence`), and
//! argument lists for vkexit built in one way: tests say what a cell or a run came to, not
//! where a string sits in JSON.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
pub use vkexit_evidence::explore::{Exploration, ExploredCell, Fix, Perturbation};
pub use vkexit_evidence::results::{CellResult, Counts, LayerCrash, Provenance, Results};
pub use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

/// The results file at `path`, typed: a field vkexit no longer writes fails here, by name.
pub fn read(path: &Path) -> Results {
    read_as(path, "results file")
}

/// The exploration file (`vkexit explore --json`) at `path`, typed.
pub fn exploration(path: &Path) -> Exploration {
    read_as(path, "exploration file")
}

/// The record a kept run's directory `run` holds (`result.json`), typed.
pub fn run_record(run: &Path) -> RunRecord {
    read_as(&run.join(vkexit_evidence::files::RESULT), "run record")
}

/// The record of `cell`'s first kept run: its first failing run, or its first run at all
/// with `--keep-passing`. Fails when the cell kept none.
pub fn first_run(cell: &CellResult) -> RunRecord {
    let run = cell
        .artifacts
        .first()
        .unwrap_or_else(|| panic!("no run kept: {cell:#?}"));
    run_record(Path::new(run))
}

/// The JSON file at `path` as a `T`, failing with the file's text when it is not one.
fn read_as<T: DeserializeOwned>(path: &Path, what: &str) -> T {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no {what} {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is no {what}: {e}\n{text}", path.display()))
}

/// A kept run's record, `result.json` in its directory: the verdict vkexit gave the run and
/// what it rests on. vkexit writes it from a type of its own (the evidence crate names the
/// file, [`vkexit_evidence::files::RESULT`], not its fields), so the fields tests read are
/// declared here: one vkexit no longer writes fails [`run_record`], by name. Fields may be
/// added.
#[derive(Debug, Clone, Deserialize)]
pub struct RunRecord {
    /// The run's cell, by its place in the plan.
    pub cell: usize,
    /// The run's number among its cell's runs, from 0.
    pub index: u32,
    /// The run's verdict, after every overrule and the allow-lists.
    pub verdict: RunVerdict,
    /// One line: why this verdict.
    pub reason: String,
    /// The signal that ended the program (`SIGSEGV`); `None` when none did.
    pub signal: Option<String>,
    /// The message ids the run's validation log holds (and the ids vkexit counts among
    /// them: calls on destroyed handles, a sanitizer's report), as the layer named them.
    pub vuids: Vec<String>,
    /// What the vkexit layers and the crash report saw, as sentences.
    #[serde(default)]
    pub findings: Vec<String>,
    /// The layer whose library held the pc of the crash that failed the run.
    #[serde(default)]
    pub crash_layer: Option<String>,
    /// How the program ended.
    pub termination: Termination,
    /// Every message id of the validation log, with how often.
    pub vuid_counts: VuidCounts,
    /// The run's wall time, in milliseconds.
    pub duration_ms: u64,
    /// How many bytes the program wrote to its standard output, all of them, kept or not.
    pub stdout_bytes: u64,
    /// As `stdout_bytes`, for its standard error.
    pub stderr_bytes: u64,
    /// The Vulkan loaders and drivers the run loaded; `None` without the preload.
    #[serde(default)]
    pub vulkan: Option<VulkanUse>,
}

/// How a run's program ended: `termination` of a [`RunRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Termination {
    /// It exited by itself, with this status.
    Exited {
        /// Its exit status (0 to 255).
        code: i32,
    },
    /// A signal ended it.
    Signaled {
        /// The signal's number.
        signal: i32,
        /// The kernel wrote a core file for it.
        core_dumped: bool,
    },
    /// vkexit killed it at the time limit.
    TimedOut {
        /// The limit, in milliseconds.
        after_ms: u64,
    },
    /// vkexit was interrupted and stopped it.
    Interrupted,
    /// It could not be started.
    NotStarted {
        /// Why not.
        reason: String,
    },
}

/// A run's validation messages by id: `vuid_counts` of a [`RunRecord`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VuidCounts {
    /// Each message id the log holds, as the layer wrote it, with how often.
    pub ids: BTreeMap<String, VuidStat>,
    /// The log ended in the middle of a line.
    pub cut_mid_line: bool,
}

/// How one message id showed in a run's log.
#[derive(Debug, Clone, Deserialize)]
pub struct VuidStat {
    /// Messages with this id.
    pub count: u64,
    /// The most severe of them: `error`, `warning`, `performance`.
    pub severity: String,
}

/// What a run loaded of Vulkan, as the preload saw it: `vulkan` of a [`RunRecord`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VulkanUse {
    /// Every loader, in the order loaded.
    pub loaders: Vec<LoaderSeen>,
    /// Every driver, in the order loaded.
    pub drivers: Vec<DriverSeen>,
    /// The first driver manifest each process that asked the loader for drivers opened.
    #[serde(default)]
    pub driver_manifests: Vec<String>,
}

/// A Vulkan loader a run loaded.
#[derive(Debug, Clone, Deserialize)]
pub struct LoaderSeen {
    /// The file it was loaded from.
    pub path: String,
    /// Its version as it reports it; `None` when unknown.
    #[serde(default)]
    pub version: Option<String>,
}

/// A Vulkan driver a run loaded.
#[derive(Debug, Clone, Deserialize)]
pub struct DriverSeen {
    /// The file it was loaded from.
    pub path: String,
    /// The library that loaded it, when a `dlopen` of it was seen.
    #[serde(default)]
    pub loaded_by: Option<String>,
}

/// The only cell of `results`.
pub fn the_cell(results: &Results) -> &CellResult {
    assert_eq!(results.cells.len(), 1, "{results:#?}");
    &results.cells[0]
}

/// The cell of `results` of `case` × `runtime`.
pub fn cell_of<'r>(results: &'r Results, case: &str, runtime: &str) -> &'r CellResult {
    results
        .cells
        .iter()
        .find(|c| c.case == case && c.runtime == runtime)
        .unwrap_or_else(|| panic!("no cell {case} × {runtime} in {results:#?}"))
}

/// Asserts that all `runs` runs of `cell` were judged `verdict`.
pub fn assert_all(cell: &CellResult, verdict: RunVerdict, runs: u64) {
    assert_eq!(cell.counts.get(verdict), runs, "{verdict}: {cell:#?}");
}

/// A cell's identity across files: case, runtime, driver, layers, emulation.
pub fn id(cell: &CellResult) -> (String, String, String, String, String) {
    (
        cell.case.clone(),
        cell.runtime.clone(),
        cell.driver.clone(),
        cell.layers.join("+"),
        cell.emulation.clone(),
    )
}

/// A vkexit command line, built a flag at a time: `Args::run().case("clean-exit").runs(2)`;
/// the program to run ([`Args::program`]) comes last, after `--`, whenever it was given.
#[derive(Debug, Clone, Default)]
pub struct Args {
    args: Vec<String>,
    program: Vec<String>,
}

impl Args {
    /// `run --driver lavapipe`: a gate on the CPU driver every test machine has.
    pub fn run() -> Self {
        Args::command("run").opt("--driver", "lavapipe")
    }

    /// `merge FILES`.
    pub fn merge(files: &[&str]) -> Self {
        Args::command("merge").flags(files)
    }

    /// Any other command: `explore`, `repro`.
    pub fn command(name: &str) -> Self {
        Args {
            args: vec![name.to_string()],
            program: Vec::new(),
        }
    }

    /// `--case CASE`.
    pub fn case(self, case: &str) -> Self {
        self.opt("--case", case)
    }

    /// `--runtime RUNTIME`.
    pub fn runtime(self, runtime: &str) -> Self {
        self.opt("--runtime", runtime)
    }

    /// `--runs N`.
    pub fn runs(self, runs: u32) -> Self {
        self.opt("--runs", &runs.to_string())
    }

    /// `--json FILE`.
    pub fn json(self, file: &str) -> Self {
        self.opt("--json", file)
    }

    /// `--baseline FILE`.
    pub fn baseline(self, file: &str) -> Self {
        self.opt("--baseline", file)
    }

    /// `--shard K/N`.
    pub fn shard(self, shard: &str) -> Self {
        self.opt("--shard", shard)
    }

    /// An option with its value: `--artifacts elsewhere`.
    pub fn opt(mut self, name: &str, value: &str) -> Self {
        self.args.extend([name.to_string(), value.to_string()]);
        self
    }

    /// Flags or arguments as they are: `--no-validation`, `--allow-no-runs`.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.args.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// `-- PROGRAM ARGS`: the program to run, after every flag whenever those are given.
    pub fn program(mut self, program: &Path, args: &[&str]) -> Self {
        self.program = vec![program.to_str().expect("a UTF-8 path").into()];
        self.program.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// The arguments, in order.
    pub fn to_vec(&self) -> Vec<String> {
        let mut all = self.args.clone();
        if !self.program.is_empty() {
            all.push("--".into());
            all.extend(self.program.iter().cloned());
        }
        all
    }
}

impl IntoIterator for &Args {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;

    fn into_iter(self) -> Self::IntoIter {
        self.to_vec().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_come_in_the_order_given_the_program_last() {
        let args = Args::run()
            .case("clean-exit")
            .runs(2)
            .flags(&["--no-validation"])
            .program(Path::new("/bin/true"), &["x"])
            .json("r.json");
        assert_eq!(
            args.to_vec(),
            [
                "run",
                "--driver",
                "lavapipe",
                "--case",
                "clean-exit",
                "--runs",
                "2",
                "--no-validation",
                "--json",
                "r.json",
                "--",
                "/bin/true",
                "x"
            ]
        );
        assert_eq!(
            Args::merge(&["a.json", "b.json"])
                .baseline("b.toml")
                .to_vec(),
            ["merge", "a.json", "b.json", "--baseline", "b.toml"]
        );
    }
}
