//! Planning: which cells to run. A cell is one case × runtime × driver ×
//! layers × emulation; it is run N times.

use crate::baseline::{self, Expectation};
use crate::drivers::{self, Driver};
use crate::errors::{Error, Result};
use crate::layers::Chain;
use crate::probe::{self, DeviceInfo};
use crate::results::CellId;
use crate::shard::Shard;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The ordering scenarios built into vkexit, in the order they are reported.
pub const BUILTIN_CASES: [&str; 4] = [
    "clean-exit",
    "buffer-kept-at-exit",
    "handler-before-load",
    "events-freed-after-teardown",
];

/// refrt's teardown policies, from the oldest behaviour to the final fix.
pub const POLICIES: [&str; 5] = [
    "never",
    "static-destructor",
    "atexit-after-init",
    "guarded",
    "release-children",
];

pub const REFRT_LIBRARY: &str = "libvkexit_refrt.so";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseCommand {
    /// A scenario binary, given `--runtime SPEC`.
    Scenario(PathBuf),
    /// Any program with its arguments.
    External(Vec<OsString>),
}

/// Why a cell is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRun {
    /// Its driver shows no device here: reported `skipped`.
    Skipped(String),
    /// Its driver is broken (the probe failed): reported `error`, never green.
    Broken(String),
}

#[derive(Debug, Clone)]
pub struct Cell {
    pub case: String,
    pub runtime: String,
    pub driver: Driver,
    pub device: Option<DeviceInfo>,
    pub layers: Vec<String>,
    pub emulation: String,
    pub command: CaseCommand,
    /// Set when the cell cannot run here.
    pub not_run: Option<NotRun>,
    pub expectation: Option<Expectation>,
}

impl Cell {
    /// A stable file-system name for the cell's evidence.
    pub fn slug(&self) -> String {
        let raw = format!(
            "{}.{}.{}.{}.{}",
            self.case,
            self.runtime,
            self.driver.name,
            if self.layers.is_empty() {
                "none".to_string()
            } else {
                self.layers.join("+")
            },
            self.emulation
        );
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.+".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }

    pub fn label(&self) -> String {
        format!("{} × {} × {}", self.case, self.runtime, self.driver.name)
    }

    /// What makes this the same cell in another run, shard or results file.
    pub fn id(&self) -> CellId {
        CellId {
            case: self.case.clone(),
            runtime: self.runtime.clone(),
            driver: self.driver.name.clone(),
            layers: self.layers.clone(),
            emulation: self.emulation.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub cases: Vec<String>,
    pub runtimes: Vec<String>,
    pub drivers: Vec<String>,
    pub external: Option<Vec<OsString>>,
    /// The layers every run gets (validation, trace, emulation).
    pub chain: Chain,
}

#[derive(Debug)]
pub struct Plan {
    pub cells: Vec<Cell>,
    /// Facts a user should see before the table (drivers left out, …).
    pub notes: Vec<String>,
    pub scenario_dir: PathBuf,
}

impl Plan {
    /// Keeps only the cells of one shard (`--shard K/N`), chosen by identity.
    pub fn retain_shard(&mut self, shard: Shard) {
        let before = self.cells.len();
        self.cells.retain(|cell| shard.contains(&cell.id()));
        self.notes.push(format!(
            "shard {shard}: {} of {before} cells",
            self.cells.len()
        ));
    }
}

/// Where the scenario binaries and refrt live: `VKEXIT_SCENARIO_DIR`, or
/// beside the vkexit executable (cargo puts them all in `target/release`).
pub fn scenario_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VKEXIT_SCENARIO_DIR") {
        return PathBuf::from(dir);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Checks a runtime spec; only `refrt:<policy>` is built in so far.
pub fn check_runtime(spec: &str) -> Result<()> {
    let bad = |reason: String| Error::BadRuntime {
        spec: spec.to_string(),
        reason,
    };
    match spec.split_once(':') {
        Some(("refrt", policy)) if POLICIES.contains(&policy) => Ok(()),
        Some(("refrt", policy)) => Err(bad(format!(
            "unknown refrt policy `{policy}`; policies: {}",
            POLICIES.join(", ")
        ))),
        Some((kind @ ("ggml" | "halide" | "wgpu" | "ncnn"), _)) => Err(bad(format!(
            "runtime kind `{kind}` is not supported by this build yet; supported: refrt:<policy>"
        ))),
        _ => Err(bad(format!(
            "expected KIND:ARG, e.g. refrt:guarded; refrt policies: {}",
            POLICIES.join(", ")
        ))),
    }
}

/// Turns a request into cells, probing each driver once.
pub fn plan(request: &Request) -> Result<Plan> {
    let scenario_dir = scenario_dir();
    let mut notes = Vec::new();
    let (cases, runtimes) = choose_cases(request)?;
    for runtime in &runtimes {
        check_runtime(runtime)?;
    }
    let drivers = choose_drivers(request, &mut notes)?;
    let layers = request.chain.names();
    let emulation = request.chain.emulation.name().to_string();
    let validation = request.chain.validation.is_some();

    let mut cells = Vec::new();
    for (driver, device, not_run) in &drivers {
        if let Some(argv) = &request.external {
            let name = Path::new(&argv[0])
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| argv[0].to_string_lossy().into_owned());
            cells.push(Cell {
                case: name,
                runtime: "external".into(),
                driver: driver.clone(),
                device: device.clone(),
                layers: layers.clone(),
                emulation: emulation.clone(),
                command: CaseCommand::External(argv.clone()),
                not_run: not_run.clone(),
                expectation: None,
            });
        }
        for case in &cases {
            let binary = scenario_dir.join(case);
            if !binary.exists() {
                return Err(Error::ScenarioMissing { path: binary });
            }
            for runtime in &runtimes {
                cells.push(Cell {
                    case: case.clone(),
                    runtime: runtime.clone(),
                    driver: driver.clone(),
                    device: device.clone(),
                    layers: layers.clone(),
                    emulation: emulation.clone(),
                    command: CaseCommand::Scenario(binary.clone()),
                    not_run: not_run.clone(),
                    expectation: baseline::builtin(
                        case,
                        runtime,
                        &driver.name,
                        &emulation,
                        validation,
                    ),
                });
            }
        }
    }
    if !cases.is_empty() {
        let lib = scenario_dir.join(REFRT_LIBRARY);
        if !lib.exists() {
            return Err(Error::ScenarioMissing { path: lib });
        }
    }
    Ok(Plan {
        cells,
        notes,
        scenario_dir,
    })
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
    let cases: Vec<String> = match (&request.external, request.cases.is_empty()) {
        (Some(_), true) => Vec::new(),
        (None, true) => BUILTIN_CASES.iter().map(|s| s.to_string()).collect(),
        (_, false) => dedup(&request.cases),
    };
    let runtimes = if request.runtimes.is_empty() {
        POLICIES.iter().map(|p| format!("refrt:{p}")).collect()
    } else {
        dedup(&request.runtimes)
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
    let candidates = if explicit {
        drivers::select(&found, &request.drivers)?
    } else {
        found
    };
    let cwd = std::env::temp_dir();
    let mut chosen = Vec::new();
    let mut absent = Vec::new();
    for driver in candidates {
        let not_run = match probe::probe_driver(&driver, &[], &cwd) {
            Ok(r) if !r.devices.is_empty() => {
                chosen.push((driver, r.devices.into_iter().next(), None));
                continue;
            }
            Ok(_) => NotRun::Skipped(format!(
                "driver {} shows no device on this machine",
                driver.name
            )),
            Err(e) => NotRun::Broken(format!("driver {} could not be probed: {e}", driver.name)),
        };
        if explicit {
            chosen.push((driver, None, Some(not_run)));
        } else {
            absent.push(driver.name.clone());
        }
    }
    if !absent.is_empty() {
        notes.push(format!(
            "drivers without a device here, not run: {}",
            absent.join(", ")
        ));
    }
    if chosen.is_empty() {
        return Err(Error::Usage(
            "no Vulkan driver with a device was found; for the CPU driver lavapipe: apt-get install mesa-vulkan-drivers"
                .into(),
        ));
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::Emulation;

    fn request() -> Request {
        Request {
            cases: Vec::new(),
            runtimes: Vec::new(),
            drivers: Vec::new(),
            external: None,
            chain: Chain {
                trace: false,
                validation: None,
                emulation: Emulation::None,
                manifests: None,
            },
        }
    }

    #[test]
    fn runtime_specs_are_checked_with_the_valid_ones_listed() {
        assert!(check_runtime("refrt:guarded").is_ok());
        let e = check_runtime("refrt:sometimes").unwrap_err().to_string();
        assert!(e.contains("release-children"), "{e}");
        let e = check_runtime("ggml:/opt/ggml").unwrap_err().to_string();
        assert!(e.contains("not supported by this build yet"), "{e}");
        let e = check_runtime("guarded").unwrap_err().to_string();
        assert!(e.contains("KIND:ARG"), "{e}");
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
            external: Some(vec!["/bin/true".into()]),
            ..request()
        };
        let (cases, _) = choose_cases(&external).unwrap();
        assert!(cases.is_empty());
        let (cases, runtimes) = choose_cases(&request()).unwrap();
        assert_eq!(cases.len(), 4);
        assert_eq!(runtimes.len(), 5);
    }

    #[test]
    fn slugs_are_file_names() {
        let cell = Cell {
            case: "clean-exit".into(),
            runtime: "refrt:guarded".into(),
            driver: Driver {
                name: "lavapipe".into(),
                manifest: "/x.json".into(),
                library: "libvulkan_lvp.so".into(),
            },
            device: None,
            layers: vec!["validation".into()],
            emulation: "none".into(),
            command: CaseCommand::External(vec![]),
            not_run: None,
            expectation: None,
        };
        assert_eq!(
            cell.slug(),
            "clean-exit.refrt-guarded.lavapipe.validation.none"
        );
    }
}
