//! The story of one run: the exit timeline (`timeline.jsonl`, from the
//! preloaded library), the Vulkan lifetimes (`trace.jsonl`), the emulated
//! driver (`tegra.jsonl`) and the crash report (`crash.jsonl`), merged by
//! their common CLOCK_MONOTONIC stamps into one ordered list.
//!
//! Every reader here is for untrusted text: a line that is not a JSON object
//! is skipped, a missing file is simply a missing source.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::run::observed::{CRASH_FILE, TIMELINE_FILE};

/// At most this many records are read from one file.
const MAX_RECORDS: usize = 200_000;
/// At most this many exit handlers are taken from the ranges of untimed C++
/// static destructors, all records together (lavapipe registers ~3,700): a
/// record may claim any range, and a failing run's summary must stay quick.
const MAX_RANGED_HANDLERS: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub t_ns: u64,
    pub source: &'static str,
    pub text: String,
    /// C++ static destructors come by the thousand: consecutive events of
    /// one group (what happened, registrant) are shown as one line.
    group: Option<Group>,
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
    kind: String,
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
            registrant(&self.registrant)
        )
    }
}

fn kind_name(kind: &str) -> &str {
    match kind {
        "atexit" => "atexit",
        "cxa-atexit" | "cxa-atexit-untimed" => "C++ static destructor",
        other => other,
    }
}

/// A registrant's file name, and the layer it is when it is one: a layer's
/// own exit handlers are where a layer's crash at exit happens.
fn registrant(path: &str) -> String {
    match crate::classify::layer_of(path) {
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
    pub events: Vec<Event>,
    handlers: BTreeMap<HandlerKey, Handler>,
    /// The exit handler that started last, in time, per process.
    last_started: BTreeMap<i64, u64>,
    /// The process vkexit started: the first whose preloaded library loaded.
    main_pid: Option<(u64, i64)>,
    crash: Option<Value>,
    backtrace: Vec<String>,
    main_returned: bool,
    /// Handlers taken from ranges so far, against `MAX_RANGED_HANDLERS`.
    ranged_handlers: u64,
}

impl Story {
    pub fn read(dir: &Path) -> Story {
        let mut story = Story::default();
        for (file, source) in [
            (TIMELINE_FILE, "exit"),
            (crate::host::layers::TRACE_FILE, "trace"),
            (crate::host::layers::TEGRA_FILE, "tegra"),
            (CRASH_FILE, "crash"),
        ] {
            if let Ok(f) = std::fs::File::open(dir.join(file)) {
                let mut taken = 0;
                let _ = crate::evidence::read_lines(f, |record| {
                    if taken < MAX_RECORDS {
                        taken += 1;
                        story.add(source, record);
                    }
                });
            }
        }
        // Stable: records of one source keep their file order at equal times.
        story.events.sort_by_key(|e| e.t_ns);
        story
    }

    fn push(&mut self, record: &Value, source: &'static str, text: String) {
        self.push_grouped(record, source, text, None);
    }

    fn push_grouped(
        &mut self,
        record: &Value,
        source: &'static str,
        text: String,
        group: Option<Group>,
    ) {
        let t_ns = record.get("t_ns").and_then(Value::as_u64).unwrap_or(0);
        self.events.push(Event {
            t_ns,
            source,
            text,
            group,
        });
    }

    /// Groups only C++ static destructors: `atexit` handlers stay one a line.
    fn group_of(&self, key: HandlerKey, what: &'static str) -> Option<Group> {
        let id = key.1;
        let h = self.handlers.get(&key)?;
        (h.kind == "cxa-atexit").then(|| Group {
            what,
            registrant: short(&h.registrant).to_string(),
            id,
        })
    }

    fn add(&mut self, source: &'static str, r: &Value) {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let n = |k: &str| r.get(k).and_then(Value::as_i64).unwrap_or(0);
        let thread = s("thread");
        let pid = n("pid");
        let text = match (source, s("ev").as_str()) {
            ("exit", "preload-loaded") => {
                let t_ns = r.get("t_ns").and_then(Value::as_u64).unwrap_or(0);
                if self.main_pid.is_none_or(|(t, _)| t_ns < t) {
                    self.main_pid = Some((t_ns, pid));
                }
                format!("process starts: {} (pid {pid})", s("program"))
            }
            ("exit", "main-start") => "main starts".to_string(),
            ("exit", "main-returned") => {
                self.main_returned = true;
                format!("main returned {}", n("status"))
            }
            ("exit", "exit-called") => format!(
                "exit({}) called from {} on thread {thread}",
                n("status"),
                short(&s("caller"))
            ),
            ("exit", "handler-registered") => {
                let id = n("id") as u64;
                let h = Handler {
                    kind: s("kind"),
                    registrant: s("registrant"),
                    symbol: s("symbol"),
                    ..Handler::default()
                };
                let text = format!("{} registered", h.describe(id));
                self.handlers.insert((pid, id), h);
                let group = self.group_of((pid, id), "registered");
                self.push_grouped(r, source, text, group);
                return;
            }
            ("exit", "handlers-registered") => {
                let (first, last) = (n("first_id") as u64, n("last_id") as u64);
                let room = MAX_RANGED_HANDLERS.saturating_sub(self.ranged_handlers);
                let end = last.min(first.saturating_add(room.min(100_000)));
                self.ranged_handlers = self
                    .ranged_handlers
                    .saturating_add(end.saturating_sub(first).saturating_add(1));
                for id in (first..=end).take(room as usize) {
                    self.handlers.insert(
                        (pid, id),
                        Handler {
                            kind: "cxa-atexit-untimed".into(),
                            registrant: s("registrant"),
                            ..Handler::default()
                        },
                    );
                }
                let text = format!(
                    "exit handlers #{first}–#{last} registered: {} C++ static destructors of {} (not timed)",
                    n("count"),
                    registrant(&s("registrant"))
                );
                // Written when the run ended: placed where it began.
                let t_ns = r.get("first_t_ns").and_then(Value::as_u64).unwrap_or(0);
                self.events.push(Event {
                    t_ns,
                    source,
                    text,
                    group: None,
                });
                return;
            }
            ("exit", "handler-start") | ("exit", "handler-end") => {
                let id = n("id") as u64;
                let h = self.handlers.entry((pid, id)).or_default();
                let start = s("ev") == "handler-start";
                if start {
                    h.started = true;
                    self.last_started.insert(pid, id);
                } else {
                    h.ended = true;
                }
                let what = if start { "runs" } else { "returned" };
                let text = format!("{} {what}", h.describe(id));
                let group = self.group_of((pid, id), "ran");
                self.push_grouped(r, source, text, group);
                return;
            }
            ("exit", "dl-fini-start") => {
                "loader finalization starts (.fini_array and __attribute__((destructor)) run now)"
                    .into()
            }
            ("exit", "dl-fini-end") => "loader finalization done".into(),
            ("exit", "dlopen") => match s("path").as_str() {
                "" => format!("dlopen of the program itself on thread {thread}"),
                path => format!("dlopen {path} on thread {thread}"),
            },
            ("exit", "dlclose") => match s("path").as_str() {
                "" => "dlclose of the program's own handle".to_string(),
                path => format!("dlclose {path}"),
            },
            ("trace", "loaded") => "trace layer in the chain".into(),
            ("trace", "create") | ("trace", "destroy")
                if matches!(s("type").as_str(), "VkInstance" | "VkDevice") =>
            {
                format!(
                    "{} {} {} on thread {thread}",
                    s("call"),
                    s("type"),
                    s("handle")
                )
            }
            ("trace", "dead-handle") => format!("{} (thread {thread})", s("message")),
            ("trace", "orphaned") => format!(
                "{} {} still alive at vkDestroyDevice",
                s("type"),
                s("handle")
            ),
            ("trace", "exit-handler-start") => {
                format!("trace layer's exit handler: {} objects alive", n("live"))
            }
            ("tegra", "loaded") => format!("tegra-exit layer in the chain ({} mode)", s("mode")),
            ("tegra", "region-mapped") => {
                format!("driver region mapped {}–{}", s("start"), s("end"))
            }
            ("tegra", "worker-started") => format!(
                "driver worker {} started for VkDevice {}",
                s("worker"),
                s("device")
            ),
            ("tegra", "worker-stopped") => format!("driver worker {} stopped", s("worker")),
            ("tegra", "exit-handler-start") => format!(
                "driver exit handler runs with {} live worker(s)",
                n("live_workers")
            ),
            ("tegra", "region-unmapped") => {
                format!("driver region {}–{} unmapped", s("start"), s("end"))
            }
            ("crash", "crash") => {
                self.crash = Some(r.clone());
                format!("CRASH {}", crash_line(r))
            }
            ("crash", "backtrace") => {
                self.backtrace = frames(r);
                return;
            }
            _ => return,
        };
        self.push(r, source, text);
    }

    /// The short form for a failing run's summary: signal, thread, region of
    /// the pc, when, and the last exit handler that ran.
    pub fn summary(&self) -> Option<String> {
        let crash = self.crash.as_ref()?;
        let mut text = crash_line(crash);
        let pid = crash.get("pid").and_then(Value::as_i64).unwrap_or(0);
        if self.main_pid.is_some_and(|(_, main)| main != pid) {
            text.push_str(&format!(", in process {pid}"));
            if let Some(cmdline) = crash.get("cmdline").and_then(Value::as_str) {
                text.push_str(&format!(" ({cmdline})"));
            }
        }
        if let Some(&id) = self.last_started.get(&pid) {
            let h = &self.handlers[&(pid, id)];
            text.push_str(&format!("; last exit handler to run: {}", h.describe(id)));
        }
        Some(text)
    }

    /// Handlers registered that never ran: what the crash cut off. C++
    /// static destructors are counted per object.
    fn never_ran(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut destructors: BTreeMap<&str, u64> = BTreeMap::new();
        let untimed = |h: &Handler| h.kind == "cxa-atexit-untimed";
        let crashed = self
            .crash
            .as_ref()
            .and_then(|c| c.get("pid"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        for ((_, id), h) in self
            .handlers
            .iter()
            .filter(|((pid, _), _)| *pid == crashed)
            .filter(|(_, h)| !h.started && !h.registrant.is_empty() && !untimed(h))
        {
            if h.kind == "cxa-atexit" {
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

    pub fn render(&self) -> String {
        let Some(first) = self.events.first() else {
            return "no timeline, trace, driver or crash evidence in this run directory\n".into();
        };
        let mut out = String::new();
        let mut i = 0;
        while i < self.events.len() {
            let e = &self.events[i];
            let run = self.events[i..]
                .iter()
                .take_while(|n| same_group(&e.group, &n.group))
                .count()
                .max(1);
            let ms = (e.t_ns.saturating_sub(first.t_ns)) as f64 / 1e6;
            let text = match (&e.group, run) {
                (Some(g), n) if n > 1 => {
                    let last = self.events[i + n - 1].group.as_ref().map_or(g.id, |l| l.id);
                    grouped_line(g, last, n)
                }
                _ => e.text.clone(),
            };
            out.push_str(&format!("{ms:>10.3} ms  {:<5}  {text}\n", e.source));
            i += run;
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
        }
        out
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

fn crash_line(r: &Value) -> String {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let when = match (
        r.get("exiting").and_then(Value::as_bool),
        r.get("main_returned").and_then(Value::as_bool),
    ) {
        (Some(true), Some(true)) => ", during exit (main had returned)",
        (Some(true), _) => ", during exit",
        (Some(false), _) => ", before exit",
        _ => "",
    };
    let region = match s("pc_mapping").as_str() {
        "unmapped" => "an unmapped region".to_string(),
        m => short(m).to_string(),
    };
    format!(
        "{} ({}) on thread {} at pc {} in {region}, address {}{when}",
        s("signal"),
        s("si_code_name"),
        s("thread"),
        s("pc"),
        r.get("addr").and_then(Value::as_str).unwrap_or("-"),
    )
}

fn frames(r: &Value) -> Vec<String> {
    let Some(list) = r.get("frames").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .take(32)
        .map(|f| {
            let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let symbol = match s("symbol").as_str() {
                "" => "?".to_string(),
                sym => sym.to_string(),
            };
            format!("{} {symbol} ({})", s("ip"), short(&s("object")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Jetson story, as the files of an emulated run tell it.
    fn write_jetson_run(dir: &Path) {
        std::fs::write(
            dir.join(TIMELINE_FILE),
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
            dir.join("tegra.jsonl"),
            r#"{"ev":"loaded","t_ns":3900,"mode":"deterministic"}
{"ev":"exit-handler-start","t_ns":9200,"live_workers":1}
{"ev":"region-unmapped","t_ns":9300,"start":"0x7f00","end":"0x7f10"}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.join(CRASH_FILE),
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
        std::fs::write(dir.path().join(TIMELINE_FILE), text).unwrap();
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
            dir.path().join(TIMELINE_FILE),
            r#"{"ev":"main-start","t_ns":10}
{"ev":"handler-registered","t_ns":30,"id":3,"kind":"atexit","registrant":"/l/libx.so"}
{"ev":"handlers-registered","t_ns":40,"first_t_ns":20,"first_id":1,"last_id":2,"count":2,"kind":"cxa-atexit","registrant":"/l/libLLVM-15.so.1"}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(CRASH_FILE),
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
    fn an_empty_directory_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let story = Story::read(dir.path());
        assert!(story.summary().is_none());
        assert!(story.render().starts_with("no timeline"));
    }
}
