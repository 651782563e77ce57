//! The mock scenario under the preloaded library: each way it dies is reported, and it still
//! dies that way.

use vkexit_testkit::built;
use vkexit_testkit::preload::{hex, run, t_ns, Plan};

fn mock(args: &[&str]) -> Plan {
    Plan::new(built("mock"), args)
}

/// `mock --signal NAME`: the mock sets the default action and raises the signal, so the
/// handler sees a signal sent by the process itself, in `raise` (glibc), before `main` returned.
fn assert_raised(signal: &str, signo: i32) {
    let run = run(mock(&["--signal", signal, "--no-vulkan"]));
    assert_eq!(run.signal(), Some(signo), "{}", run.describe());
    let crash = run.crash_record("crash");
    assert_eq!(crash["signal"], signal);
    assert_eq!(crash["signo"], signo);
    assert_eq!(crash["si_code"], -6, "{crash}");
    assert_eq!(crash["si_code_name"], "SI_TKILL");
    assert!(crash["addr"].is_null());
    assert_eq!(crash["sender_pid"], run.pid);
    assert_eq!(crash["tid"], run.pid);
    assert_eq!(crash["thread"], "mock");
    assert!(hex(&crash["pc"]) > 0);
    assert!(
        crash["pc_mapping"]
            .as_str()
            .unwrap()
            .ends_with("/libc.so.6"),
        "{crash}"
    );
    assert_eq!(
        (
            &crash["main_returned"],
            &crash["exit_called"],
            &crash["exiting"]
        ),
        (&false.into(), &false.into(), &false.into())
    );
    assert_eq!(crash["handler"], "preload");
    let backtrace = run.crash_record("backtrace");
    let frames = backtrace["frames"].as_array().unwrap();
    assert!(!frames.is_empty(), "{backtrace}");
    assert_eq!(frames[0]["ip"], crash["pc"], "{backtrace}");
    assert!(
        frames.iter().any(|f| f["symbol"]
            .as_str()
            .is_some_and(|s| s.ends_with("raise_with_default_action"))),
        "{backtrace}"
    );
    assert!(t_ns(crash) < t_ns(backtrace));
    assert!(run.has("main-start") && !run.has("main-returned"));
}

#[test]
fn a_raised_sigsegv_is_reported_and_still_kills_with_sigsegv() {
    assert_raised("SIGSEGV", libc::SIGSEGV);
}

#[test]
fn a_raised_sigabrt_is_reported_and_still_kills_with_sigabrt() {
    assert_raised("SIGABRT", libc::SIGABRT);
}

/// `mock --crash-at-exit` on lavapipe: an `atexit` handler registered after Vulkan loaded writes
/// through a null pointer (address 8) once main has returned.
#[test]
fn a_fault_in_an_exit_handler_is_reported_with_the_exit_phase() {
    let run = run(mock(&["--crash-at-exit"]).lavapipe());
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    let crash = run.crash_record("crash");
    assert_eq!(crash["signal"], "SIGSEGV");
    assert_eq!(crash["si_code"], 1);
    assert_eq!(crash["si_code_name"], "SEGV_MAPERR");
    assert_eq!(crash["addr"], "0x8");
    assert_eq!(crash["addr_mapping"], "unmapped");
    assert_eq!(crash["pc_mapping"], built("mock").to_str().unwrap());
    assert_eq!(crash["pc_perms"], "r-xp");
    assert_eq!(crash["main_returned"], true);
    assert_eq!(crash["exiting"], true);
    assert_eq!(crash["exit_called"], false);
    let backtrace = run.crash_record("backtrace");
    assert!(
        backtrace["frames"][0]["symbol"]
            .as_str()
            .is_some_and(|s| s.ends_with("crash_at_exit_handler")),
        "{backtrace}"
    );

    // The timeline: the mock's handler, registered after main started, started after main
    // returned and never ended; the loader's finalization never began.
    let handler = run.registered_by("/mock", "atexit");
    assert_eq!(handler.len(), 1, "{}", run.describe());
    let id = &handler[0]["id"];
    let start = run
        .of_handler("handler-start", id)
        .expect("its handler-start");
    assert!(run.of_handler("handler-end", id).is_none());
    assert!(t_ns(run.one("main-start")) < t_ns(handler[0]));
    assert!(t_ns(run.one("main-returned")) < t_ns(start));
    assert!(t_ns(start) < t_ns(crash));
    assert!(!run.has("dl-fini-start"));
}

/// A backtrace that takes too long is given up; the crash record is already written and the
/// signal still ends the process.
#[test]
fn a_late_backtrace_is_given_up_and_the_signal_still_kills() {
    let run = run(mock(&["--crash-at-exit", "--no-vulkan"]).env("VKEXIT_CRASH_BACKTRACE_MS", "1"));
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    assert_eq!(run.crash_record("crash")["addr"], "0x8");
    let backtrace = run.crash_record("backtrace");
    assert_eq!(backtrace["error"], "timed out", "{backtrace}");
    assert_eq!(backtrace["frames"], serde_json::json!([]));
    let took_ms = (t_ns(backtrace) - t_ns(run.crash_record("crash"))) / 1_000_000;
    assert!(took_ms < 1000, "{took_ms} ms");
}

/// A hang killed from outside (SIGKILL) is no crash: the crash file exists (the handler was
/// installed) and stays empty.
#[test]
fn a_hang_killed_from_outside_leaves_no_crash_record() {
    let run = run(mock(&["--hang", "--no-vulkan"]).kill_when("hang in main"));
    assert_eq!(run.signal(), Some(libc::SIGKILL), "{}", run.describe());
    assert_eq!(run.crash_records(), &[] as &[serde_json::Value]);
    assert!(run.has("main-start") && !run.has("main-returned"));
}

/// Without the two variables the library records nothing and creates no file; the program's
/// output and exit status are exactly those of a run without it.
#[test]
fn without_files_the_run_is_unchanged() {
    for args in [
        &["--signal", "SIGSEGV", "--no-vulkan"][..],
        &["--exit-code", "7", "--no-vulkan"],
        &["--no-vulkan"],
    ] {
        let with = run(mock(args).without_files());
        let without = run(mock(args).without_files().without_preload());
        assert_eq!(with.status, without.status, "{args:?}");
        assert_eq!(with.stdout, without.stdout, "{args:?}");
        assert_eq!(with.stderr, without.stderr, "{args:?}");
        assert!(with.crash.is_none() && with.timeline.is_none());
        let files: Vec<_> = std::fs::read_dir(with.ran.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".jsonl"))
            .collect();
        assert!(files.is_empty(), "{files:?}");
    }
}

/// Files that cannot be created cost the report, never the run.
#[test]
fn unwritable_files_leave_the_run_unchanged() {
    let run = run(mock(&["--signal", "SIGSEGV", "--no-vulkan"])
        .without_files()
        .env("VKEXIT_CRASH_FILE", "/nonexistent-dir/crash.jsonl")
        .env("VKEXIT_TIMELINE_FILE", "/nonexistent-dir/timeline.jsonl"));
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    assert!(run.stdout.contains("vkexit-step: raise SIGSEGV"));
    assert!(
        run.stderr.contains("cannot open VKEXIT_CRASH_FILE"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("cannot open VKEXIT_TIMELINE_FILE"),
        "{}",
        run.stderr
    );
}

/// `exit(7)` called by the program: recorded with its status and caller, and the exit status
/// is still 7; the exit handlers and the loader's finalization run as usual.
#[test]
fn exit_called_by_the_program_is_recorded_and_keeps_its_status() {
    let run = run(mock(&["--exit-code", "7", "--no-vulkan"]));
    assert_eq!(run.status.code(), Some(7), "{}", run.describe());
    let exit = run.one("exit-called");
    assert_eq!(exit["status"], 7);
    assert_eq!(exit["caller"], built("mock").to_str().unwrap());
    assert!(!run.has("main-returned"));
    assert!(t_ns(exit) < t_ns(run.one("dl-fini-start")));
    assert_eq!(run.crash_records(), &[] as &[serde_json::Value]);
}

/// A clean run on lavapipe: every registered handler started and ended once (at exit, or at
/// the `dlclose` of its object), those at exit in the reverse order of registration, and the
/// loader's finalization comes last.
#[test]
fn a_clean_exit_runs_every_handler_in_reverse_registration_order() {
    let run = run(mock(&[]).lavapipe());
    assert!(run.status.success(), "{}", run.describe());
    let returned = run.one("main-returned");
    assert_eq!(returned["status"], 0);
    let ids = |ev: &str| -> Vec<u64> {
        run.all(ev)
            .iter()
            .map(|r| r["id"].as_u64().unwrap())
            .collect()
    };
    let mut registered = ids("handler-registered");
    let mut started = ids("handler-start");
    let mut ended = ids("handler-end");
    assert!(
        registered.len() > 100,
        "lavapipe's LLVM registers thousands"
    );
    let at_exit: Vec<u64> = run
        .all("handler-start")
        .iter()
        .filter(|r| t_ns(r) > t_ns(returned))
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    assert!(at_exit.windows(2).all(|w| w[0] > w[1]), "{at_exit:?}");
    registered.sort_unstable();
    started.sort_unstable();
    ended.sort_unstable();
    assert_eq!(started, registered);
    assert_eq!(ended, registered);
    assert_eq!(run.events().last().unwrap()["ev"], "dl-fini-end");
    assert!(t_ns(returned) < t_ns(run.one("dl-fini-start")));
    assert_eq!(run.crash_records(), &[] as &[serde_json::Value]);
}
