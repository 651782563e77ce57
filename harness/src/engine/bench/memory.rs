//! vkexit's peak memory over a plan of many runs. `vkexit run` is made in a child vkexit
//! (`bench --rss-child`), which then reports its own peak resident set: the peak of vkexit
//! alone, not of the driver probe or the runs it spawned.

use crate::engine::invocation::{Own, Request, Resolved, Settings};
use crate::support::errors::{Error, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Peak RSS, in MB, of `vkexit run --no-validation --runs RUNS -j 2 -- /bin/true`.
pub fn peak_rss_mb(work: &Path, driver: &str, runs: u32) -> Result<f64> {
    let report = child_report(work, &format!("rss-{runs}"), driver, runs, 2, true)?;
    Ok(report.rss_kb / 1024.0)
}

/// What a child vkexit reports of itself after `vkexit run --no-validation --runs RUNS -j JOBS
/// -- /bin/true` (with `--no-diagnostics` unless `diagnostics`); `name` names its files in
/// `work`.
pub fn child_report(
    work: &Path,
    name: &str,
    driver: &str,
    runs: u32,
    jobs: u32,
    diagnostics: bool,
) -> Result<Report> {
    let exe = super::vkexit_exe()?;
    let spec = ChildSpec {
        driver: driver.to_string(),
        runs,
        jobs,
        diagnostics,
        artifacts: work.join(name),
        report: work.join(format!("{name}.txt")),
    };
    let spec_file = work.join(format!("{name}.json"));
    let text = serde_json::to_string(&spec).expect("a bench child's spec serialises");
    std::fs::write(&spec_file, text).map_err(|e| Error::io("cannot write", &spec_file, e))?;
    let status = Command::new(&exe)
        .arg("bench")
        .arg("--rss-child")
        .arg(&spec_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| Error::io("cannot start", &exe, e))?;
    let _ = std::fs::remove_dir_all(&spec.artifacts);
    Report::read(&spec.report).ok_or(Error::BenchChild { runs, jobs, status })
}

/// What a child vkexit runs (`bench --rss-child SPEC`): `vkexit run --no-validation --driver
/// DRIVER --runs RUNS -j JOBS -- /bin/true`, with its evidence in `artifacts`, then it writes
/// its [`Report`] to `report`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ChildSpec {
    driver: String,
    runs: u32,
    jobs: u32,
    diagnostics: bool,
    artifacts: std::path::PathBuf,
    report: std::path::PathBuf,
}

/// Milliseconds per run of `vkexit run --no-validation -- /bin/true`: what vkexit costs per
/// run when the run itself costs almost nothing, and how that scales with -j.
pub fn light_ms_per_run(work: &Path, driver: &str, runs: u32, jobs: u32) -> Result<f64> {
    let exe = super::vkexit_exe()?;
    let artifacts = work.join(format!("light-j{jobs}"));
    let start = std::time::Instant::now();
    Command::new(&exe)
        .args(["run", "--no-validation", "--driver", driver])
        .args(["--runs", &runs.to_string(), "-j", &jobs.to_string()])
        .arg("--artifacts")
        .arg(&artifacts)
        .args(["--", "/bin/true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| Error::io("cannot start", &exe, e))?;
    let ms = start.elapsed().as_secs_f64() * 1000.0 / f64::from(runs);
    let _ = std::fs::remove_dir_all(&artifacts);
    Ok(ms)
}

/// Milliseconds per run of a loop that spawns `/bin/true` and waits for it: what a run costs
/// with nothing of vkexit around it.
pub fn bare_true_ms_per_run(runs: u32) -> Result<f64> {
    let start = std::time::Instant::now();
    true_loop(runs)?;
    Ok(start.elapsed().as_secs_f64() * 1000.0 / f64::from(runs))
}

/// `runs` runs of `/bin/true` by a plain loop: spawn, wait.
pub fn true_loop(runs: u32) -> Result<()> {
    for _ in 0..runs {
        Command::new("/bin/true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| Error::io("cannot start", Path::new("/bin/true"), e))?;
    }
    Ok(())
}

/// Milliseconds of `vkexit run --runs 1 -- /bin/true`, the median of five: start-up (the
/// driver probe, the cgroups) and tear-down around one run.
pub fn startup_ms(work: &Path, driver: &str) -> Result<f64> {
    let mut times: Vec<f64> = (0..5)
        .map(|_| light_ms_per_run(work, driver, 1, 1))
        .collect::<Result<_>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

/// What a child vkexit (`bench --rss-child`) reports of itself once its `vkexit run` ended.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    /// Its peak resident set.
    pub rss_kb: f64,
    /// Its own CPU time, every thread (user + system).
    pub self_cpu_ms: f64,
    /// The CPU time of the runs it waited for.
    pub children_cpu_ms: f64,
}

impl Report {
    /// `KEY VALUE` lines, as [`child`] writes them.
    pub fn read(path: &Path) -> Option<Report> {
        let text = std::fs::read_to_string(path).ok()?;
        let value = |key: &str| -> Option<f64> {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
        };
        Some(Report {
            rss_kb: value("rss_kb")?,
            self_cpu_ms: value("self_cpu_ms")?,
            children_cpu_ms: value("children_cpu_ms")?,
        })
    }
}

/// In the child: the gate its spec file asks for, then its own peak RSS in kB and its CPU
/// time and its runs' written where the spec says.
pub fn child(spec_file: &Path) -> Result<bool> {
    let text = std::fs::read_to_string(spec_file)
        .map_err(|e| Error::io("cannot read the bench child's spec", spec_file, e))?;
    let spec: ChildSpec = serde_json::from_str(&text).map_err(|source| Error::BenchSpec {
        path: spec_file.to_path_buf(),
        source,
    })?;
    let resolved = Resolved::new(Request {
        config: None,
        suites: Vec::new(),
        overrides: crate::plan::matrix::Overrides {
            drivers: vec![spec.driver.clone()],
            command: vec!["/bin/true".into()],
            runs: Some(spec.runs),
            jobs: Some(spec.jobs),
            no_validation: true,
            ..Default::default()
        },
        baselines: Vec::new(),
        outputs: crate::report::Outputs::default(),
        allow_no_runs: false,
        settings: Settings {
            diagnostics: spec.diagnostics,
            ..Settings::new(spec.artifacts.clone())
        },
        own_artifacts: Own::BeforePlanning,
    })?;
    let invocation = resolved.invocation()?;
    let green = crate::engine::gate::run(&invocation, &mut [])?.is_green();
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let kb = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage.ru_maxrss
    };
    let text = format!(
        "rss_kb {kb}\nself_cpu_ms {}\nchildren_cpu_ms {}\n",
        crate::run::cost::self_cpu_ms(),
        crate::run::cost::children_cpu_ms()
    );
    std::fs::write(&spec.report, text).map_err(|e| Error::io("cannot write", &spec.report, e))?;
    Ok(green)
}
