//! `libvkexit_preload.so`: loaded with `LD_PRELOAD` into every vkexit run (built-in scenarios
//! and external programs alike), it records, without a rebuild of the program:
//!
//! - the **crash report** (`VKEXIT_CRASH_FILE`): the handler of `vkexit-crash`, installed from
//!   this library's constructor, with the exit phase that only this library can know;
//! - the **exit timeline** (`VKEXIT_TIMELINE_FILE`): `main` starting and returning, `exit`
//!   called, every `atexit`/`__cxa_atexit` handler registered (by which object, which
//!   function), started and ended, the loader's finalization (`.fini_array` destructors),
//!   `dlopen` and `dlclose`, and the Vulkan loader and drivers the program loaded ([`vulkan`]);
//! - **another exit order** on request (`VKEXIT_EXIT_ORDER`, `VKEXIT_CHAOS_SEED`): the pending
//!   exit handlers run in the order another build of the program would give them, or with
//!   other threads let run ahead between them ([`exit_order`]);
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
//! `fopen`/`fopen64` ([`validation_log`]). Each passes
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
mod handlers;
mod objects;
mod real;
mod signals;
mod start;
mod timeline;
mod validation_log;
mod vulkan;

use vkexit_crash::{exit_state, Installed};
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

pub use exit_order::{CHAOS_SEED_VAR, EXIT_ORDER_VAR};
pub use handlers::HANDLERS_VAR;
pub use timeline::TIMELINE_FILE_VAR;
pub use vkexit_crash::CRASH_FILE_VAR;

/// The library constructor: before the program's own constructors and `main`.
fn on_load() {
    real::resolve_all();
    objects::prepare();
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
        on_load()
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
