//! Every record kind of every evidence file, written with the writer and read back with the
//! reader: the two sides agree on event names, field names and value types. Each `sample`
//! matches on the file's `Event` without a wildcard, so an event added to a file without a
//! sample here does not build.

use std::path::Path;
use vkexit_evidence::read::{self, Entry, Stamp};
use vkexit_evidence::{crash, files, tegra, timeline, trace, EvidenceLog, MappedLog, Record};

fn s(text: &str) -> String {
    text.to_string()
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

/// Writes one record of each event through `log`, then reads the file back.
fn round_trip<E: Entry + PartialEq + std::fmt::Debug>(
    path: &Path,
    events: &[E::Event],
    sample: impl Fn(E::Event) -> (Record, E),
) -> Vec<(Stamp, E)> {
    let log = EvidenceLog::open(path).unwrap();
    let mut expected = Vec::new();
    for &event in events {
        let (record, entry) = sample(event);
        log.write(record).unwrap();
        expected.push(entry);
    }
    let mut read_back = Vec::new();
    let bad = read::records(std::fs::File::open(path).unwrap(), |stamp, entry: E| {
        read_back.push((stamp, entry))
    })
    .unwrap();
    assert_eq!(bad, 0);
    let entries: Vec<&E> = read_back.iter().map(|(_, e)| e).collect();
    assert_eq!(entries, expected.iter().collect::<Vec<_>>());
    for (stamp, _) in &read_back {
        assert_eq!(stamp.pid, Some(i64::from(std::process::id())));
        assert_eq!(stamp.tid, Some(vkexit_evidence::thread_id()));
        assert!(stamp.t_ns > 0);
        assert!(!stamp.truncated);
    }
    read_back
}

fn trace_sample(event: trace::Event) -> (Record, trace::Entry) {
    use trace::{field as f, Event as E};
    let mut r = Record::new(event.as_str());
    let object = |r: &mut Record, call: &str| {
        r.str(f::TYPE, "VkBuffer")
            .hex(f::HANDLE, 0x2a)
            .hex(f::PARENT, 0x55d0)
            .str(f::PARENT_TYPE, "VkDevice")
            .str(f::CALL, call);
        trace::Object {
            ty: s("VkBuffer"),
            handle: s("0x2a"),
            parent: s("0x55d0"),
            parent_type: some("VkDevice"),
            call: s(call),
        }
    };
    let alive = |r: &mut Record, when: trace::When| {
        r.str(f::WHEN, when.as_str())
            .str(f::TYPE, "VkDevice")
            .hex(f::HANDLE, 0x55d0)
            .hex(f::PARENT, 0x10)
            .str(f::PARENT_TYPE, "VkInstance")
            .str(f::CALL, "vkCreateDevice")
            .bytes_str(f::CREATED_THREAD, b"wor\"ker")
            .i64(f::CREATED_TID, 12)
            .u64(f::CREATED_T_NS, 99);
        trace::Alive {
            when: s(when.as_str()),
            ty: s("VkDevice"),
            handle: s("0x55d0"),
            parent: s("0x10"),
            parent_type: some("VkInstance"),
            call: s("vkCreateDevice"),
            created_thread: s("wor\"ker"),
            created_tid: 12,
            created_t_ns: 99,
        }
    };
    let entry = match event {
        E::Loaded => {
            r.str(f::LAYER, "VK_LAYER_VKEXIT_trace")
                .str(f::VERSION, "0.1.0")
                .u64(f::EXIT_HANDLER_T_NS, 5);
            trace::Entry::Loaded(trace::Loaded {
                layer: s("VK_LAYER_VKEXIT_trace"),
                version: s("0.1.0"),
                exit_handler_t_ns: 5,
            })
        }
        E::Create => trace::Entry::Create(object(&mut r, "vkCreateBuffer")),
        E::Destroy => trace::Entry::Destroy(object(&mut r, "vkDestroyBuffer")),
        E::DeadHandle => {
            r.str(f::CALL, "vkDestroyBuffer")
                .str(f::TYPE, "VkBuffer")
                .hex(f::HANDLE, 0x2a)
                .str(f::MESSAGE, "m")
                .str(f::DESTROYED_BY, "vkDestroyDevice")
                .str(f::ANCESTOR_TYPE, "VkDevice")
                .hex(f::ANCESTOR, 0x55d0);
            trace::Entry::DeadHandle(trace::DeadHandle {
                call: s("vkDestroyBuffer"),
                ty: s("VkBuffer"),
                handle: s("0x2a"),
                message: s("m"),
                destroyed_by: s("vkDestroyDevice"),
                ancestor: some("0x55d0"),
                ancestor_type: some("VkDevice"),
            })
        }
        E::ExitHandlerStart => {
            r.u64(f::LIVE, 3);
            trace::Entry::ExitHandlerStart(trace::ExitHandlerStart { live: 3 })
        }
        E::ExitHandlerEnd => trace::Entry::ExitHandlerEnd,
        E::Alive => trace::Entry::Alive(alive(&mut r, trace::When::Exit)),
        E::Orphaned => trace::Entry::Orphaned(alive(&mut r, trace::When::DestroyDevice)),
    };
    (r, entry)
}

fn tegra_sample(event: tegra::Event) -> (Record, tegra::Entry) {
    use tegra::{field as f, Event as E};
    let mut r = Record::new(event.as_str());
    let region = |r: &mut Record| {
        r.hex(f::START, 0x7f00).hex(f::END, 0x8000);
        tegra::Region {
            start: s("0x7f00"),
            end: s("0x8000"),
        }
    };
    let worker = |r: &mut Record, sleep_us: Option<u64>| {
        r.hex(f::DEVICE, 0x55a0)
            .str(f::WORKER, "vkexit-tegra-0")
            .i64(f::WORKER_TID, 12);
        if let Some(us) = sleep_us {
            r.u64(f::SLEEP_US, us);
        }
        tegra::Worker {
            device: s("0x55a0"),
            worker: s("vkexit-tegra-0"),
            worker_tid: 12,
            sleep_us,
        }
    };
    let entry = match event {
        E::Loaded => {
            r.str(f::LAYER, "VK_LAYER_VKEXIT_tegra_exit")
                .str(f::MODE, "deterministic")
                .hex(f::INSTANCE, 0x10);
            tegra::Entry::Loaded(tegra::Loaded {
                layer: s("VK_LAYER_VKEXIT_tegra_exit"),
                mode: s("deterministic"),
                instance: some("0x10"),
                result: None,
            })
        }
        E::Warning => {
            r.str(f::LAYER, "VK_LAYER_VKEXIT_tegra_exit")
                .str(f::MESSAGE, "unknown mode");
            tegra::Entry::Warning(tegra::Warning {
                layer: s("VK_LAYER_VKEXIT_tegra_exit"),
                message: s("unknown mode"),
            })
        }
        E::RegionMapped => tegra::Entry::RegionMapped(region(&mut r)),
        E::WorkerStarted => tegra::Entry::WorkerStarted(worker(&mut r, Some(1000))),
        E::WorkerStopped => tegra::Entry::WorkerStopped(worker(&mut r, None)),
        E::ExitHandlerStart => {
            r.u64(f::LIVE_WORKERS, 1);
            tegra::Entry::ExitHandlerStart(tegra::ExitHandlerStart { live_workers: 1 })
        }
        E::RegionUnmapped => tegra::Entry::RegionUnmapped(region(&mut r)),
        E::WaitingForFault => tegra::Entry::WaitingForFault,
        E::ExitHandlerEnd => tegra::Entry::ExitHandlerEnd,
    };
    (r, entry)
}

/// Ten other threads in four states, each a different count.
const THREAD_STATES: timeline::ThreadStates = timeline::ThreadStates {
    alive: 10,
    runnable: 1,
    asleep: 2,
    blocked: 3,
    stopped: 4,
};

fn thread_states(r: &mut Record) {
    use timeline::field as f;
    r.u64(f::ALIVE, 10)
        .u64(f::RUNNABLE, 1)
        .u64(f::ASLEEP, 2)
        .u64(f::BLOCKED, 3)
        .u64(f::STOPPED, 4);
}

fn timeline_sample(event: timeline::Event) -> (Record, timeline::Entry) {
    use timeline::{field as f, Event as E};
    let mut r = Record::new(event.as_str());
    let entry = match event {
        E::PreloadLoaded => {
            r.str(f::PROGRAM, "/x/clean-exit")
                .bool(f::CRASH_REPORT, true);
            timeline::Entry::PreloadLoaded(timeline::PreloadLoaded {
                program: some("/x/clean-exit"),
                crash_report: true,
            })
        }
        E::MainStart => {
            r.i64(f::ARGC, 3);
            timeline::Entry::MainStart(timeline::MainStart { argc: 3 })
        }
        E::MainReturned => {
            r.i64(f::STATUS, -1);
            timeline::Entry::MainReturned(timeline::Status { status: -1 })
        }
        E::ExitCalled => {
            r.i64(f::STATUS, 0)
                .raw(f::CALLER, "null")
                .hex(f::CALLER_ADDRESS, 0x401000);
            timeline::Entry::ExitCalled(timeline::ExitCalled {
                status: 0,
                caller: None,
                caller_address: s("0x401000"),
            })
        }
        E::HandlerRegistered => {
            r.u64(f::ID, 2)
                .str(f::KIND, timeline::HandlerKind::Atexit.as_str())
                .str(f::REGISTRANT, "/x/libvkexit_refrt.so")
                .hex(f::FUNCTION, 0x7f01)
                .str(f::SYMBOL, "refrt_load_time_destructor")
                .str(f::FUNCTION_OBJECT, "/x/libvkexit_refrt.so")
                .hex(f::FUNCTION_OFFSET, 0x1)
                .hex(f::ARG, 0x2)
                .str(f::CALL_OBJECT, "/x/libvkexit_refrt.so")
                .hex(f::CALL_OFFSET, 0x40)
                .bool(f::WRAPPED, true)
                .str(f::CLASS, "runtime")
                .str(f::PHASE, "in-dlopen");
            timeline::Entry::HandlerRegistered(timeline::HandlerRegistered {
                id: 2,
                kind: s("atexit"),
                registrant: some("/x/libvkexit_refrt.so"),
                function: s("0x7f01"),
                symbol: some("refrt_load_time_destructor"),
                function_object: some("/x/libvkexit_refrt.so"),
                function_offset: some("0x1"),
                arg: some("0x2"),
                call_object: some("/x/libvkexit_refrt.so"),
                call_offset: some("0x40"),
                wrapped: true,
                class: some("runtime"),
                phase: some("in-dlopen"),
            })
        }
        E::HandlersRegistered => {
            r.u64(f::FIRST_ID, 1)
                .u64(f::LAST_ID, 500)
                .u64(f::COUNT, 500)
                .str(f::KIND, timeline::HandlerKind::CxaAtexit.as_str())
                .u64(f::FIRST_T_NS, 20)
                .bool(f::WRAPPED, false)
                .str(f::REGISTRANT, "/l/libLLVM-15.so.1")
                .str(f::CLASS, "vulkan")
                .str(f::PHASE, "running");
            timeline::Entry::HandlersRegistered(timeline::HandlersRegistered {
                first_id: 1,
                last_id: 500,
                count: 500,
                kind: s("cxa-atexit"),
                first_t_ns: 20,
                wrapped: false,
                registrant: some("/l/libLLVM-15.so.1"),
                class: some("vulkan"),
                phase: some("running"),
            })
        }
        E::HandlerStart => {
            r.u64(f::ID, 5);
            timeline::Entry::HandlerStart(timeline::Handler { id: 5 })
        }
        E::HandlerEnd => {
            r.u64(f::ID, 5);
            timeline::Entry::HandlerEnd(timeline::Handler { id: 5 })
        }
        E::DlFiniStart => timeline::Entry::DlFiniStart,
        E::DlFiniEnd => timeline::Entry::DlFiniEnd,
        E::LibraryDestructorStart => {
            r.u64(f::ID, 3)
                .str(f::OBJECT, "/x/libpool.so")
                .str(f::CLASS, "runtime")
                .str(f::SYMBOL, "pool_fini")
                .hex(f::FUNCTION_OFFSET, 0x1139)
                .str(f::MOVED_BEFORE, "libctx.so");
            timeline::Entry::LibraryDestructorStart(timeline::LibraryDestructor {
                id: 3,
                object: some("/x/libpool.so"),
                class: some("runtime"),
                symbol: some("pool_fini"),
                function_offset: some("0x1139"),
                moved_before: some("libctx.so"),
            })
        }
        E::LibraryDestructorEnd => {
            r.u64(f::ID, 3);
            timeline::Entry::LibraryDestructorEnd(timeline::Handler { id: 3 })
        }
        E::Dlopen => {
            r.str(f::PATH, "libvulkan.so.1")
                .hex(f::MODE, 2)
                .hex(f::HANDLE, 0x5000)
                .bool(f::OK, true)
                .bool(f::OBSERVED, true)
                .u64(f::CALL_NS, 7)
                .str(f::CALLER, "/x/app");
            timeline::Entry::Dlopen(timeline::Dlopen {
                path: some("libvulkan.so.1"),
                mode: s("0x2"),
                handle: some("0x5000"),
                ok: Some(true),
                observed: true,
                call_ns: Some(7),
                caller: some("/x/app"),
            })
        }
        E::Dlclose => {
            r.str(f::PATH, "/l/libvulkan.so.1")
                .hex(f::HANDLE, 0x5000)
                .i64(f::RESULT, 0)
                .u64(f::CALL_NS, 8);
            timeline::Entry::Dlclose(timeline::Dlclose {
                path: s("/l/libvulkan.so.1"),
                handle: s("0x5000"),
                result: 0,
                call_ns: 8,
            })
        }
        E::VulkanObject => {
            r.str(f::ROLE, timeline::Role::Driver.as_str())
                .str(f::PATH, "/usr/lib/libvulkan_lvp.so")
                .str(f::CALLER, "/l/libvulkan.so.1");
            timeline::Entry::VulkanObject(timeline::VulkanObject {
                role: s("driver"),
                path: s("/usr/lib/libvulkan_lvp.so"),
                caller: some("/l/libvulkan.so.1"),
            })
        }
        E::ExitReordered => {
            r.str(f::ORDER, "module,linked")
                .u64(f::MOVED, 2)
                .str(f::MOVED_IDS, "3,4")
                .str(f::RUN_ORDER, "9,3,4,1")
                .u64(f::PENDING, 4)
                .u64(f::CHAOS_SEED, 7);
            timeline::Entry::ExitReordered(timeline::ExitReordered {
                order: s("module,linked"),
                moved: 2,
                moved_ids: s("3,4"),
                run_order: s("9,3,4,1"),
                pending: 4,
                chaos_seed: Some(7),
            })
        }
        E::ChaosPause => {
            r.u64(f::BEFORE_ID, 3).u64(f::WAITED_NS, 1000);
            thread_states(&mut r);
            r.u64(f::CHAOS_SEED, 7);
            timeline::Entry::ChaosPause(timeline::ChaosPause {
                before_id: 3,
                waited_ns: 1000,
                running: 0,
                threads: THREAD_STATES,
                chaos_seed: 7,
            })
        }
        E::TeardownHold => {
            r.str(f::CALL, "vkDestroyBuffer").u64(f::HELD_NS, 2000);
            thread_states(&mut r);
            r.u64(f::WOKE, 1);
            timeline::Entry::TeardownHold(timeline::TeardownHold {
                call: s("vkDestroyBuffer"),
                held_ns: 2000,
                threads: THREAD_STATES,
                woke: 1,
            })
        }
        E::TeardownWatched => timeline::Entry::TeardownWatched,
        E::SharedWrite => {
            r.str(f::NAME, "shader.spv");
            timeline::Entry::SharedWrite(timeline::SharedWrite {
                name: s("shader.spv"),
            })
        }
    };
    (r, entry)
}

fn crash_sample(event: crash::Event) -> (Record, crash::Entry) {
    use crash::{field as f, frame_field as ff, Event as E};
    let mut r = Record::new(event.as_str());
    let entry = match event {
        E::Crash => {
            r.i64(f::PPID, 1)
                .bytes_str(f::CMDLINE, b"mock --signal SIGSEGV")
                .str(f::THEN, crash::Then::DefaultAction.as_str())
                .str(f::SIGNAL, "SIGSEGV")
                .i64(f::SIGNO, 11)
                .i64(f::SI_CODE, 1)
                .str(f::SI_CODE_NAME, "SEGV_MAPERR")
                .hex(f::ADDR, 0x7f08)
                .hex(f::PC, 0x7f08)
                .str(crash::PC_MAPPING.mapping, crash::UNMAPPED)
                .str(crash::ADDR_MAPPING.mapping, "/x/lib.so")
                .str(crash::ADDR_MAPPING.perms, "r-xp")
                .hex(crash::ADDR_MAPPING.offset, 0x8)
                .bool(f::MAIN_RETURNED, true)
                .raw(f::EXIT_CALLED, "null")
                .bool(f::EXITING, true)
                .str(f::HANDLER, crash::Writer::Preload.as_str());
            crash::Entry::Crash(Box::new(crash::Crash {
                ppid: Some(1),
                cmdline: some("mock --signal SIGSEGV"),
                then: some("default-action"),
                signal: some("SIGSEGV"),
                signo: Some(11),
                si_code: Some(1),
                si_code_name: some("SEGV_MAPERR"),
                addr: some("0x7f08"),
                sender_pid: None,
                pc: some("0x7f08"),
                pc_mapping: some("unmapped"),
                pc_perms: None,
                pc_offset: None,
                addr_mapping: some("/x/lib.so"),
                addr_perms: some("r-xp"),
                addr_offset: some("0x8"),
                main_returned: Some(true),
                exit_called: None,
                exiting: Some(true),
                handler: some("preload"),
            }))
        }
        E::Backtrace => {
            let frames = format!(
                r#"[{{"{}":"0x1","{}":"/x/app","{}":"main","{}":"app.c","{}":7}},{{"{}":"0x2"}}]"#,
                ff::IP,
                ff::OBJECT,
                ff::SYMBOL,
                ff::FILE,
                ff::LINE,
                ff::IP
            );
            r.raw(f::FRAMES, &frames).u64(f::FRAMES_OMITTED, 2);
            crash::Entry::Backtrace(crash::Backtrace {
                frames: vec![
                    crash::Frame {
                        ip: s("0x1"),
                        object: some("/x/app"),
                        symbol: some("main"),
                        file: some("app.c"),
                        line: Some(7),
                    },
                    crash::Frame {
                        ip: s("0x2"),
                        ..crash::Frame::default()
                    },
                ],
                frames_omitted: 2,
                error: None,
            })
        }
        E::Fatal => {
            r.str(f::SIGNAL, "SIGBUS").hex(f::PC, 0x3);
            crash::Entry::Fatal(crash::Fatal {
                signal: some("SIGBUS"),
                pc: some("0x3"),
            })
        }
    };
    (r, entry)
}

#[test]
fn every_trace_record_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(files::TRACE.name);
    round_trip(&path, trace::Event::ALL, trace_sample);
}

#[test]
fn every_tegra_record_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(files::TEGRA.name);
    round_trip(&path, tegra::Event::ALL, tegra_sample);
}

#[test]
fn every_timeline_record_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(files::TIMELINE.name);
    round_trip(&path, timeline::Event::ALL, timeline_sample);
}

#[test]
fn every_crash_record_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(files::CRASH.name);
    round_trip(&path, crash::Event::ALL, crash_sample);
}

#[test]
fn a_mapped_trace_reads_back_through_its_nul_padding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(files::TRACE.name);
    let log = MappedLog::open(&path).unwrap();
    let mut written = Vec::new();
    for &event in trace::Event::ALL {
        let (mut record, entry) = trace_sample(event);
        log.write(&mut record).unwrap();
        written.push(entry);
    }
    // No close_tail: as a crash leaves it, the chunk's unused end is NUL bytes.
    drop(log);
    let mut read_back = Vec::new();
    let bad = read::records(std::fs::File::open(&path).unwrap(), |_, e: trace::Entry| {
        read_back.push(e)
    })
    .unwrap();
    assert_eq!((read_back, bad), (written, 0));
}

#[test]
fn a_truncated_record_says_so_and_keeps_what_fit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(files::TEGRA.name);
    let log = EvidenceLog::open(&path).unwrap();
    let mut record = Record::new(tegra::Event::Warning.as_str());
    record
        .str(tegra::field::LAYER, "VK_LAYER_VKEXIT_tegra_exit")
        .str(
            tegra::field::MESSAGE,
            &"x".repeat(vkexit_evidence::RECORD_CAPACITY),
        );
    log.write(record).unwrap();
    let mut read_back = Vec::new();
    read::records(
        std::fs::File::open(&path).unwrap(),
        |stamp, e: tegra::Entry| read_back.push((stamp.truncated, e)),
    )
    .unwrap();
    assert_eq!(
        read_back,
        [(
            true,
            tegra::Entry::Warning(tegra::Warning {
                layer: s("VK_LAYER_VKEXIT_tegra_exit"),
                message: String::new(),
            })
        )]
    );
}

#[test]
fn wire_names_are_unique_and_read_back_as_their_event() {
    fn check<T: Copy + PartialEq + std::fmt::Debug>(
        all: &[T],
        name: fn(T) -> &'static str,
        from: fn(&str) -> Option<T>,
    ) {
        for (i, &a) in all.iter().enumerate() {
            assert_eq!(from(name(a)), Some(a));
            assert!(all[i + 1..].iter().all(|&b| name(b) != name(a)));
        }
        assert_eq!(from("no-such-event"), None);
    }
    check(
        trace::Event::ALL,
        trace::Event::as_str,
        trace::Event::from_wire,
    );
    check(
        tegra::Event::ALL,
        tegra::Event::as_str,
        tegra::Event::from_wire,
    );
    check(
        timeline::Event::ALL,
        timeline::Event::as_str,
        timeline::Event::from_wire,
    );
    check(
        crash::Event::ALL,
        crash::Event::as_str,
        crash::Event::from_wire,
    );
    check(
        trace::When::ALL,
        trace::When::as_str,
        trace::When::from_wire,
    );
    check(
        crash::Then::ALL,
        crash::Then::as_str,
        crash::Then::from_wire,
    );
}

#[test]
fn a_record_of_the_wrong_shape_is_bad_and_an_unknown_event_is_skipped() {
    let text = "{\"ev\":\"worker-started\",\"worker_tid\":\"twelve\"}\n\
                {\"ev\":\"from-a-newer-layer\",\"x\":1}\n\
                {\"ev\":\"exit-handler-start\",\"live_workers\":2}\n\
                {\"ev\":\"exit-hand";
    let mut read_back = Vec::new();
    let bad = read::records(text.as_bytes(), |_, e: tegra::Entry| read_back.push(e)).unwrap();
    assert_eq!(bad, 2);
    assert_eq!(
        read_back,
        [tegra::Entry::ExitHandlerStart(tegra::ExitHandlerStart {
            live_workers: 2
        })]
    );
}

/// A `chaos-pause` of an older timeline counted the other threads alive in `running`, with no
/// states: it still reads, its states all zero, so a reader can tell it from a new one.
#[test]
fn an_older_chaos_pause_reads_with_its_count_and_no_states() {
    let line = r#"{"ev":"chaos-pause","t_ns":1,"pid":2,"tid":2,"thread":"p","before_id":3,"waited_ns":0,"running":2,"chaos_seed":1}"#;
    let mut read = Vec::new();
    let bad = read::records(line.as_bytes(), |_, e: timeline::Entry| read.push(e)).unwrap();
    assert_eq!(bad, 0);
    assert_eq!(
        read,
        [timeline::Entry::ChaosPause(timeline::ChaosPause {
            before_id: 3,
            waited_ns: 0,
            running: 2,
            threads: timeline::ThreadStates::default(),
            chaos_seed: 1,
        })]
    );
}
