//! Property tests of every parser of text that comes from outside vkexit:
//! validation logs, the JSON-lines evidence of the trace and tegra-exit
//! layers, the exit timeline and crash report, matrix and baseline TOML
//! files, ICD and layer manifests, and results files. Whatever the input, a
//! parser returns (a value or an error that names the file and where in it)
//! and never panics or runs away.
//!
//! The properties gate CI, so they are deterministic: each runs a bounded
//! number of cases drawn from a fixed seed, after replaying the failures
//! recorded in `fuzz_parsers.proptest-regressions` next to this file. A new
//! failure is appended there by proptest; commit it with the fix.
//!
//! Exploring with fresh random seeds is a separate, non-gating run:
//! `ci/fuzz-explore.sh` (or `VKEXIT_FUZZ_RANDOM=1 PROPTEST_CASES=100000
//! cargo test --release -p vkexit --test fuzz_parsers`).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngAlgorithm, RngSeed};
use std::io::Read;
use std::path::{Path, PathBuf};
use vkexit::explain::Story;
use vkexit::host::drivers;
use vkexit::host::validation;
use vkexit::host::vuid;
use vkexit::judge::BaselineFile;
use vkexit::plan::matrix::Matrix;
use vkexit::report::merge;
use vkexit::run::summaries as evidence;
use vkexit::support::toml_file::TomlFile;

/// The seed every gating run draws its cases from. Changing it changes
/// which inputs CI tries; a failure it finds goes into the regressions file.
const SEED: u64 = 0x766b_6578_6974;

/// `PROPTEST_CASES` when set, else `default` (kept small for CI); a fixed
/// seed unless `VKEXIT_FUZZ_RANDOM=1` asks for exploration.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    let random = std::env::var("VKEXIT_FUZZ_RANDOM").is_ok_and(|v| v == "1");
    ProptestConfig {
        cases,
        // ChaCha's stream for a seed is fixed by its specification, not by
        // proptest's release, so the same seed draws the same cases on
        // every machine and toolchain.
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: if random {
            RngSeed::Random
        } else {
            RngSeed::Fixed(SEED)
        },
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

fn workspace_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Hands out a byte string in the chunk sizes given, as a pipe or a slow
/// disk would.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    next: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes.get(self.next % self.sizes.len().max(1)).copied();
        self.next += 1;
        let n = size
            .unwrap_or(usize::MAX)
            .max(1)
            .min(buf.len())
            .min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Pieces validation logs are made of, and bytes they should not hold.
fn log_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "\\[ VUID-vk[A-Z][a-z]{1,10}-[a-z]{1,8}-0[0-9]{4} \\]".prop_map(String::into_bytes),
        "\\[ UNASSIGNED-[A-Za-z-]{1,20} \\]".prop_map(String::into_bytes),
        Just(b"Validation Error: ".to_vec()),
        Just(b"Validation Warning: ".to_vec()),
        Just(b"(WARN / SPEC): msgNum: 12 - ".to_vec()),
        Just(b"Performance Warning".to_vec()),
        Just(b"[ VUID-".to_vec()),
        Just(b" ]".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(vec![0xff, 0xfe, 0xc3]),
        Just(vec![0u8]),
        ".{0,40}".prop_map(String::into_bytes),
        vec(any::<u8>(), 0..64),
    ]
}

/// Any byte but a newline (mapped, not filtered: filters run out of luck
/// in long runs).
fn one_line_byte() -> impl Strategy<Value = u8> {
    any::<u8>().prop_map(|b| if b == b'\n' { b' ' } else { b })
}

fn log_bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(log_piece(), 0..80).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(config(256))]

    /// Any bytes: no panic, and where the reads happen to split the log
    /// does not change what is found in it.
    #[test]
    fn a_validation_log_reads_the_same_whatever_its_bytes_and_chunks(
        log in log_bytes(),
        sizes in vec(1usize..300, 1..8),
    ) {
        let whole = vuid::scan(&log[..]).unwrap();
        let chunked = vuid::scan(Chunked { data: &log, sizes, next: 0 }).unwrap();
        prop_assert_eq!(&whole, &chunked);
        prop_assert_eq!(whole.cut_mid_line, !log.is_empty() && !log.ends_with(b"\n"));
    }

    /// A message among garbage lines (invalid UTF-8, NULs, half ids) is
    /// still found, even when the log is cut right after it.
    #[test]
    fn a_vuid_among_garbage_lines_is_never_lost(
        before in vec(vec(one_line_byte(), 0..200), 0..20),
        after in vec(vec(one_line_byte(), 0..200), 0..20),
        cut in any::<bool>(),
    ) {
        let id = "VUID-vkDestroyDevice-device-00378";
        let mut log = Vec::new();
        for line in &before {
            log.extend_from_slice(line);
            log.push(b'\n');
        }
        log.extend_from_slice(format!("Validation Error: [ {id} ] Object 0").as_bytes());
        if !cut {
            log.push(b'\n');
            for line in &after {
                log.extend_from_slice(line);
                log.push(b'\n');
            }
        }
        let report = vuid::scan(&log[..]).unwrap();
        prop_assert!(report.ids.contains_key(id), "{:?}", report);
        prop_assert_eq!(report.cut_mid_line, cut);
    }
}

/// Values the evidence readers look for, so that random records reach the
/// code behind each `ev`, not only the JSON parser.
fn vocabulary() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let words = prop_oneof![
        Just("loaded"),
        Just("create"),
        Just("destroy"),
        Just("dead-handle"),
        Just("orphaned"),
        Just("alive"),
        Just("exit"),
        Just("registered"),
        Just("unmapped"),
        Just("worker-started"),
        Just("worker-stopped"),
        Just("exit-handler-start"),
        Just("region-mapped"),
        Just("region-unmapped"),
        Just("preload-loaded"),
        Just("main-start"),
        Just("main-returned"),
        Just("exit-called"),
        Just("handler-registered"),
        Just("handlers-registered"),
        Just("handler-start"),
        Just("handler-end"),
        Just("dl-fini-start"),
        Just("dl-fini-end"),
        Just("dlopen"),
        Just("dlclose"),
        Just("crash"),
        Just("backtrace"),
        Just("atexit"),
        Just("cxa-atexit"),
        Just("cxa-atexit-untimed"),
        Just("VkDevice"),
        Just("VkInstance"),
        Just("unmapped"),
        Just(""),
    ];
    prop_oneof![
        4 => words.prop_map(|w| Value::String(w.to_string())),
        2 => any::<i64>().prop_map(Value::from),
        2 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        1 => ".{0,30}".prop_map(Value::String),
    ]
}

fn record() -> impl Strategy<Value = serde_json::Value> {
    let key = prop_oneof![
        Just("ev"),
        Just("type"),
        Just("handle"),
        Just("call"),
        Just("message"),
        Just("when"),
        Just("created_thread"),
        Just("mode"),
        Just("live_workers"),
        Just("live"),
        Just("t_ns"),
        Just("first_t_ns"),
        Just("id"),
        Just("first_id"),
        Just("last_id"),
        Just("count"),
        Just("kind"),
        Just("registrant"),
        Just("symbol"),
        Just("status"),
        Just("caller"),
        Just("thread"),
        Just("program"),
        Just("path"),
        Just("signal"),
        Just("si_code_name"),
        Just("pc"),
        Just("pc_mapping"),
        Just("addr"),
        Just("exiting"),
        Just("main_returned"),
        Just("worker"),
        Just("device"),
        Just("start"),
        Just("end"),
        Just("frames"),
        Just("ip"),
        Just("object"),
    ];
    let value = vocabulary().prop_recursive(2, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            vec((Just("ip"), inner), 0..3).prop_map(|kv| {
                serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    });
    vec((key, value), 0..10).prop_map(|kv| {
        serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    })
}

/// JSON-lines files as a crashing process leaves them: records, garbage,
/// blank lines, a last line cut short, and the NUL padding a mapped trace
/// file holds where a process did not fill its chunk.
fn jsonl() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        6 => record().prop_map(|r| r.to_string().into_bytes()),
        1 => (record(), 1usize..16).prop_map(|(r, pad)| {
            let mut bytes = r.to_string().into_bytes();
            bytes.resize(bytes.len() + pad, 0);
            bytes
        }),
        1 => (1usize..64).prop_map(|pad| vec![0u8; pad]),
        1 => vec(any::<u8>(), 0..80),
        1 => Just(Vec::new()),
        1 => Just(b"[1,2,3]".to_vec()),
    ];
    (vec(line, 0..40), any::<u16>()).prop_map(|(lines, cut)| {
        let mut out = lines.join(&b'\n');
        out.push(b'\n');
        if cut % 3 == 0 {
            out.truncate(out.len() * usize::from(cut % 1000) / 1000);
        }
        out
    })
}

/// What the evidence readers take as one record: the text between two line
/// ends, where a NUL ends a line as a newline does (a record never holds
/// one), skipping pieces that are only white space. (A piece over 1 MiB
/// would count once per MiB; these inputs are far smaller.)
fn pieces(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|&b| b == b'\n' || b == 0)
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
}

/// The pieces a reader of `E` records must count as bad, each judged alone.
fn bad_pieces<E: vkexit_evidence::read::Entry>(bytes: &[u8]) -> u64 {
    pieces(bytes)
        .filter(|p| match serde_json::from_slice::<serde_json::Value>(p) {
            Ok(value) if value.is_object() => vkexit_evidence::read::parse::<E>(value).is_err(),
            _ => true,
        })
        .count() as u64
}

proptest! {
    #![proptest_config(config(256))]

    /// Every piece that is not a JSON object, and every record of a known event
    /// that does not hold what the event promises, is counted as a bad line, and
    /// nothing else is: NUL padding is not garbage, a record cut by a crash is,
    /// and a record of an event this version does not know is skipped uncounted.
    #[test]
    fn trace_and_tegra_evidence_never_panic_and_count_what_they_skip(bytes in jsonl()) {
        let trace = evidence::read_trace(&bytes[..]).unwrap();
        let tegra = evidence::read_tegra(&bytes[..]).unwrap();
        prop_assert_eq!(trace.bad_lines, bad_pieces::<vkexit_evidence::trace::Entry>(&bytes));
        prop_assert_eq!(tegra.bad_lines, bad_pieces::<vkexit_evidence::tegra::Entry>(&bytes));
        let _ = (trace.leaked(), format!("{trace:?}{tegra:?}"));
    }

    /// The exit timeline, the trace, the tegra evidence and the crash report
    /// of one run directory, each any JSON lines at all: `explain` reads,
    /// summarises and renders them without panicking.
    #[test]
    fn explain_reads_any_run_directory(
        timeline in jsonl(),
        trace in jsonl(),
        tegra in jsonl(),
        crash in jsonl(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [
            (vkexit_evidence::files::TIMELINE.name, &timeline),
            (vkexit_evidence::files::TRACE.name, &trace),
            (vkexit_evidence::files::TEGRA.name, &tegra),
            (vkexit_evidence::files::CRASH.name, &crash),
        ] {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let story = Story::read(dir.path());
        let _ = story.summary();
        let _ = story.render();
    }
}

/// Edits that turn a good file into a bad one the way people and tools do:
/// a range deleted, text inserted, a line duplicated.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let insert = prop_oneof![
        Just("="),
        Just("\""),
        Just("'"),
        Just("["),
        Just("]]"),
        Just("[[expect]]\n"),
        Just("[[external]]\n"),
        Just("{"),
        Just("}"),
        Just(","),
        Just("\n"),
        Just("#"),
        Just("runs = -1\n"),
        Just("timeout = 1e400\n"),
        Just("runs = 99999999999999999999\n"),
        Just("cases = [\"nope\"]\n"),
        Just("expect = \"maybe\"\n"),
        Just("\u{0}"),
        Just("é"),
        Just("drivers = 3\n"),
        Just("flaky = \"yes\"\n"),
        Just("\"\"\""),
    ]
    .prop_map(str::to_string);
    let edit = prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<usize>(), prop_oneof![insert, ".{0,12}"]).prop_map(|(at, s)| Edit::Insert(at, s)),
        any::<usize>().prop_map(Edit::DuplicateLine),
    ];
    vec(edit, 0..6)
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut t = text.to_string();
    let boundary = |t: &str, at: usize| {
        let mut i = at % (t.len() + 1);
        while !t.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    for e in edits {
        match e {
            Edit::Delete(at, n) => {
                let a = boundary(&t, *at);
                let b = boundary(&t, a.saturating_add(*n).min(t.len()));
                t.replace_range(a..b.max(a), "");
            }
            Edit::Insert(at, s) => {
                let a = boundary(&t, *at);
                t.insert_str(a, s);
            }
            Edit::DuplicateLine(at) => {
                let lines: Vec<&str> = t.lines().collect();
                if !lines.is_empty() {
                    let i = at % lines.len();
                    let mut out: Vec<&str> = lines.clone();
                    out.insert(i, lines[i]);
                    t = out.join("\n");
                }
            }
        }
    }
    t
}

/// "PATH:LINE:COLUMN: …" with numbers that are inside the file.
fn assert_located(message: &str, path: &str, text: &str) -> Result<(), TestCaseError> {
    let rest = message.strip_prefix(&format!("{path}:"));
    prop_assert!(rest.is_some(), "no file name in: {message}");
    let mut parts = rest.unwrap().splitn(3, ':');
    let line: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|_| TestCaseError::fail(format!("no line in: {message}")))?;
    let column: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|_| TestCaseError::fail(format!("no column in: {message}")))?;
    prop_assert!(
        line >= 1 && line <= text.split('\n').count(),
        "line {line} out of the file: {message}"
    );
    prop_assert!(column >= 1, "{message}");
    Ok(())
}

fn toml_file(name: &str, text: String) -> TomlFile {
    TomlFile {
        path: PathBuf::from(name),
        text,
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_damaged_matrix_file_is_refused_with_file_line_and_column(e in edits()) {
        for source in ["ci/matrix/lavapipe.toml", "ci/matrix/meta.toml", "ci/matrix/real-runtimes.toml"] {
            let text = apply(&workspace_file(source), &e);
            if let Err(err) = Matrix::parse(&toml_file("fuzz/m.toml", text.clone())) {
                assert_located(&err.to_string(), "fuzz/m.toml", &text)?;
            }
        }
    }

    #[test]
    fn a_damaged_baseline_file_is_refused_with_file_line_and_column(e in edits()) {
        for source in ["ci/baselines/lavapipe.toml", "ci/baselines/meta.toml"] {
            let text = apply(&workspace_file(source), &e);
            if let Err(err) = BaselineFile::parse(&toml_file("fuzz/b.toml", text.clone())) {
                assert_located(&err.to_string(), "fuzz/b.toml", &text)?;
            }
        }
    }

    #[test]
    fn any_text_as_a_toml_file_never_panics(text in ".{0,300}") {
        for result in [
            Matrix::parse(&toml_file("fuzz/m.toml", text.clone())).map(|_| ()),
            BaselineFile::parse(&toml_file("fuzz/b.toml", text.clone())).map(|_| ()),
        ] {
            if let Err(err) = result {
                prop_assert!(err.to_string().starts_with("fuzz/"), "{}", err);
            }
        }
    }
}

fn icd_manifest() -> impl Strategy<Value = Vec<u8>> {
    let library = prop_oneof![
        Just(serde_json::json!("libvulkan_lvp.so")),
        Just(serde_json::json!(
            "/usr/lib/x86_64-linux-gnu/libvulkan_radeon.so"
        )),
        Just(serde_json::json!("")),
        Just(serde_json::json!("/")),
        Just(serde_json::json!(7)),
        Just(serde_json::json!(null)),
        ".{0,20}".prop_map(serde_json::Value::String),
    ];
    (library, any::<bool>(), vec(any::<u8>(), 0..3), any::<u16>()).prop_map(
        |(library, nested, noise, cut)| {
            let json = if nested {
                serde_json::json!({"file_format_version": "1.0.0", "ICD": {"library_path": library, "api_version": "1.3.0"}})
            } else {
                serde_json::json!({"ICD": library})
            };
            let mut text = json.to_string().into_bytes();
            if cut % 2 == 0 {
                let at = usize::from(cut) % (text.len() + 1);
                text.truncate(at);
            }
            text.extend_from_slice(&noise);
            text
        },
    )
}

fn layer_manifest() -> impl Strategy<Value = Vec<u8>> {
    let name = prop_oneof![
        Just(serde_json::json!(validation::LAYER_NAME)),
        Just(serde_json::json!("VK_LAYER_MESA_overlay")),
        Just(serde_json::json!(3)),
    ];
    let library = prop_oneof![
        Just(serde_json::json!("libVkLayer_khronos_validation.so")),
        Just(serde_json::json!("./libVkLayer_gone.so")),
        Just(serde_json::json!("/nonexistent/lib.so")),
        Just(serde_json::json!("")),
        Just(serde_json::json!("/")),
        Just(serde_json::json!(["a"])),
        ".{0,20}".prop_map(serde_json::Value::String),
    ];
    (name, library, any::<bool>(), any::<u16>()).prop_map(|(name, library, list, cut)| {
        let layer = serde_json::json!({"name": name, "type": "GLOBAL", "library_path": library, "api_version": "1.3.239"});
        let json = if list {
            serde_json::json!({"file_format_version": "1.2.0", "layers": [layer, {"name": null}]})
        } else {
            serde_json::json!({"file_format_version": "1.2.0", "layer": layer})
        };
        let mut text = json.to_string().into_bytes();
        if cut % 3 == 0 {
            text.truncate(usize::from(cut) % (text.len() + 1));
        }
        text
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn an_icd_manifest_is_read_or_refused_with_a_reason(text in icd_manifest(), raw in vec(any::<u8>(), 0..64)) {
        let dir = tempfile::tempdir().unwrap();
        for bytes in [&text[..], &raw[..]] {
            let path = dir.path().join("fuzz_icd.json");
            std::fs::write(&path, bytes).unwrap();
            match drivers::read_manifest(&path) {
                Ok(d) => {
                    let json: serde_json::Value = serde_json::from_slice(bytes).unwrap();
                    prop_assert_eq!(Some(d.library.as_str()), json.pointer("/ICD/library_path").and_then(|v| v.as_str()));
                }
                Err(why) => {
                    let why = why.to_string();
                    prop_assert!(!why.is_empty());
                    if serde_json::from_slice::<serde_json::Value>(bytes).is_err() {
                        prop_assert!(why.contains("line"), "{}", why);
                    }
                }
            }
        }
    }

    /// A layer manifest: another layer's or an unreadable one is skipped; the
    /// validation layer's is read, or refused naming the library it lacks.
    #[test]
    fn a_layer_manifest_is_read_skipped_or_refused_naming_its_library(text in layer_manifest()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("VkLayer_khronos_validation.json");
        std::fs::write(&path, &text).unwrap();
        match validation::read_layer_manifest(&path) {
            Ok(Some(layer)) => prop_assert!(layer.library.exists(), "{:?}", layer.library),
            Ok(None) => {}
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.contains(&path.display().to_string()), "{}", message);
            }
        }
    }
}

fn results_text(counts: [u64; 3], runs: u64, vuid_count: u64) -> String {
    serde_json::json!({
        "schema": "vkexit.results/1",
        "vkexit_version": "0.1.0",
        "interrupted": false,
        "shard": null,
        "cells": [{
            "case": "clean-exit", "runtime": "refrt:never", "driver": "lavapipe",
            "layers": ["VK_LAYER_KHRONOS_validation"], "emulation": "none",
            "runs": runs,
            "counts": {"pass": counts[0], "crash": counts[1], "exit": 0, "vuid": counts[2], "timeout": 0, "error": 0, "leak": 0},
            "verdict": "fail", "vuids": ["VUID-vkDestroyDevice-device-00378"],
            "vuid_counts": {"VUID-vkDestroyDevice-device-00378": vuid_count},
            "signals": ["SIGSEGV"], "artifacts": ["/a/clean-exit/run-0"],
            "pass_rate": 0.5, "pass_rate_95": [0.1, 0.9], "duration_ms": 12
        }]
    })
    .to_string()
}

#[test]
fn the_results_template_is_a_results_file() {
    let r = merge::parse(&results_text([1, 1, 0], 2, 0)).expect("a valid results file");
    assert_eq!(r.cells.len(), 1);
    assert_eq!(r.cells[0].counts.pass, 1);
}

/// Counts a results file may claim: merging them adds numbers, it does not
/// loop once per run (a file claiming 10^18 runs would never finish, so the
/// test finishing is the check; no clock is read, so load cannot fail it).
#[test]
fn merging_results_with_absurd_counts_finishes_and_saturates() {
    let big = u64::MAX / 2 + 7;
    let a = merge::parse(&results_text([big, big, big], big, big)).unwrap();
    let b = merge::parse(&results_text([big, 3, big], big, big)).unwrap();
    let m = merge::merge(vec![a, b]);
    let c = &m.cells[0];
    assert_eq!(c.counts.pass, u64::MAX);
    assert_eq!(c.runs, u64::MAX);
    assert_eq!(c.counts.crash, big + 3);
    assert_eq!(c.vuid_counts["VUID-vkDestroyDevice-device-00378"], u64::MAX);
    assert_eq!(c.verdict.name(), "error", "counts that overflow: {c:?}");
    assert!(c.reason.as_deref().unwrap().contains("overflow"), "{c:?}");
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_results_file_is_parsed_or_refused_and_merging_never_panics(
        counts in proptest::array::uniform3(prop_oneof![0u64..50, any::<u64>()]),
        runs in prop_oneof![0u64..100, any::<u64>()],
        vuids in any::<u64>(),
        e in edits(),
        text in ".{0,200}",
    ) {
        let good = results_text(counts, runs, vuids);
        let damaged = apply(&good, &e);
        let parsed: Vec<_> = [good.as_str(), damaged.as_str(), text.as_str()]
            .into_iter()
            .filter_map(|t| merge::parse(t).ok())
            .collect();
        prop_assert!(!parsed.is_empty(), "the undamaged file parses");
        let merged = merge::merge(parsed);
        for c in &merged.cells {
            let _ = (c.counts.total(), c.counts.failures(), c.is_green());
        }
    }
}

/// A timeline that claims huge ranges of exit handlers, many times over:
/// `explain` (also used on every failing run) works on the ranges, never on
/// each handler in them. What shows it without a clock: the story it tells
/// stays about as long as the file, not as long as two billion handlers.
#[test]
fn a_timeline_claiming_billions_of_handlers_tells_a_short_story() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..2000u64 {
        text.push_str(&format!(
            "{{\"ev\":\"handlers-registered\",\"first_id\":{},\"last_id\":{},\"count\":1,\"registrant\":\"/x/lib.so\"}}\n",
            i * 1_000_000,
            i * 1_000_000 + 999_999
        ));
    }
    text.push_str("{\"ev\":\"handlers-registered\",\"first_id\":-1,\"last_id\":-1}\n");
    text.push_str("{\"ev\":\"crash\",\"signal\":\"SIGSEGV\"}\n");
    std::fs::write(
        dir.path().join(vkexit_evidence::files::TIMELINE.name),
        &text,
    )
    .unwrap();
    std::fs::write(
        dir.path().join(vkexit_evidence::files::CRASH.name),
        "{\"ev\":\"crash\",\"signal\":\"SIGSEGV\"}\n",
    )
    .unwrap();
    let story = Story::read(dir.path());
    let rendered = story.render();
    assert!(
        rendered.len() < 4 * text.len(),
        "{} bytes of story from {} bytes of timeline",
        rendered.len(),
        text.len()
    );
    assert!(rendered.contains("SIGSEGV"), "{rendered}");
}
