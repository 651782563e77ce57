//! `vkexit bench`: what vkexit costs beyond the runs themselves. The same N runs of one case,
//! in the same environment, are timed as a plain loop, under CTest and under vkexit, at one
//! and two at a time; then what each vkexit layer adds per Vulkan call, and vkexit's peak
//! memory on a plan of many runs. A measurement, printed and written as JSON, never a test.

mod calls;
mod loops;
mod memory;

use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use vkexit::errors::{Error, Result};
use vkexit::gate;
use vkexit::matrix::{Matrix, Overrides};
use vkexit::plan::{self, Cell, Plan};
use vkexit::run;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Runs of the case in each loop: bare, CTest and vkexit, at -j 1 and -j 2.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(2..))]
    runs: u32,
    /// The case to run.
    #[arg(long = "case", value_name = "NAME", default_value = "clean-exit")]
    case: String,
    /// The runtime of the case.
    #[arg(
        long = "runtime",
        value_name = "SPEC",
        default_value = "refrt:release-children"
    )]
    runtime: String,
    /// A driver short name or ICD manifest path [default: the one driver with a device].
    #[arg(long = "driver", value_name = "NAME")]
    driver: Option<String>,
    /// Run the case without the validation layer.
    #[arg(long)]
    no_validation: bool,
    /// Runs of a trivial case (`/bin/true`) whose peak memory is measured; a tenth as many
    /// are measured too, to show that it does not grow with the number of runs.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(10..))]
    rss_runs: u32,
    /// vkCreateBuffer + vkDestroyBuffer pairs per layer measurement.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(10..))]
    pairs: u32,
    /// Write the figures as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Internal: run `vkexit run` with the arguments after `--` and write its peak RSS here.
    #[arg(long, value_name = "FILE", hide = true)]
    rss_child: Option<PathBuf>,
    /// An external program and its arguments, as the case.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// One figure at -j 1 and at -j 2.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PerJobs {
    pub j1: f64,
    pub j2: f64,
}

impl PerJobs {
    fn ratio(self, to: PerJobs) -> PerJobs {
        PerJobs {
            j1: self.j1 / to.j1,
            j2: self.j2 / to.j2,
        }
    }
}

/// What a layer adds to one call it intercepts and to one it does not.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PerCall {
    pub intercepted: f64,
    pub untracked: f64,
}

/// The figures, keyed as `--json` writes them.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub bare_ms_per_run: PerJobs,
    pub ctest_ms_per_run: Option<PerJobs>,
    pub vkexit_ms_per_run: PerJobs,
    pub overhead_vs_bare: PerJobs,
    pub ratio_vs_ctest: Option<PerJobs>,
    pub speedup_j2: f64,
    pub trace_ns_per_call: PerCall,
    pub tegra_ns_per_call: PerCall,
    pub peak_rss_mb_10k: f64,
}

pub fn bench(args: BenchArgs) -> Result<bool> {
    if let Some(out) = &args.rss_child {
        return memory::child(out, &args.command);
    }
    let work = tempfile::Builder::new()
        .prefix("vkexit-bench-")
        .tempdir()
        .map_err(|e| Error::io("cannot create a scratch directory", std::env::temp_dir(), e))?;
    let (plan, options) = plan_one(&args, work.path())?;
    let cell = &plan.cells[0];
    println!(
        "vkexit bench: {} runs of {} [{}], {}",
        args.runs,
        cell.label(),
        vkexit::judge::layers_text(&cell.layers),
        load_note()
    );
    let runs = args.runs;
    let ctest = loops::ctest_program();
    if ctest.is_none() {
        println!("  ctest: not found (apt-get install cmake); left out");
    }
    let select = selection_args(&args, cell);
    // Bare, CTest, vkexit at -j 1, then the other way round at -j 2: a load that drifts while
    // the bench runs weighs on each about alike.
    let bare_j1 = loops::bare(&plan, &options, work.path(), runs, 1)?;
    let ctest_j1 = match &ctest {
        Some(c) => Some(loops::ctest(c, &plan, &options, work.path(), runs, 1)?),
        None => None,
    };
    let vkexit_j1 = loops::vkexit(&select, work.path(), runs, 1)?;
    let vkexit_j2 = loops::vkexit(&select, work.path(), runs, 2)?;
    let ctest_j2 = match &ctest {
        Some(c) => Some(loops::ctest(c, &plan, &options, work.path(), runs, 2)?),
        None => None,
    };
    let bare_j2 = loops::bare(&plan, &options, work.path(), runs, 2)?;
    print_loop("bare loop", bare_j1, bare_j2);
    if let Some((j1, j2)) = ctest_j1.zip(ctest_j2) {
        print_loop("ctest", j1, j2);
    }
    print_loop("vkexit run", vkexit_j1, vkexit_j2);
    let wall = |j1: loops::Timing, j2: loops::Timing| PerJobs {
        j1: j1.wall,
        j2: j2.wall,
    };
    let bare = wall(bare_j1, bare_j2);
    let ctest = ctest_j1.zip(ctest_j2).map(|(j1, j2)| wall(j1, j2));
    let vkexit = wall(vkexit_j1, vkexit_j2);
    println!(
        "  CPU per run, vkexit / bare loop: {:.3} at -j 1, {:.3} at -j 2 (CPU time hardly depends on the load)",
        vkexit_j1.cpu / bare_j1.cpu,
        vkexit_j2.cpu / bare_j2.cpu
    );
    let trace = calls::per_call(&plan, cell, work.path(), calls::Layer::Trace, args.pairs)?;
    let tegra = calls::per_call(&plan, cell, work.path(), calls::Layer::Tegra, args.pairs)?;
    let small = (args.rss_runs / 10).max(1);
    let driver = cell.driver.manifest.display().to_string();
    let light = PerJobs {
        j1: memory::light_ms_per_run(work.path(), &driver, small, 1)?,
        j2: memory::light_ms_per_run(work.path(), &driver, small, 2)?,
    };
    println!(
        "  a CPU-light case, `-- /bin/true` without validation, {small} runs: {:.2} ms per run at -j 1, {:.2} at -j 2: speedup {:.2}",
        light.j1,
        light.j2,
        light.j1 / light.j2
    );
    let rss_small = memory::peak_rss_mb(work.path(), &driver, small)?;
    let rss = memory::peak_rss_mb(work.path(), &driver, args.rss_runs)?;
    println!(
        "  vkexit peak RSS, `-- /bin/true` without validation: {rss_small:.1} MB at {small} runs, {rss:.1} MB at {} runs",
        args.rss_runs
    );
    let figures = Figures {
        bare_ms_per_run: bare,
        ctest_ms_per_run: ctest,
        vkexit_ms_per_run: vkexit,
        overhead_vs_bare: vkexit.ratio(bare),
        ratio_vs_ctest: ctest.map(|c| vkexit.ratio(c)),
        speedup_j2: vkexit.j1 / vkexit.j2,
        trace_ns_per_call: trace,
        tegra_ns_per_call: tegra,
        peak_rss_mb_10k: rss,
    };
    print_targets(&figures, rss_small);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&figures).expect("figures serialise");
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::io("cannot write the bench results", path, e))?;
    }
    Ok(true)
}

/// The one cell the loops run, and the options vkexit would run it with.
fn plan_one(args: &BenchArgs, work: &Path) -> Result<(Plan, run::Options)> {
    let mut matrix = Matrix::default();
    matrix.apply(Overrides {
        cases: match args.command.is_empty() {
            true => vec![args.case.clone()],
            false => Vec::new(),
        },
        runtimes: vec![args.runtime.clone()],
        drivers: args.driver.iter().cloned().collect(),
        command: args.command.clone(),
        name: None,
        private_cwd: false,
        runs: Some(args.runs),
        jobs: None,
        timeout: None,
        emulate: None,
        trace: false,
        no_validation: args.no_validation,
        fail_on_leak: false,
    })?;
    let [set] = &matrix.layer_sets()[..] else {
        unreachable!("flags alone give one layer set")
    };
    let validation = match set.validation {
        true => Some(vkexit::validation::find_layer()?),
        false => None,
    };
    let mut chain = gate::chain(set, validation.as_ref(), false);
    let plan = plan::plan(&gate::request(&matrix, chain.clone()))?;
    let runnable: Vec<&Cell> = plan.cells.iter().filter(|c| c.not_run.is_none()).collect();
    if runnable.len() != 1 {
        return Err(Error::Usage(format!(
            "vkexit bench times one cell; the selection gives {} runnable cells: pick one with --driver",
            runnable.len()
        )));
    }
    let plan = Plan {
        cells: plan
            .cells
            .into_iter()
            .filter(|c| c.not_run.is_none())
            .collect(),
        ..plan
    };
    chain.write_manifests(&work.join("layers"), &plan.scenario_dir)?;
    let options = run::Options {
        runs: args.runs,
        jobs: 1,
        timeout: std::time::Duration::from_secs(60),
        artifacts: work.join("unused"),
        keep_passing: false,
        chain,
        fail_on_leak: false,
        // The plain loop and CTest run the program as it is; vkexit adds its diagnostics, and
        // their cost counts as vkexit's.
        diagnostics: false,
        time_destructors: false,
        children_may_crash: false,
    };
    Ok((plan, options))
}

/// `vkexit run` arguments that select the same cell: its driver named, so that vkexit probes
/// that driver only, as a CI job for one driver does.
fn selection_args(args: &BenchArgs, cell: &Cell) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    if args.command.is_empty() {
        out.extend(["--case".into(), args.case.clone().into()]);
    }
    out.extend(["--runtime".into(), args.runtime.clone().into()]);
    out.extend([
        "--driver".into(),
        cell.driver.manifest.clone().into_os_string(),
    ]);
    if args.no_validation {
        out.push("--no-validation".into());
    }
    if !args.command.is_empty() {
        out.push("--".into());
        out.extend(args.command.iter().cloned());
    }
    out
}

fn print_loop(what: &str, j1: loops::Timing, j2: loops::Timing) {
    println!(
        "  {what:<11} {:>8.2} ms per run at -j 1, {:>8.2} at -j 2 (CPU {:.2} and {:.2} ms per run)",
        j1.wall, j2.wall, j1.cpu, j2.cpu
    );
}

fn print_targets(f: &Figures, rss_small: f64) {
    let mark = |ok: bool| if ok { "met" } else { "NOT met" };
    let o = f.overhead_vs_bare;
    println!(
        "  overhead vs bare: {:.3} at -j 1, {:.3} at -j 2 (target ≤ 1.03: {})",
        o.j1,
        o.j2,
        mark(o.j1 <= 1.03 && o.j2 <= 1.03)
    );
    if let Some(r) = f.ratio_vs_ctest {
        println!(
            "  vkexit / ctest:   {:.3} at -j 1, {:.3} at -j 2 (target ≤ 1.0: {})",
            r.j1,
            r.j2,
            mark(r.j1 <= 1.0 && r.j2 <= 1.0)
        );
    }
    let bare_speedup = f.bare_ms_per_run.j1 / f.bare_ms_per_run.j2;
    println!(
        "  speedup at -j 2:  {:.2} (the bare loop's: {bare_speedup:.2}; target ≥ 1.8 where the case is CPU-light)",
        f.speedup_j2
    );
    for (name, c) in [
        ("trace", f.trace_ns_per_call),
        ("tegra-exit", f.tegra_ns_per_call),
    ] {
        println!(
            "  {name} layer: {:+.0} ns per intercepted call, {:+.0} ns per untracked call",
            c.intercepted, c.untracked
        );
    }
    println!(
        "  trace layer ≤ 1 µs per intercepted call: {}",
        mark(f.trace_ns_per_call.intercepted <= 1000.0)
    );
    let growth = f.peak_rss_mb_10k - rss_small;
    println!(
        "  peak memory grows {growth:+.1} MB from a tenth of the runs to all of them (flat: {})",
        mark(growth <= 1.0)
    );
}

/// The vkexit binary to run the loops with. A build that replaced it while the bench runs leaves
/// `/proc/self/exe` naming `… (deleted)`: the binary now at that path is taken.
fn vkexit_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find vkexit itself", Path::new("/proc/self/exe"), e))?;
    let text = exe.to_string_lossy();
    Ok(match text.strip_suffix(" (deleted)") {
        Some(path) => PathBuf::from(path),
        None => exe,
    })
}

/// The load average, so a reader can judge how quiet the machine was.
fn load_note() -> String {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => {
            let one = text.split_whitespace().next().unwrap_or("?");
            format!("load average {one} at start")
        }
        Err(_) => "load average unknown".to_string(),
    }
}
