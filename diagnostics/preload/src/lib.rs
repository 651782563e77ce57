//! `libvkexit_preload.so`: loaded with `LD_PRELOAD` into every vkexit run (built-in scenarios
//! and external programs alike), it records, without a rebuild of the program:
//!
//! - the **crash report** (`VKEXIT_CRASH_FILE`): the handler of `vkexit-crash`, installed from
//!   this library's constructor, with the exit phase that only this library can know;
//! - the **exit timeline** (`VKEXIT_TIMELINE_FILE`): `main` starting and returning, `exit`
//!   called, every `atexit`/`__cxa_atexit` handler registered (by which object, which
//!   function), started and ended, the loader's finalization and each library destructor
//!   it runs (`.fini_array`, [`fini`]),
//!   `dlopen` and `dlclose`, and the Vulkan loader and drivers the program loaded ([`vulkan`]);
//! - **another exit order** on request (`VKEXIT_EXIT_ORDER`, `VKEXIT_CHAOS_SEED`): the pending
//!   exit handlers run in the order another build of the program would give them, or with
//!   other threads let run ahead between them ([`exit_order`]), and one object's library
//!   destructors run before another's ([`fini`]);
//! - **a slower device's teardown** on request (`VKEXIT_SLOW_TEARDOWN`): each destroy call
//!   made during exit, as vkexit's trace layer reports it, holds its thread until the threads
//!   asleep at it have woken ([`slow_teardown`]);
//! - **what the run writes into a shared working directory** (`VKEXIT_SHARED_DIR`): each
//!   top-level name a process opens for writing there ([`shared_writes`]);
//! - the **validation layer's log, one file per instance** (`VKEXIT_VALIDATION_LOG`,
//!   `VKEXIT_VALIDATION_LOGS`): each `fopen` of the configured log goes to a file of its own
//!   ([`validation_log`]), so no instance truncates another's report.
//!
//! Both files are JSON lines written by the layers' evidence writer: each record starts with
//! `ev`, `t_ns` (CLOCK_MONOTONIC, the layers' clock), `pid`, `tid`, `thread`. README.md has the
//! schemas.
//!
//! Interposed: `__libc_start_main` ([`start`]), `exit` ([`exit`]), `__cxa_atexit`
//! ([`handlers`]), `dlopen`/`dlclose` ([`dl`]), `sigaction`/`signal` ([`signals`]),
//! `fopen`/`fopen64` ([`validation_log`]), the calls that write files ([`shared_writes`]).
//! Each passes
//! the call on to glibc with the program's own arguments; the program's behaviour (exit status,
//! signals, handler order, library search) stays its own.
//!
//! The rlib exists only so that `cargo test` builds the cdylib. Never link it into a program.

// Test builds of this crate are programs: they must not interpose their own libc.
#![cfg_attr(test, allow(dead_code))]

mod classes;
mod dl;
mod elf;
mod exit;
mod exit_order;
mod fini;
mod handlers;
mod objects;
mod real;
mod shared_writes;
mod signals;
mod slow_teardown;
mod start;
mod threads;
mod timeline;
mod validation_log;
mod vulkan;

use std::sync::atomic::{AtomicU8, Ordering};

use vkexit_crash::{exit_state, Installed};
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

pub use exit_order::{CHAOS_SEED_VAR, EXIT_ORDER_VAR};
pub use handlers::HANDLERS_VAR;
pub use slow_teardown::{vkexit_preload_destroy_returned, vkexit_preload_teardown_watched};
pub use timeline::TIMELINE_FILE_VAR;
pub use vkexit_crash::CRASH_FILE_VAR;

/// Not set up yet, being set up, set up.
const NOT_YET: u8 = 0;
const UNDER_WAY: u8 = 1;
const DONE: u8 = 2;
static SET_UP: AtomicU8 = AtomicU8::new(NOT_YET);

/// Sets the library up once: from its constructor, or from the first interposed call that
/// comes before it. The constructors of the program's own libraries can run before a
/// preloaded library's (the dynamic loader initialises an object's dependencies first, and
/// nothing makes the program's libraries depend on this one), so a library that creates its
/// Vulkan instance from a constructor, or a C++ global's, reaches `fopen`, `dlopen` and
/// `__cxa_atexit` here first. A call made while the set-up is under way (its own, or another
/// thread's) goes on without it.
pub(crate) fn ensure_loaded() {
    if SET_UP.load(Ordering::Acquire) == DONE {
        return;
    }
    // Too early for the C library: a sanitizer's runtime initialises from `.preinit_array`,
    // before the C library has set up the environment, and calls in here. The constructor
    // comes later and sets up then.
    // SAFETY: reads the C library's `environ` pointer; nothing writes it concurrently here.
    if unsafe { libc::environ }.is_null() {
        return;
    }
    let ours = SET_UP.compare_exchange(NOT_YET, UNDER_WAY, Ordering::AcqRel, Ordering::Acquire);
    if ours.is_ok() {
        set_up();
        SET_UP.store(DONE, Ordering::Release);
    }
}

/// What the library does once, before it records anything.
fn set_up() {
    real::resolve_all();
    objects::prepare();
    shared_writes::configure();
    slow_teardown::configure();
    handlers::configure(exit_order::configure());
    validation_log::configure();
    exit_state::track();
    let timeline = timeline::open();
    let crash = vkexit_crash::install_preloaded();
    if timeline.is_some() {
        vulkan::prepare();
        let mut record = Record::new(Event::PreloadLoaded.as_str());
        timeline::c_str_field(&mut record, field::PROGRAM, objects::program());
        record.bool(field::CRASH_REPORT, matches!(crash, Installed::Now { .. }));
        timeline::write(record);
        vulkan::scan(None, None);
    }
}

/// The library's constructor, from its `.init_array`: before the program's own constructors
/// (a preloaded library's run first) and `main`.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = {
    extern "C" fn constructor() {
        ensure_loaded()
    }
    constructor
};

/// The marker that `vkexit_crash::install` looks for: a copy of the handler linked into the
/// program stands back when this library is present.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn vkexit_preload_owns_crash_handler() -> bool {
    vkexit_crash::installed_here()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_marker_has_the_name_the_crash_crate_looks_for() {
        assert_eq!(
            vkexit_crash::PRELOAD_MARKER.to_str().unwrap(),
            "vkexit_preload_owns_crash_handler"
        );
    }
}
