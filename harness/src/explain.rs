//! The story of one run: the exit timeline (`timeline.jsonl`, from the
//! preloaded library), the Vulkan lifetimes (`trace.jsonl`), the emulated
//! driver (`tegra.jsonl`) and the crash report (`crash.jsonl`), merged by
//! their common CLOCK_MONOTONIC stamps into one ordered list.
//!
//! Every reader here is for untrusted text: a line that is not a JSON object
//! is skipped, a missing file is simply a missing source.

use std::collections::BTreeMap;
use std::path::Path;
use vkexit_evidence::read::{self, Stamp};
use vkexit_evidence::timeline::HandlerKind;
use vkexit_evidence::{crash, files, tegra, timeline, trace};

/// At most this many records are read from one file.
const MAX_RECORDS: usize = 200_000;
/// At most this many exit handlers are taken from the ranges of untimed C++
/// static destructors, all records together (lavapipe registers ~3,700): a
/// record may claim any range, and a failing run's summary must stay quick.
const MAX_RANGED_HANDLERS: u64 = 1_000_000;

/// One line of the story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// CLOCK_MONOTONIC, in nanoseconds, as the writer stamped it.
    pub(crate) t_ns: u64,
    /// The file it comes from, shortened: `exit`, `trace`, `tegra` or `crash`.
    pub(crate) source: &'static str,
    /// What happened, as a sentence.
    pub(crate) text: String,
    /// C++ static destructors come by the thousand: consecutive events of
    /// one group (what happened, registrant) are shown as one line.
    group: Option<Group>,
    /// The process and thread that wrote it: a lane of the picture.
    pub(crate) pid: i64,
    pub(crate) thread: String,
    pub(crate) kind: Kind,
}

/// What kind of thing an event is, for the picture's marks and colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The process starts, main starts or returns, exit is called, the loader finalizes.
    Process,
    /// An exit handler registered.
    HandlerRegistered,
    /// An exit handler runs or returns.
    HandlerRan,
    /// Many C++ static destructors of one library, registered or run.
    Destructors,
    /// dlopen or dlclose.
    Library,
    /// A VkInstance or VkDevice created or destroyed, an object left alive.
    Vulkan,
    /// The emulated driver's own doings.
    Driver,
    /// A layer's report: a call on a dead handle, a validation message.
    Report,
    /// The crash.
    Crash,
    /// A thread still running when the run's timeout came (from `hang.json`).
    Hang,
}

/// One line of the story as told: consecutive events of one group folded into one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub(crate) t_ns: u64,
    /// The last folded event's time (`t_ns` for a single event).
    pub(crate) end_ns: u64,
    pub(crate) source: &'static str,
    pub(crate) text: String,
    pub(crate) pid: i64,
    pub(crate) thread: String,
    pub(crate) kind: Kind,
    /// Events folded into this line: more than 1 for a run of static destructors.
    pub(crate) folded: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    /// "registered" or "ran".
    what: &'static str,
    registrant: String,
    id: u64,
}

/// An exit handler: every process of a run numbers its own from 1.
type HandlerKey = (i64, u64);

/// What is known of one exit handler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Handler {
    /// As the record said: a [`HandlerKind`], or a newer writer's.
    kind: String,
    /// One of a run of C++ static destructors registered together, not timed one by one.
    untimed: bool,
    registrant: String,
    symbol: String,
    started: bool,
    ended: bool,
}

impl Handler {
    fn describe(&self, id: u64) -> String {
        let symbol = if self.symbol.is_empty() {
            String::new()
        } else {
            format!(" {}", self.symbol)
        };
        format!(
            "exit handler #{id}{symbol} ({}, registered by {})",
            kind_name(&self.kind),
            registrant_name(&self.registrant)
        )
    }
}

fn kind_name(kind: &str) -> &str {
    match HandlerKind::from_wire(kind) {
        Some(HandlerKind::Atexit) => "atexit",
        Some(HandlerKind::CxaAtexit) => "C++ static destructor",
        None => kind,
    }
}

impl Handler {
    /// A C++ static destructor timed on its own: one of a group of lines.
    fn is_timed_destructor(&self) -> bool {
        !self.untimed && self.kind == HandlerKind::CxaAtexit.as_str()
    }
}

/// "the library destructor #4 of libpool.so (`pool_fini`)", the function from the record or,
/// where the dynamic symbol table does not name it, from the object's own symbol table.
fn describe_destructor(d: &timeline::LibraryDestructor) -> String {
    let object = d.object.as_deref().unwrap_or("");
    let symbol = d.symbol.clone().or_else(|| {
        let offset = d.function_offset.as_deref()?.trim_start_matches("0x");
        let offset = u64::from_str_radix(offset, 16).ok()?;
        let file = crate::host::source_lines::Object::read(std::path::Path::new(object))?;
        file.function_at(offset).map(str::to_string)
    });
    let name = match object {
        "" => "an unknown object".to_string(),
        path => registrant_name(path),
    };
    match symbol {
        Some(symbol) => format!("the library destructor #{} of {name} (`{symbol}`)", d.id),
        None => format!("the library destructor #{} of {name}", d.id),
    }
}

/// A registrant's file name, and the layer it is when it is one: a layer's
/// own exit handlers are where a layer's crash at exit happens.
fn registrant_name(path: &str) -> String {
    match crate::host::layers::layer_of(path) {
        Some(layer) if !layer.starts_with("lib") => {
            format!("{}, the {layer} layer", short(path))
        }
        Some(_) => format!("{}, a layer", short(path)),
        None => short(path).to_string(),
    }
}

/// The file name of a path, for reading; "?" when unknown.
fn short(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some("") | None => "?",
        Some(name) => name,
    }
}

/// A run's evidence, read from its directory.
#[derive(Debug, Default)]
pub struct Story {
    pub(crate) events: Vec<Event>,
    handlers: BTreeMap<HandlerKey, Handler>,
    /// The exit handler that started last, in time, per process.
    last_started: BTreeMap<i64, u64>,
    /// The process vkexit started: the first whose preloaded library loaded.
    main_pid: Option<(u64, i64)>,
    /// The first crash signal, in time: the headline, whatever came after it.
    crash: Option<(Stamp, crash::Crash)>,
    /// The crash signals after the first, in time (an abort in the C library once a worker
    /// thread's fault corrupted the heap, a child's crash).
    later_crashes: Vec<(Stamp, crash::Crash)>,
    backtrace: Vec<String>,
    /// Why the crash report holds no frames, as its writer said.
    backtrace_error: Option<String>,
    main_returned: bool,
    /// When the dynamic loader's finalization began, per process.
    loader_finalization: BTreeMap<i64, u64>,
    /// The library destructor last started, per process, and whether it returned.
    last_destructor: BTreeMap<i64, (timeline::LibraryDestructor, bool)>,
    /// Handlers taken from ranges so far, against `MAX_RANGED_HANDLERS`.
    ranged_handlers: u64,
    /// The evidence files that are there but could not be read, each with why: a story
    /// told without them must say so, not that the run left no such evidence.
    unreadable: Vec<String>,
}

impl Story {
    /// Reads the evidence files a run directory holds; a missing file or a bad line is
    /// left out, never an error. A file that is there but cannot be read, or holds not one
    /// record, is named in the story.
    pub fn read(dir: &Path) -> Story {
        let mut story = Story::default();
        story.read_file::<timeline::Entry>(dir, files::TIMELINE, Story::add_timeline);
        story.read_file::<trace::Entry>(dir, files::TRACE, Story::add_trace);
        story.read_file::<tegra::Entry>(dir, files::TEGRA, Story::add_tegra);
        story.read_file::<crash::Entry>(dir, files::CRASH, Story::add_crash);
        // Stable: records of one source keep their file order at equal times.
        story.events.sort_by_key(|e| e.t_ns);
        story
    }

    /// Adds the first `MAX_RECORDS` records of one evidence file; a missing file is simply a
    /// missing source.
    fn read_file<E: read::Entry>(
        &mut self,
        dir: &Path,
        file: files::EvidenceFile,
        mut add: impl FnMut(&mut Story, Stamp, E),
    ) {
        let f = match std::fs::File::open(dir.join(file.name)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.unreadable.push(format!("{}: {e}", file.name));
                return;
            }
        };
        let mut seen = 0u64;
        let read = read::records(f, |stamp, record: E| {
            seen += 1;
            if seen <= MAX_RECORDS as u64 {
                add(self, stamp, record);
            }
        });
        match read {
            Err(e) => self.unreadable.push(format!(
                "{}: read failed after {seen} record(s): {e}",
                file.name
            )),
            Ok(bad) if seen == 0 && bad > 0 => self.unreadable.push(format!(
                "{}: {bad} line(s), none of them a record this vkexit reads",
                file.name
            )),
            Ok(_) => {}
        }
    }

    fn push(&mut self, stamp: &Stamp, source: &'static str, kind: Kind, text: String) {
        self.push_grouped(stamp, source, kind, text, None);
    }

    fn push_grouped(
        &mut self,
        stamp: &Stamp,
        source: &'static str,
        kind: Kind,
        text: String,
        group: Option<Group>,
    ) {
        self.events.push(Event {
            t_ns: stamp.t_ns,
            source,
            text,
            group,
            pid: stamp.pid.unwrap_or(0),
            thread: stamp.thread.clone().unwrap_or_default(),
            kind,
        });
    }

    /// Groups only timed C++ static destructors: `atexit` handlers stay one a line.
    fn group_of(&self, key: HandlerKey, what: &'static str) -> Option<Group> {
        let id = key.1;
        let h = self.handlers.get(&key)?;
        h.is_timed_destructor().then(|| Group {
            what,
            registrant: short(&h.registrant).to_string(),
            id,
        })
    }

    fn add_timeline(&mut self, stamp: Stamp, record: timeline::Entry) {
        const SOURCE: &str = "exit";
        let pid = stamp.pid.unwrap_or(0);
        let thread = stamp.thread.as_deref().unwrap_or("");
        let (kind, text) = match record {
            timeline::Entry::PreloadLoaded(loaded) => {
                if self.main_pid.is_none_or(|(t, _)| stamp.t_ns < t) {
                    self.main_pid = Some((stamp.t_ns, pid));
                }
                let text = format!(
                    "process starts: {} (pid {pid})",
                    loaded.program.unwrap_or_default()
                );
                (Kind::Process, text)
            }
            timeline::Entry::MainStart(_) => (Kind::Process, "main starts".to_string()),
            timeline::Entry::MainReturned(returned) => {
                self.main_returned = true;
                (Kind::Process, format!("main returned {}", returned.status))
            }
            timeline::Entry::ExitCalled(called) => {
                let text = format!(
                    "exit({}) called from {} on thread {thread}",
                    called.status,
                    short(called.caller.as_deref().unwrap_or(""))
                );
                (Kind::Process, text)
            }
            timeline::Entry::HandlerRegistered(registered) => {
                let id = registered.id;
                let h = Handler {
                    kind: registered.kind,
                    registrant: registered.registrant.unwrap_or_default(),
                    symbol: registered.symbol.unwrap_or_default(),
                    ..Handler::default()
                };
                let text = format!("{} registered", h.describe(id));
                self.handlers.insert((pid, id), h);
                let group = self.group_of((pid, id), "registered");
                self.push_grouped(&stamp, SOURCE, Kind::HandlerRegistered, text, group);
                return;
            }
            timeline::Entry::HandlersRegistered(run) => {
                let registrant = run.registrant.unwrap_or_default();
                let (first, last) = (run.first_id, run.last_id);
                let room = MAX_RANGED_HANDLERS.saturating_sub(self.ranged_handlers);
                let end = last.min(first.saturating_add(room.min(100_000)));
                self.ranged_handlers = self
                    .ranged_handlers
                    .saturating_add(end.saturating_sub(first).saturating_add(1));
                for id in (first..=end).take(room as usize) {
                    self.handlers.insert(
                        (pid, id),
                        Handler {
                            kind: HandlerKind::CxaAtexit.as_str().to_string(),
                            untimed: true,
                            registrant: registrant.clone(),
                            ..Handler::default()
                        },
                    );
                }
                let text = format!(
                    "exit handlers #{first}–#{last} registered: {} C++ static destructors of {} (not timed)",
                    run.count,
                    registrant_name(&registrant)
                );
                // Written when the run ended: placed where it began.
                self.events.push(Event {
                    t_ns: run.first_t_ns,
                    source: SOURCE,
                    text,
                    group: None,
                    pid,
                    thread: thread.to_string(),
                    kind: Kind::Destructors,
                });
                return;
            }
            timeline::Entry::HandlerStart(handler) => {
                self.handler_ran(&stamp, pid, handler.id, true);
                return;
            }
            timeline::Entry::HandlerEnd(handler) => {
                self.handler_ran(&stamp, pid, handler.id, false);
                return;
            }
            timeline::Entry::DlFiniStart => (
                {
                    self.loader_finalization.entry(pid).or_insert(stamp.t_ns);
                    Kind::Process
                },
                "loader finalization starts (.fini_array and __attribute__((destructor)) run now)"
                    .into(),
            ),
            timeline::Entry::DlFiniEnd => (Kind::Process, "loader finalization done".into()),
            timeline::Entry::LibraryDestructorStart(d) => {
                self.last_destructor.insert(pid, (d.clone(), false));
                let object = d
                    .object
                    .as_deref()
                    .map_or_else(|| "an unknown object".to_string(), registrant_name);
                let function = match &d.symbol {
                    Some(symbol) => format!("`{symbol}`"),
                    None => "a function the symbol table does not name".into(),
                };
                let moved = match &d.moved_before {
                    Some(then) => format!(", moved before {then}'s"),
                    None => String::new(),
                };
                (
                    Kind::HandlerRan,
                    format!("library destructor #{} of {object} runs: {function}{moved}", d.id),
                )
            }
            timeline::Entry::LibraryDestructorEnd(d) => (
                {
                    if let Some(last) = self.last_destructor.get_mut(&pid) {
                        last.1 = true;
                    }
                    Kind::HandlerRan
                },
                format!("library destructor #{} returned", d.id),
            ),
            timeline::Entry::Dlopen(dlopen) => match dlopen.path.as_deref().unwrap_or("") {
                "" => (
                    Kind::Library,
                    format!("dlopen of the program itself on thread {thread}"),
                ),
                path => (Kind::Library, format!("dlopen {path} on thread {thread}")),
            },
            timeline::Entry::Dlclose(dlclose) => match dlclose.path.as_str() {
                "" => (
                    Kind::Library,
                    "dlclose of the program's own handle".to_string(),
                ),
                path => (Kind::Library, format!("dlclose {path}")),
            },
            timeline::Entry::VulkanObject(_) => return,
            timeline::Entry::SharedWrite(w) => (
                Kind::Process,
                format!("writes {} in the shared working directory", w.name),
            ),
            timeline::Entry::ExitReordered(r) => (Kind::Process, reordered_text(&r)),
            timeline::Entry::ChaosPause(p) => (
                Kind::Process,
                format!(
                    "thread timing (seed {}): before exit handler #{}, {}; waited {:.3} ms for the runnable ones",
                    p.chaos_seed,
                    p.before_id,
                    chaos_threads(&p),
                    p.waited_ns as f64 / 1e6
                ),
            ),
            timeline::Entry::TeardownHold(h) => (
                Kind::Process,
                format!(
                    "slow teardown: {} returned; {}; held {:.3} ms, {} woke",
                    h.call,
                    thread_states(&h.threads, ""),
                    h.held_ns as f64 / 1e6,
                    h.woke
                ),
            ),
            timeline::Entry::TeardownWatched => return,
        };
        self.push(&stamp, SOURCE, kind, text);
    }

    fn handler_ran(&mut self, stamp: &Stamp, pid: i64, id: u64, start: bool) {
        let h = self.handlers.entry((pid, id)).or_default();
        if start {
            h.started = true;
            self.last_started.insert(pid, id);
        } else {
            h.ended = true;
        }
        let what = if start { "runs" } else { "returned" };
        let text = format!("{} {what}", h.describe(id));
        let group = self.group_of((pid, id), "ran");
        self.push_grouped(stamp, "exit", Kind::HandlerRan, text, group);
    }

    fn add_trace(&mut self, stamp: Stamp, record: trace::Entry) {
        let thread = stamp.thread.as_deref().unwrap_or("");
        let (kind, text) = match record {
            trace::Entry::Loaded(_) => (Kind::Library, "trace layer in the chain".into()),
            trace::Entry::Create(object) | trace::Entry::Destroy(object)
                if matches!(object.ty.as_str(), "VkInstance" | "VkDevice") =>
            {
                let text = format!(
                    "{} {} {} on thread {thread}",
                    object.call, object.ty, object.handle
                );
                (Kind::Vulkan, text)
            }
            trace::Entry::DeadHandle(dead) => {
                (Kind::Report, format!("{} (thread {thread})", dead.message))
            }
            trace::Entry::Orphaned(orphan) => {
                let text = format!(
                    "{} {} still alive at vkDestroyDevice",
                    orphan.ty, orphan.handle
                );
                (Kind::Vulkan, text)
            }
            trace::Entry::ExitHandlerStart(start) => {
                let text = format!("trace layer's exit handler: {} objects alive", start.live);
                (Kind::HandlerRan, text)
            }
            trace::Entry::Create(_)
            | trace::Entry::Destroy(_)
            | trace::Entry::Alive(_)
            | trace::Entry::ExitHandlerEnd => return,
        };
        self.push(&stamp, "trace", kind, text);
    }

    fn add_tegra(&mut self, stamp: Stamp, record: tegra::Entry) {
        let text = match record {
            tegra::Entry::Loaded(loaded) => {
                format!("tegra-exit layer in the chain ({} mode)", loaded.mode)
            }
            tegra::Entry::RegionMapped(region) => {
                format!("driver region mapped {}–{}", region.start, region.end)
            }
            tegra::Entry::WorkerStarted(worker) => format!(
                "driver worker {} started for VkDevice {}",
                worker.worker, worker.device
            ),
            tegra::Entry::WorkerStopped(worker) => {
                format!("driver worker {} stopped", worker.worker)
            }
            tegra::Entry::ExitHandlerStart(start) => format!(
                "driver exit handler runs with {} live worker(s)",
                start.live_workers
            ),
            tegra::Entry::RegionUnmapped(region) => {
                format!("driver region {}–{} unmapped", region.start, region.end)
            }
            tegra::Entry::Warning(_)
            | tegra::Entry::WaitingForFault
            | tegra::Entry::ExitHandlerEnd => return,
        };
        self.push(&stamp, "tegra", Kind::Driver, text);
    }

    fn add_crash(&mut self, stamp: Stamp, record: crash::Entry) {
        match record {
            crash::Entry::Crash(crash) => {
                let text = format!("CRASH {}", crash_line(&stamp, &crash));
                self.push(&stamp, "crash", Kind::Crash, text);
                let this = (stamp, *crash);
                match self.crash.take() {
                    None => self.crash = Some(this),
                    Some(first) if first.0.t_ns <= this.0.t_ns => {
                        self.crash = Some(first);
                        self.later_crashes.push(this);
                    }
                    Some(first) => {
                        self.crash = Some(this);
                        self.later_crashes.push(first);
                    }
                }
                self.later_crashes.sort_by_key(|(stamp, _)| stamp.t_ns);
            }
            crash::Entry::Backtrace(backtrace) if self.backtrace.is_empty() => {
                self.backtrace = frames(&backtrace);
                self.backtrace_error = backtrace.error.filter(|_| self.backtrace.is_empty());
            }
            crash::Entry::Backtrace(_) => {}
            crash::Entry::Fatal(_) => {}
        }
    }
    /// The short form for a failing run's summary: signal, thread, region of
    /// the pc, when, and the last exit handler that ran.
    pub fn summary(&self) -> Option<String> {
        let (stamp, crash) = self.crash.as_ref()?;
        let mut text = crash_line(stamp, crash);
        let pid = stamp.pid.unwrap_or(0);
        if self.main_pid.is_some_and(|(_, main)| main != pid) {
            text.push_str(&format!(", in process {pid}"));
            if let Some(cmdline) = &crash.cmdline {
                text.push_str(&format!(" ({cmdline})"));
            }
        }
        if let Some(&id) = self.last_started.get(&pid) {
            let h = &self.handlers[&(pid, id)];
            text.push_str(&format!("; last exit handler to run: {}", h.describe(id)));
        }
        if let Some(destructor) = self.crashed_in_destructor() {
            text.push_str(&format!("; in {destructor}"));
        }
        if !self.later_crashes.is_empty() {
            text.push_str(&format!("; then {}", self.later().join(", ")));
        }
        Some(text)
    }

    /// When the first crash came during exit, in the dynamic loader's finalization (after
    /// every exit handler: `.fini_array`, `__attribute__((destructor))`), which no order of the
    /// exit handlers moves: the last exit handler that ran before it, described, or "none".
    pub fn crash_in_loader_finalization(&self) -> Option<String> {
        let (stamp, crash) = self.crash.as_ref()?;
        if crash.exiting != Some(true) {
            return None;
        }
        let pid = stamp.pid.unwrap_or(0);
        let began = *self.loader_finalization.get(&pid)?;
        if stamp.t_ns < began {
            return None;
        }
        Some(match self.last_started.get(&pid) {
            Some(&id) => self.handlers[&(pid, id)].describe(id),
            None => "none".to_string(),
        })
    }

    /// The library destructor the first crash came in (started, not returned, in the crashing
    /// process, during the loader's finalization), described.
    pub fn crashed_in_destructor(&self) -> Option<String> {
        let (stamp, _) = self.crash.as_ref()?;
        let pid = stamp.pid.unwrap_or(0);
        let began = *self.loader_finalization.get(&pid)?;
        let (destructor, returned) = self.last_destructor.get(&pid)?;
        (stamp.t_ns >= began && !returned).then(|| describe_destructor(destructor))
    }

    /// The crash signals after the first, in short: "SIGABRT on thread main in libc.so.6"
    /// (with its process when it is another).
    pub(crate) fn later(&self) -> Vec<String> {
        let first_pid = self.crash.as_ref().and_then(|(stamp, _)| stamp.pid);
        self.later_crashes
            .iter()
            .map(|(stamp, crash)| {
                let mut text = short_crash_line(stamp, crash);
                if stamp.pid != first_pid {
                    text.push_str(&format!(" (process {})", stamp.pid.unwrap_or(0)));
                }
                text
            })
            .collect()
    }

    /// The first crash's headline, when the run crashed.
    pub(crate) fn first_crash(&self) -> Option<String> {
        let (stamp, crash) = self.crash.as_ref()?;
        Some(crash_line(stamp, crash))
    }

    /// Handlers registered that never ran: what the crash cut off. C++
    /// static destructors are counted per object.
    fn never_ran(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut destructors: BTreeMap<&str, u64> = BTreeMap::new();
        let crashed = self
            .crash
            .as_ref()
            .and_then(|(stamp, _)| stamp.pid)
            .unwrap_or(0);
        for ((_, id), h) in self
            .handlers
            .iter()
            .filter(|((pid, _), _)| *pid == crashed)
            .filter(|(_, h)| !h.started && !h.registrant.is_empty() && !h.untimed)
        {
            if h.is_timed_destructor() {
                *destructors.entry(short(&h.registrant)).or_insert(0) += 1;
            } else {
                lines.push(h.describe(*id));
            }
        }
        for (object, n) in destructors {
            lines.push(format!("{n} C++ static destructor(s) of {object}"));
        }
        lines
    }

    /// The events as the story tells them: a run of C++ static destructors of one library
    /// is one line.
    pub(crate) fn lines(&self) -> Vec<Line> {
        let mut lines = Vec::new();
        let mut i = 0;
        while i < self.events.len() {
            let e = &self.events[i];
            let run = self.events[i..]
                .iter()
                .take_while(|n| same_group(&e.group, &n.group))
                .count()
                .max(1);
            let text = match (&e.group, run) {
                (Some(g), n) if n > 1 => {
                    let last = self.events[i + n - 1].group.as_ref().map_or(g.id, |l| l.id);
                    grouped_line(g, last, n)
                }
                _ => e.text.clone(),
            };
            lines.push(Line {
                t_ns: e.t_ns,
                end_ns: self.events[i + run - 1].t_ns,
                source: e.source,
                text,
                pid: e.pid,
                thread: e.thread.clone(),
                kind: if run > 1 { Kind::Destructors } else { e.kind },
                folded: run,
            });
            i += run;
        }
        lines
    }

    /// The exit handlers a crash cut off, one line each (destructors counted per library);
    /// empty without a crash.
    pub(crate) fn cut_off(&self) -> Vec<String> {
        match self.crash {
            Some(_) => self.never_ran(),
            None => Vec::new(),
        }
    }

    /// The process and thread that crashed, with the library of the pc.
    pub(crate) fn crash_lane(&self) -> Option<(i64, String)> {
        let (stamp, _) = self.crash.as_ref()?;
        Some((
            stamp.pid.unwrap_or(0),
            stamp.thread.clone().unwrap_or_default(),
        ))
    }

    /// The whole story, one event a line with its time since the first event, then the
    /// exit handlers a crash cut off: what `vkexit explain RUN_DIR` prints.
    pub fn render(&self) -> String {
        let mut out: String = self
            .unreadable
            .iter()
            .map(|why| format!("could not read {why}\n"))
            .collect();
        let Some(first) = self.events.first() else {
            if out.is_empty() {
                return "no timeline, trace, driver or crash evidence in this run directory\n"
                    .into();
            }
            return out
                + "no other timeline, trace, driver or crash evidence in this run directory\n";
        };
        // With more than one process, which one each line is of.
        let mut pids: Vec<i64> = self.events.iter().map(|e| e.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let processes = pids.len() > 1;
        if processes {
            out.push_str(&format!(
                "{:>13}  {:>7}  {:<5}  what\n",
                "time", "process", "from"
            ));
        }
        for line in self.lines() {
            let ms = (line.t_ns.saturating_sub(first.t_ns)) as f64 / 1e6;
            let pid = match processes {
                true => format!("{:>7}  ", line.pid),
                false => String::new(),
            };
            out.push_str(&format!(
                "{ms:>10.3} ms  {pid}{:<5}  {}\n",
                line.source, line.text
            ));
        }
        if self.crash.is_some() {
            let cut = self.never_ran();
            if !cut.is_empty() {
                out.push_str("\nnever ran, cut off by the crash:\n");
                for h in cut {
                    out.push_str(&format!("  {h}\n"));
                }
            }
            if !self.backtrace.is_empty() {
                out.push_str("\nbacktrace of the crashing thread:\n");
                for (i, f) in self.backtrace.iter().enumerate() {
                    out.push_str(&format!("  #{i:<2} {f}\n"));
                }
            }
            if let Some(why) = self.backtrace_why_not() {
                out.push_str(&format!("\nno backtrace of the crashing thread: {why}\n"));
            }
        }
        out
    }
}

impl Story {
    /// Why the crash has no backtrace, when it has none: what its writer said, and what that
    /// means for a reader.
    pub(crate) fn backtrace_why_not(&self) -> Option<String> {
        if self.crash.is_none() || !self.backtrace.is_empty() {
            return None;
        }
        let why = match self.backtrace_error.as_deref() {
            Some(e @ "the backtrace child died of a signal") => format!(
                "{e}: the stack is walked and symbolized in a copy of the crashed process, and \
                 that copy crashed too, as it does when the fault left the heap or the stack \
                 unusable; the crash line above (thread, pc, library) is what is known"
            ),
            Some(e) => e.to_string(),
            None => "the process ended before its crash handler wrote one".to_string(),
        };
        Some(why)
    }
}

fn same_group(a: &Option<Group>, b: &Option<Group>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.what == b.what && a.registrant == b.registrant,
        _ => false,
    }
}

fn grouped_line(g: &Group, last_id: u64, events: usize) -> String {
    if g.id == last_id {
        return format!(
            "exit handler #{} (C++ static destructor of {}) {}",
            g.id, g.registrant, g.what
        );
    }
    match g.what {
        "registered" => format!(
            "exit handlers #{}–#{last_id} registered: {events} C++ static destructors of {}",
            g.id, g.registrant
        ),
        _ => format!(
            "exit handlers #{}–#{last_id} ran: {} C++ static destructors of {}",
            g.id,
            events.div_ceil(2),
            g.registrant
        ),
    }
}

fn crash_line(stamp: &Stamp, crash: &crash::Crash) -> String {
    let or_unknown = |text: &Option<String>| text.clone().unwrap_or_else(|| "?".to_string());
    let when = match (crash.exiting, crash.main_returned) {
        (Some(true), Some(true)) => ", during exit (main had returned)",
        (Some(true), _) => ", during exit",
        (Some(false), _) => ", before exit",
        _ => "",
    };
    let region = match crash.pc_mapping.as_deref() {
        Some(crash::UNMAPPED) => "an unmapped region".to_string(),
        Some(mapping) => short(mapping).to_string(),
        None => "?".to_string(),
    };
    format!(
        "{} ({}) on thread {} at pc {} in {region}, address {}{when}",
        or_unknown(&crash.signal),
        or_unknown(&crash.si_code_name),
        or_unknown(&stamp.thread),
        or_unknown(&crash.pc),
        crash.addr.as_deref().unwrap_or("-"),
    )
}

/// "SIGABRT on thread main in libc.so.6".
fn short_crash_line(stamp: &Stamp, crash: &crash::Crash) -> String {
    let region = match crash.pc_mapping.as_deref() {
        Some(crash::UNMAPPED) => "an unmapped region",
        Some(mapping) => short(mapping),
        None => "?",
    };
    format!(
        "{} on thread {} in {region}",
        crash.signal.as_deref().unwrap_or("?"),
        stamp.thread.as_deref().unwrap_or("?"),
    )
}

fn frames(backtrace: &crash::Backtrace) -> Vec<String> {
    backtrace
        .frames
        .iter()
        .take(32)
        .map(|f| {
            let symbol = match f.symbol.as_deref() {
                None | Some("") => "?",
                Some(symbol) => symbol,
            };
            let object = f.object.as_deref().unwrap_or("");
            format!("{} {symbol} ({})", f.ip, short(object))
        })
        .collect()
}

/// What an `exit-reordered` record says: the order asked for, and the handlers it moved.
fn reordered_text(r: &timeline::ExitReordered) -> String {
    let seed = r
        .chaos_seed
        .map(|s| format!(", thread timing seed {s}"))
        .unwrap_or_default();
    let order = match r.order.as_str() {
        "" => "natural".to_string(),
        o => o.to_string(),
    };
    let moved: Vec<String> = r.moved_ids().iter().map(|id| format!("#{id}")).collect();
    match moved.is_empty() {
        true => format!(
            "exit order {order}{seed}: {} pending exit handler(s), none moved",
            r.pending
        ),
        false => format!(
            "exit order {order}{seed}: {} pending exit handler(s); moved, in their new order: {}",
            r.pending,
            moved.join(", ")
        ),
    }
}

/// The other threads at a chaos pause, as said; an older timeline recorded only how many were
/// alive.
fn chaos_threads(p: &timeline::ChaosPause) -> String {
    match (p.threads.alive, p.running) {
        (0, n) if n > 0 => format!("{n} other thread(s) alive (their states not recorded)"),
        _ => thread_states(&p.threads, ""),
    }
}

/// "3 other threads alive at the exit handlers: 1 asleep, 2 blocked"; `at` says where (may be
/// empty).
pub(crate) fn thread_states(s: &timeline::ThreadStates, at: &str) -> String {
    let at = match at {
        "" => String::new(),
        at => format!(" {at}"),
    };
    if s.alive == 0 {
        return format!("no other thread alive{at}");
    }
    let parts: Vec<String> = [
        (s.runnable, "runnable"),
        (s.asleep, "asleep"),
        (s.blocked, "blocked"),
        (s.stopped, "stopped"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let threads = match s.alive {
        1 => "1 other thread".to_string(),
        n => format!("{n} other threads"),
    };
    format!("{threads} alive{at}: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Jetson story, as the files of an emulated run tell it.
    fn write_jetson_run(dir: &Path) {
        std::fs::write(
            dir.join(files::TIMELINE.name),
            r#"{"ev":"preload-loaded","t_ns":1000,"program":"/x/clean-exit"}
{"ev":"main-start","t_ns":2000}
{"ev":"handler-registered","t_ns":3000,"id":2,"kind":"atexit","registrant":"/x/libvkexit_refrt.so","symbol":"refrt_load_time_destructor"}
{"ev":"handler-registered","t_ns":4000,"id":5,"kind":"atexit","registrant":"/x/libVkLayer_vkexit_tegra_exit.so"}
{"ev":"main-returned","t_ns":9000,"status":0}
{"ev":"handler-start","t_ns":9100,"id":5}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.join(files::TEGRA.name),
            r#"{"ev":"loaded","t_ns":3900,"mode":"deterministic"}
{"ev":"exit-handler-start","t_ns":9200,"live_workers":1}
{"ev":"region-unmapped","t_ns":9300,"start":"0x7f00","end":"0x7f10"}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.join(files::CRASH.name),
            r#"{"ev":"crash","t_ns":9400,"signal":"SIGSEGV","si_code_name":"SEGV_MAPERR","thread":"vkexit-tegra-0","pc":"0x7f08","pc_mapping":"unmapped","addr":"0x7f08","exiting":true,"main_returned":true}
{"ev":"backtrace","t_ns":9500,"frames":[{"ip":"0x7f08","symbol":"","object":""}]}
not json at all
"#,
        )
        .unwrap();
    }

    #[test]
    fn the_jetson_story_reads_in_order_with_what_the_crash_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        write_jetson_run(dir.path());
        let story = Story::read(dir.path());
        let text = story.render();
        let order = [
            "process starts",
            "registered by libVkLayer_vkexit_tegra_exit.so",
            "main returned 0",
            "exit handler #5 (atexit, registered by libVkLayer_vkexit_tegra_exit.so) runs",
            "driver exit handler runs with 1 live worker",
            "unmapped",
            "CRASH SIGSEGV (SEGV_MAPERR) on thread vkexit-tegra-0 at pc 0x7f08 in an unmapped region",
            "never ran, cut off by the crash:",
            "exit handler #2 refrt_load_time_destructor (atexit, registered by libvkexit_refrt.so)",
        ];
        let mut at = 0;
        for piece in order {
            let found = text[at..]
                .find(piece)
                .unwrap_or_else(|| panic!("{piece} after {at}:\n{text}"));
            at += found;
        }
        assert_eq!(
            story.summary().unwrap(),
            "SIGSEGV (SEGV_MAPERR) on thread vkexit-tegra-0 at pc 0x7f08 in an unmapped region, address 0x7f08, during exit (main had returned); last exit handler to run: exit handler #5 (atexit, registered by libVkLayer_vkexit_tegra_exit.so)"
        );
    }

    #[test]
    fn a_crash_in_the_loaders_finalization_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        write_jetson_run(dir.path());
        // The driver's handler was running when its thread crashed: inside a handler.
        assert_eq!(Story::read(dir.path()).crash_in_loader_finalization(), None);
        let timeline = dir.path().join(files::TIMELINE.name);
        let mut text = std::fs::read_to_string(&timeline).unwrap();
        text.push_str("{\"ev\":\"handler-end\",\"t_ns\":9150,\"id\":5}\n");
        text.push_str("{\"ev\":\"dl-fini-start\",\"t_ns\":9160}\n");
        std::fs::write(&timeline, text).unwrap();
        assert_eq!(
            Story::read(dir.path())
                .crash_in_loader_finalization()
                .as_deref(),
            Some("exit handler #5 (atexit, registered by libVkLayer_vkexit_tegra_exit.so)")
        );
        // A library destructor that started and never returned is where it crashed.
        let mut text = std::fs::read_to_string(&timeline).unwrap();
        text.push_str("{\"ev\":\"library-destructor-start\",\"t_ns\":9170,\"id\":1,\"object\":\"/x/app\",\"symbol\":\"app_fini\"}\n");
        text.push_str("{\"ev\":\"library-destructor-end\",\"t_ns\":9180,\"id\":1}\n");
        text.push_str("{\"ev\":\"library-destructor-start\",\"t_ns\":9190,\"id\":2,\"object\":\"/x/libpool.so\",\"symbol\":\"pool_fini\"}\n");
        std::fs::write(&timeline, text).unwrap();
        let story = Story::read(dir.path());
        assert_eq!(
            story.crashed_in_destructor().as_deref(),
            Some("the library destructor #2 of libpool.so (`pool_fini`)")
        );
        assert!(
            story
                .summary()
                .unwrap()
                .ends_with("; in the library destructor #2 of libpool.so (`pool_fini`)"),
            "{:?}",
            story.summary()
        );
    }

    #[test]
    fn the_first_crash_is_the_headline_and_later_signals_follow_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(files::TIMELINE.name),
            r#"{"ev":"preload-loaded","t_ns":1000,"pid":10,"program":"/x/test"}
{"ev":"preload-loaded","t_ns":1500,"pid":11,"program":"/bin/dash"}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(files::CRASH.name),
            r#"{"ev":"crash","t_ns":5000,"pid":10,"signal":"SIGSEGV","si_code_name":"SEGV_MAPERR","thread":"llvmpipe-0","pc":"0x10","pc_mapping":"/usr/lib/libvulkan_lvp.so","addr":"0x0","exiting":false}
{"ev":"backtrace","t_ns":5100,"pid":10,"frames":[],"error":"the backtrace child died of a signal"}
{"ev":"crash","t_ns":6000,"pid":10,"signal":"SIGABRT","si_code_name":"SI_TKILL","thread":"test","pc":"0x20","pc_mapping":"/usr/lib/libc.so.6","exiting":false}
"#,
        )
        .unwrap();
        let story = Story::read(dir.path());
        assert_eq!(
            story.summary().unwrap(),
            "SIGSEGV (SEGV_MAPERR) on thread llvmpipe-0 at pc 0x10 in libvulkan_lvp.so, address 0x0, before exit; then SIGABRT on thread test in libc.so.6"
        );
        let text = story.render();
        assert!(
            text.contains(
                "no backtrace of the crashing thread: the backtrace child died of a signal: "
            ),
            "{text}"
        );
        // Two processes wrote: each line says which.
        assert!(text.contains(" process  from   what\n"), "{text}");
        assert!(text.lines().any(|l| l.contains("     11  exit ")), "{text}");
    }

    #[test]
    fn thousands_of_static_destructors_read_as_one_line_each_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for id in 1..=500u64 {
            text.push_str(&format!(
                "{{\"ev\":\"handler-registered\",\"t_ns\":{id},\"id\":{id},\"kind\":\"cxa-atexit\",\"registrant\":\"/l/libLLVM-15.so.1\"}}\n"
            ));
        }
        text.push_str("{\"ev\":\"handler-registered\",\"t_ns\":600,\"id\":501,\"kind\":\"atexit\",\"registrant\":\"/l/libx.so\"}\n");
        for id in (499..=500u64).rev() {
            let t = 1000 + 2 * (500 - id);
            text.push_str(&format!(
                "{{\"ev\":\"handler-start\",\"t_ns\":{t},\"id\":{id}}}\n"
            ));
            text.push_str(&format!(
                "{{\"ev\":\"handler-end\",\"t_ns\":{},\"id\":{id}}}\n",
                t + 1
            ));
        }
        std::fs::write(dir.path().join(files::TIMELINE.name), text).unwrap();
        let story = Story::read(dir.path());
        let lines: Vec<String> = story.render().lines().map(str::to_string).collect();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].ends_with(
            "exit handlers #1–#500 registered: 500 C++ static destructors of libLLVM-15.so.1"
        ));
        assert!(lines[1].ends_with("exit handler #501 (atexit, registered by libx.so) registered"));
        assert!(lines[2]
            .ends_with("exit handlers #500–#499 ran: 2 C++ static destructors of libLLVM-15.so.1"));
    }

    #[test]
    fn untimed_destructor_runs_are_one_line_placed_where_they_began() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(files::TIMELINE.name),
            r#"{"ev":"main-start","t_ns":10}
{"ev":"handler-registered","t_ns":30,"id":3,"kind":"atexit","registrant":"/l/libx.so"}
{"ev":"handlers-registered","t_ns":40,"first_t_ns":20,"first_id":1,"last_id":2,"count":2,"kind":"cxa-atexit","registrant":"/l/libLLVM-15.so.1"}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(files::CRASH.name),
            r#"{"ev":"crash","t_ns":50,"signal":"SIGSEGV","thread":"main","pc":"0x1","pc_mapping":"unmapped"}
"#,
        )
        .unwrap();
        let text = Story::read(dir.path()).render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].ends_with("exit handlers #1–#2 registered: 2 C++ static destructors of libLLVM-15.so.1 (not timed)"),
            "{text}"
        );
        assert!(
            lines[2].ends_with("exit handler #3 (atexit, registered by libx.so) registered"),
            "{text}"
        );
        // Destructors that were not timed are not claimed to have been cut off.
        assert!(
            text.contains("never ran, cut off by the crash:\n  exit handler #3 (atexit"),
            "{text}"
        );
        assert!(
            !text.contains("C++ static destructor(s) of libLLVM"),
            "{text}"
        );
    }

    #[test]
    fn evidence_that_is_there_but_unreadable_is_named_not_called_missing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(files::TIMELINE.name),
            "\u{1}\u{2} not json\n[1, 2]\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join(files::CRASH.name)).unwrap();
        let text = Story::read(dir.path()).render();
        assert!(
            text.contains("could not read timeline.jsonl: 2 line(s), none of them a record"),
            "{text}"
        );
        assert!(
            text.contains("could not read crash.jsonl: read failed"),
            "{text}"
        );
        assert!(!text.starts_with("no timeline"), "{text}");
        assert!(
            text.ends_with(
                "no other timeline, trace, driver or crash evidence in this run directory\n"
            ),
            "{text}"
        );

        // Beside readable evidence, the unreadable file is still named.
        std::fs::write(
            dir.path().join(files::TIMELINE.name),
            "{\"ev\":\"main-start\",\"t_ns\":10}\n",
        )
        .unwrap();
        let text = Story::read(dir.path()).render();
        assert!(
            text.starts_with("could not read crash.jsonl: read failed"),
            "{text}"
        );
        assert!(text.contains("main"), "{text}");
    }

    #[test]
    fn an_empty_directory_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let story = Story::read(dir.path());
        assert!(story.summary().is_none());
        assert!(story.render().starts_with("no timeline"));
    }
}
