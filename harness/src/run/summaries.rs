//! What a run's evidence files say, summed up for its verdict: `trace.jsonl` from
//! VK_LAYER_VKEXIT_trace, `tegra.jsonl` from VK_LAYER_VKEXIT_tegra_exit and `crash.jsonl` from
//! the preloaded crash handler, which every process of the run writes to. Records are read as
//! `vkexit-evidence` types, in bounded memory; a line cut by a crash or any line that is not a
//! record is counted and skipped, never fatal.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use vkexit_evidence::read::{self, Stamp};
use vkexit_evidence::{crash, tegra, trace};

/// At most this many individual findings are kept per run; the rest are
/// still counted by type.
const MAX_FINDINGS: usize = 64;

/// What VK_LAYER_VKEXIT_trace saw of the run's Vulkan objects, summed from `trace.jsonl`
/// (present only when the run asked for the trace layer).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// The layer wrote its `loaded` record: it sat in the call chain.
    pub(crate) loaded: bool,
    /// `create` records: objects the program created, all types together.
    pub(crate) creates: u64,
    /// `destroy` records: objects the program destroyed, all types together.
    pub(crate) destroys: u64,
    /// Objects alive when the layer's exit handler ran, by type.
    pub(crate) alive_at_exit: BTreeMap<String, u64>,
    /// Objects still alive at vkDestroyInstance, by type.
    pub(crate) alive_at_destroy_instance: BTreeMap<String, u64>,
    /// Children still alive when their device was destroyed, by type.
    #[serde(default)]
    pub(crate) orphaned_at_destroy_device: BTreeMap<String, u64>,
    /// Calls made on a handle that was already destroyed (`dead-handle` records).
    pub(crate) dead_handle_calls: u64,
    /// Sentences a person reads: "VkDevice 0x… alive at exit (created on thread main)".
    pub(crate) findings: Vec<String>,
    /// Lines that were not a trace record (cut by a crash, not JSON, or a known event
    /// missing what it promises): counted and skipped.
    pub bad_lines: u64,
}

impl TraceSummary {
    /// Some Vulkan object was still alive when the layer's exit handler ran: what
    /// `fail_on_leak` (the matrix key, `--fail-on-leak`) fails a run for.
    pub fn leaked(&self) -> bool {
        !self.alive_at_exit.is_empty()
    }

    fn note(&mut self, finding: String) {
        if self.findings.len() < MAX_FINDINGS && !self.findings.contains(&finding) {
            self.findings.push(finding);
        }
    }

    fn add(&mut self, record: trace::Entry) {
        match record {
            trace::Entry::Loaded(_) => self.loaded = true,
            trace::Entry::Create(_) => self.creates += 1,
            trace::Entry::Destroy(_) => self.destroys += 1,
            trace::Entry::DeadHandle(dead) => {
                self.dead_handle_calls += 1;
                let message = match dead.message.as_str() {
                    "" => format!("{} on a destroyed {} {}", dead.call, dead.ty, dead.handle),
                    _ => dead.message,
                };
                self.note(message);
            }
            trace::Entry::Orphaned(orphan) => {
                *self
                    .orphaned_at_destroy_device
                    .entry(orphan.ty.clone())
                    .or_insert(0) += 1;
                self.note(format!(
                    "{} {} still alive at vkDestroyDevice",
                    orphan.ty, orphan.handle
                ));
            }
            trace::Entry::Alive(alive) => {
                let at_exit = alive.when() == Some(trace::When::Exit);
                let map = if at_exit {
                    &mut self.alive_at_exit
                } else {
                    &mut self.alive_at_destroy_instance
                };
                *map.entry(alive.ty.clone()).or_insert(0) += 1;
                let when = if at_exit { "exit" } else { "vkDestroyInstance" };
                let thread = match alive.created_thread.as_str() {
                    "" => String::new(),
                    t => format!(" (created on thread {t})"),
                };
                self.note(format!(
                    "{} {} alive at {when}{thread}",
                    alive.ty, alive.handle
                ));
            }
            trace::Entry::ExitHandlerStart(_) | trace::Entry::ExitHandlerEnd => {}
        }
    }
}

/// What VK_LAYER_VKEXIT_tegra_exit, the emulated driver, did in the run, summed from
/// `tegra.jsonl` (present only when the run asked for emulation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TegraSummary {
    /// The layer wrote its `loaded` record: it sat in the call chain.
    pub(crate) loaded: bool,
    /// The emulation mode its `loaded` record named; empty when it wrote none.
    pub(crate) mode: String,
    /// Device worker threads the emulated driver started.
    pub(crate) workers_started: u64,
    /// Device worker threads the emulated driver stopped.
    pub(crate) workers_stopped: u64,
    /// Workers alive when the exit handler unmapped the region.
    pub(crate) live_at_unmap: Option<u64>,
    /// Sentences a person reads: what the emulated driver's exit did wrong.
    pub(crate) findings: Vec<String>,
    /// Lines that were not a tegra-exit record (cut by a crash, not JSON, or a known
    /// event missing what it promises): counted and skipped.
    pub bad_lines: u64,
}

impl TegraSummary {
    fn add(&mut self, record: tegra::Entry) {
        match record {
            tegra::Entry::Loaded(loaded) => {
                self.loaded = true;
                self.mode = loaded.mode;
            }
            tegra::Entry::WorkerStarted(_) => self.workers_started += 1,
            tegra::Entry::WorkerStopped(_) => self.workers_stopped += 1,
            tegra::Entry::ExitHandlerStart(start) => {
                let live = start.live_workers;
                self.live_at_unmap = Some(live);
                if live > 0 {
                    self.findings.push(format!(
                        "tegra-exit: exit handler unmapped the driver region with {live} device worker(s) still running"
                    ));
                }
            }
            tegra::Entry::Warning(_)
            | tegra::Entry::RegionMapped(_)
            | tegra::Entry::RegionUnmapped(_)
            | tegra::Entry::WaitingForFault
            | tegra::Entry::ExitHandlerEnd => {}
        }
    }
}

/// At most this many crashed processes are kept per run; more are counted.
const MAX_CRASHED_PROCESSES: usize = 64;

/// One process of a run's tree that took a crash signal: its first `crash`
/// record, and whether the signal ended it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProcessCrash {
    pub(crate) pid: i64,
    pub(crate) ppid: i64,
    /// The process's arguments joined by spaces (empty from an older handler).
    pub(crate) cmdline: String,
    pub(crate) signal: String,
    pub(crate) thread: String,
    pub(crate) pc: String,
    /// The file of the process's maps that held the pc, `unmapped`, `[anonymous]`, …
    pub(crate) pc_mapping: String,
    /// The object whose code brought the crash about: the pc's, or, when the
    /// pc is in the C or C++ runtime (`abort`, `raise`, a failed assertion),
    /// the first object of the backtrace outside it. A layer that aborts is
    /// known by this, not by its pc.
    #[serde(default)]
    pub(crate) culprit: String,
    /// The signal ended the process: its default action was taken, at once or
    /// after a program handler gave up on the fault. A crash the program's own
    /// handler survived (a JIT's guard page, a death-test's parent) is not fatal.
    pub(crate) fatal: bool,
}

impl ProcessCrash {
    /// `process 1234 (mock --signal SIGSEGV)`, for sentences.
    pub(crate) fn describe(&self) -> String {
        match self.cmdline.as_str() {
            "" => format!("process {}", self.pid),
            cmdline => format!("process {} ({})", self.pid, cut(cmdline, 160)),
        }
    }
}

/// The C and C++ runtime: where `abort`, `raise` and assertion failures
/// have their pc, whoever called them.
fn is_runtime(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    [
        "libc.so",
        "libstdc++.so",
        "libgcc_s.so",
        "libc++.so",
        "libc++abi.so",
        "ld-linux",
    ]
    .iter()
    .any(|name| file.starts_with(name))
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// What `crash.jsonl` says about the processes of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CrashSummary {
    /// In the order of their first crash record.
    pub(crate) processes: Vec<ProcessCrash>,
    /// Crashed processes beyond the ones kept.
    pub(crate) more: u64,
    pub(crate) bad_lines: u64,
}

impl CrashSummary {
    fn add(&mut self, stamp: Stamp, record: crash::Entry) {
        let Some(pid) = stamp.pid else {
            return;
        };
        let (crash, ends_it) = match record {
            crash::Entry::Backtrace(backtrace) => {
                self.blame(pid, &backtrace);
                return;
            }
            crash::Entry::Crash(crash) => {
                let ends_it = crash.ends_process();
                (*crash, ends_it)
            }
            // What a `fatal` record says of the process, when its crash record was lost.
            crash::Entry::Fatal(fatal) => {
                let crash = crash::Crash {
                    signal: fatal.signal,
                    pc: fatal.pc,
                    ..crash::Crash::default()
                };
                (crash, true)
            }
        };
        if let Some(known) = self.processes.iter_mut().find(|p| p.pid == pid) {
            known.fatal |= ends_it;
            return;
        }
        // A `fatal` record whose crash record was lost (a cut line) still names the process.
        if self.processes.len() >= MAX_CRASHED_PROCESSES {
            self.more += 1;
            return;
        }
        let pc_mapping = crash.pc_mapping.unwrap_or_default();
        self.processes.push(ProcessCrash {
            pid,
            ppid: crash.ppid.unwrap_or(0),
            cmdline: crash.cmdline.unwrap_or_default(),
            signal: crash.signal.unwrap_or_default(),
            thread: stamp.thread.unwrap_or_default(),
            pc: crash.pc.unwrap_or_default(),
            culprit: pc_mapping.clone(),
            pc_mapping,
            fatal: ends_it,
        });
    }

    /// A crash whose pc is in the C or C++ runtime is put on the first
    /// object of its backtrace outside the runtime (and outside vkexit's
    /// preloaded library).
    fn blame(&mut self, pid: i64, backtrace: &crash::Backtrace) {
        let Some(crash) = self.processes.iter_mut().find(|p| p.pid == pid) else {
            return;
        };
        if !is_runtime(&crash.culprit) {
            return;
        }
        let objects = backtrace.frames.iter().filter_map(|f| f.object.as_deref());
        if let Some(object) = objects
            .filter(|o| !o.is_empty())
            .find(|o| !is_runtime(o) && !o.ends_with("/libvkexit_preload.so"))
        {
            crash.culprit = object.to_string();
        }
    }

    /// The processes other than `main_pid` that died of a crash signal.
    pub(crate) fn fatal_besides(
        &self,
        main_pid: Option<i64>,
    ) -> impl Iterator<Item = &ProcessCrash> {
        self.processes
            .iter()
            .filter(move |p| p.fatal && Some(p.pid) != main_pid)
    }

    /// The main process's crash, when it wrote one.
    pub(crate) fn of(&self, pid: Option<i64>) -> Option<&ProcessCrash> {
        self.processes.iter().find(|p| Some(p.pid) == pid)
    }
}

/// Sums up a `trace.jsonl`; fails only when reading fails, never on what a line holds.
pub fn read_trace(reader: impl Read) -> std::io::Result<TraceSummary> {
    let mut summary = TraceSummary::default();
    summary.bad_lines = read::records(reader, |_, record| summary.add(record))?;
    Ok(summary)
}

/// Sums up a `crash.jsonl`, every process's crashes; fails only when reading fails.
pub(crate) fn read_crashes(reader: impl Read) -> std::io::Result<CrashSummary> {
    let mut summary = CrashSummary::default();
    summary.bad_lines = read::records(reader, |stamp, record| summary.add(stamp, record))?;
    Ok(summary)
}

/// Sums up a `tegra.jsonl`; fails only when reading fails, never on what a line holds.
pub fn read_tegra(reader: impl Read) -> std::io::Result<TegraSummary> {
    let mut summary = TegraSummary::default();
    summary.bad_lines = read::records(reader, |_, record| summary.add(record))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEVER_AT_EXIT: &str = r#"{"ev":"loaded","layer":"VK_LAYER_VKEXIT_trace","t_ns":1,"pid":9,"tid":9,"thread":"clean-exit"}
{"ev":"create","type":"VkInstance","handle":"0x5581","parent":"0x0","call":"vkCreateInstance","thread":"main"}
{"ev":"create","type":"VkDevice","handle":"0x55a0","parent":"0x5581","call":"vkCreateDevice","thread":"main"}
{"ev":"create","type":"VkBuffer","handle":"0x2","parent":"0x55a0","call":"vkCreateBuffer"}
{"ev":"destroy","type":"VkBuffer","handle":"0x2","parent":"0x55a0","call":"vkDestroyBuffer"}
{"ev":"exit-handler-start","live":2}
{"ev":"orphaned","when":"destroy-device","type":"VkBuffer","handle":"0x3","parent":"0x55a0","created_thread":"main"}
{"ev":"alive","when":"exit","type":"VkDevice","handle":"0x55a0","parent":"0x5581","created_thread":"main"}
{"ev":"alive","when":"exit","type":"VkInstance","handle":"0x5581","parent":"0x0","created_thread":"main"}
{"ev":"dead-handle","call":"vkDestroyEvent","type":"VkDevice","handle":"0x55a0","message":"vkDestroyEvent on a destroyed VkDevice 0x55a0"}
{"ev":"alive","when":"exi"#;

    #[test]
    fn alive_objects_and_dead_handles_read_as_sentences() {
        let s = read_trace(NEVER_AT_EXIT.as_bytes()).unwrap();
        assert!(s.loaded);
        assert_eq!((s.creates, s.destroys), (3, 1));
        assert_eq!(s.alive_at_exit["VkDevice"], 1);
        assert_eq!(s.alive_at_exit["VkInstance"], 1);
        assert!(s.leaked());
        assert_eq!(s.orphaned_at_destroy_device["VkBuffer"], 1);
        assert_eq!(s.findings[0], "VkBuffer 0x3 still alive at vkDestroyDevice");
        assert_eq!(
            s.findings[1],
            "VkDevice 0x55a0 alive at exit (created on thread main)"
        );
        assert!(s
            .findings
            .contains(&"vkDestroyEvent on a destroyed VkDevice 0x55a0".to_string()));
        assert_eq!(s.dead_handle_calls, 1);
        // The last line was cut by the crash: counted, not fatal.
        assert_eq!(s.bad_lines, 1);
    }

    #[test]
    fn nul_padding_of_a_mapped_trace_reads_as_line_ends() {
        let mut text = b"{\"ev\":\"loaded\"}\n".to_vec();
        text.extend([0u8; 300]);
        text.extend(b"{\"ev\":\"create\",\"type\":\"VkDevice\"}\n\0\0{\"ev\":\"cre");
        text.extend([0u8; 100]);
        text.extend(b"{\"ev\":\"destroy\",\"type\":\"VkDevice\"}\n");
        text.extend([0u8; 4096]);
        let s = read_trace(&text[..]).unwrap();
        assert!(s.loaded);
        assert_eq!((s.creates, s.destroys), (1, 1));
        // Only the record cut by the crash is bad; the padding is not.
        assert_eq!(s.bad_lines, 1);
    }

    #[test]
    fn a_trace_without_its_loaded_record_proves_nothing() {
        let s = read_trace(&b"{\"ev\":\"create\",\"type\":\"VkDevice\"}\n\xff\xfe\n[1,2]\n"[..])
            .unwrap();
        assert!(!s.loaded);
        assert_eq!(s.bad_lines, 2);
        assert!(!s.leaked());
    }

    #[test]
    fn crashes_are_told_apart_by_process_and_by_whether_they_ended_it() {
        let text = r#"{"ev":"crash","pid":20,"ppid":10,"cmdline":"mock --signal SIGSEGV","then":"default-action","signal":"SIGSEGV","thread":"mock","pc":"0x1","pc_mapping":"/lib/libc.so.6"}
{"ev":"backtrace","pid":20,"frames":[]}
{"ev":"crash","pid":30,"ppid":10,"cmdline":"jit","then":"program-handler","signal":"SIGSEGV","pc":"0x2","pc_mapping":"[anonymous]"}
{"ev":"crash","pid":40,"ppid":10,"cmdline":"rust","then":"program-handler","signal":"SIGSEGV","pc":"0x3","pc_mapping":"/x/libVkLayer_vkexit_trace.so"}
{"ev":"fatal","pid":40,"signal":"SIGSEGV","pc":"0x3"}
{"ev":"crash","pid":50,"signal":"SIGABRT"}
{"ev":"fatal","pid":60,"signal":"SIGBUS"}
{"ev":"crash","pid":
"#;
        let s = read_crashes(text.as_bytes()).unwrap();
        let fatal: Vec<(i64, bool)> = s.processes.iter().map(|p| (p.pid, p.fatal)).collect();
        // 30's own handler took the fault and it lived on; 40's gave it back (Rust's does);
        // 50 is from a handler too old to say, so it counts; 60's crash line was lost.
        assert_eq!(
            fatal,
            [(20, true), (30, false), (40, true), (50, true), (60, true)]
        );
        assert_eq!(s.bad_lines, 1);
        assert_eq!(
            s.processes[0].describe(),
            "process 20 (mock --signal SIGSEGV)"
        );
        assert_eq!(s.processes[3].describe(), "process 50");
        let besides: Vec<i64> = s.fatal_besides(Some(20)).map(|p| p.pid).collect();
        assert_eq!(besides, [40, 50, 60]);
        assert_eq!(
            s.of(Some(40)).unwrap().pc_mapping,
            "/x/libVkLayer_vkexit_trace.so"
        );
    }

    #[test]
    fn an_abort_is_put_on_the_object_that_called_it() {
        let text = r#"{"ev":"crash","pid":7,"then":"default-action","signal":"SIGABRT","pc":"0x1","pc_mapping":"/usr/lib/x86_64-linux-gnu/libc.so.6"}
{"ev":"backtrace","pid":7,"frames":[{"ip":"0x1","object":"/lib/x86_64-linux-gnu/libc.so.6"},{"ip":"0x2","object":"/x/libvkexit_preload.so"},{"ip":"0x3","object":"/usr/lib/x86_64-linux-gnu/libstdc++.so.6"},{"ip":"0x4","object":"/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so"},{"ip":"0x5","object":"/x/app"}]}
{"ev":"crash","pid":8,"then":"default-action","signal":"SIGSEGV","pc":"0x1","pc_mapping":"/x/libVkLayer_vkexit_trace.so"}
{"ev":"backtrace","pid":8,"frames":[{"ip":"0x1","object":"/x/app"}]}
"#;
        let s = read_crashes(text.as_bytes()).unwrap();
        assert_eq!(
            s.processes[0].culprit,
            "/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so"
        );
        // A pc outside the runtime is its own culprit, whatever the frames say.
        assert_eq!(s.processes[1].culprit, "/x/libVkLayer_vkexit_trace.so");
    }

    #[test]
    fn a_crash_file_from_a_fork_bomb_stays_bounded() {
        let text: String = (0..1000)
            .map(|pid| format!("{{\"ev\":\"crash\",\"pid\":{pid},\"signal\":\"SIGSEGV\"}}\n"))
            .collect();
        let s = read_crashes(text.as_bytes()).unwrap();
        assert_eq!(s.processes.len(), MAX_CRASHED_PROCESSES);
        assert_eq!(s.more, 1000 - MAX_CRASHED_PROCESSES as u64);
    }

    #[test]
    fn tegra_evidence_says_how_many_workers_were_alive_at_the_unmap() {
        let text = r#"{"ev":"loaded","layer":"VK_LAYER_VKEXIT_tegra_exit","mode":"deterministic"}
{"ev":"region-mapped","start":"0x7f00","end":"0x8000"}
{"ev":"worker-started","device":"0x55a0","worker":"vkexit-tegra-0","worker_tid":12}
{"ev":"exit-handler-start","live_workers":1}
{"ev":"region-unmapped","start":"0x7f00","end":"0x8000"}
{"ev":"waiting-for-fault"}
"#;
        let s = read_tegra(text.as_bytes()).unwrap();
        assert!(s.loaded);
        assert_eq!(s.mode, "deterministic");
        assert_eq!(s.live_at_unmap, Some(1));
        assert_eq!(s.findings.len(), 1);
    }
}
