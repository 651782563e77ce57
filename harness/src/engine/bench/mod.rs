//! `vkexit bench`: what vkexit costs beyond the runs themselves. The same N runs of one case,
//! in the same environment, are timed as a plain loop, under CTest and under vkexit, at one
//! and two at a time; then what each vkexit layer adds per Vulkan call, and vkexit's peak
//! memory on a plan of many runs. A measurement, printed and written as JSON, never a test.

mod calls;
mod fixed;
mod loops;
pub(crate) mod memory;
pub mod startup;

use super::invocation::{self, Own, Resolved, Settings};
use crate::plan::matrix::Overrides;
use crate::plan::{Cell, Plan};
use crate::report;
use crate::run;
use crate::support::errors::{BadSelection, Error, Result};
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What to measure: the figures `vkexit bench` takes, as its flags give them.
#[derive(Debug, Clone)]
pub struct Request {
    /// Runs of the case in each loop: bare, CTest and vkexit, at -j 1 and -j 2.
    pub runs: u32,
    /// Times each loop is timed, interleaved with the others.
    pub repeats: u32,
    /// The case to run (unless `command` is given).
    pub case: String,
    /// The runtime of the case.
    pub runtime: String,
    /// A driver short name or ICD manifest path; `None`: the one driver with a device.
    pub driver: Option<String>,
    /// Run the case without the validation layer.
    pub no_validation: bool,
    /// Runs of `/bin/true` whose peak memory is measured (and a tenth as many).
    pub rss_runs: u32,
    /// vkCreateBuffer + vkDestroyBuffer pairs per layer measurement.
    pub pairs: u32,
    /// Where the figures go as JSON.
    pub json: Option<PathBuf>,
    /// An external program and its arguments, as the case.
    pub command: Vec<OsString>,
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

/// The 1-minute load average before the first loop and after the last.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Load {
    pub before: f64,
    pub after: f64,
    /// Either was above half a load per CPU: wall-clock figures are noise.
    pub busy: bool,
}

/// The figures, keyed as `--json` writes them.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub load_average: Load,
    pub repeats: u32,
    pub bare_ms_per_run: PerJobs,
    pub ctest_ms_per_run: Option<PerJobs>,
    pub vkexit_ms_per_run: PerJobs,
    /// Slowest minus fastest of the repeats, in ms per run.
    pub bare_ms_spread: PerJobs,
    pub ctest_ms_spread: Option<PerJobs>,
    pub vkexit_ms_spread: PerJobs,
    /// `vkexit run --runs 1 -- /bin/true` less one bare `/bin/true`: start-up and tear-down.
    pub startup_ms: f64,
    /// One `vkexit exec` or `vkexit run` of `/bin/true` from spawn to exit, with the driver
    /// named, against `/bin/true` spawned bare: what a test runner pays per test.
    pub startup: Vec<startup::Figure>,
    /// `vkexit run -- /bin/true` less a bare loop of `/bin/true`, per run, at -j 1.
    pub fixed_ms_per_run: f64,
    /// The same in CPU time (user + system of vkexit and its runs), which hardly depends on
    /// the load: the sum of `fixed_breakdown_cpu_ms`' preload, child and supervisor.
    pub fixed_cpu_ms_per_run: f64,
    /// What the fixed cost is made of, in CPU ms per run.
    pub fixed_breakdown_cpu_ms: fixed::Breakdown,
    pub overhead_vs_bare: PerJobs,
    pub ratio_vs_ctest: Option<PerJobs>,
    pub speedup_j2: f64,
    pub trace_ns_per_call: PerCall,
    pub tegra_ns_per_call: PerCall,
    pub peak_rss_mb_10k: f64,
}

pub fn bench(args: Request) -> Result<bool> {
    let work = tempfile::Builder::new()
        .prefix("vkexit-bench-")
        .tempdir()
        .map_err(|e| Error::io("cannot create a scratch directory", std::env::temp_dir(), e))?;
    let (plan, options) = plan_one(&args, work.path())?;
    let cell = &plan.cells[0];
    println!(
        "vkexit bench: {} runs of {} [{}], each loop {} time(s), load average {:.2} at start",
        args.runs,
        cell.label(),
        crate::judge::layers_text(&cell.layers),
        args.repeats,
        load_average()
    );
    let runs = args.runs;
    let ctest = loops::ctest_program();
    if ctest.is_none() {
        println!("  ctest: not found (apt-get install cmake); left out");
    }
    let select = selection_args(&args, cell);
    let load_before = load_average();
    // Every repeat times each loop once at -j 1 and once at -j 2, in an order that turns
    // each repeat: a load that drifts while the bench runs weighs on each loop alike.
    let mut times: [[Vec<loops::Timing>; 2]; 3] = Default::default();
    for repeat in 0..args.repeats as usize {
        for (j, jobs) in [1u32, 2].into_iter().enumerate() {
            for turn in 0..3 {
                let which = (turn + repeat + j) % 3;
                let timing = match which {
                    0 => loops::bare(&plan, &options, work.path(), runs, jobs)?,
                    1 => match &ctest {
                        Some(c) => loops::ctest(c, &plan, &options, work.path(), runs, jobs)?,
                        None => continue,
                    },
                    _ => loops::vkexit(&select, work.path(), runs, jobs)?,
                };
                times[which][j].push(timing);
            }
        }
    }
    let [bare_t, ctest_t, vkexit_t] = times.map(|per_j| per_j.map(|t| Summary::of(&t)));
    let has_ctest = ctest.is_some();
    print_loop("bare loop", &bare_t);
    if has_ctest {
        print_loop("ctest", &ctest_t);
    }
    print_loop("vkexit run", &vkexit_t);
    let wall = |t: &[Summary; 2]| PerJobs {
        j1: t[0].wall,
        j2: t[1].wall,
    };
    let spread = |t: &[Summary; 2]| PerJobs {
        j1: t[0].spread,
        j2: t[1].spread,
    };
    let bare = wall(&bare_t);
    let ctest = has_ctest.then(|| wall(&ctest_t));
    let vkexit = wall(&vkexit_t);
    println!(
        "  CPU per run, vkexit / bare loop: {:.3} at -j 1, {:.3} at -j 2 (CPU time hardly depends on the load)",
        vkexit_t[0].cpu / bare_t[0].cpu,
        vkexit_t[1].cpu / bare_t[1].cpu
    );
    let trace = calls::per_call(cell, work.path(), calls::Layer::Trace, args.pairs)?;
    let tegra = calls::per_call(cell, work.path(), calls::Layer::Tegra, args.pairs)?;
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
    let true_bare = memory::bare_true_ms_per_run(small)?;
    // T(n) = start-up + n × per run, so per run = (T(n) − T(1)) / (n − 1): start-up is not
    // spread into the cost per run.
    let one_run = memory::startup_ms(work.path(), &driver)?;
    let n = f64::from(small.max(2));
    let fixed = (light.j1 * n - one_run) / (n - 1.0) - true_bare;
    let startup = one_run - true_bare;
    println!(
        "  vkexit's own cost: {fixed:.3} ms per run beyond a bare loop of /bin/true ({true_bare:.3} ms per run), {startup:.1} ms of start-up and tear-down"
    );
    let starts = startup::measure(work.path(), &driver, (args.repeats * 7).max(15))?;
    print_startup(&starts);
    let breakdown = fixed::measure(work.path(), &driver, small)?;
    print_breakdown(&breakdown);
    let rss_small = memory::peak_rss_mb(work.path(), &driver, small)?;
    let rss = memory::peak_rss_mb(work.path(), &driver, args.rss_runs)?;
    println!(
        "  vkexit peak RSS, `-- /bin/true` without validation: {rss_small:.1} MB at {small} runs, {rss:.1} MB at {} runs",
        args.rss_runs
    );
    let load_after = load_average();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let load = Load {
        before: load_before,
        after: load_after,
        // The 1-minute average after the loops holds their own load: up to 2
        // runnable at -j 2. Only load beyond that is someone else's.
        busy: load_before > 0.5 * cpus || load_after > 0.5 * cpus + 2.0,
    };
    let figures = Figures {
        load_average: load,
        repeats: args.repeats,
        bare_ms_per_run: bare,
        ctest_ms_per_run: ctest,
        vkexit_ms_per_run: vkexit,
        bare_ms_spread: spread(&bare_t),
        ctest_ms_spread: has_ctest.then(|| spread(&ctest_t)),
        vkexit_ms_spread: spread(&vkexit_t),
        startup_ms: startup,
        startup: starts,
        fixed_ms_per_run: fixed,
        fixed_cpu_ms_per_run: breakdown.total(),
        fixed_breakdown_cpu_ms: breakdown,
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

/// The one cell the loops run, and the options vkexit would run it with: an invocation of
/// the flags' one cell, without diagnostics (the plain loop and CTest run the program as it
/// is; vkexit adds its diagnostics, and their cost counts as vkexit's).
fn plan_one(args: &Request, work: &Path) -> Result<(Plan, run::Options)> {
    let overrides = Overrides {
        cases: match args.command.is_empty() {
            true => vec![args.case.clone()],
            false => Vec::new(),
        },
        runtimes: vec![args.runtime.clone()],
        drivers: args.driver.iter().cloned().collect(),
        command: args.command.clone(),
        runs: Some(args.runs),
        jobs: Some(1),
        timeout: Some(60.0),
        no_validation: args.no_validation,
        ..Overrides::default()
    };
    let resolved = Resolved::new(invocation::Request {
        config: None,
        suites: Vec::new(),
        overrides,
        baselines: Vec::new(),
        outputs: report::Outputs::default(),
        allow_no_runs: false,
        settings: Settings {
            diagnostics: false,
            ..Settings::new(work.join("unused"))
        },
        // The loops' runs go to scratch directories of their own.
        own_artifacts: Own::Never,
    })?;
    let invocation = resolved.invocation()?;
    let [part] = &invocation.parts[..] else {
        unreachable!("flags alone give one layer set")
    };
    let runnable: Vec<&Cell> = part
        .plan
        .cells
        .iter()
        .filter(|c| c.not_run.is_none())
        .collect();
    if runnable.len() != 1 {
        return Err(Error::BadSelection(BadSelection::BenchNotOneCell {
            count: runnable.len(),
        }));
    }
    let plan = Plan {
        cells: runnable.into_iter().cloned().collect(),
        notes: Vec::new(),
        helpers: part.plan.helpers.clone(),
    };
    let mut options = invocation.options(part);
    options.chain.write_manifests(&work.join("layers"))?;
    Ok((plan, options))
}

/// `vkexit run` arguments that select the same cell: its driver named, so that vkexit probes
/// that driver only, as a CI job for one driver does.
fn selection_args(args: &Request, cell: &Cell) -> Vec<OsString> {
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

/// The median of the repeats of one loop, and their spread.
#[derive(Debug, Clone, Copy, Default)]
struct Summary {
    wall: f64,
    spread: f64,
    cpu: f64,
}

impl Summary {
    fn of(times: &[loops::Timing]) -> Summary {
        if times.is_empty() {
            return Summary::default();
        }
        let wall: Vec<f64> = times.iter().map(|t| t.wall).collect();
        let cpu: Vec<f64> = times.iter().map(|t| t.cpu).collect();
        let (lo, hi) = wall
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &w| (lo.min(w), hi.max(w)));
        Summary {
            wall: median(wall),
            spread: hi - lo,
            cpu: median(cpu),
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n % 2 {
        1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

fn print_loop(what: &str, t: &[Summary; 2]) {
    println!(
        "  {what:<11} {:>8.2} ms per run at -j 1 (± {:.2}), {:>8.2} at -j 2 (± {:.2}); CPU {:.2} and {:.2} ms per run",
        t[0].wall,
        t[0].spread / 2.0,
        t[1].wall,
        t[1].spread / 2.0,
        t[0].cpu,
        t[1].cpu
    );
}

fn print_targets(f: &Figures, rss_small: f64) {
    let mark = |ok: bool| if ok { "met" } else { "NOT met" };
    let l = f.load_average;
    println!(
        "  load average {:.2} before, {:.2} after{}",
        l.before,
        l.after,
        match l.busy {
            true => ": WARNING: the machine was busy; the wall-clock figures are not to be trusted",
            false => "",
        }
    );
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
    println!(
        "  start-up and tear-down ≤ 100 ms: {:.1} ms ({}); fixed cost per run ≤ 0.3 ms beyond a bare loop: {:.3} ms ({})",
        f.startup_ms,
        mark(f.startup_ms <= 100.0),
        f.fixed_ms_per_run,
        mark(f.fixed_ms_per_run <= 0.3)
    );
    if f.fixed_ms_per_run > 0.3 || f.fixed_cpu_ms_per_run > 0.3 {
        let (what, ms) = f.fixed_breakdown_cpu_ms.largest();
        println!("  the fixed cost per run is bounded by {what}: {ms:.3} ms of CPU per run");
    }
    let growth = f.peak_rss_mb_10k - rss_small;
    println!(
        "  peak memory grows {growth:+.1} MB from a tenth of the runs to all of them (flat: {})",
        mark(growth <= 1.0)
    );
}

/// Each command's start-up, and the target: one exec or run of one program within 20 ms.
fn print_startup(figures: &[startup::Figure]) {
    println!("  start-up, spawn to exit (median of interleaved rounds; the probe of the driver kept unless said):");
    for f in figures {
        println!(
            "    {:<58} {:7.1} ms wall (spread {:5.1}), {:6.1} ms CPU, {:+7.1} ms beyond bare",
            f.command, f.wall_ms, f.wall_spread_ms, f.cpu_ms, f.beyond_bare_ms
        );
    }
    let worst = figures
        .iter()
        .filter(|f| f.command.contains("--no-validation --") && !f.command.contains("no probe"))
        .map(|f| f.wall_ms)
        .fold(0.0, f64::max);
    println!(
        "  start-up of one exec or run without validation ≤ 20 ms wall: {worst:.1} ms ({})",
        if worst <= 20.0 { "met" } else { "NOT met" }
    );
}

/// The fixed cost per run in CPU time, by part.
fn print_breakdown(b: &fixed::Breakdown) {
    let p = &b.parts;
    let rest =
        b.supervisor - (p.spawn_and_supervise + p.cgroup + p.reaper + p.run_directory + p.evidence);
    println!(
        "  in CPU time (hardly depends on the load): {:.3} ms per run beyond a bare loop's {:.3}:",
        b.total(),
        b.bare
    );
    println!(
        "    diagnostics preload {:.3} (loading it and libgcc_s into the run, its constructor, its records, their reading)",
        b.preload
    );
    println!(
        "    the run's process {:.3} (process group, limits, cgroup, environment: beyond a plain spawn)",
        b.child
    );
    println!(
        "    vkexit itself {:.3}: spawn and supervision {:.3} (the spawn alone: {:.3}), cgroup {:.3} (made per run instead: {:.3}), orphan sweep {:.3}, run directory {:.3}, evidence {:.3}, the rest {:.3}",
        b.supervisor,
        p.spawn_and_supervise,
        p.spawn,
        p.cgroup,
        p.cgroup_made_per_run,
        p.reaper,
        p.run_directory,
        p.evidence,
        rest
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

/// The 1-minute load average, so a reader can judge how quiet the machine was; NaN when it
/// cannot be read.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
