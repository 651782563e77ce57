//! The JSON-lines evidence the vkexit layers and the crash report leave in a
//! run directory: `trace.jsonl` from VK_LAYER_VKEXIT_trace, `tegra.jsonl` from
//! VK_LAYER_VKEXIT_tegra_exit and `crash.jsonl` from the preloaded crash
//! handler, which every process of the run writes to. Read in bounded memory; a line cut by a crash
//! or any line that is not a JSON object is counted and skipped, never fatal.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};

/// At most this many individual findings are kept per run; the rest are
/// still counted by type.
const MAX_FINDINGS: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// The layer wrote its `loaded` record: it sat in the call chain.
    pub loaded: bool,
    pub creates: u64,
    pub destroys: u64,
    /// Objects alive when the layer's exit handler ran, by type.
    pub alive_at_exit: BTreeMap<String, u64>,
    /// Objects still alive at vkDestroyInstance, by type.
    pub alive_at_destroy_instance: BTreeMap<String, u64>,
    /// Children still alive when their device was destroyed, by type.
    #[serde(default)]
    pub orphaned_at_destroy_device: BTreeMap<String, u64>,
    pub dead_handle_calls: u64,
    /// Sentences a person reads: "VkDevice 0x… alive at exit (created on thread main)".
    pub findings: Vec<String>,
    pub bad_lines: u64,
}

impl TraceSummary {
    pub fn leaked(&self) -> bool {
        !self.alive_at_exit.is_empty()
    }

    fn note(&mut self, finding: String) {
        if self.findings.len() < MAX_FINDINGS && !self.findings.contains(&finding) {
            self.findings.push(finding);
        }
    }

    fn add(&mut self, record: &Value) {
        let field = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
        let kind = field("type");
        match field("ev") {
            "loaded" => self.loaded = true,
            "create" => self.creates += 1,
            "destroy" => self.destroys += 1,
            "dead-handle" => {
                self.dead_handle_calls += 1;
                let message = match field("message") {
                    "" => format!(
                        "{} on a destroyed {kind} {}",
                        field("call"),
                        field("handle")
                    ),
                    m => m.to_string(),
                };
                self.note(message);
            }
            "orphaned" => {
                *self
                    .orphaned_at_destroy_device
                    .entry(kind.to_string())
                    .or_insert(0) += 1;
                self.note(format!(
                    "{kind} {} still alive at vkDestroyDevice",
                    field("handle")
                ));
            }
            "alive" => {
                let at_exit = field("when") == "exit";
                let map = if at_exit {
                    &mut self.alive_at_exit
                } else {
                    &mut self.alive_at_destroy_instance
                };
                *map.entry(kind.to_string()).or_insert(0) += 1;
                let when = if at_exit { "exit" } else { "vkDestroyInstance" };
                let thread = match field("created_thread") {
                    "" => String::new(),
                    t => format!(" (created on thread {t})"),
                };
                self.note(format!(
                    "{kind} {} alive at {when}{thread}",
                    field("handle")
                ));
            }
            _ => {}
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TegraSummary {
    pub loaded: bool,
    pub mode: String,
    pub workers_started: u64,
    pub workers_stopped: u64,
    /// Workers alive when the exit handler unmapped the region.
    pub live_at_unmap: Option<u64>,
    pub findings: Vec<String>,
    pub bad_lines: u64,
}

impl TegraSummary {
    fn add(&mut self, record: &Value) {
        let field = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
        match field("ev") {
            "loaded" => {
                self.loaded = true;
                self.mode = field("mode").to_string();
            }
            "worker-started" => self.workers_started += 1,
            "worker-stopped" => self.workers_stopped += 1,
            "exit-handler-start" => {
                let live = record
                    .get("live_workers")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                self.live_at_unmap = Some(live);
                if live > 0 {
                    self.findings.push(format!(
                        "tegra-exit: exit handler unmapped the driver region with {live} device worker(s) still running"
                    ));
                }
            }
            _ => {}
        }
    }
}

/// At most this many crashed processes are kept per run; more are counted.
const MAX_CRASHED_PROCESSES: usize = 64;

/// One process of a run's tree that took a crash signal: its first `crash`
/// record, and whether the signal ended it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCrash {
    pub pid: i64,
    pub ppid: i64,
    /// The process's arguments joined by spaces (empty from an older handler).
    pub cmdline: String,
    pub signal: String,
    pub thread: String,
    pub pc: String,
    /// The file of the process's maps that held the pc, `unmapped`, `[anonymous]`, …
    pub pc_mapping: String,
    /// The object whose code brought the crash about: the pc's, or, when the
    /// pc is in the C or C++ runtime (`abort`, `raise`, a failed assertion),
    /// the first object of the backtrace outside it. A layer that aborts is
    /// known by this, not by its pc.
    #[serde(default)]
    pub culprit: String,
    /// The signal ended the process: its default action was taken, at once or
    /// after a program handler gave up on the fault. A crash the program's own
    /// handler survived (a JIT's guard page, a death-test's parent) is not fatal.
    pub fatal: bool,
}

impl ProcessCrash {
    /// `process 1234 (mock --signal SIGSEGV)`, for sentences.
    pub fn describe(&self) -> String {
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
pub struct CrashSummary {
    /// In the order of their first crash record.
    pub processes: Vec<ProcessCrash>,
    /// Crashed processes beyond the ones kept.
    pub more: u64,
    pub bad_lines: u64,
}

impl CrashSummary {
    fn add(&mut self, record: &Value) {
        let field = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
        let Some(pid) = record.get("pid").and_then(Value::as_i64) else {
            return;
        };
        let ev = field("ev");
        if ev == "backtrace" {
            self.blame(pid, record);
            return;
        }
        if ev != "crash" && ev != "fatal" {
            return;
        }
        // An older handler wrote no `then`: its crash counts as the end of the process,
        // so a crash is never lost for want of the field.
        let ends_it = ev == "fatal" || field("then") != "program-handler";
        if let Some(known) = self.processes.iter_mut().find(|p| p.pid == pid) {
            known.fatal |= ends_it;
            return;
        }
        // A `fatal` record whose crash record was lost (a cut line) still names the process.
        if self.processes.len() >= MAX_CRASHED_PROCESSES {
            self.more += 1;
            return;
        }
        self.processes.push(ProcessCrash {
            pid,
            ppid: record.get("ppid").and_then(Value::as_i64).unwrap_or(0),
            cmdline: field("cmdline").to_string(),
            signal: field("signal").to_string(),
            thread: field("thread").to_string(),
            pc: field("pc").to_string(),
            pc_mapping: field("pc_mapping").to_string(),
            culprit: field("pc_mapping").to_string(),
            fatal: ends_it,
        });
    }

    /// A crash whose pc is in the C or C++ runtime is put on the first
    /// object of its backtrace outside the runtime (and outside vkexit's
    /// preloaded library).
    fn blame(&mut self, pid: i64, record: &Value) {
        let Some(crash) = self.processes.iter_mut().find(|p| p.pid == pid) else {
            return;
        };
        if !is_runtime(&crash.culprit) {
            return;
        }
        let frames = record.get("frames").and_then(Value::as_array);
        let objects = frames
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("object").and_then(Value::as_str));
        if let Some(object) = objects
            .filter(|o| !o.is_empty())
            .find(|o| !is_runtime(o) && !o.ends_with("/libvkexit_preload.so"))
        {
            crash.culprit = object.to_string();
        }
    }

    /// The processes other than `main_pid` that died of a crash signal.
    pub fn fatal_besides(&self, main_pid: Option<i64>) -> impl Iterator<Item = &ProcessCrash> {
        self.processes
            .iter()
            .filter(move |p| p.fatal && Some(p.pid) != main_pid)
    }

    /// The main process's crash, when it wrote one.
    pub fn of(&self, pid: Option<i64>) -> Option<&ProcessCrash> {
        self.processes.iter().find(|p| Some(p.pid) == pid)
    }
}

/// Reads JSON lines, handing each object to `add`; returns the number of
/// lines that were not JSON objects.
pub(crate) fn read_lines(reader: impl Read, mut add: impl FnMut(&Value)) -> std::io::Result<u64> {
    const MAX_LINE: u64 = 1 << 20;
    let mut reader = BufReader::new(reader);
    let mut bad = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        // Records are small: a line longer than this is garbage, and the
        // rest of it is read as one more bad line.
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(bad);
        }
        // The trace layer writes through a mapping of the file and leaves NUL bytes where a
        // process did not fill its chunk (at a crash, or between processes): they end a
        // record like a newline, and a record never holds one.
        for part in line.split(|&b| b == 0) {
            if part.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(part) {
                Ok(v) if v.is_object() => add(&v),
                _ => bad += 1,
            }
        }
    }
}

pub fn read_trace(reader: impl Read) -> std::io::Result<TraceSummary> {
    let mut summary = TraceSummary::default();
    summary.bad_lines = read_lines(reader, |v| summary.add(v))?;
    Ok(summary)
}

pub fn read_crashes(reader: impl Read) -> std::io::Result<CrashSummary> {
    let mut summary = CrashSummary::default();
    summary.bad_lines = read_lines(reader, |v| summary.add(v))?;
    Ok(summary)
}

pub fn read_tegra(reader: impl Read) -> std::io::Result<TegraSummary> {
    let mut summary = TegraSummary::default();
    summary.bad_lines = read_lines(reader, |v| summary.add(v))?;
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
