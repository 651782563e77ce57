//! `__libc_start_main`: wraps the program's `main` (`main-start`, `main-returned`) and the
//! loader's `rtld_fini` (`dl-fini-start`, `dl-fini-end`).
//!
//! After `main` returns, glibc calls `exit` internally, not through the PLT, so the interposed
//! `exit` never sees it: the wrapped `main` is what tells that the exit began. `rtld_fini`
//! (`_dl_fini`) is registered by `__libc_start_main` before anything else, so it runs last,
//! after every `atexit` and `__cxa_atexit` handler: it runs the objects' `.fini_array`
//! destructors (`__attribute__((destructor))`).

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use vkexit_crash::exit_state;
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::{real, timeline};

type Main = unsafe extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) -> c_int;
type Fini = unsafe extern "C" fn();
type StartMain = unsafe extern "C" fn(
    Main,
    c_int,
    *mut *mut c_char,
    *mut c_void,
    *mut c_void,
    Option<Fini>,
    *mut c_void,
) -> c_int;

static MAIN: AtomicUsize = AtomicUsize::new(0);
static RTLD_FINI: AtomicUsize = AtomicUsize::new(0);

/// Called by the program's `_start`. `init` and `fini` are passed through as they are (null
/// since glibc 2.34).
///
/// # Safety
/// The arguments are `_start`'s, as glibc defines them.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __libc_start_main(
    main: Main,
    argc: c_int,
    argv: *mut *mut c_char,
    init: *mut c_void,
    fini: *mut c_void,
    rtld_fini: Option<Fini>,
    stack_end: *mut c_void,
) -> c_int {
    // SAFETY: glibc's __libc_start_main has this signature.
    let start: StartMain = unsafe { std::mem::transmute(real::LIBC_START_MAIN.get()) };
    MAIN.store(main as usize, Ordering::Release);
    let rtld_fini = rtld_fini.map(|fini| {
        RTLD_FINI.store(fini as usize, Ordering::Release);
        wrapped_rtld_fini as Fini
    });
    // SAFETY: the program's own arguments, with main and rtld_fini wrapped.
    unsafe { start(wrapped_main, argc, argv, init, fini, rtld_fini, stack_end) }
}

unsafe extern "C" fn wrapped_main(
    argc: c_int,
    argv: *mut *mut c_char,
    envp: *mut *mut c_char,
) -> c_int {
    let mut start = Record::new(Event::MainStart.as_str());
    start.i64(field::ARGC, argc.into());
    timeline::write(start);
    crate::classes::main_starts();
    // SAFETY: the program's main, stored before glibc called this wrapper.
    let main: Main = unsafe { std::mem::transmute(MAIN.load(Ordering::Acquire)) };
    // SAFETY: main's own arguments.
    let status = unsafe { main(argc, argv, envp) };
    exit_state::note_main_returned();
    crate::handlers::flush_registrations();
    let mut returned = Record::new(Event::MainReturned.as_str());
    returned.i64(field::STATUS, status.into());
    timeline::write(returned);
    crate::vulkan::scan(None, None);
    crate::exit_order::take_over(status);
    status
}

/// Runs as the last exit handler, inside `exit()`, on the exiting thread: the library
/// destructors are wrapped ([`crate::fini`]), then the loader's own finalization runs them.
unsafe extern "C" fn wrapped_rtld_fini() {
    vkexit_crash::hold_exit_while_crash_is_reported();
    timeline::write(Record::new(Event::DlFiniStart.as_str()));
    crate::fini::wrap_all(crate::exit_order::destructor_steps());
    // SAFETY: the loader's rtld_fini, stored by __libc_start_main above.
    let fini: Fini = unsafe { std::mem::transmute(RTLD_FINI.load(Ordering::Acquire)) };
    // SAFETY: called once, as glibc would have.
    unsafe { fini() };
    timeline::write(Record::new(Event::DlFiniEnd.as_str()));
    vkexit_crash::hold_exit_while_crash_is_reported();
}
