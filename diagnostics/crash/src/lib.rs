//! vkexit's crash report: a handler for `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` and `SIGABRT`
//! that writes what a crash at exit needs explained, then lets the signal end the process as it
//! would have.
//!
//! Two JSON lines go to the file named by `VKEXIT_CRASH_FILE` (nothing is installed when it is
//! unset), through [`EvidenceLog`], so each has `ev`, `t_ns` (CLOCK_MONOTONIC), `pid`, `tid`
//! and `thread` first. Their events and fields are `vkexit_evidence::crash`'s:
//!
//! - `crash`, written from the handler with async-signal-safe calls only: `ppid`, `cmdline`
//!   (the process's arguments joined by spaces, at most 1 KiB: which process of a run's tree
//!   crashed), `then` (`default-action`: the signal ends the process; `program-handler`: the
//!   program's own handler decides, and may survive it), `signal`, `signo`,
//!   `si_code`, `si_code_name`, `addr` (the faulting address, `null` for a sent signal),
//!   `sender_pid` (sent signals), `pc`, `pc_mapping` (the file of `/proc/self/maps` holding the
//!   pc, `[anonymous]`, `unmapped` or `unknown`), `pc_offset` (the pc as an offset in that
//!   file), `addr_mapping`/`addr_offset` (the same for `addr`), `main_returned`,
//!   `exit_called`, `exiting` (`null` unless the preloaded library tracks them), `handler`
//!   (`preload` or `linked`);
//! - `backtrace`, best effort, for the first crash only: `frames` (`[{ip, object, symbol,
//!   file, line}, …]` from the faulting pc outwards), `frames_omitted`, or `error`;
//! - `fatal`: `signal`, `pc`, when a program handler returned without curing a fault recorded
//!   with `then: program-handler` and the default action now ends the process.
//!
//! A process died of its crash when it has a `crash` record with `then: default-action` or a
//! `fatal` record; the handler is inherited by forked children and preloaded again into exec'd
//! ones, so one file holds the crashes of a whole process tree, told apart by `pid`.
//!
//! Then the signal's own outcome, as the program set it up: its own handler is called (one
//! installed before ours, or, through the preloaded library, after), or the default action
//! taken — by returning from a fault, so that the instruction faults again, or by sending the
//! signal again. The exit status is the one the program would have had. See [`disposition`].
//!
//! [`install`] is for programs that link this crate; the preloaded `libvkexit_preload.so`
//! installs the same handler into any program, and then `install` does nothing. The schemas,
//! costs and limits are in `diagnostics/preload/README.md`.

mod context;
pub mod disposition;
pub mod exit_state;
mod frames;
mod handler;
mod maps;
pub mod names;
mod stacks;

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use vkexit_evidence::crash::Writer;
use vkexit_evidence::{files, EvidenceLog};

pub use handler::hold_exit_while_crash_is_reported;

/// The crash file: JSON lines, appended.
pub const CRASH_FILE_VAR: &str = files::CRASH.var;
/// How long the backtrace may take, in milliseconds; `0` turns it off.
pub const BACKTRACE_MS_VAR: &str = "VKEXIT_CRASH_BACKTRACE_MS";
/// Well under the 5 s that the Tegra emulation's exit handler waits for a fault.
pub const DEFAULT_BACKTRACE_MS: u64 = 2000;
/// Exported by the preloaded library: its presence means the preloaded copy owns the handler.
pub const PRELOAD_MARKER: &CStr = c"vkexit_preload_owns_crash_handler";

/// What [`install`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Installed {
    /// Installed now for these signals (a signal the program inherited as ignored stays so).
    Now {
        /// The signals whose handler is now vkexit's.
        signals: Vec<&'static str>,
    },
    /// This copy already ran its installation.
    Already,
    /// The preloaded library is in the process and owns the handler.
    ByPreload,
    /// `VKEXIT_CRASH_FILE` is unset or empty, or the file cannot be opened (said on stderr).
    Disabled,
}

static STARTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the crash handler from a program that links this crate. Idempotent, and a no-op
/// when the preloaded library is present. The calling thread gets an alternate signal stack.
///
/// Call it early in `main`: a handler that the program installed before (Rust's own
/// stack-overflow handler, for one) is chained to after the record is written.
pub fn install() -> Installed {
    if preload_present() {
        return Installed::ByPreload;
    }
    install_as(Writer::Linked)
}

/// The preloaded library's installation, from its constructor.
#[doc(hidden)]
pub fn install_preloaded() -> Installed {
    install_as(Writer::Preload)
}

/// Whether this copy of the crate has its handler installed.
pub fn installed_here() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

fn install_as(writer: Writer) -> Installed {
    if STARTED.swap(true, Ordering::AcqRel) {
        return Installed::Already;
    }
    let Some(log) = EvidenceLog::from_env(CRASH_FILE_VAR, "vkexit-crash") else {
        return Installed::Disabled;
    };
    let backtrace_ms = std::env::var(BACKTRACE_MS_VAR)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_BACKTRACE_MS);
    frames::prepare();
    let config = handler::Config {
        log,
        writer,
        backtrace_ms,
    };
    if handler::CONFIG.set(config).is_err() {
        return Installed::Already;
    }
    stacks::prepare();
    let signals = disposition::install(handler::address());
    INSTALLED.store(!signals.is_empty(), Ordering::Release);
    Installed::Now {
        signals: signals.into_iter().map(names::signal_name).collect(),
    }
}

fn preload_present() -> bool {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, PRELOAD_MARKER.as_ptr()) }.is_null()
}

/// For the preloaded `sigaction` and `signal`: see [`disposition`].
pub mod interpose {
    use libc::{c_int, sighandler_t};

    use crate::{disposition, handler};

    /// `Some(result)` when the call is answered here, `None` to pass it on.
    ///
    /// # Safety
    /// `act` and `oldact` are `sigaction`'s arguments: null or valid.
    pub unsafe fn sigaction(
        signo: c_int,
        act: *const libc::sigaction,
        oldact: *mut libc::sigaction,
    ) -> Option<c_int> {
        // SAFETY: the caller's contract.
        unsafe { disposition::program_sigaction(handler::address(), signo, act, oldact) }
    }

    /// `Some(previous)` when the call is answered here, `None` to pass it on.
    pub fn signal(signo: c_int, wanted: sighandler_t) -> Option<sighandler_t> {
        disposition::program_signal(handler::address(), signo, wanted)
    }
}
