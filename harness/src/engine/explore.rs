//! `vkexit explore`: a cell's natural exit, then each perturbation of it, and where the
//! natural exit fails, the smallest change of order that makes it clean.
//!
//! Each phase is one gate over the whole selection with one thing changed for every run: an
//! exit order (`run --exit-order`), the driver's exit emulated (`run --emulate`), thread
//! timing (`run --chaos-seed`), or a slower device's teardown (`run --slow-teardown`); its runs keep their directories under
//! `<artifacts>/explore/<phase>/`, so that every perturbation replays and explains. The natural
//! phase is `run` itself, judged by the same baseline; a perturbation is judged by its runs
//! alone (all pass, none, some), and one that moved no handler in this program (or, for the
//! perturbations of threads, found no thread it could move) is `not-applicable`, as its first
//! run's timeline says, with the reason.

use super::gate;
use super::invocation::{Invocation, Settings};
use crate::host::layers::Emulation;
use crate::host::source_lines;
use crate::judge::{self, Baseline};
use crate::plan::exit_order::{ExitOrder, Handler, Order, Step};
use crate::plan::fix_search;
use crate::plan::matrix::Matrix;
use crate::plan::Cell;
use crate::report::{
    self,
    events::{GateEvent, Reporter},
};
use crate::run;
use crate::support::errors::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vkexit_evidence::exit_order::Class;
use vkexit_evidence::explore::{Exploration, ExploredCell, Fix, Perturbation};
use vkexit_evidence::results::{CellResult, Counts, Results};
use vkexit_evidence::timeline::{self, Event};

/// What `explore` is asked.
pub(crate) struct Request<'a> {
    pub(crate) matrix: &'a Matrix,
    pub(crate) baseline: &'a Baseline,
    /// The settings of every phase; each phase's evidence goes under its own directory of
    /// `settings.artifacts`.
    pub(crate) settings: Settings,
    /// The exit orders to perturb with (default: every deployment order).
    pub(crate) orders: Vec<Order>,
    /// The seed of the thread-timing perturbation.
    pub(crate) chaos_seed: u64,
    /// Phases not started once this much time has gone.
    pub(crate) budget: Option<Duration>,
}

/// One perturbation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Order(Order),
    Driver(Emulation),
    Threads(u64),
    /// A slower device's teardown: each destroy call at exit held until the threads asleep at
    /// it have woken.
    SlowTeardown,
    /// A change of exit order the fix search verifies (its steps are the phase's).
    Fix,
    /// The runtime libraries linked in the reverse order (each cell's steps are its own).
    Libraries,
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Order(o) => o.name().to_string(),
            Kind::Driver(e) => format!("driver-exit:{}", e.name()),
            Kind::Threads(seed) => format!("threads:seed={seed}"),
            Kind::SlowTeardown => "slow-teardown".into(),
            Kind::Fix => "fix".into(),
            Kind::Libraries => "library-link-order".into(),
        }
    }

    fn condition(self) -> String {
        match self {
            Kind::Order(o) => o.condition().to_string(),
            Kind::Driver(Emulation::TegraRacy) => {
                "the NVIDIA Tegra driver's exit (Jetson): its exit handler unmaps the code a \
                 driver thread still runs, racing the process's exit (flaky, as on the Orin)"
                    .into()
            }
            Kind::Driver(_) => {
                "the NVIDIA Tegra driver's exit (Jetson): its exit handler unmaps the code a \
                 driver thread runs until vkDestroyDevice"
                    .into()
            }
            Kind::Threads(_) => {
                "another thread timing at exit: threads still runnable when exit starts run \
                 ahead of the exit handlers (a slower machine, a loaded one)"
                    .into()
            }
            Kind::SlowTeardown => {
                "a slower device's teardown at exit, as a Jetson's is: each vkDestroy*/vkFree* \
                 call made during exit takes long enough for the threads asleep at it to wake \
                 into what it destroyed"
                    .into()
            }
            Kind::Fix => "a change of the program's exit order".into(),
            Kind::Libraries => {
                "the runtime libraries linked in the other order (-lb -la for -la -lb): their \
                 library destructors (.fini_array, __attribute__((destructor))) run in the \
                 reverse order, as far as what each library needs allows"
                    .into()
            }
        }
    }

    fn replay(self) -> String {
        match self {
            Kind::Order(o) => format!("--exit-order {}", o.name()),
            Kind::Driver(e) => format!("--emulate {}", e.name()),
            Kind::Threads(seed) => format!("--chaos-seed {seed}"),
            Kind::SlowTeardown => "--slow-teardown".into(),
            Kind::Fix | Kind::Libraries => "--exit-order".into(),
        }
    }

    fn dir(self) -> String {
        self.name().replace([':', '='], "-")
    }
}

/// A cell's identity across phases that change its emulation: case, runtime, driver, layers.
type CellKey = (String, String, String, Vec<String>);

/// A cell of one phase: its key and its emulation.
type PhaseCell = (CellKey, String);

fn key(c: &CellResult) -> CellKey {
    (
        c.case.clone(),
        c.runtime.clone(),
        c.driver.clone(),
        c.layers.clone(),
    )
}

fn plan_key(c: &Cell) -> CellKey {
    (
        c.case.clone(),
        c.runtime.clone(),
        c.driver.name.clone(),
        c.layers.clone(),
    )
}

/// An exploration made, and why it ran nothing when it ran nothing (every cell skipped, an
/// empty shard): as for `run`, no runs is not green unless the user allows it.
pub(crate) struct Explored {
    pub(crate) exploration: Exploration,
    pub(crate) no_runs: Option<String>,
}

/// Runs the exploration; `reporters` hear every phase's gate.
pub(crate) fn explore(request: &Request, reporters: &mut [&mut dyn Reporter]) -> Result<Explored> {
    let start = Instant::now();
    // Planned once: every phase runs the same cells (a driver probed once), each changed.
    let base = Invocation::new(request.matrix, request.baseline, request.settings.clone())?;
    let emulated = emulated_bases(request, &base)?;
    let natural = phase(request, &base, "natural", None, None, None, reporters)?;
    let mut cells: Vec<ExploredCell> = natural
        .cells
        .iter()
        .map(|c| ExploredCell {
            natural: c.clone(),
            perturbations: Vec::new(),
            fix: None,
            no_fix: None,
            fix_undecided: false,
            findings: Vec::new(),
        })
        .collect();
    let mut kinds: Vec<Kind> = request.orders.iter().map(|&o| Kind::Order(o)).collect();
    kinds.extend([
        Kind::Driver(Emulation::Tegra),
        Kind::Driver(Emulation::TegraRacy),
        Kind::Threads(request.chaos_seed),
        Kind::SlowTeardown,
    ]);
    let mut left_out = Vec::new();
    let over_budget = |start: &Instant| request.budget.is_some_and(|b| start.elapsed() >= b);
    for kind in kinds {
        if run::interrupt::interrupted() {
            break;
        }
        if over_budget(&start) {
            left_out.push(kind.name());
            continue;
        }
        let results = match kind {
            Kind::Order(o) => phase(
                request,
                &base,
                &kind.dir(),
                Some(ExitOrder::of(o)),
                None,
                None,
                reporters,
            )?,
            Kind::Driver(e) => match emulated.iter().find(|(m, _)| *m == e) {
                Some((_, invocation)) => phase(
                    request,
                    invocation,
                    &kind.dir(),
                    None,
                    None,
                    None,
                    reporters,
                )?,
                None => continue,
            },
            Kind::Threads(seed) => phase(
                request,
                &base,
                &kind.dir(),
                None,
                Some(seed),
                None,
                reporters,
            )?,
            Kind::SlowTeardown => phase(
                request,
                &base.clone().with_slow_teardown(true),
                &kind.dir(),
                None,
                None,
                None,
                reporters,
            )?,
            Kind::Fix | Kind::Libraries => continue,
        };
        for cell in &mut cells {
            if let Some(p) = perturbation(kind, &cell.natural, &results) {
                cell.perturbations.push(p);
            }
        }
    }
    library_link_order(request, &base, &mut cells, &start, &mut left_out, reporters)?;
    search_fixes(request, &base, &mut cells, &start, &mut left_out, reporters)?;
    for cell in &mut cells {
        cell.findings = findings(cell);
    }
    let exploration = Exploration {
        schema: vkexit_evidence::explore::SCHEMA.into(),
        vkexit_version: env!("CARGO_PKG_VERSION").into(),
        chaos_seed: request.chaos_seed,
        shard: request.settings.shard.map(|s| s.to_string()),
        left_out,
        interrupted: run::interrupt::interrupted(),
        cells,
    };
    Ok(Explored {
        no_runs: crate::judge::no_runs_explored(&exploration),
        exploration,
    })
}

/// The cells under each emulated driver exit, planned now with the natural ones; none where
/// every cell emulates one already. Only the layer sets with no emulation are emulated: a set
/// that emulates a driver's exit already is explored as it is (a matrix with both, as the
/// default gate is, would otherwise give two sets of the same layers). A shard is of the
/// natural cells: each keeps its emulated twins, whichever shard their own identity would
/// fall in.
fn emulated_bases<'a>(
    request: &Request<'a>,
    base: &Invocation,
) -> Result<Vec<(Emulation, Invocation)>> {
    if base.cells().all(|c| c.emulation != Emulation::None) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for e in [Emulation::Tegra, Emulation::TegraRacy] {
        let mut matrix = request.matrix.clone();
        matrix.layer_sets = matrix
            .layer_sets()
            .into_iter()
            .filter(|s| s.emulation == Emulation::None)
            .map(|mut s| {
                s.emulation = e;
                s
            })
            .collect();
        let settings = Settings {
            shard: None,
            ..request.settings.clone()
        };
        let mut invocation = Invocation::new(&matrix, request.baseline, settings)?;
        if request.settings.shard.is_some() {
            let natural: Vec<CellKey> = base.cells().map(plan_key).collect();
            invocation.retain_cells(|c| natural.contains(&plan_key(c)));
        }
        out.push((e, invocation));
    }
    Ok(out)
}

/// One gate over `base`'s cells with every run changed as asked, its evidence in its own
/// directory; `only` keeps those cells alone.
fn phase(
    request: &Request,
    base: &Invocation,
    dir: &str,
    exit_order: Option<ExitOrder>,
    chaos_seed: Option<u64>,
    only: Option<&[PhaseCell]>,
    reporters: &mut [&mut dyn Reporter],
) -> Result<Results> {
    let natural = dir == "natural";
    let mut invocation = base.clone().perturbed(exit_order, chaos_seed);
    invocation.settings = Settings {
        artifacts: request.settings.artifacts.join("explore").join(dir),
        keep_passing: true,
        rerun_without_layer: natural && request.settings.rerun_without_layer,
        ..invocation.settings
    };
    if let Some(only) = only {
        invocation.retain_cells(|c| {
            let key = plan_key(c);
            only.iter()
                .any(|(k, emulation)| *k == key && emulation == c.emulation.name())
        });
    }
    let mut phase_line = PhaseLine {
        name: dir.to_string(),
        cells: 0,
        runs: 0,
    };
    let mut all: Vec<&mut dyn Reporter> = vec![&mut phase_line];
    for r in reporters.iter_mut() {
        all.push(&mut **r);
    }
    gate::run(&invocation, &mut all)
}

/// One line on stderr per phase: what it ran.
struct PhaseLine {
    name: String,
    cells: usize,
    runs: u32,
}

impl Reporter for PhaseLine {
    fn report(&mut self, event: &GateEvent) -> Result<()> {
        match event {
            GateEvent::Started { cells, runs, .. } => {
                (self.cells, self.runs) = (*cells, *runs);
                eprintln!(
                    "vkexit explore: {}: {} cell(s) × {} run(s)",
                    self.name, self.cells, self.runs
                );
            }
            GateEvent::Notes(_) | GateEvent::RunFinished { .. } | GateEvent::Finished(_) => {}
        }
        Ok(())
    }
}

/// The perturbation `kind` of the natural cell `natural`, from the phase's results.
fn perturbation(kind: Kind, natural: &CellResult, results: &Results) -> Option<Perturbation> {
    let mut p = Perturbation {
        name: kind.name(),
        condition: kind.condition(),
        replay: kind.replay(),
        counts: Counts::default(),
        verdict: "not-applicable".into(),
        moved: Vec::new(),
        signals: Vec::new(),
        vuids: Vec::new(),
        artifacts: Vec::new(),
    };
    if let Kind::Driver(_) = kind {
        if natural.emulation != "none" {
            p.moved.push(format!(
                "the runs emulate the driver's exit already ({})",
                natural.emulation
            ));
            return Some(p);
        }
    }
    let cell = results.cells.iter().find(|c| match kind {
        Kind::Driver(_) => key(c) == key(natural),
        _ => key(c) == key(natural) && c.emulation == natural.emulation,
    });
    let Some(cell) = cell.filter(|c| c.runs > 0) else {
        if natural.runs == 0 {
            return None;
        }
        // No run of it counted: judged as such, an error.
        p.verdict = judge::explore::verdict_of(&Counts::default()).into();
        p.moved.push(match cell.and_then(|c| c.reason.clone()) {
            Some(why) => format!("its runs did not start: {why}"),
            None => "its runs did not start".into(),
        });
        return Some(p);
    };
    let first = cell.artifacts.first().map(PathBuf::from);
    let applies = match kind {
        Kind::Order(Order::OlderGlibc) => {
            let natural_order = natural
                .artifacts
                .first()
                .map(|d| library_order(Path::new(d)))
                .unwrap_or_default();
            let order = first.as_deref().map(library_order).unwrap_or_default();
            match order_change(&natural_order, &order) {
                Some(change) => {
                    p.moved = vec![change];
                    true
                }
                // Not seen (a run that ended before the loader's finalization): its runs judge.
                None if natural_order.is_empty() || order.is_empty() => true,
                None => {
                    p.moved = vec![format!(
                        "glibc 2.31's sort gives the {} objects whose library destructors ran \
                         the same order here",
                        order.len()
                    )];
                    false
                }
            }
        }
        Kind::Order(_) | Kind::Fix | Kind::Libraries => {
            let moved = first.as_deref().map(moved_handlers).unwrap_or_default();
            p.moved = moved.clone();
            !moved.is_empty()
        }
        Kind::Threads(_) | Kind::SlowTeardown => {
            let acts = match (kind, first.as_deref()) {
                (_, None) => Acts::Unproven("its runs kept no directory".into()),
                (Kind::Threads(_), Some(dir)) => threads_ran_ahead(dir),
                (_, Some(dir)) => teardown_held(dir),
            };
            match acts {
                Acts::On(what) => {
                    p.moved = vec![what];
                    true
                }
                Acts::Not(why) => {
                    p.moved = vec![why];
                    false
                }
                Acts::Unproven(why) => {
                    p.moved = vec![why];
                    p.verdict = judge::explore::unproven().into();
                    false
                }
            }
        }
        Kind::Driver(_) => true,
    };
    p.counts = cell.counts;
    p.signals = cell.signals.clone();
    p.vuids = cell.vuids.clone();
    p.artifacts = cell.artifacts.iter().take(3).cloned().collect();
    if applies {
        p.verdict = judge::explore::verdict_of(&cell.counts).into();
    }
    Some(p)
}

/// The objects whose library destructors a run's main process ran, by file name, in order.
fn library_order(run_dir: &Path) -> Vec<String> {
    let Ok(file) = std::fs::File::open(run_dir.join(vkexit_evidence::files::TIMELINE.name)) else {
        return Vec::new();
    };
    let mut main_pid = None;
    let mut out: Vec<String> = Vec::new();
    let _ = vkexit_evidence::read::records(file, |stamp, e: timeline::Entry| {
        let pid = stamp.pid.unwrap_or(0);
        if main_pid.is_none() && matches!(e, timeline::Entry::PreloadLoaded(_)) {
            main_pid = Some(pid);
        }
        if let (timeline::Entry::LibraryDestructorStart(d), true) = (e, main_pid == Some(pid)) {
            let object = d.object.unwrap_or_default();
            let name = object.rsplit('/').next().unwrap_or("").to_string();
            if !out.contains(&name) {
                out.push(name);
            }
        }
    });
    out
}

/// How the loader's order of library destructors changed, said in one line; `None` when it
/// did not (or nothing was seen).
fn order_change(natural: &[String], now: &[String]) -> Option<String> {
    if natural.is_empty() || now.is_empty() || natural == now {
        return None;
    }
    let elsewhere = natural.iter().zip(now).filter(|(a, b)| a != b).count();
    // The first object now run before one it used to follow.
    let earlier = now.iter().enumerate().find_map(|(i, object)| {
        let was = natural.iter().position(|o| o == object)?;
        let passed = now[i + 1..].iter().find(|o| {
            natural
                .iter()
                .position(|n| n == *o)
                .is_some_and(|p| p < was)
        })?;
        Some(format!("{object} before {passed}"))
    });
    Some(format!(
        "the loader ran library destructors in another order: {elsewhere} of {} objects in another place{}",
        now.len(),
        earlier.map_or(String::new(), |e| format!(" (first: {e})"))
    ))
}

/// The handlers an exit order moved, as the run directory's timeline names them.
fn moved_handlers(run_dir: &Path) -> Vec<String> {
    let Ok(file) = std::fs::File::open(run_dir.join(vkexit_evidence::files::TIMELINE.name)) else {
        return Vec::new();
    };
    let mut registered: BTreeMap<(i64, u64), timeline::HandlerRegistered> = BTreeMap::new();
    let mut moved: Option<(i64, Vec<u64>)> = None;
    let mut libraries: Vec<(i64, String, String)> = Vec::new();
    let _ = vkexit_evidence::read::records(file, |stamp, e: timeline::Entry| match e {
        timeline::Entry::HandlerRegistered(h) => {
            registered.insert((stamp.pid.unwrap_or(0), h.id), h);
        }
        timeline::Entry::ExitReordered(r) if moved.is_none() && r.moved > 0 => {
            moved = Some((stamp.pid.unwrap_or(0), r.moved_ids()));
        }
        timeline::Entry::LibraryDestructorStart(d) => {
            let pid = stamp.pid.unwrap_or(0);
            let (Some(object), Some(then)) = (d.object, d.moved_before) else {
                return;
            };
            let object = object.rsplit('/').next().unwrap_or(&object).to_string();
            let first_pid = libraries.first().map_or(pid, |l| l.0);
            if pid == first_pid && !libraries.iter().any(|l| l.1 == object) {
                libraries.push((pid, object, then));
            }
        }
        _ => {}
    });
    let mut out: Vec<String> = match moved {
        Some((pid, ids)) => ids
            .iter()
            .map(|id| match registered.get(&(pid, *id)) {
                Some(h) => describe_handler(*id, h),
                None => format!("exit handler #{id}"),
            })
            .collect(),
        None => Vec::new(),
    };
    out.extend(
        libraries.into_iter().map(|(_, object, then)| {
            format!("the library destructors of {object}, before {then}'s")
        }),
    );
    out
}

fn describe_handler(id: u64, h: &timeline::HandlerRegistered) -> String {
    let kind = match h.kind() {
        Some(timeline::HandlerKind::CxaAtexit) => "C++ static destructor",
        _ => "atexit",
    };
    let registrant = h
        .registrant
        .as_deref()
        .map(|r| r.rsplit('/').next().unwrap_or(r).to_string())
        .unwrap_or_else(|| "an unknown object".into());
    match &h.symbol {
        Some(symbol) => format!("`{symbol}` (#{id}, {kind}, registered by {registrant})"),
        None => format!("exit handler #{id} ({kind}, registered by {registrant})"),
    }
}

/// What a perturbation of threads did to a run, from its timeline: what it acted on, why it
/// had nothing to act on, or that the evidence does not say.
enum Acts {
    On(String),
    Not(String),
    Unproven(String),
}

/// Whether a thread was runnable at a boundary where the chaos schedule paused: only those run
/// ahead (whether that changed the outcome is the runs' verdict). Threads alive but asleep or
/// blocked are counted and said, never taken for running ones.
fn threads_ran_ahead(run_dir: &Path) -> Acts {
    let Ok(file) = std::fs::File::open(run_dir.join(vkexit_evidence::files::TIMELINE.name)) else {
        return Acts::Unproven("its run left no exit timeline".into());
    };
    let (mut pauses, mut ran, mut busiest) = (0u64, None, timeline::ThreadStates::default());
    let _ = vkexit_evidence::read::records_of(file, Event::ChaosPause, |_, e: timeline::Entry| {
        if let timeline::Entry::ChaosPause(p) = e {
            pauses += 1;
            let mut states = p.threads;
            if states.alive == 0 && p.running > 0 {
                // An older timeline: the threads alive, their states not recorded.
                states.alive = p.running;
                states.runnable = p.running;
            }
            if states.runnable > 0 && ran.is_none() {
                ran = Some(states);
            }
            if states.alive > busiest.alive {
                busiest = states;
            }
        }
    });
    let at = match pauses {
        1 => "at the 1 exit handler boundary it paused at".to_string(),
        n => format!("at the {n} exit handler boundaries it paused at"),
    };
    match (pauses, ran) {
        (0, _) => Acts::Not("no exit handler was pending at exit: no boundary to pause at".into()),
        (_, Some(states)) => Acts::On(format!(
            "{}, let run ahead",
            crate::explain::thread_states(&states, "at the first pause with one runnable")
        )),
        (_, None) if busiest.alive == 0 => Acts::Not(format!("no other thread was alive {at}")),
        (_, None) => Acts::Not(format!(
            "{}; none was runnable, so none ran ahead",
            crate::explain::thread_states(&busiest, &at)
        )),
    }
}

/// Whether the slow teardown held a destroy call at exit while another thread was asleep or
/// runnable: the threads it let wake into what the call destroyed.
fn teardown_held(run_dir: &Path) -> Acts {
    let Ok(file) = std::fs::File::open(run_dir.join(vkexit_evidence::files::TIMELINE.name)) else {
        return Acts::Unproven("its run left no exit timeline".into());
    };
    let (mut watched, mut driver) = (false, false);
    let (mut calls, mut held, mut woke) = (0u64, 0u64, 0u64);
    let (mut first, mut busiest) = (None, timeline::ThreadStates::default());
    let _ = vkexit_evidence::read::records(file, |_, e: timeline::Entry| match e {
        timeline::Entry::TeardownWatched => watched = true,
        timeline::Entry::VulkanObject(o) if o.role() == Some(timeline::Role::Driver) => {
            driver = true
        }
        timeline::Entry::TeardownHold(h) => {
            calls += 1;
            if h.threads.runnable + h.threads.asleep > 0 {
                held += 1;
                woke += h.woke;
                first.get_or_insert(h.threads);
            }
            if h.threads.alive > busiest.alive {
                busiest = h.threads;
            }
        }
        _ => {}
    });
    if !watched {
        return match driver {
            true => Acts::Unproven(
                "the layer that reports destroy calls to vkexit was not in the process (a driver was)"
                    .into(),
            ),
            false => Acts::Not("it loaded no Vulkan driver: no device to tear down".into()),
        };
    }
    let calls_said = match calls {
        1 => "its 1 destroy call".to_string(),
        n => format!("its {n} destroy calls"),
    };
    match first {
        _ if calls == 0 => Acts::Not("it made no vkDestroy*/vkFree* call during exit".into()),
        None if busiest.alive == 0 => Acts::Not(format!(
            "no other thread was alive at {calls_said} during exit"
        )),
        None => Acts::Not(format!(
            "{}; none was asleep or runnable, so none could wake into them",
            crate::explain::thread_states(&busiest, &format!("at {calls_said} during exit"))
        )),
        Some(states) => Acts::On(format!(
            "held after {held} of {calls_said} during exit; at the first, {}; {woke} woke while held",
            crate::explain::thread_states(&states, "")
        )),
    }
}

/// The runtime libraries linked in the other order: for each cell whose natural exit ran the
/// library destructors of two runtime libraries neither of which needs the other, the order
/// the planner gives for that link order (`plan::fix_search::relinked_libraries`), run for the
/// cells that share it; any other cell is `not-applicable`, saying why.
fn library_link_order(
    request: &Request,
    base: &Invocation,
    cells: &mut [ExploredCell],
    start: &Instant,
    left_out: &mut Vec<String>,
    reporters: &mut [&mut dyn Reporter],
) -> Result<()> {
    let kind = Kind::Libraries;
    let mut groups: Vec<(ExitOrder, Vec<usize>)> = Vec::new();
    for (i, cell) in cells.iter_mut().enumerate() {
        let Some(dir) = cell
            .natural
            .artifacts
            .first()
            .filter(|_| cell.natural.runs > 0)
        else {
            continue;
        };
        let exit = observed_exit(Path::new(dir));
        let Some(order) = fix_search::relinked_libraries(&exit) else {
            let why = match exit.libraries.is_empty() {
                true => "no library destructor ran in its natural exit (it ended before the \
                         loader's finalization): no link order of library destructors to try"
                    .to_string(),
                false => "no two runtime libraries whose destructors ran at exit are \
                          independent of each other (fewer than two, or one needs the other): \
                          no link order changes their order"
                    .to_string(),
            };
            cell.perturbations.push(Perturbation {
                name: kind.name(),
                condition: kind.condition(),
                replay: kind.replay(),
                counts: Counts::default(),
                verdict: "not-applicable".into(),
                moved: vec![why],
                signals: Vec::new(),
                vuids: Vec::new(),
                artifacts: Vec::new(),
            });
            continue;
        };
        match groups.iter_mut().find(|(o, _)| *o == order) {
            Some((_, members)) => members.push(i),
            None => groups.push((order, vec![i])),
        }
    }
    for (n, (order, members)) in groups.into_iter().enumerate() {
        if run::interrupt::interrupted() {
            break;
        }
        if request.budget.is_some_and(|b| start.elapsed() >= b) {
            left_out.push(format!("{}:{order}", kind.name()));
            continue;
        }
        let only: Vec<PhaseCell> = members
            .iter()
            .map(|&i| (key(&cells[i].natural), cells[i].natural.emulation.clone()))
            .collect();
        let dir = format!("{}-{}", kind.dir(), n + 1);
        let results = phase(
            request,
            base,
            &dir,
            Some(order.clone()),
            None,
            Some(&only),
            reporters,
        )?;
        for &i in &members {
            if let Some(mut p) = perturbation(kind, &cells[i].natural, &results) {
                p.replay = format!("--exit-order {order}");
                p.condition = p
                    .condition
                    .replacen("(-lb -la for -la -lb)", &linked_as(&order), 1);
                cells[i].perturbations.push(p);
            }
        }
    }
    Ok(())
}

/// The link order `order`'s steps stand for: "(libctx.so before libpool.so)".
fn linked_as(order: &ExitOrder) -> String {
    let each: Vec<String> = order
        .0
        .iter()
        .filter_map(|s| match s {
            Step::Destructors { first, then } => Some(format!("{first} before {then}")),
            _ => None,
        })
        .collect();
    format!("({})", each.join(", "))
}

/// Where the natural exit fails: the changes of exit order the planner proposes for each cell
/// from the exit its natural run took (`plan::fix_search`), smallest first, tried in rounds
/// (each cell's next candidate; cells with the same one share a phase); a cell's first that
/// made every run pass is its fix. What was searched is said either way.
fn search_fixes(
    request: &Request,
    base: &Invocation,
    cells: &mut [ExploredCell],
    start: &Instant,
    left_out: &mut Vec<String>,
    reporters: &mut [&mut dyn Reporter],
) -> Result<()> {
    let failing = |c: &ExploredCell| {
        let n = &c.natural;
        n.runs > 0 && n.counts.passed() < n.runs && n.counts.error == 0
    };
    let mut searches: Vec<Search> = cells
        .iter()
        .map(|c| match failing(c) {
            true => Search::of(&c.natural),
            false => Search::default(),
        })
        .collect();
    let mut budget_ran_out = false;
    for round in 0.. {
        let open: Vec<usize> = (0..cells.len())
            .filter(|&i| failing(&cells[i]) && cells[i].fix.is_none())
            .filter(|&i| round < searches[i].candidates.len())
            .collect();
        if open.is_empty() || run::interrupt::interrupted() {
            break;
        }
        // The cells of this round, by the candidate each tries.
        let mut by_order: Vec<(ExitOrder, Vec<usize>)> = Vec::new();
        for &i in &open {
            let order = searches[i].candidates[round].order.clone();
            match by_order.iter_mut().find(|(o, _)| *o == order) {
                Some((_, members)) => members.push(i),
                None => by_order.push((order, vec![i])),
            }
        }
        for (order, members) in by_order {
            // A deployment order already run for every cell: its runs are the verification.
            let ran = |c: &ExploredCell| match order.0.as_slice() {
                [Step::Order(one)] => c
                    .perturbations
                    .iter()
                    .find(|p| p.name == one.name())
                    .cloned(),
                _ => None,
            };
            let results = match members.iter().all(|&i| ran(&cells[i]).is_some()) {
                true => None,
                false if request.budget.is_some_and(|b| start.elapsed() >= b) => {
                    budget_ran_out = true;
                    left_out.push(format!("fix:{order}"));
                    continue;
                }
                false => {
                    let only: Vec<PhaseCell> = members
                        .iter()
                        .map(|&i| (key(&cells[i].natural), cells[i].natural.emulation.clone()))
                        .collect();
                    // A file name for any step: `:` would split the paths of the variables
                    // that name files in it (VK_ADD_DRIVER_FILES, LD_PRELOAD).
                    let dir = format!("fix-{order}").replace([',', ':', '#', '='], "-");
                    Some(phase(
                        request,
                        base,
                        &dir,
                        Some(order.clone()),
                        None,
                        Some(&only),
                        reporters,
                    )?)
                }
            };
            for &i in &members {
                let tried = match &results {
                    Some(r) => perturbation(Kind::Fix, &cells[i].natural, r),
                    None => ran(&cells[i]),
                };
                let search = &mut searches[i];
                search.tried.push(order.to_string());
                if tried.as_ref().is_none_or(|p| p.verdict == "error") {
                    search.undecided = true;
                }
                if let Some(p) = tried.filter(|p| p.verdict == "pass") {
                    let natural = &cells[i].natural;
                    let (passed, runs) = (natural.counts.passed(), natural.counts.total());
                    let fix_passed = p.counts.passed();
                    if let Err(needed) = judge::explore::fix_beyond_chance(passed, runs, fix_passed)
                    {
                        // A flaky exit: these passes could be its own. Searched on, and if
                        // nothing else tells itself apart, not decided.
                        search.by_chance.get_or_insert(format!(
                            "`{order}` passed {fix_passed} of {fix_passed} run(s), but the natural \
                             exit passed {passed} of {runs} too: too few runs to tell the change \
                             from chance (explore again with --runs {needed} or more)"
                        ));
                        continue;
                    }
                    let (change, diff) = advice(&order, &cells[i].natural);
                    cells[i].fix = Some(Fix {
                        exit_order: order.to_string(),
                        change,
                        diff,
                        moved: p.moved,
                        counts: p.counts,
                        verdict: p.verdict,
                    });
                }
            }
        }
    }
    for (cell, search) in cells.iter_mut().zip(searches) {
        if !failing(cell) || cell.fix.is_some() {
            continue;
        }
        let cut_short = budget_ran_out && search.tried.len() < search.candidates.len();
        let undecided = search.undecided || run::interrupt::interrupted();
        cell.fix_undecided = undecided || cut_short || search.by_chance.is_some();
        cell.no_fix = Some(match undecided {
            true => "not decided: a change of exit order could not be tried (its runs did not start or were cut short)".into(),
            false if search.by_chance.is_some() => {
                format!("not decided: {}", search.by_chance.unwrap_or_default())
            }
            false if cut_short => format!(
                "not decided: the budget (--budget) ran out after {} of the {} {} this exit allows ({})",
                search.tried.len(),
                search.candidates.len(),
                match search.candidates.len() {
                    1 => "change of exit order",
                    _ => "changes of exit order",
                },
                match search.tried.is_empty() {
                    true => "none tried".to_string(),
                    false => format!("tried {}", search.tried.join("; ")),
                }
            ),
            false => no_fix_reason(&cell.natural, &search),
        });
    }
    Ok(())
}

/// One failing cell's search: the candidates planned from its natural exit, those tried, and
/// whether one could not be judged.
#[derive(Default)]
struct Search {
    candidates: Vec<fix_search::Candidate>,
    tried: Vec<String>,
    undecided: bool,
    /// A change that passed, of an exit that passes now and then, in too few runs to tell
    /// it from chance: what to say of it.
    by_chance: Option<String>,
}

impl Search {
    /// The candidates for the exit `natural`'s first kept run took.
    fn of(natural: &CellResult) -> Search {
        let exit = natural
            .artifacts
            .first()
            .map(|dir| observed_exit(Path::new(dir)))
            .unwrap_or_default();
        Search {
            candidates: fix_search::candidates(&exit),
            ..Search::default()
        }
    }
}

/// The exit a run took, from its timeline: the main process's handlers pending when exit
/// began (those run before, inside a `dlclose`, left out).
fn observed_exit(run_dir: &Path) -> fix_search::ObservedExit {
    let Ok(file) = std::fs::File::open(run_dir.join(vkexit_evidence::files::TIMELINE.name)) else {
        return fix_search::ObservedExit::default();
    };
    let mut main_pid: Option<i64> = None;
    let mut registered: Vec<fix_search::Registered> = Vec::new();
    let mut ran: std::collections::HashSet<u64> = Default::default();
    let mut exiting = false;
    let mut libraries: Vec<(String, Option<String>)> = Vec::new();
    let _ = vkexit_evidence::read::records(file, |stamp, e: timeline::Entry| {
        let pid = stamp.pid.unwrap_or(0);
        if main_pid.is_none() && matches!(e, timeline::Entry::PreloadLoaded(_)) {
            main_pid = Some(pid);
        }
        if main_pid != Some(pid) {
            return;
        }
        match e {
            timeline::Entry::HandlerRegistered(h) => registered.push(fix_search::Registered {
                id: h.id,
                destructor: h.kind() == Some(timeline::HandlerKind::CxaAtexit),
                symbol: h.symbol,
                class: h.class,
                phase: h.phase,
                registrant: h.registrant,
            }),
            timeline::Entry::HandlersRegistered(run) => {
                let last = run.last_id.min(run.first_id.saturating_add(100_000));
                for id in run.first_id..=last {
                    registered.push(fix_search::Registered {
                        id,
                        destructor: true,
                        symbol: None,
                        class: run.class.clone(),
                        phase: run.phase.clone(),
                        registrant: run.registrant.clone(),
                    });
                }
            }
            timeline::Entry::MainReturned(_) | timeline::Entry::ExitCalled(_) => exiting = true,
            timeline::Entry::HandlerStart(h) if !exiting => {
                ran.insert(h.id);
            }
            timeline::Entry::LibraryDestructorStart(d) => {
                if let Some(object) = d.object {
                    if !libraries.iter().any(|(o, _)| *o == object) {
                        libraries.push((object, d.class));
                    }
                }
            }
            _ => {}
        }
    });
    fix_search::ObservedExit::of(&registered, &ran).with_libraries(linked_libraries(&libraries))
}

/// The objects whose library destructors ran, in that order, each with the libraries it
/// needs as its file says (by the file names of the objects here that have those names).
fn linked_libraries(ran: &[(String, Option<String>)]) -> Vec<fix_search::Library> {
    let file_name = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    // Only the program's and the runtime libraries' files: what moves, and what they need (the
    // Vulkan stack's and the system's are large, LLVM's over 100 MB, and never move).
    let linking: Vec<Option<vkexit_elf::Linking>> = ran
        .iter()
        .map(|(path, class)| {
            let class = class.as_deref().and_then(Class::from_name);
            if !matches!(class, Some(Class::App | Class::Runtime)) {
                return None;
            }
            let bytes = std::fs::read(path).ok()?;
            vkexit_elf::linking(&bytes).ok()
        })
        .collect();
    // A needed name is a soname; the timeline names files.
    let file_of = |needed: &str| -> String {
        ran.iter()
            .zip(&linking)
            .find(|((path, _), l)| {
                file_name(path) == needed
                    || l.as_ref().and_then(|l| l.soname.as_deref()) == Some(needed)
            })
            .map_or_else(|| needed.to_string(), |((path, _), _)| file_name(path))
    };
    ran.iter()
        .zip(&linking)
        .map(|((path, class), l)| fix_search::Library {
            file: file_name(path),
            class: class
                .as_deref()
                .and_then(Class::from_name)
                .unwrap_or(Class::System),
            needs: l
                .iter()
                .flat_map(|l| l.needed.iter().map(|n| file_of(n)))
                .collect(),
        })
        .collect()
}

/// What to change in the source for `order`: each step's advice, in turn, with where in the
/// program's source each handler it names was registered (and each library's destructor is)
/// as the natural run's timeline and the program's debug info say; and the change as a diff
/// where a step swaps two registrations of one function.
fn advice(order: &ExitOrder, natural: &CellResult) -> (String, Option<String>) {
    let sources = natural
        .artifacts
        .first()
        .map(|dir| Sources::read(Path::new(dir)))
        .unwrap_or_default();
    let mut diff = None;
    let each: Vec<String> = order
        .0
        .iter()
        .map(|step| match step {
            Step::Before { first, then } => {
                let (a, b) = (sources.registration(first), sources.registration(then));
                if let (Some(a), Some(b), None) = (&a, &b, &diff) {
                    diff = source_lines::swap_diff(a, b);
                }
                let (a, b) = (a.map(|l| l.short()), b.map(|l| l.short()));
                step.advice_at(a.as_deref(), b.as_deref())
            }
            Step::Destructors { first, then } => {
                let (a, b) = (sources.destructor(first), sources.destructor(then));
                step.advice_at(a.as_deref(), b.as_deref())
            }
            Step::Order(_) => step.advice(),
        })
        .collect();
    (each.join("; then "), diff)
}

/// One registration: its id, its symbol, and the registering object with the call's return
/// address there.
struct Registration {
    id: u64,
    symbol: Option<String>,
    call: Option<(String, u64)>,
}

/// Where the natural run's exit handlers were registered and its library destructors are:
/// the main process's records, read back to the program's source through its debug info.
#[derive(Default)]
struct Sources {
    registrations: Vec<Registration>,
    /// Each library destructor that ran: its object's file and its offset there.
    destructors: Vec<(String, u64)>,
}

impl Sources {
    fn read(run_dir: &Path) -> Sources {
        let mut out = Sources::default();
        let Ok(file) = std::fs::File::open(run_dir.join(vkexit_evidence::files::TIMELINE.name))
        else {
            return out;
        };
        let hex = |text: Option<&str>| {
            text.and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
        };
        let mut main_pid = None;
        let _ = vkexit_evidence::read::records(file, |stamp, e: timeline::Entry| {
            let pid = stamp.pid.unwrap_or(0);
            if main_pid.is_none() && matches!(e, timeline::Entry::PreloadLoaded(_)) {
                main_pid = Some(pid);
            }
            if main_pid != Some(pid) {
                return;
            }
            match e {
                timeline::Entry::HandlerRegistered(h) => {
                    let call = h.call_object.zip(hex(h.call_offset.as_deref()));
                    out.registrations.push(Registration {
                        id: h.id,
                        symbol: h.symbol,
                        call,
                    });
                }
                timeline::Entry::LibraryDestructorStart(d) => {
                    if let Some(at) = d.object.zip(hex(d.function_offset.as_deref())) {
                        out.destructors.push(at);
                    }
                }
                _ => {}
            }
        });
        out
    }

    /// The source line of `handler`'s registration.
    fn registration(&self, handler: &Handler) -> Option<source_lines::SourceLine> {
        let found = self.registrations.iter().find(|r| match handler {
            Handler::Symbol(s) => r.symbol.as_deref() == Some(s.as_str()),
            Handler::Id(want) => r.id == *want,
        })?;
        let (object, offset) = found.call.as_ref()?;
        source_lines::Object::read(Path::new(object))?.call_at(*offset)
    }

    /// The library destructor of the object `file` that its own source defines (not the C++
    /// runtime's hook every object has), with its line: "`pool_fini`, pool.c:9".
    fn destructor(&self, file: &str) -> Option<String> {
        let (path, _) = self
            .destructors
            .iter()
            .find(|(path, _)| path.rsplit('/').next() == Some(file))?;
        let object = source_lines::Object::read(Path::new(path))?;
        self.destructors
            .iter()
            .filter(|(p, _)| p == path)
            .find_map(|(_, offset)| {
                let function = object.function_at(*offset)?;
                if function.starts_with("__") {
                    return None;
                }
                Some(match object.line_at(*offset) {
                    Some(line) => format!("`{function}`, {}", line.short()),
                    None => format!("`{function}`"),
                })
            })
    }
}

fn no_fix_reason(natural: &CellResult, search: &Search) -> String {
    let searched = match search.tried.len() {
        0 => "no change of exit order moves any of its exit handlers".to_string(),
        n => {
            let combined = search.tried.iter().filter(|t| t.contains(',')).count();
            format!(
                "no change of exit order made it pass: all {n} that move its exit handlers were \
                 tried ({} single, {combined} of two combined: {})",
                n - combined,
                search.tried.join("; ")
            )
        }
    };
    // A crash in the loader's finalization comes from a library destructor that runs after
    // every exit handler: no order of the handlers moves it.
    let story = natural
        .artifacts
        .first()
        .filter(|_| natural.counts.crash > 0)
        .map(|dir| crate::explain::Story::read(Path::new(dir)));
    let after_handlers = story.as_ref().and_then(|s| {
        let last = s.crash_in_loader_finalization()?;
        Some(match s.crashed_in_destructor() {
            Some(destructor) => format!("in {destructor}; the last exit handler to run: {last}"),
            None => format!("the last exit handler to run: {last}"),
        })
    });
    let what = match (natural.counts.crash > 0, natural.counts.vuid > 0, after_handlers) {
        (false, true, _) => "the validation errors do not depend on the order of the exit handlers: the objects are still alive when the device is destroyed, whatever runs first (release them before vkDestroyDevice)".to_string(),
        (_, _, Some(last)) => format!("the crash comes in the dynamic loader's finalization, after every exit handler ({last}): a library destructor (.fini_array, __attribute__((destructor))) uses what was already torn down, and no order of the exit handlers or of two runtime libraries' destructors helped; tear the device down before then (in an exit handler registered after vkCreateInstance, or before main returns)"),
        _ if natural.emulation != "none" => "nothing destroys the device before the driver's exit handler in any order vkexit can make: a teardown must exist and run before it (register one with atexit after vkCreateInstance)".to_string(),
        _ => "the failure does not depend on the order of the exit handlers (a use after free inside one handler, or teardown that never happens)".to_string(),
    };
    format!("{searched}: {what}")
}

/// Whether the perturbation named `name` acts on threads: what it says it did is their states,
/// not handlers moved.
fn acts_on_threads(name: &str) -> bool {
    name.starts_with("threads:") || name == Kind::SlowTeardown.name()
}

/// What a developer acts on: latent bugs in a passing exit, and the fix of a failing one.
fn findings(cell: &ExploredCell) -> Vec<String> {
    let natural = &cell.natural;
    let passes = natural.runs > 0 && natural.counts.passed() == natural.runs;
    let mut out = Vec::new();
    for p in cell.perturbations.iter().filter(|p| p.verdict == "error") {
        let why = p
            .moved
            .first()
            .map(String::as_str)
            .unwrap_or("a run could not be judged");
        out.push(format!("{} could not be judged: {why}", p.name));
    }
    let judged = |p: &&Perturbation| p.verdict != "error" && judge::explore::failed(&p.verdict);
    for p in cell.perturbations.iter().filter(judged) {
        let how = report::explore::outcome(&p.counts, &p.signals, &p.vuids);
        let moved = match (p.moved.is_empty(), acts_on_threads(&p.name)) {
            (true, _) => String::new(),
            (false, true) => format!("; {}", p.moved.join(", ")),
            (false, false) => format!("; moved: {}", p.moved.join(", ")),
        };
        out.push(match passes {
            true => format!(
                "passes here; {how} under {} ({}){moved} — replay: vkexit run {}",
                p.name, p.condition, p.replay
            ),
            false => format!("{} also fails: {how}{moved}", p.name),
        });
    }
    if let Some(fix) = &cell.fix {
        out.push(format!(
            "fix: {} (moved {}: pass {}/{}) — replay: vkexit run --exit-order {}",
            fix.change,
            fix.moved.join(", "),
            fix.counts.passed(),
            fix.counts.total(),
            fix.exit_order
        ));
    }
    if let Some(why) = &cell.no_fix {
        out.push(why.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn another_loader_order_is_said_by_the_first_object_that_moved_ahead() {
        let natural = names(&["app", "libpool.so", "libctx.so", "libvulkan.so.1"]);
        assert_eq!(order_change(&natural, &natural), None);
        assert_eq!(order_change(&natural, &[]), None);
        let now = names(&["app", "libctx.so", "libpool.so", "libvulkan.so.1"]);
        assert_eq!(
            order_change(&natural, &now).as_deref(),
            Some(
                "the loader ran library destructors in another order: 2 of 4 objects in another \
                 place (first: libctx.so before libpool.so)"
            )
        );
        let order = ExitOrder::parse("destructors:libctx.so:before:libpool.so").unwrap();
        assert_eq!(linked_as(&order), "(libctx.so before libpool.so)");
    }
}
