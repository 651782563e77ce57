//! Running: every run of every cell, each in its own process group and its own private
//! directory, `jobs` at a time. The stage spawns, supervises and reaps, reads back what each
//! run left, and tells its caller as [`Event`]s; it decides no verdict. The caller answers a
//! finished run with whether its directory is kept (and the record to keep with it) before
//! the worker that made it starts another.

pub(crate) mod capture;
pub mod cgroup;
pub(crate) mod cost;
pub(crate) mod hang;
pub(crate) mod interrupt;
pub(crate) mod observed;
pub(crate) mod reaper;
mod replay;
pub(crate) mod schedule;
pub(crate) mod shared_dir;
mod slot;
pub(crate) mod spawn;
pub mod summaries;
pub(crate) mod unix;

use crate::host::drivers::{self, DriverSelection};
use crate::host::layers::{self, Chain};
use crate::host::loader::{self, VulkanUse};
use crate::host::sanitizer::{self, Runtimes};
use crate::host::validation;
use crate::plan::{CaseCommand, Cell, Plan};
use crate::support::env::{self, BadVariable, Environment};
use crate::support::errors::{Error, Result};
use capture::Capture;
use hang::HangReport;
use observed::{ProcessTree, RunEvidence, Termination, Validation, CRASH_FILE, TIMELINE_FILE};
use schedule::Ended;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;
use summaries::{TegraSummary, TraceSummary};
use vkexit_evidence::files;

/// How the runs are made: what the run stage needs, and nothing a verdict is made by.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) runs: u32,
    pub(crate) jobs: usize,
    pub(crate) timeout: Duration,
    pub(crate) artifacts: PathBuf,
    /// The layers of every run.
    pub(crate) chain: Chain,
    /// Preload the crash report and exit timeline into every run.
    pub(crate) diagnostics: bool,
    /// Time every C++ static destructor in the exit timeline (slower exit).
    pub(crate) time_destructors: bool,
    /// The exit order every run takes (`module`, `linked,…`): the preload's
    /// `VKEXIT_EXIT_ORDER`.
    pub(crate) exit_order: Option<String>,
    /// The thread-timing seed of every run: the preload's `VKEXIT_CHAOS_SEED`.
    pub(crate) chaos_seed: Option<u64>,
    /// Pass every run's stdout and stderr through to vkexit's own as they come (`vkexit exec`).
    pub(crate) echo: bool,
}

/// What the run stage takes from vkexit's environment for the whole process, not for one
/// execution: the limit of its runs' cgroups (one parent cgroup per process), how it starts
/// runs, and whether it reaps orphans.
#[derive(Debug, Clone)]
pub(crate) struct Process {
    pub(crate) max_processes: std::result::Result<u64, BadVariable>,
    /// Ask to be the reaper of orphaned descendants.
    pub(crate) subreaper: bool,
    /// Start runs with `clone3` into their cgroup, where the kernel lets it.
    pub(crate) clone3: bool,
}

impl Process {
    pub(crate) fn of(env: &Environment) -> Process {
        Process {
            max_processes: env.max_processes.clone(),
            subreaper: env.subreaper,
            clone3: env.clone3,
        }
    }
}

static PROCESS: OnceLock<Process> = OnceLock::new();

/// How this process makes runs: as `prepare_process` was given it; else (code that makes runs
/// without a command, as unit tests do) as the environment says.
pub(crate) fn process() -> &'static Process {
    PROCESS.get_or_init(|| Process::of(Environment::get()))
}

/// A run the stage finished: everything it left, read back from its directory, and the
/// facts around it that its verdict depends on.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The cell's place in the plan.
    pub(crate) cell: usize,
    /// The run's number in its cell, from 0.
    pub(crate) index: u32,
    /// How the program ended and what the layers and the crash report left.
    pub(crate) evidence: RunEvidence,
    /// Faults around the run (a limit that could not be set, an orphan that would not die):
    /// what makes its verdict doubtful.
    pub(crate) faults: Vec<String>,
    /// The Vulkan loader and drivers the program loaded; `None` without the preload.
    pub(crate) vulkan: Option<VulkanUse>,
    /// The manifest copy that chooses the cell's driver, when it was needed and is missing:
    /// the driver was not chosen.
    pub(crate) unchosen_driver: Option<PathBuf>,
    /// The threads and stacks of a run that hung.
    pub(crate) hang: Option<HangReport>,
    /// A sanitizer's report on the run's stderr, in one line (`host::sanitizer::report`).
    pub(crate) sanitizer_report: Option<String>,
    /// The story's summary of the run's first crash (`explain::Story::summary`: the signal,
    /// where, when, the last exit handler that ran), when its crash report holds one.
    pub(crate) crash_story: Option<String>,
    pub(crate) duration: Duration,
    pub(crate) stdout_bytes: u64,
    pub(crate) stderr_bytes: u64,
    /// What the test's own runner said when it reported the run skipped (`plan::suites`'s
    /// rule for its kind, on its output and exit status).
    pub(crate) skipped_by_runner: Option<String>,
    /// The top-level names its processes wrote into the directory it shares with other runs
    /// (the preload's records), sorted; empty when it shares none.
    pub(crate) shared_writes: Vec<String>,
}

/// A kept run's directory, moved to its place under its cell.
#[derive(Debug)]
pub(crate) struct Stored {
    pub(crate) cell: usize,
    pub(crate) index: u32,
    /// Where it is now.
    pub(crate) dir: PathBuf,
    /// Why its output and record could not be written there, when they could not.
    pub(crate) failed: Option<String>,
}

/// What the run stage tells its caller, in the order it happens.
#[derive(Debug)]
pub(crate) enum Event {
    /// A run ended; its worker waits for the answer.
    Finished(Box<Finished>),
    /// A run the caller kept is where it will stay.
    Stored(Stored),
}

/// The caller's answer to an event.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    /// Whether more runs should start.
    pub(crate) flow: Flow,
    /// For [`Event::Finished`]: keep the run's directory, writing this as its `result.json`;
    /// `None` removes it.
    pub(crate) keep: Option<String>,
}

/// Whether more runs should start, as `execute`'s caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Flow {
    #[default]
    Go,
    /// No new run starts; those under way finish.
    Stop,
}

/// What a worker sends: a finished run with where to send the answer, or a stored one.
enum Message {
    Finished(Box<Finished>, mpsc::SyncSender<Option<String>>),
    Stored(Stored),
}

/// What a process that makes runs does before anything else: refuse a process limit that
/// would make every run an error, keep `process` for every run of this process, then take over
/// Ctrl-C, so that nothing may be left behind.
pub(crate) fn prepare_process(process: Process) -> Result<()> {
    process.max_processes.clone().map_err(Error::ProcessLimit)?;
    let _ = PROCESS.set(process);
    interrupt::install().map_err(Error::SignalHandlers)
}

/// Runs the plan. `on_event` sees each run finish and be stored, as it happens (nothing
/// per run is held here), and says whether more runs should start; a run starts only once
/// every run that finished before it has been answered, and a kept one stored. A run that
/// overlapped another writing into the directory they share is made again alone before it
/// is told (`schedule`). Gives what the cells wrote into the directories they share, and the
/// runs made again there.
pub(crate) fn execute(
    plan: &Plan,
    options: &Options,
    mut on_event: impl FnMut(&Cell, Event) -> Reply,
) -> Result<SharedDirs> {
    let _ = reaper::become_subreaper();
    let root = prepare_artifacts(plan, &options.artifacts)?;
    // Runs work in their own directory: every path they get is absolute.
    let mut chain = options.chain.clone();
    chain.write_manifests(&root.join(".layers"))?;
    write_driver_manifests(plan, &root);
    // Once per cell, before any run: the sanitizer runtimes its program must load first.
    let sanitizers: Vec<Runtimes> = plan
        .cells
        .iter()
        .map(|cell| sanitizer_runtimes(cell, options))
        .collect();
    // The same options with the paths resolved here: assembled by the Invocation only.
    let mut resolved = options.clone();
    (resolved.artifacts, resolved.chain) = (root, chain);
    let options = &resolved;
    // The runnable cells, each with what holds its runs apart; nothing per run is held
    // but its record.
    let runnable: Vec<usize> = (0..plan.cells.len())
        .filter(|&i| plan.cells[i].not_run.is_none())
        .collect();
    let total = runnable.len() * options.runs as usize;
    let rules = runnable
        .iter()
        .map(|&i| schedule::Rule::of(&plan.cells[i], options.diagnostics))
        .collect();
    let answers = Answers::new(schedule::Schedule::new(rules, options.runs));
    let watch = shared_dir::Watch::default();
    let (tx, rx) = mpsc::channel::<Message>();
    std::thread::scope(|scope| {
        for worker in 0..options.jobs.max(1).min(total.max(1)) {
            let tx = tx.clone();
            let (runnable, answers, sanitizers, watch) = (&runnable, &answers, &sanitizers, &watch);
            scope.spawn(move || {
                let mut slot = slot::Slot::new(&options.artifacts, worker);
                // A slot frees: the next run starts as soon as every finished run is
                // answered and the schedule lets one start, with no timer.
                while let Some(taken) = answers.next() {
                    let cell = runnable[taken.cell];
                    let index = taken.index;
                    let runtimes = &sanitizers[cell];
                    let (finished, keeping) =
                        run_one(plan, cell, index, options, runtimes, &mut slot);
                    let wrote = &finished.shared_writes;
                    if answers.ended(taken.cell, index, !wrote.is_empty()) == Ended::Again {
                        watch.made_again(&plan.cells[cell], cell);
                        slot.clean();
                        continue;
                    }
                    watch.counted(&plan.cells[cell], cell, wrote);
                    let (answer, keep) = mpsc::sync_channel(1);
                    answers.sent();
                    if tx
                        .send(Message::Finished(Box::new(finished), answer))
                        .is_err()
                    {
                        answers.done(Flow::Stop);
                        break;
                    }
                    // No answer (the caller is gone) removes the run.
                    match keep.recv().ok().flatten() {
                        Some(result) => {
                            let stored = keeping.store(&mut slot, cell, index, &result);
                            if tx.send(Message::Stored(stored)).is_err() {
                                break;
                            }
                        }
                        None => slot.clean(),
                    }
                }
            });
        }
        drop(tx);
        // Whatever ends this loop, no worker waits on it any longer.
        let _stop = answers.stop_on_drop();
        for message in rx {
            match message {
                Message::Finished(finished, answer) => {
                    let cell = finished.cell;
                    let reply = on_event(&plan.cells[cell], Event::Finished(finished));
                    let kept = reply.keep.is_some();
                    let _ = answer.send(reply.keep);
                    // A kept run is done once it is stored.
                    match kept {
                        true => answers.stop_if(reply.flow),
                        false => answers.done(reply.flow),
                    }
                }
                Message::Stored(stored) => {
                    let cell = stored.cell;
                    let reply = on_event(&plan.cells[cell], Event::Stored(stored));
                    answers.done(reply.flow);
                }
            }
        }
    });
    // Every run has ended: whatever is left of any of them goes now.
    reaper::sweep();
    slot::remove_all(&options.artifacts);
    cgroup::release();
    let (written, made_again) = watch.finish();
    Ok(SharedDirs {
        written,
        made_again,
    })
}

/// What runs did in the directories they share with other runs.
#[derive(Debug, Default)]
pub(crate) struct SharedDirs {
    /// The cells whose runs wrote there, in the plan's order.
    pub(crate) written: Vec<shared_dir::Written>,
    /// The runs made again alone, by directory.
    pub(crate) made_again: Vec<shared_dir::MadeAgain>,
}

/// The caller's answers that starting runs waits for: the runs sent by the workers that are
/// not done yet (answered, and stored when kept),
/// whether the caller said to stop, and the schedule of the runs left. A run starts only once
/// every finished run is done: without that, a worker could start its next run while the
/// record of its last, failing one was still on its way, and "no run starts after the first
/// failure" would hold only by luck, at any `-j`.
struct Answers {
    state: std::sync::Mutex<State>,
    answered: std::sync::Condvar,
}

struct State {
    undone: usize,
    stop: bool,
    schedule: schedule::Schedule,
}

/// A run a worker took; the schedule hears of its end when this drops.
struct Taken<'a> {
    answers: &'a Answers,
    /// The cell's place among the runnable cells.
    cell: usize,
    index: u32,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.answers.lock().schedule.release(self.cell, self.index);
        self.answers.answered.notify_all();
    }
}

impl Answers {
    fn new(schedule: schedule::Schedule) -> Answers {
        Answers {
            state: std::sync::Mutex::new(State {
                undone: 0,
                stop: false,
                schedule,
            }),
            answered: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until no run is undone and the schedule lets one start; that run, or `None`
    /// when no more runs start.
    fn next(&self) -> Option<Taken<'_>> {
        let mut state = self.lock();
        loop {
            if state.stop || interrupt::interrupted() || state.schedule.exhausted() {
                return None;
            }
            if state.undone == 0 {
                if let Some((cell, index)) = state.schedule.take() {
                    return Some(Taken {
                        answers: self,
                        cell,
                        index,
                    });
                }
            }
            state = self.answered.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Run `index` of the runnable `cell` ended, having written into its shared directory or
    /// not: whether it counts.
    fn ended(&self, cell: usize, index: u32, wrote: bool) -> Ended {
        let ended = self.lock().schedule.ended(cell, index, wrote);
        self.answered.notify_all();
        ended
    }

    /// A finished run is on its way.
    fn sent(&self) {
        self.lock().undone += 1;
    }

    /// The caller said to stop, or to go on, of a run not done yet.
    fn stop_if(&self, flow: Flow) {
        if flow == Flow::Stop {
            self.lock().stop = true;
            self.answered.notify_all();
        }
    }

    /// A run is done, or will never be.
    fn done(&self, flow: Flow) {
        let mut state = self.lock();
        state.undone = state.undone.saturating_sub(1);
        state.stop |= flow == Flow::Stop;
        self.answered.notify_all();
    }

    fn stop_on_drop(&self) -> impl Drop + '_ {
        struct Stop<'a>(&'a Answers);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.lock().stop = true;
                self.0.answered.notify_all();
            }
        }
        Stop(self)
    }
}

/// Creates the artifacts root and clears the evidence of earlier runs of the
/// same cells, so every path in the results is from this run.
fn prepare_artifacts(plan: &Plan, root: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    // Private when vkexit makes it; a directory the caller named is left as it is.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(|e| Error::io("cannot create the artifacts directory", root, e))?;
    let root = &root
        .canonicalize()
        .map_err(|e| Error::io("cannot resolve the artifacts directory", root, e))?;
    // Runs find their driver and preload through lists of paths that `:` separates.
    if root.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(Error::BadFlag {
            flag: "--artifacts",
            value: Some(root.display().to_string()),
            why: "a path with `:` cannot name a run's files in VK_ADD_DRIVER_FILES and \
                  LD_PRELOAD, which `:` separates: choose a directory without it"
                .into(),
        });
    }
    for cell in plan.cells.iter().filter(|c| c.not_run.is_none()) {
        let dir = root.join(cell.slug());
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| Error::io("cannot clear old evidence", &dir, e))?;
        }
    }
    let probe = root.join(".vkexit-write-test");
    std::fs::write(&probe, b"")
        .map_err(|e| Error::io("the artifacts directory is not writable", root, e))?;
    let _ = std::fs::remove_file(probe);
    Ok(root.clone())
}

/// What a worker holds of a finished run to keep it, if asked to.
struct Keeping {
    /// Its place under its cell.
    place: PathBuf,
    /// The command it ran, when it started.
    spec: Option<unix::CommandSpec>,
    stdout: Capture,
    stderr: Capture,
}

impl Keeping {
    /// Moves the run out of the slot to its place, with its command, replay script, output
    /// and `result`; evidence that cannot be written is said, for the caller to judge.
    fn store(self, slot: &mut slot::Slot, cell: usize, index: u32, result: &str) -> Stored {
        let from = slot.dir().to_path_buf();
        let dir = match slot.keep_as(&self.place) {
            Ok(()) => self.place,
            // Kept where it is: the next run makes a new slot.
            Err(_) => from,
        };
        if let Some(spec) = &self.spec {
            let spec = moved(spec, slot.dir(), &dir);
            let _ = write_command(&dir, &spec);
            let _ = replay::write(&dir, slot.dir(), &spec);
        }
        let failed = write_evidence(&dir, result, &self.stdout, &self.stderr)
            .err()
            .map(|e| e.to_string());
        Stored {
            cell,
            index,
            dir,
            failed,
        }
    }
}

fn run_one(
    plan: &Plan,
    cell_index: usize,
    index: u32,
    options: &Options,
    runtimes: &Runtimes,
    slot: &mut slot::Slot,
) -> (Finished, Keeping) {
    let cell = &plan.cells[cell_index];
    // Made in the worker's slot; moved here when it is kept.
    let place = options
        .artifacts
        .join(cell.slug())
        .join(format!("run-{index}"));
    let dir = slot.dir().to_path_buf();
    let validation = options.chain.validation.is_some();
    let mut hang: Option<HangReport> = None;
    let mut started = false;
    let outcome = match slot.prepare(validation) {
        Ok(()) => {
            let (made, prepared, cgroups) = slot.command(cell_index, |dir| {
                command_spec(plan, cell, dir, options, runtimes)
            });
            let mut on_hang = |pgid: libc::pid_t, stdout: &Capture| {
                hang = Some(crate::run::hang::capture(pgid, &stdout.to_lossy_string()));
            };
            let outcome = unix::run_prepared(
                made,
                prepared,
                cgroups,
                &limits(options, cell),
                &mut on_hang,
            );
            started = true;
            outcome
        }
        Err(e) => unix::Ended {
            termination: Termination::NotStarted {
                reason: format!("cannot prepare the run directory: {e}"),
            },
            stdout: Capture::new(0),
            stderr: Capture::new(0),
            duration: Duration::ZERO,
            faults: Vec::new(),
            pid: None,
            orphans: Vec::new(),
        },
    };
    let crashes = read_crashes(&dir);
    let crash_story = crash_story(&dir, &crashes);
    // Read by the scenario's set-up check, the sanitizer's report and the suite's skip rule.
    let stderr = outcome.stderr.to_lossy_string();
    let evidence = RunEvidence {
        termination: outcome.termination.clone(),
        validation: Validation::read(&dir, validation),
        trace: options.chain.trace.then(|| read_trace(&dir)),
        tegra: (options.chain.emulation != layers::Emulation::None).then(|| read_tegra(&dir)),
        tree: ProcessTree {
            main_pid: outcome.pid.map(i64::from),
            crashes,
            orphans: outcome.orphans,
        },
        // An external program's exit code 3 is its own; only a built-in scenario means this.
        setup_failure: match (&outcome.termination, cell.runtime.as_str()) {
            (_, "external") => None,
            (Termination::Exited { code }, _) => observed::setup_failure(*code, &stderr),
            _ => None,
        },
    };
    if let Some(report) = &hang {
        let json = serde_json::to_string_pretty(report).expect("a hang report serialises");
        let _ = std::fs::write(dir.join(files::HANG), json + "\n");
    }
    let copy = options
        .artifacts
        .join(DRIVERS_DIR)
        .join(drivers::selected_manifest_name(&cell.driver));
    let finished = Finished {
        cell: cell_index,
        index,
        evidence,
        faults: outcome.faults,
        vulkan: loader::read(&dir.join(TIMELINE_FILE)),
        unchosen_driver: (selection(cell) == DriverSelection::LoaderSelect && !copy.is_file())
            .then_some(copy),
        hang,
        sanitizer_report: sanitizer::report(&stderr),
        crash_story,
        duration: outcome.duration,
        stdout_bytes: outcome.stdout.total(),
        stderr_bytes: outcome.stderr.total(),
        skipped_by_runner: cell.props.skip.as_ref().and_then(|rule| {
            let code = match &outcome.termination {
                Termination::Exited { code } => Some(*code),
                _ => None,
            };
            rule.skipped(code, &outcome.stdout.to_lossy_string(), &stderr)
        }),
        shared_writes: match shared_dir::shared(cell) {
            Some(_) => shared_dir::read(&dir.join(TIMELINE_FILE)),
            None => Vec::new(),
        },
    };
    let keeping = Keeping {
        place,
        spec: started.then(|| slot.last_command().cloned()).flatten(),
        stdout: outcome.stdout,
        stderr: outcome.stderr,
    };
    (finished, keeping)
}

/// The command as it would run in `to`, where the run's directory was kept.
fn moved(spec: &unix::CommandSpec, from: &Path, to: &Path) -> unix::CommandSpec {
    let mut spec = spec.clone();
    spec.cwd = PathBuf::from(slot::moved(&spec.cwd.display().to_string(), from, to));
    for (_, value) in &mut spec.env_set {
        *value = value
            .split(':')
            .map(|part| slot::moved(part, from, to))
            .collect::<Vec<_>>()
            .join(":");
    }
    spec
}

/// How a run of `cell` chooses its driver: by the version of the loader vkexit found (the
/// one a program gets from `libvulkan.so.1`); a program with a loader of its own is checked
/// after the run (`judge::run::loader_use`).
pub(crate) fn selection(cell: &Cell) -> DriverSelection {
    DriverSelection::for_loader(
        cell.device
            .as_ref()
            .and_then(|d| d.loader_version.as_deref()),
    )
}

/// Where the manifest copies that [`DriverSelection::LoaderSelect`] names are written.
const DRIVERS_DIR: &str = ".drivers";

/// Writes the manifest copy of every runnable cell's driver, once, before any run. One that
/// cannot be written (a full disk) makes each run of its cells an `error`, as a run
/// directory that cannot be prepared does (`judge::run::loader_use`).
fn write_driver_manifests(plan: &Plan, root: &Path) {
    let dir = root.join(DRIVERS_DIR);
    for cell in plan.cells.iter().filter(|c| c.not_run.is_none()) {
        if selection(cell) == DriverSelection::LoaderSelect {
            let _ = drivers::write_selected_manifest(&cell.driver, &dir);
        }
    }
}

fn limits(options: &Options, cell: &Cell) -> unix::Limits {
    unix::Limits {
        timeout: cell.props.timeout.unwrap_or(options.timeout),
        term_grace: Duration::from_secs(2),
        pipe_grace: Duration::from_millis(500),
        capture_keep: crate::run::capture::DEFAULT_KEEP,
        echo: options.echo,
    }
}

/// The cell's and the run's directories are private (0700): a run's
/// evidence and settings are read and written by vkexit and its run only.
fn prepare_run_dir(dir: &Path, validation: bool) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir.join("home"))?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir.join("xdg-runtime"))?;
    if validation {
        let text = validation::settings_text(&dir.join(vkexit_evidence::files::VALIDATION_LOG));
        std::fs::write(dir.join(vkexit_evidence::files::LAYER_SETTINGS), text)?;
    }
    Ok(())
}

/// The environment of one run: the caller's, less anything that would
/// change what the layer reports, pointed into the run directory.
fn command_spec(
    plan: &Plan,
    cell: &Cell,
    dir: &Path,
    options: &Options,
    runtimes: &Runtimes,
) -> unix::CommandSpec {
    let chain = &options.chain;
    let dir_str = |p: &Path| dir.join(p).display().to_string();
    let mut env_set: Vec<(String, String)> = vec![
        ("HOME".into(), dir_str(Path::new("home"))),
        (
            "XDG_DATA_HOME".into(),
            dir_str(Path::new("home/.local/share")),
        ),
        ("XDG_CONFIG_HOME".into(), dir_str(Path::new("home/.config"))),
        ("XDG_RUNTIME_DIR".into(), dir_str(Path::new("xdg-runtime"))),
    ];
    env_set.extend(drivers::selection_env(
        &cell.driver,
        selection(cell),
        &options.artifacts.join(DRIVERS_DIR),
    ));
    env_set.extend(chain.env(dir));
    env_set.extend(cell.env.iter().cloned());
    if options.diagnostics {
        // The cell's own preload (`[env] LD_PRELOAD`) is the one the run would
        // have had without vkexit, ahead of an inherited one; both stay.
        let user = cell_var(cell, "LD_PRELOAD");
        env_set.extend(diagnostics_env(
            &plan.helpers.preload,
            dir,
            options.time_destructors,
            user.as_deref(),
            runtimes,
        ));
        if let Some(asan) = runtimes.asan_options(cell_var(cell, "ASAN_OPTIONS").as_deref()) {
            env_set.push(("ASAN_OPTIONS".into(), asan));
        }
        if let Some(order) = &options.exit_order {
            env_set.push((env::EXIT_ORDER.into(), order.clone()));
            if let Some(tunable) = crate::plan::exit_order::Order::loader_tunable(order) {
                // Added to the program's own tunables, which the loader reads in order.
                let value = match cell_var(cell, "GLIBC_TUNABLES") {
                    Some(own) if !own.is_empty() => format!("{own}:{tunable}"),
                    _ => tunable.to_string(),
                };
                env_set.push(("GLIBC_TUNABLES".into(), value));
            }
        }
        if let Some(seed) = options.chaos_seed {
            env_set.push((env::CHAOS_SEED.into(), seed.to_string()));
        }
        if let Some(shared) = shared_dir::shared(cell) {
            // As the program's getcwd names it; vkexit's own files (the resolved artifacts
            // root) are never its writes, even inside it.
            let shared = std::fs::canonicalize(shared).unwrap_or_else(|_| shared.to_path_buf());
            env_set.push((env::SHARED_DIR.into(), shared.display().to_string()));
            let skip = options.artifacts.display().to_string();
            env_set.push((env::SHARED_DIR_SKIP.into(), skip));
        }
    }
    let env_remove: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| {
            layers::is_inherited_layer_setting(k)
                || drivers::SELECTION_VARIABLES.contains(&k.as_str())
        })
        .filter(|k| !env_set.iter().any(|(s, _)| s == k))
        .chain(cell.props.env_remove.iter().cloned())
        .collect();
    let (program, args) = match &cell.command {
        CaseCommand::Scenario(binary) => {
            if let Some(refrt) = &plan.helpers.refrt {
                env_set.push((env::REFRT_LIB.into(), refrt.display().to_string()));
            }
            (
                binary.clone(),
                vec!["--runtime".into(), cell.runtime.clone().into()],
            )
        }
        CaseCommand::External(argv) => (PathBuf::from(&argv[0]), argv[1..].to_vec()),
    };
    unix::CommandSpec {
        program,
        args,
        cwd: cell.workdir.clone().unwrap_or_else(|| dir.to_path_buf()),
        env_set,
        env_remove,
    }
}

/// Prepares `dir` as a run directory and gives the command a run of `cell`
/// makes in it, as `execute` makes it: for timing the same runs outside
/// vkexit (`vkexit bench`). `options.chain` must have its manifests written.
pub(crate) fn command_in(
    plan: &Plan,
    cell: &Cell,
    dir: &Path,
    options: &Options,
) -> std::io::Result<unix::CommandSpec> {
    prepare_run_dir(dir, options.chain.validation.is_some())?;
    if selection(cell) == DriverSelection::LoaderSelect {
        drivers::write_selected_manifest(&cell.driver, &options.artifacts.join(DRIVERS_DIR))?;
    }
    let runtimes = sanitizer_runtimes(cell, options);
    Ok(command_spec(plan, cell, dir, options, &runtimes))
}

/// A variable as a run of `cell` gets it: the cell's own (`[env]`), else vkexit's.
fn cell_var(cell: &Cell, name: &str) -> Option<String> {
    cell.env
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(name).ok())
}

/// The sanitizer runtimes an external program of `cell` names, resolved with the library path
/// its runs get; none without the preload, which is what would come before them.
fn sanitizer_runtimes(cell: &Cell, options: &Options) -> Runtimes {
    let CaseCommand::External(argv) = &cell.command else {
        return Runtimes::default();
    };
    if !options.diagnostics || cell.not_run.is_some() {
        return Runtimes::default();
    }
    let program = Path::new(&argv[0]);
    let program = match program.as_os_str().as_encoded_bytes().contains(&b'/') {
        true if program.is_relative() => cell
            .workdir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default()
            .join(program),
        true => program.to_path_buf(),
        false => {
            let path =
                cell_var(cell, "PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
            match std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
            {
                Some(found) => found,
                None => return Runtimes::default(),
            }
        }
    };
    let library_path = cell_var(cell, "LD_LIBRARY_PATH").map(std::ffi::OsString::from);
    sanitizer::runtimes(&program, library_path.as_ref())
}

/// The preloaded crash report and exit timeline, ahead of `user`, the
/// preload the run would have had without vkexit (kept, in its own order):
/// vkexit's must see the program's own interposers as the program. Only the
/// sanitizer runtimes come before it, where the program would have them:
/// first (`host::sanitizer`).
fn diagnostics_env(
    preload: &Path,
    dir: &Path,
    time_destructors: bool,
    user: Option<&str>,
    runtimes: &Runtimes,
) -> Vec<(String, String)> {
    let preload = preload.display().to_string();
    let mut env: Vec<(String, String)> = vec![
        ("LD_PRELOAD".into(), runtimes.compose(&preload, user)),
        (
            vkexit_evidence::files::CRASH.var.into(),
            dir.join(CRASH_FILE).display().to_string(),
        ),
        (
            vkexit_evidence::files::TIMELINE.var.into(),
            dir.join(TIMELINE_FILE).display().to_string(),
        ),
    ];
    if !time_destructors {
        // Wrapping thousands of C++ static destructors costs tens of ms at
        // exit, enough to change the outcome of exit-time races.
        env.push((env::TIMELINE_HANDLERS.into(), "atexit".into()));
    }
    env
}

/// A missing or unreadable file reads as a layer that never loaded: the
/// classifier then refuses to call the run a pass.
fn read_trace(dir: &Path) -> TraceSummary {
    std::fs::File::open(dir.join(vkexit_evidence::files::TRACE.name))
        .and_then(summaries::read_trace)
        .unwrap_or_default()
}

/// No crash file is no crash: the handler writes only when one happens.
fn read_crashes(dir: &Path) -> summaries::CrashSummary {
    std::fs::File::open(dir.join(CRASH_FILE))
        .and_then(summaries::read_crashes)
        .unwrap_or_default()
}

/// The story of a run that crashed, in short: told from every evidence file of its directory,
/// read only when the crash report holds a crash (a passing run reads nothing more).
pub(super) fn crash_story(dir: &Path, crashes: &summaries::CrashSummary) -> Option<String> {
    if crashes.processes.is_empty() {
        return None;
    }
    crate::explain::Story::read(dir).summary()
}

fn read_tegra(dir: &Path) -> TegraSummary {
    std::fs::File::open(dir.join(vkexit_evidence::files::TEGRA.name))
        .and_then(summaries::read_tegra)
        .unwrap_or_default()
}

fn write_command(dir: &Path, spec: &unix::CommandSpec) -> std::io::Result<()> {
    let mut text = String::new();
    text.push_str(&format!("cwd: {}\n", spec.cwd.display()));
    for k in &spec.env_remove {
        text.push_str(&format!("unset {k}\n"));
    }
    for (k, v) in &spec.env_set {
        text.push_str(&format!("{k}={}\n", shell_quote(v)));
    }
    text.push_str(&shell_quote(&spec.program.display().to_string()));
    for a in &spec.args {
        text.push(' ');
        text.push_str(&shell_quote(&a.to_string_lossy()));
    }
    text.push('\n');
    std::fs::write(dir.join(files::COMMAND), text)
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A kept run's output and record beside its evidence.
fn write_evidence(
    dir: &Path,
    result: &str,
    stdout: &Capture,
    stderr: &Capture,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    stdout.write_to(std::io::BufWriter::new(std::fs::File::create(
        dir.join(files::STDOUT),
    )?))?;
    stderr.write_to(std::io::BufWriter::new(std::fs::File::create(
        dir.join(files::STDERR),
    )?))?;
    crate::support::output::write_atomically(&dir.join(files::RESULT), result.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quoting_for_a_replayable_command_line() {
        assert_eq!(shell_quote("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
