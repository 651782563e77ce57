//! Matrix files (`vkexit run --config FILE.toml`): the cells of one CI job
//! and how they are run, so that a job is a file under review, not a long
//! command line.
//!
//! ```toml
//! cases = ["clean-exit", "handler-before-load"]  # built-in scenarios
//! runtimes = ["refrt:never", "refrt:guarded"]     # refrt policies
//! drivers = ["lavapipe", "/opt/icd.d/x_icd.json"] # short names or ICD manifest paths
//! runs = 20                                      # runs per cell
//! timeout = 60                                   # seconds before a run counts as hung
//! jobs = 4                                       # runs at once
//! fail_on_leak = false                           # objects alive at exit fail a run
//! allow_no_runs = false                          # true: a gate in which no run started
//!                                                # (no driver shows a device) exits 0
//! exit_order = "module"                          # every run exits in this order (as
//!                                                # `--exit-order`; the flag comes first)
//! chaos_seed = 7                                 # threads let run ahead at exit (as
//!                                                # `--chaos-seed`; the flag comes first)
//! require_vulkan = false                         # true: a run that exits 0 without using
//!                                                # Vulkan is an error (not `no-vulkan`)
//!
//! [env]                                          # added to every run
//! MESA_SHADER_CACHE_DISABLE = "true"
//!
//! [[external]]                                   # any program, as one case
//! name = "my-test"
//! argv = ["build/my-test", "--small"]
//! env = { MY_LOG = "1" }                         # added to its runs
//! private_cwd = false                            # true: runs start in their own directory,
//!                                                # not in vkexit's (default false)
//!
//! [[layers]]                                     # one set per [[layers]]: a dimension
//! validation = true                              # default true
//! trace = false                                  # default false
//! emulation = "tegra"                            # none, tegra or tegra-racy; default none
//! validation_manifest = "/opt/sdk/1.4.309/x86_64/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
//!                                                # this validation layer build, not the one the
//!                                                # loader finds; its cells' layers read
//!                                                # `validation@1.4.309` (relative paths: from
//!                                                # where vkexit runs)
//! ```
//!
//! Every key may be left out: no `cases` means every built-in case (none
//! when there are `[[external]]` cases), no `runtimes` every refrt policy,
//! no `drivers` every driver that shows a device, no `[[layers]]` one set
//! with validation only. A driver the file names that is not installed
//! gives `skipped` cells with the reason; of several entries that name the
//! same driver (a manifest path and its short name), the first one found is
//! used. Command-line flags change what the file says (`Matrix::apply`).

use crate::host::layers::{self, Emulation};
use crate::host::validation;
use crate::plan::suites::{self, Kind};
use crate::plan::{self, BUILTIN_CASES};
use crate::support::errors::{BadSelection, Error, Result};
use crate::support::toml_file::TomlFile;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// Runs per cell when neither `runs` nor `--runs` says.
pub(crate) const DEFAULT_RUNS: u32 = 5;
/// Seconds before a run counts as hung when neither `timeout` nor `--timeout` says.
pub(crate) const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

// The largest numbers a matrix file or the command line may give. Past them
// a value is a slip (10^12 runs, 100,000 processes at once, a timeout past
// any CI job), and some would overflow the time arithmetic of a run.
pub(crate) const MAX_RUNS: u32 = 1_000_000;
pub(crate) const MAX_JOBS: u32 = 1024;
pub(crate) const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// A run's time limit that is none.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum BadTimeout {
    /// Not a number.
    #[error("expected a number of seconds in (0, {MAX_TIMEOUT_SECS}]")]
    NotANumber,
    /// A number outside (0, MAX_TIMEOUT_SECS].
    #[error("{0} is not in (0, {MAX_TIMEOUT_SECS}] seconds")]
    OutOfRange(f64),
}

/// `--timeout`: seconds in (0, MAX_TIMEOUT_SECS].
pub(crate) fn parse_timeout(text: &str) -> std::result::Result<f64, BadTimeout> {
    let secs: f64 = text.trim().parse().map_err(|_| BadTimeout::NotANumber)?;
    check_timeout(secs)
}

fn check_timeout(secs: f64) -> std::result::Result<f64, BadTimeout> {
    match secs.is_finite() && secs > 0.0 && secs <= MAX_TIMEOUT_SECS {
        true => Ok(secs),
        false => Err(BadTimeout::OutOfRange(secs)),
    }
}

/// Why a program cannot be started as the runs would start it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoProgram {
    /// A path that cannot be looked at (most often: nothing is there).
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The program's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A path that is a directory.
    #[error("{}: is a directory", .0.display())]
    Directory(PathBuf),
    /// A file without an execute bit.
    #[error("{}: not executable", .0.display())]
    NotExecutable(PathBuf),
    /// A bare name that no directory of the runs' PATH holds.
    #[error("{}: not found in PATH", .0.display())]
    NotInPath(PathBuf),
}

/// Whether `program` names a file vkexit can start, as the runs will look
/// it up: a path with a `/` from the directory vkexit runs in, a bare name
/// in `path` (the runs' PATH).
pub(crate) fn find_program(
    program: &Path,
    path: Option<&std::ffi::OsStr>,
) -> std::result::Result<(), NoProgram> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let program = program.to_path_buf();
    if program.components().count() > 1 || program.is_absolute() {
        return match std::fs::metadata(&program) {
            Err(source) => Err(NoProgram::Unreadable {
                path: program,
                source,
            }),
            Ok(m) if m.is_dir() => Err(NoProgram::Directory(program)),
            Ok(_) if !executable(&program) => Err(NoProgram::NotExecutable(program)),
            Ok(_) => Ok(()),
        };
    }
    let dirs = path.map(std::env::split_paths).into_iter().flatten();
    match dirs.into_iter().any(|d| executable(&d.join(&program))) {
        true => Ok(()),
        false => Err(NoProgram::NotInPath(program)),
    }
}

/// One set of layers every run of its cells gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LayerSet {
    /// `validation`: VK_LAYER_KHRONOS_validation is enabled (default true).
    pub(crate) validation: bool,
    /// `trace`: VK_LAYER_VKEXIT_trace is enabled (default false).
    pub(crate) trace: bool,
    /// `emulation`: the emulated driver exit, if any (default none).
    pub(crate) emulation: Emulation,
    /// `validation_manifest`: the validation layer build to use (an absolute manifest path),
    /// instead of the one the loader would find; only with `validation`.
    pub(crate) validation_manifest: Option<PathBuf>,
}

impl Default for LayerSet {
    fn default() -> Self {
        LayerSet {
            validation: true,
            trace: false,
            emulation: Emulation::None,
            validation_manifest: None,
        }
    }
}

/// A program run as one case, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct External {
    /// `name`: the case name its cells and results carry.
    pub(crate) name: String,
    /// `argv`: the program and its arguments, run as given.
    pub(crate) argv: Vec<OsString>,
    /// `env`: added to the environment of its runs, after the matrix's own.
    pub(crate) env: Vec<(String, String)>,
    /// `private_cwd`: its runs start in their own private directory, not in the caller's.
    pub(crate) private_cwd: bool,
    /// Where its runs start, when not where vkexit runs (a suite's test).
    pub(crate) workdir: Option<PathBuf>,
    /// Why it is not run: a suite's disabled test, one that cannot start, a failed listing.
    pub(crate) not_run: Option<plan::NotRun>,
    /// What its suite says of it beyond its command.
    pub(crate) props: plan::CellProps,
    /// It is a test of a `[[suite]]`: its program was checked when it was listed.
    pub(crate) from_suite: bool,
}

impl External {
    /// `vkexit run [--name NAME] -- CMD ARGS`: named `NAME`, else after the program's file
    /// name, or the script's when the program is an interpreter.
    pub(crate) fn from_command(argv: Vec<OsString>, name: Option<String>) -> External {
        External {
            name: name.unwrap_or_else(|| plan::external_name(&argv)),
            argv,
            env: Vec::new(),
            private_cwd: false,
            workdir: None,
            not_run: None,
            props: plan::CellProps::default(),
            from_suite: false,
        }
    }

    /// A suite's test as a case.
    fn from_test(test: suites::Test) -> External {
        let props = test.props;
        External {
            name: test.name,
            argv: test.argv,
            env: props.env,
            private_cwd: false,
            workdir: test.workdir,
            not_run: props.not_run,
            props: plan::CellProps {
                env_remove: props.env_remove,
                timeout: props.timeout,
                will_fail: props.will_fail,
                run_serial: props.run_serial,
                resource_locks: props.resource_locks,
                notes: props.notes,
                skip: props.skip,
            },
            from_suite: true,
        }
    }

    /// The command as a user would type it, for messages.
    pub(crate) fn command_line(&self) -> String {
        self.argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A matrix file, checked: the cells of one job and how they are run. Its keys are those
/// of the module's example; every one may be left out.
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    /// `cases`: built-in cases; empty: every one, unless there are external cases.
    pub(crate) cases: Vec<String>,
    /// `[[external]]`: programs run as cases, in file order.
    pub(crate) externals: Vec<External>,
    /// `[[suite]]` and `--ctest`, `--gtest`, `--pytest`, `--libtest`: test suites whose
    /// tests become external cases when they are listed (`list_suites`).
    pub(crate) suites: Vec<suites::Suite>,
    /// `runtimes`: empty means every refrt policy.
    pub(crate) runtimes: Vec<String>,
    /// `drivers`: short names or ICD manifest paths; empty means every driver that shows
    /// a device.
    pub(crate) drivers: Vec<String>,
    /// The drivers come from a file: one that is not installed gives skipped
    /// cells. Named on the command line, it is an error (likely a typo).
    pub(crate) skip_absent_drivers: bool,
    /// `[[layers]]`: one set per table; empty means one set, validation only.
    pub(crate) layer_sets: Vec<LayerSet>,
    /// `runs`: runs per cell; absent: [`DEFAULT_RUNS`].
    pub(crate) runs: Option<u32>,
    /// `timeout`: seconds before a run counts as hung; absent: [`DEFAULT_TIMEOUT_SECS`].
    pub(crate) timeout: Option<f64>,
    /// `jobs`: runs at once; absent: one per CPU.
    pub(crate) jobs: Option<u32>,
    /// `[env]`: added to the environment of vkexit and of every run.
    pub(crate) env: Vec<(String, String)>,
    /// `fail_on_leak`: Vulkan objects alive at exit (seen by the trace layer) fail a run.
    pub(crate) fail_on_leak: bool,
    /// `exit_order`: every run exits in this order (`--exit-order` comes first).
    pub(crate) exit_order: Option<super::exit_order::ExitOrder>,
    /// `chaos_seed`: every run's threads timed by this seed (`--chaos-seed` comes first).
    pub(crate) chaos_seed: Option<u64>,
    /// `require_vulkan`: a run that exits 0 without using Vulkan is an error.
    pub(crate) require_vulkan: bool,
    /// `allow_no_runs`: a gate in which no run started (every driver absent, an empty
    /// shard) exits 0; without it, that is an error.
    pub(crate) allow_no_runs: bool,
}

/// What the command line says, to apply over a matrix file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub(crate) cases: Vec<String>,
    pub(crate) runtimes: Vec<String>,
    pub(crate) drivers: Vec<String>,
    /// `-- CMD ARGS`.
    pub(crate) command: Vec<OsString>,
    /// `--name`: the case name of `-- CMD ARGS`.
    pub(crate) name: Option<String>,
    /// `--private-cwd`: every external case's runs start in their own directory.
    pub(crate) private_cwd: bool,
    pub(crate) runs: Option<u32>,
    pub(crate) jobs: Option<u32>,
    pub(crate) timeout: Option<f64>,
    pub(crate) emulate: Option<String>,
    pub(crate) trace: bool,
    pub(crate) no_validation: bool,
    pub(crate) fail_on_leak: bool,
}

impl Matrix {
    pub(crate) fn read(path: &Path) -> Result<Matrix> {
        Matrix::parse(&TomlFile::read(path, "cannot read the matrix file")?)
    }

    /// Checks a matrix file's text; an error names the file, line and column and what was
    /// expected there.
    pub fn parse(file: &TomlFile) -> Result<Matrix> {
        let raw: RawMatrix = file.parse()?;
        raw.check(file)
    }

    /// The command line over the file:
    /// - `--case`, `--runtime` and `--driver` replace the file's list; a
    ///   `--case` may name a built-in case or one of the file's `[[external]]`
    ///   cases, and the cases not named are left out;
    /// - `-- CMD ARGS` adds a case to the file's;
    /// - `--runs`, `-j` and `--timeout` replace the file's value;
    /// - `--emulate`, `--trace` and `--no-validation` change every layer set
    ///   (sets that become the same are run once); `--fail-on-leak` turns it on.
    pub(crate) fn apply(&mut self, o: Overrides) -> Result<()> {
        if !o.cases.is_empty() {
            self.select_cases(&o.cases)?;
        }
        if !o.runtimes.is_empty() {
            self.runtimes = o.runtimes;
        }
        if !o.drivers.is_empty() {
            self.drivers = o.drivers;
            self.skip_absent_drivers = false;
        }
        match (o.command.is_empty(), o.name) {
            (false, name) => {
                if let Some(name) = &name {
                    check_name(name).map_err(|why| Error::bad_flag("--name", name, why))?;
                }
                let external = External::from_command(o.command, name);
                self.check_new_name(&external)?;
                self.externals.push(external);
            }
            (true, Some(name)) => {
                return Err(Error::bad_flag(
                    "--name",
                    name,
                    "names the program after `--`, and there is none",
                ))
            }
            (true, None) => {}
        }
        if o.private_cwd {
            for external in &mut self.externals {
                external.private_cwd = true;
            }
        }
        self.runs = o.runs.or(self.runs);
        self.jobs = o.jobs.or(self.jobs);
        if let Some(secs) = o.timeout {
            check_timeout(secs).map_err(|why| Error::BadFlag {
                flag: "--timeout",
                value: None,
                why: why.to_string(),
            })?;
            self.timeout = Some(secs);
        }
        let emulate = o.emulate.as_deref().map(Emulation::parse).transpose()?;
        let mut sets = Vec::new();
        for mut set in self.layer_sets() {
            set.emulation = emulate.unwrap_or(set.emulation);
            set.trace |= o.trace;
            set.validation &= !o.no_validation;
            if !set.validation {
                set.validation_manifest = None;
            }
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
        self.layer_sets = sets;
        self.fail_on_leak |= o.fail_on_leak;
        Ok(())
    }

    fn select_cases(&mut self, names: &[String]) -> Result<()> {
        for name in names {
            let known = BUILTIN_CASES.contains(&name.as_str())
                || self.externals.iter().any(|e| &e.name == name);
            if !known {
                let mut valid: Vec<&str> = BUILTIN_CASES.to_vec();
                valid.extend(self.externals.iter().map(|e| e.name.as_str()));
                return Err(Error::UnknownCase {
                    name: name.clone(),
                    valid: valid.join(", "),
                });
            }
        }
        self.cases = names
            .iter()
            .filter(|n| BUILTIN_CASES.contains(&n.as_str()))
            .cloned()
            .collect();
        self.externals.retain(|e| names.contains(&e.name));
        Ok(())
    }

    fn check_new_name(&self, new: &External) -> Result<()> {
        let name = &new.name;
        if BUILTIN_CASES.contains(&name.as_str()) {
            return Err(Error::BadSelection(BadSelection::BuiltinName {
                command: new.command_line(),
                name: name.to_string(),
            }));
        }
        if let Some(old) = self.externals.iter().find(|e| &e.name == name) {
            return Err(Error::BadSelection(BadSelection::SameName {
                name: name.to_string(),
                first: old.command_line(),
                second: new.command_line(),
            }));
        }
        Ok(())
    }

    /// Lists every suite, once, and adds its tests as external cases, in the suites' order
    /// and each suite's; the lines it returns say what each listing found and cost, and
    /// what vkexit does not honour of a test. Two cases of one name are refused.
    pub(crate) fn list_suites(&mut self) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        for suite in std::mem::take(&mut self.suites) {
            let listing = suite.list();
            let runnable = listing
                .tests
                .iter()
                .filter(|t| t.props.not_run.is_none())
                .count();
            let ms = listing.took.as_secs_f64() * 1000.0;
            notes.push(match listing.failed {
                true => format!(
                    "{}: the listing failed after {ms:.0} ms (`{}`): its case is an error",
                    suite.label(),
                    listing.command
                ),
                false => format!(
                    "{}: {} tests listed ({runnable} to run) in {ms:.0} ms ({:.0} ms of them {}'s own) by `{}`",
                    suite.label(),
                    listing.tests.len(),
                    listing.tool.as_secs_f64() * 1000.0,
                    suite.kind.name(),
                    listing.command
                ),
            });
            for test in listing.tests {
                for note in &test.props.notes {
                    notes.push(format!("{}: {note}", test.name));
                }
                let external = External::from_test(test);
                self.check_new_name(&external)?;
                self.externals.push(external);
            }
        }
        Ok(notes)
    }

    pub(crate) fn layer_sets(&self) -> Vec<LayerSet> {
        match self.layer_sets.is_empty() {
            true => vec![LayerSet::default()],
            false => self.layer_sets.clone(),
        }
    }

    pub(crate) fn runs(&self) -> u32 {
        self.runs.unwrap_or(DEFAULT_RUNS)
    }

    /// Refuses, before any run, an external case whose program cannot be
    /// started: every run of it would be an `error`.
    pub(crate) fn check_programs(&self) -> Result<()> {
        let path = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        for e in self.externals.iter().filter(|e| !e.from_suite) {
            let Some(program) = e.argv.first() else {
                continue;
            };
            let run_path = e
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| OsString::from(v))
                .or_else(|| path.clone());
            find_program(Path::new(program), run_path.as_deref()).map_err(|why| {
                Error::BadSelection(BadSelection::ProgramNotFound {
                    case: e.name.clone(),
                    why: why.to_string(),
                })
            })?;
        }
        Ok(())
    }

    pub(crate) fn timeout_secs(&self) -> f64 {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)
    }
}

/// Variables vkexit sets for every run itself: a matrix may not set them.
pub(crate) fn is_reserved_variable(key: &str) -> bool {
    use crate::support::env;
    use vkexit_evidence::files::{CRASH, TIMELINE};
    layers::is_inherited_layer_setting(key)
        || crate::host::drivers::SELECTION_VARIABLES.contains(&key)
        || [
            "HOME",
            "XDG_DATA_HOME",
            "XDG_CONFIG_HOME",
            "XDG_RUNTIME_DIR",
            env::REFRT_LIB,
            CRASH.var,
            TIMELINE.var,
            env::RUN_TOKEN,
        ]
        .contains(&key)
}

// ---------------------------------------------------------------------------
// The file as written, then checked value by value, with positions.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    cases: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    external: Vec<Spanned<RawExternal>>,
    #[serde(default)]
    suite: Vec<Spanned<RawSuite>>,
    runtimes: Option<Spanned<Vec<Spanned<String>>>>,
    drivers: Option<Spanned<Vec<Spanned<String>>>>,
    layers: Option<Spanned<Vec<Spanned<RawLayerSet>>>>,
    runs: Option<Spanned<u32>>,
    timeout: Option<Spanned<f64>>,
    jobs: Option<Spanned<u32>>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    fail_on_leak: bool,
    #[serde(default)]
    allow_no_runs: bool,
    exit_order: Option<Spanned<String>>,
    chaos_seed: Option<u64>,
    #[serde(default)]
    require_vulkan: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExternal {
    name: Spanned<String>,
    argv: Spanned<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    private_cwd: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    kind: Spanned<String>,
    build_dir: Option<Spanned<String>>,
    program: Option<Spanned<String>>,
    python: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayerSet {
    validation: Option<bool>,
    #[serde(default)]
    trace: bool,
    emulation: Option<EmulationName>,
    validation_manifest: Option<Spanned<String>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum EmulationName {
    None,
    Tegra,
    TegraRacy,
}

impl RawMatrix {
    fn check(self, file: &TomlFile) -> Result<Matrix> {
        let exit_order = match self.exit_order {
            Some(order) => {
                let at = order.span().start;
                let order = super::exit_order::ExitOrder::parse(order.get_ref())
                    .map_err(|why| file.error_at(at, format!("exit_order: {why}")))?;
                Some(order)
            }
            None => None,
        };
        let mut m = Matrix {
            skip_absent_drivers: self.drivers.is_some(),
            fail_on_leak: self.fail_on_leak,
            allow_no_runs: self.allow_no_runs,
            exit_order,
            chaos_seed: self.chaos_seed,
            require_vulkan: self.require_vulkan,
            env: check_env(file, self.env)?,
            ..Matrix::default()
        };
        for raw in self.external {
            let at = raw.span().start;
            let e = check_external(file, raw.into_inner())?;
            if let Some(first) = m.externals.iter().find(|x| x.name == e.name) {
                return Err(file.error_at(
                    at,
                    format!(
                        "a second [[external]] named `{}`: `{}` and `{}`",
                        e.name,
                        first.command_line(),
                        e.command_line()
                    ),
                ));
            }
            m.externals.push(e);
        }
        for raw in self.suite {
            let at = raw.span().start;
            m.suites.push(check_suite(file, at, raw.into_inner())?);
        }
        if let Some(cases) = self.cases {
            m.cases = list(
                file,
                cases,
                "cases",
                "every built-in case",
                |name| match BUILTIN_CASES.contains(&name) {
                    true => Ok(()),
                    false => Err(BadItem::UnknownCase(name.to_string())),
                },
            )?;
        }
        if let Some(runtimes) = self.runtimes {
            m.runtimes = list(file, runtimes, "runtimes", "every refrt policy", |spec| {
                plan::check_runtime(spec).map_err(BadItem::Runtime)
            })?;
        }
        if let Some(drivers) = self.drivers {
            m.drivers = list(
                file,
                drivers,
                "drivers",
                "every driver with a device",
                |d| match d.is_empty() {
                    true => Err(BadItem::EmptyDriver),
                    false => Ok(()),
                },
            )?;
        }
        if let Some(sets) = self.layers {
            if sets.get_ref().is_empty() {
                return Err(file.error(
                    &sets.span(),
                    "`layers` is empty: leave it out for validation only",
                ));
            }
            for raw in sets.into_inner() {
                let at = raw.span().start;
                let set = raw.into_inner().check(file)?;
                if m.layer_sets.contains(&set) {
                    return Err(file.error_at(at, "this layer set is given twice"));
                }
                m.layer_sets.push(set);
            }
        }
        if let Some(runs) = self.runs {
            if !(1..=MAX_RUNS).contains(runs.get_ref()) {
                return Err(file.error(&runs.span(), format!("`runs` must be in 1..={MAX_RUNS}")));
            }
            m.runs = Some(runs.into_inner());
        }
        if let Some(jobs) = self.jobs {
            if !(1..=MAX_JOBS).contains(jobs.get_ref()) {
                return Err(file.error(&jobs.span(), format!("`jobs` must be in 1..={MAX_JOBS}")));
            }
            m.jobs = Some(jobs.into_inner());
        }
        if let Some(timeout) = self.timeout {
            let secs = *timeout.get_ref();
            if let Err(why) = check_timeout(secs) {
                return Err(file.error(&timeout.span(), format!("`timeout`: {why}")));
            }
            m.timeout = Some(secs);
        }
        Ok(m)
    }
}

impl RawLayerSet {
    fn check(self, file: &TomlFile) -> Result<LayerSet> {
        let validation = self.validation.unwrap_or(true);
        let validation_manifest = match self.validation_manifest {
            None => None,
            Some(path) if !validation => {
                return Err(file.error(
                    &path.span(),
                    "validation_manifest in a set with `validation = false`: drop one of them",
                ));
            }
            Some(path) => {
                let layer = validation::pinned_layer(Path::new(path.get_ref()))
                    .map_err(|e| file.error(&path.span(), format!("validation_manifest {e}")))?;
                Some(layer.manifest)
            }
        };
        Ok(LayerSet {
            validation,
            trace: self.trace,
            emulation: match self.emulation.unwrap_or(EmulationName::None) {
                EmulationName::None => Emulation::None,
                EmulationName::Tegra => Emulation::Tegra,
                EmulationName::TegraRacy => Emulation::TegraRacy,
            },
            validation_manifest,
        })
    }
}

/// Why an entry of a matrix's `cases`, `runtimes` or `drivers` cannot be used.
#[derive(Debug, thiserror::Error)]
enum BadItem {
    /// A case that is not built in.
    #[error(
        "unknown case `{0}`; built-in cases: {cases} (any other program is an [[external]] entry)",
        cases = BUILTIN_CASES.join(", ")
    )]
    UnknownCase(String),
    /// A runtime spec that is none ([`plan::check_runtime`]'s error).
    #[error(transparent)]
    Runtime(Error),
    /// `""` for a driver.
    #[error("empty driver name")]
    EmptyDriver,
}

/// A list of names, each checked, without repeats; an empty list is refused
/// since leaving the key out means `all`.
fn list(
    file: &TomlFile,
    items: Spanned<Vec<Spanned<String>>>,
    key: &str,
    all: &str,
    check: impl Fn(&str) -> std::result::Result<(), BadItem>,
) -> Result<Vec<String>> {
    let span = items.span();
    let items = items.into_inner();
    if items.is_empty() {
        return Err(file.error(&span, format!("`{key}` is empty: leave it out for {all}")));
    }
    let mut out: Vec<String> = Vec::new();
    for item in items {
        check(item.get_ref()).map_err(|why| file.error(&item.span(), why))?;
        if !out.contains(item.get_ref()) {
            out.push(item.into_inner());
        }
    }
    Ok(out)
}

fn check_env(
    file: &TomlFile,
    env: BTreeMap<String, Spanned<String>>,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (key, value) in env {
        let bad_name = key.is_empty() || key.contains(['=', '\0']);
        if bad_name {
            return Err(file.error(
                &value.span(),
                format!("`{key}` is not an environment variable name"),
            ));
        }
        if is_reserved_variable(&key) {
            return Err(file.error(
                &value.span(),
                format!("{key} is set by vkexit for every run (layers, driver, run directory); choose them with `drivers` and [[layers]]"),
            ));
        }
        if value.get_ref().contains('\0') {
            return Err(file.error(&value.span(), format!("the value of {key} holds a NUL")));
        }
        out.push((key, value.into_inner()));
    }
    Ok(out)
}

/// A name an external case cannot have.
#[derive(Debug, thiserror::Error)]
enum BadName {
    /// Empty, or only spaces.
    #[error("the name is empty")]
    Empty,
    /// The name of a built-in case.
    #[error("`{0}` is a built-in case: give the program another name")]
    Builtin(String),
}

/// Why `name` cannot name an external case.
fn check_name(name: &str) -> std::result::Result<(), BadName> {
    if name.trim().is_empty() {
        return Err(BadName::Empty);
    }
    if BUILTIN_CASES.contains(&name) {
        return Err(BadName::Builtin(name.to_string()));
    }
    Ok(())
}

fn check_external(file: &TomlFile, raw: RawExternal) -> Result<External> {
    check_name(raw.name.get_ref()).map_err(|why| file.error(&raw.name.span(), why))?;
    let argv_span = raw.argv.span();
    let argv = raw.argv.into_inner();
    if !matches!(argv.first(), Some(program) if !program.is_empty()) {
        return Err(file.error(
            &argv_span,
            "`argv` needs the program, then its arguments: [\"path/to/program\", \"--arg\"]",
        ));
    }
    Ok(External {
        name: raw.name.into_inner(),
        argv: argv.into_iter().map(OsString::from).collect(),
        env: check_env(file, raw.env)?,
        private_cwd: raw.private_cwd,
        workdir: None,
        not_run: None,
        props: plan::CellProps::default(),
        from_suite: false,
    })
}

/// Where a suite's tests would come from that they cannot.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadSuiteTarget {
    /// CTest's build directory is none.
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A directory, but no CMake build directory with tests.
    #[error(
        "{}: no CTestTestfile.cmake there: give a CMake build directory of a project that calls enable_testing()",
        .0.display()
    )]
    NoCtestFile(PathBuf),
    /// The test program, or pytest's interpreter, cannot be started.
    #[error(transparent)]
    Program(#[from] NoProgram),
}

/// Where a suite's tests come from, checked before anything is listed: a CTest build
/// directory, a test program, or pytest's interpreter; what is wrong, else.
pub(crate) fn check_suite_target(
    kind: Kind,
    target: &Path,
) -> std::result::Result<PathBuf, BadSuiteTarget> {
    let absolute = std::path::absolute(target).unwrap_or_else(|_| target.to_path_buf());
    match kind {
        Kind::Ctest => {
            if !target.is_dir() {
                return Err(BadSuiteTarget::NotADirectory(target.to_path_buf()));
            }
            if !target.join("CTestTestfile.cmake").is_file() {
                return Err(BadSuiteTarget::NoCtestFile(target.to_path_buf()));
            }
            Ok(absolute)
        }
        Kind::Gtest | Kind::Libtest => {
            let program = match target.components().count() {
                1 if !target.is_absolute() => Path::new(".").join(target),
                _ => target.to_path_buf(),
            };
            find_program(&program, None)?;
            Ok(absolute)
        }
        Kind::Pytest => {
            find_program(target, std::env::var_os("PATH").as_deref())?;
            Ok(target.to_path_buf())
        }
    }
}

/// pytest's interpreter when neither `python` nor `--python` names one.
pub(crate) const DEFAULT_PYTHON: &str = "python3";

fn check_suite(file: &TomlFile, at: usize, raw: RawSuite) -> Result<suites::Suite> {
    let Some(kind) = Kind::parse(raw.kind.get_ref()) else {
        return Err(file.error(
            &raw.kind.span(),
            format!(
                "unknown suite kind `{}`; kinds: {}",
                raw.kind.get_ref(),
                Kind::NAMES.join(", ")
            ),
        ));
    };
    let wrong = |key: &str, span: &std::ops::Range<usize>| {
        let for_kinds = match key {
            "build_dir" => "ctest",
            "program" => "gtest and libtest",
            _ => "pytest",
        };
        Err(file.error(
            span,
            format!(
                "`{key}` is for suites of kind {for_kinds}, not {}",
                kind.name()
            ),
        ))
    };
    let (key, target) = match (kind, &raw.build_dir, &raw.program) {
        (Kind::Ctest, Some(dir), None) => ("build_dir", dir),
        (Kind::Gtest | Kind::Libtest, None, Some(program)) => ("program", program),
        (Kind::Pytest, None, None) => ("python", raw.python.as_ref().unwrap_or(&raw.kind)),
        (_, Some(dir), _) if kind != Kind::Ctest => return wrong("build_dir", &dir.span()),
        (_, _, Some(program)) if !matches!(kind, Kind::Gtest | Kind::Libtest) => {
            return wrong("program", &program.span())
        }
        _ => {
            let needs = match kind {
                Kind::Ctest => "`build_dir`, the CMake build directory",
                _ => "`program`, the test program",
            };
            return Err(file.error_at(
                at,
                format!("a [[suite]] of kind {} needs {needs}", kind.name()),
            ));
        }
    };
    if let (Some(python), false) = (&raw.python, kind == Kind::Pytest) {
        return wrong("python", &python.span());
    }
    let target = match kind {
        Kind::Pytest => PathBuf::from(
            raw.python
                .as_ref()
                .map_or(DEFAULT_PYTHON, |p| p.get_ref().as_str()),
        ),
        _ => PathBuf::from(target.get_ref()),
    };
    let checked = check_suite_target(kind, &target).map_err(|why| {
        let span = match kind {
            Kind::Pytest => raw.python.as_ref().map_or(raw.kind.span(), |p| p.span()),
            _ => match key {
                "build_dir" => raw.build_dir.as_ref().map(|d| d.span()).unwrap_or_default(),
                _ => raw.program.as_ref().map(|d| d.span()).unwrap_or_default(),
            },
        };
        file.error(&span, format!("`{key}` {why}"))
    })?;
    let (target, python) = match kind {
        Kind::Pytest => (PathBuf::new(), checked.display().to_string()),
        _ => (checked, DEFAULT_PYTHON.to_string()),
    };
    Ok(suites::Suite {
        kind,
        target,
        args: raw.args,
        python,
        env: check_env(file, raw.env)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_names_an_exit_order_and_a_bad_one_is_placed() {
        let m = parse("exit_order = \"module,linked\"\nchaos_seed = 7\n").unwrap();
        assert_eq!(m.exit_order.unwrap().to_string(), "module,linked");
        assert_eq!(m.chaos_seed, Some(7));
        let err = parse("runs = 2\nexit_order = \"static\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(":2:") && err.contains("`static` is no exit order"),
            "{err}"
        );
    }

    fn parse(text: &str) -> Result<Matrix> {
        let file = TomlFile {
            path: "ci/matrix/m.toml".into(),
            text: text.into(),
        };
        Matrix::parse(&file)
    }

    #[test]
    fn a_full_matrix_reads_back_as_written() {
        let m = parse(
            r#"
cases = ["clean-exit", "handler-before-load", "clean-exit"]
runtimes = ["refrt:never", "refrt:release-children"]
drivers = ["/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json", "nvidia"]
runs = 20
timeout = 30
jobs = 4
fail_on_leak = true

[env]
MESA_SHADER_CACHE_DISABLE = "true"

[[external]]
name = "my-test"
argv = ["build/my-test", "--small"]
env = { MY_LOG = "1" }

[[layers]]
emulation = "none"

[[layers]]
validation = true
trace = true
emulation = "tegra-racy"
"#,
        )
        .unwrap();
        assert_eq!(m.cases, ["clean-exit", "handler-before-load"]);
        assert_eq!(m.runtimes.len(), 2);
        assert_eq!(m.drivers.len(), 2);
        assert!(m.skip_absent_drivers);
        assert_eq!((m.runs(), m.timeout_secs(), m.jobs), (20, 30.0, Some(4)));
        assert!(m.fail_on_leak);
        assert_eq!(m.env, [("MESA_SHADER_CACHE_DISABLE".into(), "true".into())]);
        assert_eq!(m.externals[0].name, "my-test");
        assert_eq!(m.externals[0].env, [("MY_LOG".into(), "1".into())]);
        assert_eq!(
            m.layer_sets,
            [
                LayerSet::default(),
                LayerSet {
                    validation: true,
                    trace: true,
                    emulation: Emulation::TegraRacy,
                    validation_manifest: None,
                }
            ]
        );
    }

    #[test]
    fn an_empty_file_is_the_default_job() {
        let m = parse("").unwrap();
        assert!(m.cases.is_empty() && m.runtimes.is_empty() && m.drivers.is_empty());
        assert_eq!(m.layer_sets(), [LayerSet::default()]);
        assert_eq!((m.runs(), m.timeout_secs()), (DEFAULT_RUNS, 60.0));
        assert!(!m.skip_absent_drivers);
    }

    #[test]
    fn errors_name_the_file_line_and_column_and_what_was_expected() {
        let cases: [(&str, &str); 16] = [
            ("runs = 5\nrnus = 3\n", "ci/matrix/m.toml:2:1: unknown field `rnus`, expected one of"),
            ("cases = [\"clean-exit\", \"clean-exti\"]\n", "ci/matrix/m.toml:1:24: unknown case `clean-exti`; built-in cases: clean-exit"),
            ("runtimes = [\n  \"refrt:sometimes\",\n]\n", "ci/matrix/m.toml:2:3: bad runtime spec `refrt:sometimes`"),
            ("runs = 0\n", "ci/matrix/m.toml:1:8: `runs` must be in 1..=1000000"),
            ("runs = 1000001\n", "ci/matrix/m.toml:1:8: `runs` must be in 1..=1000000"),
            ("jobs = 100000\n", "ci/matrix/m.toml:1:8: `jobs` must be in 1..=1024"),
            ("runs = -2\n", "ci/matrix/m.toml:1:8: invalid value: integer `-2`, expected u32"),
            ("timeout = \"60s\"\n", "ci/matrix/m.toml:1:11: invalid type: string \"60s\", expected f64"),
            ("timeout = 0\n", "ci/matrix/m.toml:1:11: `timeout`: 0 is not in (0, 86400] seconds"),
            ("timeout = 1e20\n", "ci/matrix/m.toml:1:11: `timeout`: 100000000000000000000 is not in (0, 86400] seconds"),
            ("cases = []\n", "ci/matrix/m.toml:1:9: `cases` is empty: leave it out for every built-in case"),
            ("[[layers]]\nemulation = \"jetson\"\n", "ci/matrix/m.toml:2:13: unknown variant `jetson`, expected one of `none`, `tegra`, `tegra-racy`"),
            ("[[layers]]\nvalidaton = false\n", "ci/matrix/m.toml:2:1: unknown field `validaton`"),
            ("[env]\nVK_INSTANCE_LAYERS = \"x\"\n", "ci/matrix/m.toml:2:22: VK_INSTANCE_LAYERS is set by vkexit"),
            ("[[external]]\nname = \"clean-exit\"\nargv = [\"x\"]\n", "ci/matrix/m.toml:2:8: `clean-exit` is a built-in case"),
            ("[[external]]\nname = \"t\"\nargv = []\n", "ci/matrix/m.toml:3:8: `argv` needs the program"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}\n  got:  {e}\n  want: {want}");
        }
        let e = parse("[[external]]\nname = \"t\"\nargv = [\"a\"]\n[[external]]\nname = \"t\"\nargv = [\"b\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("ci/matrix/m.toml:4:1: a second [[external]] named `t`"),
            "{e}"
        );
        let e = parse("[[layers]]\n[[layers]]\nvalidation = true\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("ci/matrix/m.toml:2:1: this layer set is given twice"),
            "{e}"
        );
    }

    #[test]
    fn a_named_validation_manifest_is_checked_where_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other_layer.json");
        std::fs::write(
            &other,
            r#"{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_MESA_overlay","library_path":"x.so"}}"#,
        )
        .unwrap();
        let missing = dir.path().join("nothing.json");
        let cases = [
            (
                format!("[[layers]]\nvalidation_manifest = \"{}\"\n", missing.display()),
                format!("ci/matrix/m.toml:2:23: validation_manifest {}: no such file", missing.display()),
            ),
            (
                format!("[[layers]]\nvalidation_manifest = \"{}\"\n", other.display()),
                format!(
                    "ci/matrix/m.toml:2:23: validation_manifest {}: not a layer manifest (JSON) that names VK_LAYER_KHRONOS_validation",
                    other.display()
                ),
            ),
            (
                format!("[[layers]]\nvalidation = false\nvalidation_manifest = \"{}\"\n", other.display()),
                "ci/matrix/m.toml:3:23: validation_manifest in a set with `validation = false`".to_string(),
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(
                e.starts_with(&want),
                "{text:?}\n  got:  {e}\n  want: {want}"
            );
        }
    }

    #[test]
    fn no_validation_drops_a_named_manifest_with_the_layer() {
        let mut m = Matrix {
            layer_sets: vec![
                LayerSet::default(),
                LayerSet {
                    validation_manifest: Some("/sdk/VkLayer_khronos_validation.json".into()),
                    ..LayerSet::default()
                },
            ],
            ..Matrix::default()
        };
        m.apply(Overrides {
            no_validation: true,
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(
            m.layer_sets,
            [LayerSet {
                validation: false,
                ..LayerSet::default()
            }]
        );
    }

    fn file() -> Matrix {
        parse(
            r#"
cases = ["clean-exit", "buffer-kept-at-exit"]
runtimes = ["refrt:never"]
drivers = ["lavapipe"]
runs = 20
[[external]]
name = "my-test"
argv = ["/bin/true"]
[[layers]]
emulation = "none"
[[layers]]
emulation = "tegra"
"#,
        )
        .unwrap()
    }

    #[test]
    fn list_flags_replace_the_files_lists() {
        let mut m = file();
        m.apply(Overrides {
            cases: vec!["my-test".into()],
            runtimes: vec!["refrt:guarded".into()],
            drivers: vec!["radv".into()],
            ..Overrides::default()
        })
        .unwrap();
        assert!(m.cases.is_empty());
        assert_eq!(m.externals.len(), 1);
        assert_eq!(m.runtimes, ["refrt:guarded"]);
        assert_eq!(m.drivers, ["radv"]);
        assert!(!m.skip_absent_drivers, "a --driver typo is an error");

        let mut m = file();
        m.apply(Overrides {
            cases: vec!["clean-exit".into()],
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(m.cases, ["clean-exit"]);
        assert!(m.externals.is_empty());

        let e = file()
            .apply(Overrides {
                cases: vec!["nope".into()],
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown case `nope`") && e.contains("my-test"),
            "{e}"
        );
    }

    #[test]
    fn a_command_adds_a_case_and_numbers_replace() {
        let mut m = file();
        m.apply(Overrides {
            command: vec!["/usr/bin/env".into(), "true".into()],
            runs: Some(3),
            jobs: Some(1),
            timeout: Some(5.0),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(m.cases.len(), 2);
        assert_eq!(m.externals.len(), 2);
        assert_eq!(m.externals[1].name, "true");
        assert_eq!((m.runs(), m.jobs, m.timeout_secs()), (3, Some(1), 5.0));
        let e = file()
            .apply(Overrides {
                command: vec!["/x/my-test".into()],
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("two cases would be named `my-test`: `/bin/true` and `/x/my-test`"),
            "{e}"
        );
        let e = file()
            .apply(Overrides {
                timeout: Some(0.0),
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("--timeout"), "{e}");
    }

    #[test]
    fn a_command_can_be_named_and_run_in_a_private_directory() {
        let mut m = file();
        m.apply(Overrides {
            command: vec!["python3".into(), "my-test".into()],
            name: Some("mine".into()),
            private_cwd: true,
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(m.externals[1].name, "mine");
        assert!(m.externals.iter().all(|e| e.private_cwd));
        let e = Matrix::default()
            .apply(Overrides {
                name: Some("mine".into()),
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("--name mine") && e.contains("after `--`"), "{e}");
        let e = Matrix::default()
            .apply(Overrides {
                command: vec!["/bin/true".into()],
                name: Some("clean-exit".into()),
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a built-in case"), "{e}");
        // A script named after a case of the file: both commands are shown.
        let e = file()
            .apply(Overrides {
                command: vec!["python3".into(), "t/my-test".into()],
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`/bin/true` and `python3 t/my-test`") && e.contains("--name"),
            "{e}"
        );
    }

    #[test]
    fn private_cwd_is_a_key_of_an_external_case_and_duplicates_show_both_commands() {
        let m = parse("[[external]]\nname = \"t\"\nargv = [\"a\"]\nprivate_cwd = true\n").unwrap();
        assert!(m.externals[0].private_cwd);
        let e = parse(
            "[[external]]\nname = \"t\"\nargv = [\"a\"]\n[[external]]\nname = \"t\"\nargv = [\"b\", \"-x\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("named `t`: `a` and `b -x`"), "{e}");
    }

    #[test]
    fn layer_flags_change_every_set() {
        let mut m = file();
        m.apply(Overrides {
            trace: true,
            ..Overrides::default()
        })
        .unwrap();
        assert!(m.layer_sets.iter().all(|s| s.trace && s.validation));
        assert_eq!(m.layer_sets.len(), 2);

        // Both sets become validation-less and tegra: one set is left.
        let mut m = file();
        m.apply(Overrides {
            emulate: Some("tegra".into()),
            no_validation: true,
            fail_on_leak: true,
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(
            m.layer_sets,
            [LayerSet {
                validation: false,
                trace: false,
                emulation: Emulation::Tegra,
                validation_manifest: None,
            }]
        );
        assert!(m.fail_on_leak);

        let mut m = Matrix::default();
        m.apply(Overrides {
            emulate: Some("tegra-racy".into()),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(m.layer_sets[0].emulation, Emulation::TegraRacy);
        let e = Matrix::default()
            .apply(Overrides {
                emulate: Some("jetson".into()),
                ..Overrides::default()
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("none, tegra, tegra-racy"), "{e}");
    }
}
