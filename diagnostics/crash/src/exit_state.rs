//! How far the process is into its exit, as the crash record reports it. Only the preloaded
//! library can know (it wraps `main` and interposes `exit`); a handler linked into a program
//! without it reports the phase as unknown.

use std::sync::atomic::{AtomicBool, Ordering};

static TRACKED: AtomicBool = AtomicBool::new(false);
static MAIN_RETURNED: AtomicBool = AtomicBool::new(false);
static EXIT_CALLED: AtomicBool = AtomicBool::new(false);

/// Says that `main` and `exit` are watched in this process, so the flags below mean something.
pub fn track() {
    TRACKED.store(true, Ordering::Release);
}

/// `main` returned: glibc runs the exit handlers next.
pub fn note_main_returned() {
    MAIN_RETURNED.store(true, Ordering::Release);
}

/// The program called `exit()` itself.
pub fn note_exit_called() {
    EXIT_CALLED.store(true, Ordering::Release);
}

/// The phase at one moment; `None` fields when it is not tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    /// Whether `main` had returned.
    pub main_returned: Option<bool>,
    /// Whether `exit` had been called (exit handlers running or run).
    pub exit_called: Option<bool>,
}

impl Phase {
    /// Now. Async-signal-safe: three atomic loads.
    pub fn now() -> Self {
        if !TRACKED.load(Ordering::Acquire) {
            return Phase {
                main_returned: None,
                exit_called: None,
            };
        }
        Phase {
            main_returned: Some(MAIN_RETURNED.load(Ordering::Acquire)),
            exit_called: Some(EXIT_CALLED.load(Ordering::Acquire)),
        }
    }

    /// Whether `exit()` is running: `main` returned (glibc calls `exit` next) or the program
    /// called it.
    pub fn exiting(&self) -> Option<bool> {
        Some(self.main_returned? || self.exit_called?)
    }
}
