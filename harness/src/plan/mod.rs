//! Planning: which cells to run. A cell is one case × runtime × driver ×
//! layers × emulation; it is run N times.

mod cases;
pub(crate) mod exit_order;
pub(crate) mod fix_search;
pub mod matrix;
pub(crate) mod shard;
pub(crate) mod suites;

use crate::host::drivers::{self, Driver};
use crate::host::helpers;
use crate::host::layers::{Chain, Emulation};
use crate::host::probe::{self, DeviceInfo};
use crate::support::env;
use crate::support::errors::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use vkexit_evidence::results::CellId;

use cases::{absolute_runtime, real_runtime_missing};
pub(crate) use cases::{
    case_needs_missing_operation, case_rank, check_runtime, runtime_rank, BUILTIN_CASES, CASES,
    POLICIES, REAL_RUNTIMES, REFRT_LIBRARY,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CaseCommand {
    /// A scenario binary, given `--runtime SPEC`.
    Scenario(PathBuf),
    /// Any program with its arguments.
    External(Vec<OsString>),
}

/// Why a cell is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotRun {
    /// Its driver shows no device here: reported `skipped`.
    Skipped(String),
    /// Its driver is broken (the probe failed): reported `error`, never green.
    Broken(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub(crate) case: String,
    pub(crate) runtime: String,
    pub(crate) driver: Driver,
    pub(crate) device: Option<DeviceInfo>,
    pub(crate) layers: Vec<String>,
    pub(crate) emulation: Emulation,
    pub(crate) command: CaseCommand,
    /// Where its runs start: the caller's directory for an external case (relative paths
    /// work, as under ctest); `None`: the run's own private directory.
    pub(crate) workdir: Option<PathBuf>,
    /// Set when the cell cannot run here.
    pub(crate) not_run: Option<NotRun>,
    /// The validation layer's version, when the runs use it.
    pub(crate) validation_layer: Option<String>,
    /// Variables added to every run of the cell (a matrix's `env`, an
    /// external case's own).
    pub(crate) env: Vec<(String, String)>,
    /// What a test suite says of the case beyond its command (empty for any other case).
    pub(crate) props: CellProps,
}

/// What a test suite says of one of its tests beyond its command and environment
/// (`plan::suites`); the default for every other case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CellProps {
    /// Taken out of its runs' environment.
    pub(crate) env_remove: Vec<String>,
    /// Its own time limit, over the matrix's.
    pub(crate) timeout: Option<std::time::Duration>,
    /// A nonzero exit is its pass (CTest's `WILL_FAIL`): judged so unless a baseline
    /// entry says otherwise.
    pub(crate) will_fail: bool,
    /// Its runs run with nothing else at the same time (CTest's `RUN_SERIAL`).
    pub(crate) run_serial: bool,
    /// No two runs naming one of these run at the same time (CTest's `RESOURCE_LOCK`).
    pub(crate) resource_locks: Vec<String>,
    /// What vkexit does not honour of it, one line each; its cell's findings start with them.
    pub(crate) notes: Vec<String>,
    /// How its suite's runner tells that a run of it was skipped.
    pub(crate) skip: Option<suites::SkipRule>,
}

impl Cell {
    /// A stable file-system name for the cell's evidence.
    /// The name of the cell's evidence directory: `case.runtime.driver.layers.emulation`,
    /// each character outside `[A-Za-z0-9-_.+]` made `-` (the runtime's `kind:` separator
    /// is one). Two cells must never share it, nor may it pass the file-name limit: a name
    /// that lost a character that way, or that is longer than [`MAX_SLUG`] bytes, is cut
    /// and ends in `~` and a hash of the whole name, which no other name ends in.
    pub(crate) fn slug(&self) -> String {
        let layers = match self.layers.is_empty() {
            true => "none".to_string(),
            false => self.layers.join("+"),
        };
        let runtime = match self.runtime.split_once(':') {
            Some((kind, rest)) => (format!("{kind}-"), rest),
            None => (String::new(), self.runtime.as_str()),
        };
        let parts = [
            self.case.as_str(),
            &format!("{}{}", runtime.0, runtime.1),
            &self.driver.name,
            &layers,
            self.emulation.name(),
        ];
        // The runtime's kind is part of its spec (`refrt:`), so its `:` loses nothing.
        let lossless = std::iter::once(&self.case)
            .chain([&runtime.1.to_string(), &self.driver.name, &layers])
            .all(|p| p.chars().all(slug_char));
        let raw = format!(
            "{}.{}.{}.{}.{}",
            self.case,
            self.runtime,
            self.driver.name,
            layers,
            self.emulation.name()
        );
        let safe: String = parts
            .join(".")
            .chars()
            .map(|c| if slug_char(c) { c } else { '-' })
            .collect();
        if lossless && safe.len() <= MAX_SLUG {
            return safe;
        }
        let hash = format!("~{:016x}", fnv1a(raw.as_bytes()));
        let mut cut = MAX_SLUG - hash.len();
        while !safe.is_char_boundary(cut.min(safe.len())) {
            cut -= 1;
        }
        format!("{}{hash}", &safe[..cut.min(safe.len())])
    }

    /// Whether its runs start in a directory they share (an external case or a suite's test
    /// run where the caller or the suite says): two of them at once could write the same
    /// file there, so they run one at a time (`run::schedule`).
    pub(crate) fn shares_workdir(&self) -> bool {
        self.workdir.is_some()
    }

    pub(crate) fn label(&self) -> String {
        format!("{} × {} × {}", self.case, self.runtime, self.driver.name)
    }

    /// What makes this the same cell in another run, shard or results file.
    pub(crate) fn id(&self) -> CellId {
        CellId {
            case: self.case.clone(),
            runtime: self.runtime.clone(),
            driver: self.driver.name.clone(),
            layers: self.layers.clone(),
            emulation: self.emulation.name().to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) cases: Vec<String>,
    pub(crate) runtimes: Vec<String>,
    pub(crate) drivers: Vec<String>,
    /// A named driver that is not installed gives skipped cells (a matrix
    /// file's drivers), instead of an error (a `--driver` typo).
    pub(crate) skip_absent_drivers: bool,
    pub(crate) externals: Vec<ExternalCase>,
    /// The layers every run gets (validation, trace, emulation).
    pub(crate) chain: Chain,
    /// Where the real runtimes are (`support::env::Environment::runtime_cache`).
    pub(crate) runtime_cache: Option<PathBuf>,
}

/// Any program, run as one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExternalCase {
    pub(crate) name: String,
    pub(crate) argv: Vec<OsString>,
    /// Its runs start in their own private directory, not in the caller's.
    pub(crate) private_cwd: bool,
    /// Where its runs start, when not where vkexit runs (a suite's test).
    pub(crate) workdir: Option<PathBuf>,
    /// Why it is not run (a suite's disabled test, one that cannot start).
    pub(crate) not_run: Option<NotRun>,
    pub(crate) props: CellProps,
}

/// The case name of `-- CMD ARGS`: the program's file name, or, when the program is an
/// interpreter (`python3 x.py`, `bash x.sh`, `node x.js`, also behind `env`), the script's
/// (`x.py`), or the module's of `python3 -m MODULE`. Code given inline (`-c`) keeps the
/// interpreter's name.
pub(crate) fn external_name(argv: &[OsString]) -> String {
    let file_name = |arg: &OsString| {
        Path::new(arg)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| arg.to_string_lossy().into_owned())
    };
    let Some(mut at) = (!argv.is_empty()).then_some(0) else {
        return String::new();
    };
    if file_name(&argv[0]) == "env" {
        // `env [-i] [NAME=VALUE]... PROGRAM ARGS`.
        match argv[1..].iter().position(|a| {
            let a = a.to_string_lossy();
            !a.starts_with('-') && !a.contains('=')
        }) {
            Some(i) => at = i + 1,
            None => return file_name(&argv[0]),
        }
    }
    let program = file_name(&argv[at]);
    if !is_interpreter(&program) {
        return program;
    }
    let mut args = argv[at + 1..].iter().map(|a| a.to_string_lossy());
    while let Some(arg) = args.next() {
        match arg.as_ref() {
            "-m" => return args.next().map_or(program, |m| m.into_owned()),
            "-c" | "-e" | "--eval" | "-p" | "--print" => return program,
            // Options that take the next argument.
            "-W" | "-X" | "-o" | "-O" | "-r" | "--require" | "--import" | "--loader" => {
                args.next();
            }
            "--" => {
                return args
                    .next()
                    .map_or(program, |s| file_name(&s.into_owned().into()))
            }
            option if option.starts_with('-') => {}
            script => return file_name(&script.to_string().into()),
        }
    }
    program
}

/// Programs whose first operand is the script they run.
fn is_interpreter(program: &str) -> bool {
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(
        base,
        "python"
            | "pypy"
            | "bash"
            | "sh"
            | "dash"
            | "zsh"
            | "ksh"
            | "node"
            | "nodejs"
            | "bun"
            | "perl"
            | "ruby"
            | "lua"
            | "luajit"
            | "Rscript"
            | "php"
            | "tclsh"
    )
}

#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) cells: Vec<Cell>,
    /// Facts a user should see before the table (drivers left out, …).
    pub(crate) notes: Vec<String>,
    pub(crate) helpers: Carried,
}

/// The helpers the runs of a plan are given, unpacked and checked before any run.
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    /// The diagnostics preload.
    pub(crate) preload: PathBuf,
    /// refrt, when the plan has built-in cases.
    pub(crate) refrt: Option<PathBuf>,
}

/// Turns a request into cells, probing each driver once.
pub(crate) fn plan(request: &Request) -> Result<Plan> {
    let mut notes = Vec::new();
    let (cases, runtimes) = choose_cases(request)?;
    for runtime in &runtimes {
        check_runtime(runtime)?;
    }
    let drivers = choose_drivers(request, &mut notes)?;
    let layers = request.chain.names();
    let emulation = request.chain.emulation;
    let validation_layer = request
        .chain
        .validation
        .as_ref()
        .map(|v| v.api_version.clone());

    let here = std::env::current_dir()
        .map_err(|e| Error::io("cannot read the working directory", Path::new("."), e))?;
    let mut cells = Vec::new();
    for (driver, device, not_run) in &drivers {
        for external in &request.externals {
            cells.push(Cell {
                case: external.name.clone(),
                runtime: "external".into(),
                driver: driver.clone(),
                device: device.clone(),
                layers: layers.clone(),
                emulation,
                command: CaseCommand::External(external.argv.clone()),
                workdir: match external.private_cwd {
                    true => None,
                    false => Some(external.workdir.clone().unwrap_or_else(|| here.clone())),
                },
                not_run: not_run.clone().or_else(|| external.not_run.clone()),
                env: Vec::new(),
                validation_layer: validation_layer.clone(),
                props: external.props.clone(),
            });
        }
        for case in &cases {
            let binary = helpers::path(case)?;
            for runtime in &runtimes {
                let not_run = not_run.clone().or_else(|| {
                    real_runtime_missing(runtime, request.runtime_cache.as_deref())
                        .or_else(|| case_needs_missing_operation(case, runtime))
                        .map(NotRun::Skipped)
                });
                cells.push(Cell {
                    case: case.clone(),
                    runtime: runtime.clone(),
                    driver: driver.clone(),
                    device: device.clone(),
                    layers: layers.clone(),
                    emulation,
                    command: CaseCommand::Scenario(binary.clone()),
                    workdir: None,
                    not_run,
                    env: runtime_env(runtime, request.runtime_cache.as_deref()),
                    validation_layer: validation_layer.clone(),
                    props: CellProps::default(),
                });
            }
        }
    }
    let helpers = Carried {
        preload: helpers::path(helpers::PRELOAD_LIBRARY)?,
        refrt: match cases.is_empty() {
            true => None,
            false => Some(helpers::path(REFRT_LIBRARY)?),
        },
    };
    Ok(Plan {
        cells,
        notes,
        helpers,
    })
}

/// What every run of a cell with `runtime` needs in its environment: where
/// the runtime cache is, for `ggml` and `halide` without a path.
fn runtime_env(runtime: &str, cache: Option<&Path>) -> Vec<(String, String)> {
    match (REAL_RUNTIMES.contains(&runtime), cache) {
        (true, Some(cache)) => vec![(env::RUNTIME_CACHE.into(), cache.display().to_string())],
        _ => Vec::new(),
    }
}

fn choose_cases(request: &Request) -> Result<(Vec<String>, Vec<String>)> {
    for case in &request.cases {
        if !BUILTIN_CASES.contains(&case.as_str()) {
            return Err(Error::UnknownCase {
                name: case.clone(),
                valid: BUILTIN_CASES.join(", "),
            });
        }
    }
    let cases: Vec<String> = match (request.externals.is_empty(), request.cases.is_empty()) {
        (false, true) => Vec::new(),
        (true, true) => BUILTIN_CASES.iter().map(|s| s.to_string()).collect(),
        (_, false) => dedup(&request.cases),
    };
    let runtimes = if request.runtimes.is_empty() {
        POLICIES.iter().map(|p| format!("refrt:{p}")).collect()
    } else {
        let absolute: Vec<String> = request
            .runtimes
            .iter()
            .map(|r| absolute_runtime(r))
            .collect();
        dedup(&absolute)
    };
    Ok((cases, runtimes))
}

fn dedup(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

type ChosenDriver = (Driver, Option<DeviceInfo>, Option<NotRun>);

/// With `--driver`, every named driver is kept: one without a device gives
/// skipped cells, one that cannot be probed gives error cells. Without it,
/// the drivers that show a device are used and the others named in a note.
fn choose_drivers(request: &Request, notes: &mut Vec<String>) -> Result<Vec<ChosenDriver>> {
    let (found, problems) = drivers::discover();
    for (manifest, problem) in &problems {
        notes.push(format!(
            "ignored ICD manifest {}: {problem}",
            manifest.display()
        ));
    }
    let explicit = !request.drivers.is_empty();
    let candidates: Vec<(Driver, Option<NotRun>)> = match explicit {
        true if request.skip_absent_drivers => resolve_listed(&found, &request.drivers),
        true => drivers::select(&found, &request.drivers)?
            .into_iter()
            .map(|d| (d, None))
            .collect(),
        false => found.into_iter().map(|d| (d, None)).collect(),
    };
    let cwd = std::env::temp_dir();
    let mut chosen = Vec::new();
    let mut absent = Vec::new();
    for (driver, missing) in candidates {
        if missing.is_some() {
            chosen.push((driver, None, missing));
            continue;
        }
        let not_run = match probe::probe_driver(&driver, &[], &cwd) {
            Ok(r) if !r.devices.is_empty() => {
                let loader = r.loader_version.clone();
                let device = r.devices.into_iter().next().map(|mut d| {
                    d.loader_version = Some(loader);
                    d
                });
                chosen.push((driver, device, None));
                continue;
            }
            Ok(_) => NotRun::Skipped(format!(
                "driver {} shows no device on this machine",
                driver.name
            )),
            Err(e) => NotRun::Broken(format!("driver {} could not be probed: {e}", driver.name)),
        };
        // A driver the user did not ask for is simply not used (`vkexit list` says which
        // show a device); one asked for gives cells that say why they did not run.
        if explicit {
            if matches!(not_run, NotRun::Skipped(_)) && !absent.contains(&driver.name) {
                absent.push(driver.name.clone());
            }
            chosen.push((driver, None, Some(not_run)));
        }
    }
    if !absent.is_empty() {
        notes.push(format!(
            "drivers without a device here, not run: {}",
            absent.join(", ")
        ));
    }
    if chosen.is_empty() {
        return Err(Error::NoDevice);
    }
    Ok(chosen)
}

/// The drivers a matrix file lists, in its order. An entry is a short name
/// (every installed manifest of that driver) or a manifest path. Entries
/// that come to a driver already listed are alternatives: the first one
/// found is used, so `["/usr/local/nvidia/…/nvidia_icd.json", "nvidia"]`
/// runs NVIDIA once, wherever it is installed. A driver no entry finds gives
/// one skipped driver, with what was looked for.
fn resolve_listed(found: &[Driver], wanted: &[String]) -> Vec<(Driver, Option<NotRun>)> {
    // (name, drivers found, what was looked for in vain)
    let mut named: Vec<(String, Vec<Driver>, Vec<String>)> = Vec::new();
    for want in wanted {
        let (name, drivers, miss) = if want.ends_with(".json") || Path::new(want).is_absolute() {
            match drivers::read_manifest(Path::new(want)) {
                Ok(d) => (d.name.clone(), vec![d], None),
                Err(e) => (guess_name(want), vec![], Some(format!("{want}: {e}"))),
            }
        } else {
            let drivers: Vec<Driver> = found.iter().filter(|d| &d.name == want).cloned().collect();
            let miss = drivers
                .is_empty()
                .then(|| format!("no ICD manifest of driver {want} is installed"));
            (want.clone(), drivers, miss)
        };
        let slot = match named.iter().position(|(n, _, _)| *n == name) {
            Some(i) => i,
            None => {
                named.push((name, Vec::new(), Vec::new()));
                named.len() - 1
            }
        };
        let (_, have, missed) = &mut named[slot];
        if have.is_empty() {
            *have = drivers;
        }
        missed.extend(miss);
    }
    let mut out = Vec::new();
    for (name, have, missed) in named {
        if have.is_empty() {
            let manifest = wanted
                .iter()
                .find(|w| w.ends_with(".json") && guess_name(w) == name)
                .map(PathBuf::from)
                .unwrap_or_default();
            let driver = Driver {
                name: name.clone(),
                manifest,
                library: String::new(),
            };
            let why = format!(
                "driver {name} is not installed here ({})",
                missed.join("; ")
            );
            out.push((driver, Some(NotRun::Skipped(why))));
        } else {
            out.extend(have.into_iter().map(|d| (d, None)));
        }
    }
    out
}

/// The short name a manifest that cannot be read would most likely give:
/// `nvidia_icd.json` → nvidia, `lvp_icd.x86_64.json` → lavapipe.
fn guess_name(manifest: &str) -> String {
    let file = Path::new(manifest)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.split('.').next().unwrap_or_default();
    let stem = stem.strip_suffix("_icd").unwrap_or(stem);
    let name = drivers::short_name(&format!("libvulkan_{stem}.so"));
    match name.strip_prefix("vulkan_") {
        Some(rest) if rest.starts_with("nvidia") => "nvidia".to_string(),
        Some(rest) => rest.to_string(),
        None => name,
    }
}

/// The longest evidence directory name: under the 255 bytes most file systems allow, with
/// room for vkexit's own suffixes.
pub(crate) const MAX_SLUG: usize = 200;

fn slug_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.+".contains(c)
}

/// FNV-1a, 64 bits: a hash fixed by its definition, so a cell's directory is the same on
/// every machine and in every version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            cases: Vec::new(),
            runtimes: Vec::new(),
            drivers: Vec::new(),
            skip_absent_drivers: false,
            externals: Vec::new(),
            chain: Chain {
                slow_teardown: false,
                trace: false,
                validation: None,
                emulation: Emulation::None,
                manifests: None,
            },
            runtime_cache: None,
        }
    }

    #[test]
    fn runtime_specs_are_checked_with_the_valid_ones_listed() {
        assert!(check_runtime("refrt:guarded").is_ok());
        let e = check_runtime("refrt:sometimes").unwrap_err().to_string();
        assert!(e.contains("release-children"), "{e}");
        assert!(check_runtime("ggml").is_ok());
        assert!(check_runtime("halide").is_ok());
        assert!(check_runtime("ggml:/").is_ok());
        let e = check_runtime("ggml:/nonexistent/ggml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        // A file that is none of ggml's layouts is refused with the layouts listed.
        let dir = tempfile::tempdir().unwrap();
        for name in ["libggml-vulkan.so", "libggml.so.0", "libvulkan.so.1"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let spec = |name: &str| format!("ggml:{}", dir.path().join(name).display());
        assert!(check_runtime(&spec("libggml-vulkan.so")).is_ok());
        assert!(check_runtime(&spec("libggml.so.0")).is_ok());
        let e = check_runtime(&spec("libvulkan.so.1"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`libvulkan.so.1` is none of ggml's layouts")
                && e.contains("backends0/libggml-vulkan.so"),
            "{e}"
        );
        let e = check_runtime("wgpu:x").unwrap_err().to_string();
        assert!(e.contains("not supported by this build yet"), "{e}");
        let e = check_runtime("guarded").unwrap_err().to_string();
        assert!(e.contains("KIND:ARG"), "{e}");
    }

    #[test]
    fn halide_skips_only_the_ordering_made_of_events() {
        for case in BUILTIN_CASES {
            let why = case_needs_missing_operation(case, "halide");
            assert_eq!(
                why.is_some(),
                case == "events-freed-after-teardown",
                "{case}"
            );
            assert!(
                case_needs_missing_operation(case, "halide:/opt/h.so").is_some() == why.is_some()
            );
            assert!(case_needs_missing_operation(case, "ggml").is_none());
            assert!(case_needs_missing_operation(case, "refrt:never").is_none());
        }
    }

    #[test]
    fn real_runtime_paths_are_made_absolute() {
        let spec = absolute_runtime("ggml:rel/dir");
        assert!(
            spec.starts_with("ggml:/") && spec.ends_with("/rel/dir"),
            "{spec}"
        );
        assert_eq!(absolute_runtime("halide"), "halide");
        assert_eq!(absolute_runtime("refrt:never"), "refrt:never");
    }

    #[test]
    fn a_case_run_by_an_interpreter_is_named_after_its_script() {
        let name =
            |args: &[&str]| external_name(&args.iter().map(OsString::from).collect::<Vec<_>>());
        assert_eq!(
            name(&["python3", "tests/my_test.py", "--fast"]),
            "my_test.py"
        );
        assert_eq!(
            name(&["/usr/bin/python3.11", "-u", "-W", "ignore", "x.py"]),
            "x.py"
        );
        assert_eq!(name(&["python3", "-m", "pytest", "-x"]), "pytest");
        assert_eq!(name(&["python3", "-c", "print(1)"]), "python3");
        assert_eq!(name(&["bash", "ci/run.sh"]), "run.sh");
        assert_eq!(name(&["node", "--require", "hook.js", "app.js"]), "app.js");
        assert_eq!(name(&["env", "A=1", "python3", "y.py"]), "y.py");
        assert_eq!(name(&["/usr/bin/env", "true"]), "true");
        assert_eq!(name(&["build/my-test", "x.py"]), "my-test");
        assert_eq!(name(&["python3"]), "python3");
    }

    #[test]
    fn unknown_cases_list_the_built_in_ones() {
        let request = Request {
            cases: vec!["buffer-kept".into()],
            ..request()
        };
        let e = choose_cases(&request).unwrap_err().to_string();
        assert!(e.contains("buffer-kept-at-exit"), "{e}");
    }

    #[test]
    fn an_external_command_alone_runs_no_built_in_case() {
        let external = Request {
            externals: vec![ExternalCase {
                name: "true".into(),
                argv: vec!["/bin/true".into()],
                private_cwd: false,
                workdir: None,
                not_run: None,
                props: CellProps::default(),
            }],
            ..request()
        };
        let (cases, _) = choose_cases(&external).unwrap();
        assert!(cases.is_empty());
        let (cases, runtimes) = choose_cases(&request()).unwrap();
        assert_eq!(cases.len(), 4);
        assert_eq!(runtimes.len(), 5);
    }

    fn driver(name: &str, manifest: &str) -> Driver {
        Driver {
            name: name.into(),
            manifest: manifest.into(),
            library: format!("lib{name}.so"),
        }
    }

    #[test]
    fn a_matrix_driver_that_is_not_installed_is_skipped_with_what_was_looked_for() {
        let found = vec![driver(
            "lavapipe",
            "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
        )];
        let wanted: Vec<String> = vec![
            "/nonexistent/icd.d/nvidia_icd.json".into(),
            "nvidia".into(),
            "lavapipe".into(),
        ];
        let got = resolve_listed(&found, &wanted);
        assert_eq!(got.len(), 2);
        let (nvidia, why) = &got[0];
        assert_eq!(nvidia.name, "nvidia");
        assert_eq!(
            nvidia.manifest,
            Path::new("/nonexistent/icd.d/nvidia_icd.json")
        );
        let Some(NotRun::Skipped(why)) = why else {
            panic!("{why:?}")
        };
        assert!(
            why.starts_with(
                "driver nvidia is not installed here (/nonexistent/icd.d/nvidia_icd.json: "
            ) && why.ends_with("; no ICD manifest of driver nvidia is installed)"),
            "{why}"
        );
        assert_eq!(got[1], (found[0].clone(), None));
    }

    #[test]
    fn the_first_entry_found_for_a_driver_wins() {
        let dir = tempfile::tempdir().unwrap();
        let icd = dir.path().join("nvidia_icd.json");
        std::fs::write(
            &icd,
            r#"{"file_format_version":"1.0.0","ICD":{"library_path":"libGLX_nvidia.so.0","api_version":"1.3.0"}}"#,
        )
        .unwrap();
        let found = vec![driver("nvidia", "/usr/share/vulkan/icd.d/nvidia_icd.json")];
        let wanted = vec![icd.display().to_string(), "nvidia".to_string()];
        let got = resolve_listed(&found, &wanted);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.manifest, icd);
        assert!(got[0].1.is_none());
        // The other order: the installed one comes first.
        let wanted = vec!["nvidia".to_string(), icd.display().to_string()];
        let got = resolve_listed(&found, &wanted);
        assert_eq!(got[0].0.manifest, found[0].manifest);
    }

    #[test]
    fn names_are_guessed_from_manifest_file_names() {
        assert_eq!(
            guess_name("/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"),
            "nvidia"
        );
        assert_eq!(
            guess_name("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"),
            "lavapipe"
        );
        assert_eq!(
            guess_name("/usr/share/vulkan/icd.d/radeon_icd.x86_64.json"),
            "radv"
        );
        assert_eq!(guess_name("/opt/my_icd.json"), "my");
    }

    #[test]
    fn slugs_are_file_names() {
        let cell = crate::test_fixtures::planned_cell();
        assert_eq!(
            cell.slug(),
            "clean-exit.refrt-guarded.lavapipe.validation.none"
        );
        // Names that become one name when made safe get directories of their own.
        let named = |case: &str| Cell {
            case: case.into(),
            runtime: "external".into(),
            ..cell.clone()
        };
        let (slash, dash, colon) = (
            named("a/b").slug(),
            named("a-b").slug(),
            named("a:b").slug(),
        );
        assert_eq!(dash, "a-b.external.lavapipe.validation.none");
        assert!(
            slash.starts_with("a-b.external.lavapipe.validation.none~"),
            "{slash}"
        );
        assert_ne!(slash, colon);
        assert_ne!(slash, dash);
        // A name past the file-name limit is cut, and stays apart from one that differs
        // only after the cut.
        let long = named(&"é".repeat(300)).slug();
        let longer = named(&format!("{}x", "é".repeat(300))).slug();
        assert!(long.len() <= MAX_SLUG, "{}", long.len());
        assert_ne!(long, longer);
        assert_eq!(named(&"x".repeat(300)).slug().len(), MAX_SLUG);
    }
}
