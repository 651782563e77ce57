//! A Rust program that overflows its stack, compiled here with rustc: with the preloaded library
//! it still prints Rust's own message and dies of SIGABRT, as without it (Rust's runtime still
//! finds the default action and installs its handler, behind ours), and the overflow is on
//! record, on the main thread (our alternate stack) and on a spawned one (Rust's 8 KiB one).
//! On the main thread the abort is on record too. On a spawned thread there is no room for it:
//! below the overflow's frames on Rust's 8 KiB stack the kernel's frame for the abort (3.3 KiB
//! where the CPU has AVX-512 state) and our handler do not fit, and the kernel would end the
//! process with SIGSEGV; the abort takes the program's own action there, unrecorded.

use std::path::PathBuf;
use std::process::Command;
use vkexit_testkit::preload::{run, t_ns, Plan};

const PROGRAM: &str = r#"
use std::hint::black_box;

fn deep(n: u64) -> u64 {
    let a = black_box([n; 512]);
    if n == 0 {
        return a[1];
    }
    deep(n - 1) + a[7]
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("thread") {
        let worker = std::thread::Builder::new().name("deep".into());
        worker.spawn(|| deep(u64::MAX)).unwrap().join().unwrap();
    } else {
        println!("{}", deep(u64::MAX));
    }
}
"#;

fn program() -> PathBuf {
    static BUILT: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    let (_, exe) = BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("overflow.rs");
        std::fs::write(&source, PROGRAM).unwrap();
        let exe = dir.path().join("overflow");
        let output = Command::new("rustc")
            .args(["-O", "--edition", "2021", "-o"])
            .arg(&exe)
            .arg(&source)
            .output()
            .unwrap_or_else(|e| panic!("rustc is needed for this test: {e}"));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        (dir, exe)
    });
    exe.clone()
}

/// `thread` as Rust names it in its message, and as the kernel does (`comm`) in the records;
/// whether the abort that follows is recorded too.
fn assert_overflow_reported(args: &[&str], thread: &str, comm: &str, abort_recorded: bool) {
    let exe = program();
    let plain = run(Plan::new(&exe, args).without_preload().without_files());
    let run = run(Plan::new(&exe, args));
    assert_eq!(plain.signal(), Some(libc::SIGABRT), "{}", plain.describe());
    assert_eq!(run.signal(), Some(libc::SIGABRT), "{}", run.describe());
    let message = format!("thread '{thread}'");
    for r in [&plain, &run] {
        assert!(r.stderr.contains(&message), "{}", r.stderr);
        assert!(
            r.stderr.contains("has overflowed its stack"),
            "{}",
            r.stderr
        );
    }
    let crashes: Vec<_> = run
        .crash_records()
        .iter()
        .filter(|r| r["ev"] == "crash")
        .collect();
    assert_eq!(
        crashes.len(),
        1 + usize::from(abort_recorded),
        "{}",
        run.describe()
    );
    let overflow = crashes[0];
    assert_eq!(overflow["signal"], "SIGSEGV");
    assert_eq!(overflow["thread"], comm);
    assert_eq!(overflow["pc_mapping"], exe.to_str().unwrap());
    let backtrace = run.crash_record("backtrace");
    let frames = backtrace["frames"].as_array().unwrap();
    assert_eq!(frames[0]["ip"], overflow["pc"], "{backtrace}");
    assert!(frames
        .iter()
        .all(|f| f["symbol"].as_str().is_some_and(|s| s.ends_with("::deep"))));
    assert!(t_ns(overflow) < t_ns(backtrace));
    if abort_recorded {
        let abort = crashes[1];
        assert_eq!(abort["signal"], "SIGABRT");
        assert_eq!(abort["tid"], overflow["tid"]);
        assert!(t_ns(backtrace) < t_ns(abort));
    }
}

#[test]
fn an_overflow_of_the_main_thread_still_ends_in_rusts_abort() {
    assert_overflow_reported(&[], "main", "overflow", true);
}

#[test]
fn an_overflow_of_a_spawned_thread_is_reported_from_its_small_alternate_stack() {
    assert_overflow_reported(&["thread"], "deep", "deep", false);
}
