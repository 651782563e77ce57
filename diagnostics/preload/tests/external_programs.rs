//! Programs vkexit knows nothing about, compiled here with gcc and g++, under the preloaded
//! library: the same crash report and timeline, told apart by kind (`atexit`, C++ static
//! destructor, `.fini_array` destructor), with the programs' own behaviour unchanged.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use vkexit_testkit::preload::{hex, run, t_ns, Plan, Run};

/// Registers `cleanup` with `atexit` and has a `__attribute__((destructor))`; each prints its
/// name and the CLOCK_MONOTONIC time. The environment picks what else happens.
const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void say(const char *what) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[160];
    int n = snprintf(line, sizeof line, "%s %lld\n", what,
                     (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    write(1, line, n);
}

__attribute__((destructor)) static void library_destructor(void) { say("destructor"); }

void cleanup(void) {
    say("cleanup");
    if (getenv("CRASH_IN_CLEANUP")) {
        volatile int *field = (int *)16;
        *field = 1;
    }
}

static void own_handler(int signo) {
    (void)signo;
    write(1, "own handler\n", 12);
    _exit(42);
}

int main(void) {
    atexit(cleanup);
    const char *library = getenv("DLOPEN");
    if (library) {
        void *handle = dlopen(library, RTLD_NOW);
        say(handle ? "dlopen ok" : "dlopen failed");
        if (handle) dlclose(handle);
    }
    if (getenv("OWN_HANDLER")) {
        signal(SIGSEGV, own_handler);
        volatile int *field = (int *)24;
        *field = 1;
    }
    if (getenv("ABORT")) abort();
    if (getenv("EXIT_CODE")) exit(atoi(getenv("EXIT_CODE")));
    say("main returns");
    return 0;
}
"#;

/// A C++ static with a destructor (registered with `__cxa_atexit` before `main`), and an
/// `atexit` handler registered in `main`.
const CXX_PROGRAM: &str = r#"
#include <cstdlib>
#include <unistd.h>

struct Logger {
    ~Logger() { write(1, "static destructor\n", 18); }
};
static Logger logger;

extern "C" void cleanup(void) { write(1, "cleanup\n", 8); }

int main() {
    std::atexit(cleanup);
    return 0;
}
"#;

const PLUGIN: &str = "int vkexit_plugin_answer(void) { return 42; }\n";

/// Builds with `compiler` once per name (tests share the builds), failing (never skipping)
/// when the compiler is missing.
fn compile(compiler: &str, source: &str, name: &str, extra: &[&str]) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let dir = build_dir();
    let extension = if compiler == "g++" { "cpp" } else { "c" };
    let source_path = dir.join(format!("{name}.{extension}"));
    std::fs::write(&source_path, source).unwrap();
    let output = dir.join(name);
    let result = Command::new(compiler)
        .args(["-O1", "-g", "-o"])
        .arg(&output)
        .arg(&source_path)
        .args(extra)
        .output()
        .unwrap_or_else(|e| {
            panic!("{compiler} is needed for this test ({e}): apt-get install build-essential")
        });
    assert!(
        result.status.success(),
        "{compiler} failed:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    built.insert(name.to_owned(), output.clone());
    output
}

/// One directory per test process, kept for its lifetime.
fn build_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .to_path_buf()
}

fn program() -> PathBuf {
    compile("gcc", PROGRAM, "exit-story", &["-rdynamic"])
}

/// The time a program printed after `what`.
fn said(run: &Run, what: &str) -> Option<u64> {
    run.stdout.lines().find_map(|line| {
        line.strip_prefix(what)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|ns| ns.parse().ok())
    })
}

fn cleanup_registration(run: &Run, exe: &Path) -> Value {
    let registered = run.registered_by(&format!("/{}", file_name(exe)), "atexit");
    assert_eq!(registered.len(), 1, "{}", run.describe());
    registered[0].clone()
}

fn file_name(path: &Path) -> &str {
    path.file_name().unwrap().to_str().unwrap()
}

#[test]
fn a_fault_in_an_atexit_handler_is_reported_and_the_destructor_never_runs() {
    let exe = program();
    let run = run(Plan::new(&exe, &[]).env("CRASH_IN_CLEANUP", "1"));
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    let crash = run.crash_record("crash");
    assert_eq!(crash["si_code_name"], "SEGV_MAPERR");
    assert_eq!(crash["addr"], "0x10");
    assert_eq!(crash["pc_mapping"], exe.to_str().unwrap());
    assert_eq!(crash["main_returned"], true);
    assert_eq!(crash["exiting"], true);
    assert_eq!(crash["thread"], "exit-story");
    let backtrace = run.crash_record("backtrace");
    assert_eq!(backtrace["frames"][0]["symbol"], "cleanup", "{backtrace}");
    assert_eq!(
        backtrace["frames"][0]["file"]
            .as_str()
            .map(|f| f.ends_with("exit-story.c")),
        Some(true)
    );

    let cleanup = cleanup_registration(&run, &exe);
    assert_eq!(cleanup["symbol"], "cleanup");
    assert_eq!(cleanup["registrant"], exe.to_str().unwrap());
    assert_eq!(cleanup["function_object"], exe.to_str().unwrap());
    let start = run.of_handler("handler-start", &cleanup["id"]).unwrap();
    assert!(run.of_handler("handler-end", &cleanup["id"]).is_none());
    assert!(t_ns(run.one("main-returned")) < t_ns(start));
    assert!(t_ns(start) < said(&run, "cleanup").unwrap());
    assert!(said(&run, "cleanup").unwrap() < t_ns(crash));
    // The .fini_array destructor would run in the loader's finalization, which never began.
    assert!(!run.has("dl-fini-start"));
    assert_eq!(said(&run, "destructor"), None, "{}", run.stdout);
}

#[test]
fn a_clean_exit_runs_the_atexit_handler_then_the_destructor_in_the_loaders_finalization() {
    let exe = program();
    let run = run(Plan::new(&exe, &[]));
    assert!(run.status.success(), "{}", run.describe());
    let cleanup = cleanup_registration(&run, &exe);
    let start = run.of_handler("handler-start", &cleanup["id"]).unwrap();
    let end = run.of_handler("handler-end", &cleanup["id"]).unwrap();
    let cleanup_ran = said(&run, "cleanup").unwrap();
    assert!(t_ns(start) < cleanup_ran && cleanup_ran < t_ns(end));
    let destructor_ran = said(&run, "destructor").unwrap();
    let (fini_start, fini_end) = (run.one("dl-fini-start"), run.one("dl-fini-end"));
    assert!(t_ns(end) < t_ns(fini_start));
    assert!(t_ns(fini_start) < destructor_ran && destructor_ran < t_ns(fini_end));
    assert_eq!(run.crash_records(), &[] as &[Value]);

    // The program says the same, in the same order, without the library.
    let plain =
        vkexit_testkit::preload::run(Plan::new(&exe, &[]).without_preload().without_files());
    let words = |run: &Run| -> Vec<String> {
        run.stdout
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(words(&run), words(&plain));
    assert_eq!(words(&run), ["main", "cleanup", "destructor"]);
}

#[test]
fn exit_called_by_the_program_keeps_its_status_and_runs_the_handlers() {
    let exe = program();
    let run = run(Plan::new(&exe, &[]).env("EXIT_CODE", "3"));
    assert_eq!(run.status.code(), Some(3), "{}", run.describe());
    let exit = run.one("exit-called");
    assert_eq!(exit["status"], 3);
    assert_eq!(exit["caller"], exe.to_str().unwrap());
    assert!(!run.has("main-returned"));
    let cleanup = cleanup_registration(&run, &exe);
    assert!(t_ns(exit) < t_ns(run.of_handler("handler-start", &cleanup["id"]).unwrap()));
    assert!(run.of_handler("handler-end", &cleanup["id"]).is_some());
    assert!(said(&run, "destructor").is_some());
}

#[test]
fn abort_is_reported_as_sigabrt_and_still_kills_with_it() {
    let exe = program();
    let run = run(Plan::new(&exe, &[]).env("ABORT", "1"));
    assert_eq!(run.signal(), Some(libc::SIGABRT), "{}", run.describe());
    let crash = run.crash_record("crash");
    assert_eq!(crash["signal"], "SIGABRT");
    assert_eq!(crash["si_code_name"], "SI_TKILL");
    assert!(crash["pc_mapping"]
        .as_str()
        .unwrap()
        .ends_with("/libc.so.6"));
    assert_eq!(crash["main_returned"], false);
    let frames = run.crash_record("backtrace")["frames"].clone();
    assert!(
        frames
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["symbol"] == "main"),
        "{frames}"
    );
}

/// A handler the program installs itself still runs, as it would without the library, and
/// ends the run its way; the fault is on record first.
#[test]
fn a_handler_the_program_installs_later_runs_after_the_record() {
    let exe = program();
    let run = run(Plan::new(&exe, &[]).env("OWN_HANDLER", "1"));
    assert_eq!(run.status.code(), Some(42), "{}", run.describe());
    assert!(run.stdout.contains("own handler"));
    let crash = run.crash_record("crash");
    assert_eq!(crash["addr"], "0x18");
    assert_eq!(crash["pc_mapping"], exe.to_str().unwrap());
    assert!(t_ns(crash) < t_ns(run.crash_record("backtrace")));
}

/// A C++ static destructor is a `cxa-atexit` registration with its object as the argument,
/// made before `main`; it runs after the `atexit` handler registered later.
#[test]
fn a_cxx_static_destructor_is_told_from_an_atexit_handler() {
    let exe = compile("g++", CXX_PROGRAM, "cxx-story", &["-rdynamic"]);
    let run = run(Plan::new(&exe, &[]));
    assert!(run.status.success(), "{}", run.describe());
    assert_eq!(run.stdout, "cleanup\nstatic destructor\n");
    let own = format!("/{}", file_name(&exe));
    let destructor = run.registered_by(&own, "cxa-atexit");
    let cleanup = run.registered_by(&own, "atexit");
    assert_eq!(
        (destructor.len(), cleanup.len()),
        (1, 1),
        "{}",
        run.describe()
    );
    let (destructor, cleanup) = (destructor[0], cleanup[0]);
    assert!(hex(&destructor["arg"]) != 0);
    assert!(destructor["symbol"].is_null());
    assert_eq!(destructor["wrapped"], true);
    assert_eq!(destructor["function_object"], exe.to_str().unwrap());
    assert_eq!(cleanup["symbol"], "cleanup");
    let main_start = run.one("main-start");
    assert!(t_ns(destructor) < t_ns(main_start) && t_ns(main_start) < t_ns(cleanup));
    let cleanup_end = run.of_handler("handler-end", &cleanup["id"]).unwrap();
    let destructor_start = run.of_handler("handler-start", &destructor["id"]).unwrap();
    let destructor_end = run.of_handler("handler-end", &destructor["id"]).unwrap();
    assert!(t_ns(cleanup_end) < t_ns(destructor_start));
    assert!(t_ns(destructor_end) < t_ns(run.one("dl-fini-start")));
}

/// glibc searches a bare name in the calling object's RUNPATH: a plugin found only there loads
/// exactly as without the library (the call goes to glibc with the caller's own return
/// address, and is recorded as not observed); names whose result cannot depend on the caller
/// are observed, with their handle, and so is their `dlclose`.
#[test]
fn dlopen_keeps_the_callers_library_search() {
    let dir = build_dir().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let plugin_source = dir.join("plugin.c");
    std::fs::write(&plugin_source, PLUGIN).unwrap();
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libvkexit_plugin.so"))
        .arg(&plugin_source)
        .status()
        .unwrap();
    assert!(built.success());
    let runpath = format!("-Wl,-rpath,{},--enable-new-dtags", dir.display());
    let with_runpath = compile("gcc", PROGRAM, "exit-story-runpath", &[runpath.as_str()]);
    let without_runpath = program();

    let bare = || Plan::new(&with_runpath, &[]).env("DLOPEN", "libvkexit_plugin.so");
    let preloaded = run(bare());
    let plain = run(bare().without_preload().without_files());
    assert!(said(&plain, "dlopen ok").is_some(), "{}", plain.describe());
    assert!(
        said(&preloaded, "dlopen ok").is_some(),
        "{}",
        preloaded.describe()
    );
    let open = preloaded.one("dlopen");
    assert_eq!(open["path"], "libvkexit_plugin.so");
    assert_eq!(open["observed"], false);
    assert!(open["handle"].is_null() && open["ok"].is_null());
    assert_eq!(open["caller"], with_runpath.to_str().unwrap());
    // The plugin is found only through that RUNPATH.
    let elsewhere = run(Plan::new(&without_runpath, &[]).env("DLOPEN", "libvkexit_plugin.so"));
    assert!(
        said(&elsewhere, "dlopen failed").is_some(),
        "{}",
        elsewhere.describe()
    );
    assert_eq!(elsewhere.one("dlopen")["ok"], false);
    assert_eq!(elsewhere.one("dlopen")["observed"], true);

    // A bare name from a program without search paths, and a full path: observed.
    for library in [
        "libm.so.6".to_owned(),
        dir.join("libvkexit_plugin.so").display().to_string(),
    ] {
        let run = run(Plan::new(&without_runpath, &[]).env("DLOPEN", &library));
        let open = run.one("dlopen");
        assert_eq!(open["path"], library.as_str());
        assert_eq!(
            (&open["observed"], &open["ok"]),
            (&true.into(), &true.into()),
            "{open}"
        );
        let close = run.one("dlclose");
        assert_eq!(close["handle"], open["handle"]);
        assert_eq!(close["result"], 0);
        let name = library.rsplit('/').next().unwrap();
        assert!(close["path"].as_str().unwrap().ends_with(name), "{close}");
    }
}

/// `VKEXIT_TIMELINE_HANDLERS=atexit`: C++ static destructors run unwrapped (no records at exit)
/// and their registrations are recorded as runs, one `handlers-registered` record per run of
/// consecutive ones by one object; `atexit` handlers keep their own records, start and end.
#[test]
fn cxx_static_destructors_can_be_left_unwrapped() {
    let exe = compile("g++", CXX_PROGRAM, "cxx-story", &["-rdynamic"]);
    let run = run(Plan::new(&exe, &[]).env("VKEXIT_TIMELINE_HANDLERS", "atexit"));
    assert!(run.status.success(), "{}", run.describe());
    assert_eq!(run.stdout, "cleanup\nstatic destructor\n");
    let own = format!("/{}", file_name(&exe));
    assert!(
        run.registered_by(&own, "cxa-atexit").is_empty(),
        "{}",
        run.describe()
    );
    let runs: Vec<&Value> = run
        .all("handlers-registered")
        .into_iter()
        .filter(|r| r["registrant"].as_str().is_some_and(|p| p.ends_with(&own)))
        .collect();
    assert_eq!(runs.len(), 1, "{}", run.describe());
    let destructors = runs[0];
    assert_eq!(destructors["wrapped"], false);
    assert_eq!(destructors["count"], 1);
    assert_eq!(destructors["first_id"], destructors["last_id"]);
    assert!(destructors["first_t_ns"].as_u64().unwrap() <= destructors["t_ns"].as_u64().unwrap());
    let cleanup = run.registered_by(&own, "atexit")[0];
    assert_eq!(cleanup["wrapped"], true);
    assert!(run
        .of_handler("handler-start", &destructors["first_id"])
        .is_none());
    assert!(run.of_handler("handler-end", &cleanup["id"]).is_some());
}
