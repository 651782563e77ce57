//! The dispositions of the watched signals: ours installed in front, what was there before
//! (to chain to), and what the program asks for later.
//!
//! A program that sets `SIG_DFL` on a watched signal while our handler is installed (Rust's
//! mock does before `raise`, as many crash paths do) asks for the default action: the handler
//! stays, and after recording it carries out that default action itself. Any other disposition
//! the program installs replaces ours: that is the program's business. The preloaded library
//! routes `sigaction` and `signal` through [`program_sigaction`] and [`program_signal`] for
//! this; a handler linked into a program without it cannot see those calls.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use libc::{c_int, sighandler_t};

/// The signals with a crash report.
pub const WATCHED: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

extern "C" {
    /// glibc's own name for `sigaction`: never interposed, so our calls reach the kernel's
    /// disposition even when the preloaded `sigaction` sits in front of it.
    fn __sigaction(
        signo: c_int,
        act: *const libc::sigaction,
        oldact: *mut libc::sigaction,
    ) -> c_int;
}

/// What the handler does once the record is written.
#[derive(Clone, Copy)]
pub enum After {
    /// Our handler is not installed for this signal.
    NotInstalled,
    /// Carry out the default action (terminate, with a core if enabled).
    Default,
    /// Call the handler that was installed before ours.
    Chain(&'static libc::sigaction),
}

const NOT_INSTALLED: u8 = 0;
const DEFAULT: u8 = 1;
const CHAIN: u8 = 2;

static AFTER: [AtomicU8; WATCHED.len()] = [const { AtomicU8::new(NOT_INSTALLED) }; WATCHED.len()];
/// Each signal's disposition before ours; set once, before ours is installed.
static PRIOR: [OnceLock<libc::sigaction>; WATCHED.len()] =
    [const { OnceLock::new() }; WATCHED.len()];

fn index(signo: c_int) -> Option<usize> {
    WATCHED.iter().position(|&s| s == signo)
}

/// What to do after recording `signo`. Async-signal-safe: atomic loads only.
pub fn after(signo: c_int) -> After {
    let Some(i) = index(signo) else {
        return After::NotInstalled;
    };
    match AFTER[i].load(Ordering::Acquire) {
        DEFAULT => After::Default,
        CHAIN => PRIOR[i].get().map_or(After::Default, After::Chain),
        _ => After::NotInstalled,
    }
}

/// Installs `handler` (an `SA_SIGINFO` handler) for every watched signal, remembering what was
/// there. A signal the program inherited as ignored stays ignored. Returns the signals now
/// handled.
pub fn install(handler: usize) -> Vec<c_int> {
    let mut installed = Vec::new();
    for (i, &signo) in WATCHED.iter().enumerate() {
        let Some(current) = query(signo) else {
            continue;
        };
        if current.sa_sigaction == libc::SIG_IGN || current.sa_sigaction == handler {
            continue;
        }
        let prior = *PRIOR[i].get_or_init(|| current);
        let after = if prior.sa_sigaction == libc::SIG_DFL {
            DEFAULT
        } else {
            CHAIN
        };
        AFTER[i].store(after, Ordering::Release);
        let ours = action(handler, prior.sa_flags & libc::SA_RESTART);
        // SAFETY: a fully initialised action for a catchable signal.
        if unsafe { __sigaction(signo, &ours, std::ptr::null_mut()) } == 0 {
            installed.push(signo);
        } else {
            AFTER[i].store(NOT_INSTALLED, Ordering::Release);
        }
    }
    installed
}

/// Our action: siginfo, on the alternate stack where the thread has one, and not deferred, so
/// that a fault inside the handler re-enters it and is recognised there (see `handler`).
fn action(handler: usize, extra_flags: c_int) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is valid; the fields that matter are set below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER | extra_flags;
    // SAFETY: initialises the mask inside `act`.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    act
}

fn query(signo: c_int) -> Option<libc::sigaction> {
    // SAFETY: an all-zero sigaction is a valid output buffer.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: queries only (no new action); `current` is a live output buffer.
    (unsafe { __sigaction(signo, std::ptr::null(), &mut current) } == 0).then_some(current)
}

/// Sets `signo` to its default action now. Async-signal-safe (one `sigaction`).
pub fn set_default(signo: c_int) {
    // SAFETY: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
    let act: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a valid action for a catchable signal.
    unsafe { __sigaction(signo, &act, std::ptr::null_mut()) };
}

/// The preloaded `sigaction` asks this first: `Some(result)` when the call was answered here
/// (the program set `SIG_DFL` on a watched signal while our handler `handler` is installed,
/// or reinstalls our handler), `None` to pass the call on unchanged.
///
/// # Safety
/// `act` and `oldact` are `sigaction`'s arguments: null or valid.
pub unsafe fn program_sigaction(
    handler: usize,
    signo: c_int,
    act: *const libc::sigaction,
    oldact: *mut libc::sigaction,
) -> Option<c_int> {
    let i = index(signo)?;
    if act.is_null() {
        return None;
    }
    // SAFETY: the caller passes a valid action.
    let wanted = unsafe { (*act).sa_sigaction };
    let current = query(signo)?;
    if current.sa_sigaction != handler {
        return None;
    }
    if wanted == libc::SIG_DFL {
        AFTER[i].store(DEFAULT, Ordering::Release);
        if !oldact.is_null() {
            // SAFETY: the caller passes a writable oldact.
            unsafe { *oldact = current };
        }
        return Some(0);
    }
    if wanted == handler {
        // Reinstalled from an earlier query: keep our own flags.
        // SAFETY: `act` is valid (above).
        let restart = unsafe { (*act).sa_flags } & libc::SA_RESTART;
        let ours = action(handler, restart);
        // SAFETY: a valid action; oldact is the caller's.
        return Some(unsafe { __sigaction(signo, &ours, oldact) });
    }
    None
}

/// The preloaded `signal` asks this first, as [`program_sigaction`]: `Some(previous)` when
/// answered here.
pub fn program_signal(handler: usize, signo: c_int, wanted: sighandler_t) -> Option<sighandler_t> {
    let i = index(signo)?;
    let current = query(signo)?;
    if current.sa_sigaction != handler {
        return None;
    }
    if wanted == libc::SIG_DFL {
        AFTER[i].store(DEFAULT, Ordering::Release);
        return Some(current.sa_sigaction);
    }
    if wanted == handler {
        let ours = action(handler, libc::SA_RESTART);
        // SAFETY: a valid action for a catchable signal.
        return Some(
            if unsafe { __sigaction(signo, &ours, std::ptr::null_mut()) } == 0 {
                current.sa_sigaction
            } else {
                libc::SIG_ERR
            },
        );
    }
    None
}
