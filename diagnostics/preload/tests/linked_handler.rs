//! The crash handler linked into the scenarios (`vkexit_crash::install` at scenario start):
//! alone it reports the crash, chained in front of Rust's own SIGSEGV handler; with the
//! preloaded library present it stands back, and exactly one record is written.
//!
//! `handler-before-load --runtime refrt:never` crashes at exit, in refrt's registry lookup.

use vkexit_testkit::built;
use vkexit_testkit::preload::{run, Plan};

fn handler_before_load() -> Plan {
    Plan::new(built("handler-before-load"), &["--runtime", "refrt:never"])
        .lavapipe()
        .env("VKEXIT_REFRT_LIB", built("libvkexit_refrt.so"))
}

#[test]
fn linked_alone_it_reports_and_the_crash_stays_a_sigsegv() {
    let run = run(handler_before_load().without_preload());
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    let crash = run.crash_record("crash");
    assert_eq!(crash["handler"], "linked");
    assert_eq!(crash["signal"], "SIGSEGV");
    assert!(
        crash["pc_mapping"]
            .as_str()
            .unwrap()
            .ends_with("/libvkexit_refrt.so"),
        "{crash}"
    );
    // The registry's unmapped-and-reserved range: a fault on an access-less mapping.
    assert_eq!(crash["si_code_name"], "SEGV_ACCERR");
    assert_eq!(crash["addr_perms"], "---p");
    // Without the preloaded library nobody watches main and exit.
    assert!(crash["main_returned"].is_null() && crash["exiting"].is_null());
    assert!(run.crash_record("backtrace")["frames"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["symbol"]
            .as_str()
            .is_some_and(|s| s.contains("Event::free"))));
    assert!(run.timeline.is_none());
}

#[test]
fn with_the_preload_present_the_linked_copy_stands_back() {
    let run = run(handler_before_load());
    assert_eq!(run.signal(), Some(libc::SIGSEGV), "{}", run.describe());
    let crash = run.crash_record("crash");
    assert_eq!(crash["handler"], "preload");
    assert_eq!(crash["main_returned"], true);
    assert_eq!(crash["exiting"], true);
}
