//! The dispositions of the watched signals: ours installed in front, and behind it the one the
//! program believes it has, which our handler carries out after recording.
//!
//! At install, whatever was there (the default action, or a handler installed earlier) becomes
//! the program's disposition. Afterwards, with the preloaded library routing `sigaction` and
//! `signal` through [`program_sigaction`] and [`program_signal`], the program's own calls
//! change only its disposition behind ours, and its queries see that disposition, never ours:
//! - Rust's runtime, finding the default action, installs its stack-overflow handler as it
//!   would without us (and gives its threads alternate stacks); a stack overflow still ends in
//!   its message and `SIGABRT`;
//! - a program that sets `SIG_DFL` before `raise` (the mock does) still dies of the signal;
//! - a program's crash handler still runs, after the record is written.
//!
//! Only `SIG_IGN` makes ours step aside (the program wants the signal ignored). Calls that do
//! not go through `sigaction` or `signal` (raw system calls, `sysv_signal`, `sigset`) replace
//! ours: that is the program's business. A handler linked into a program without the preloaded
//! library sees none of these calls, and chains only to what was installed before it.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
    /// The program's disposition is the default action: terminate (with a core if enabled).
    Default,
    /// The program's disposition is this handler.
    Chain(libc::sigaction),
}

/// Whether our handler is installed for each watched signal.
static INSTALLED: [AtomicBool; WATCHED.len()] = [const { AtomicBool::new(false) }; WATCHED.len()];

/// The program's disposition per signal: a small ring of saved actions and the one in force.
/// A writer fills a fresh slot, then publishes its number; the handler copies the published
/// slot. Tearing one would take eight more changes of the same signal during that copy.
const SLOTS: usize = 8;
struct Saved(UnsafeCell<MaybeUninit<libc::sigaction>>);
// SAFETY: slots are written before they are published and rewritten only eight changes later
// (see above); readers copy them out.
unsafe impl Sync for Saved {}
static SAVED: [[Saved; SLOTS]; WATCHED.len()] =
    [const { [const { Saved(UnsafeCell::new(MaybeUninit::uninit())) }; SLOTS] }; WATCHED.len()];
static NEXT_SLOT: [AtomicUsize; WATCHED.len()] = [const { AtomicUsize::new(0) }; WATCHED.len()];
/// The slot in force, plus one; 0 means the default action.
static CURRENT: [AtomicUsize; WATCHED.len()] = [const { AtomicUsize::new(0) }; WATCHED.len()];

fn index(signo: c_int) -> Option<usize> {
    WATCHED.iter().position(|&s| s == signo)
}

/// The program's disposition for signal `i`. Async-signal-safe: loads and a copy.
fn program_action(i: usize) -> libc::sigaction {
    match CURRENT[i].load(Ordering::Acquire) {
        // SAFETY: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
        0 => unsafe { std::mem::zeroed() },
        // SAFETY: a published slot was fully written before its number was stored.
        slot => unsafe { (*SAVED[i][slot - 1].0.get()).assume_init() },
    }
}

/// Makes `action` the program's disposition for signal `i`. Async-signal-safe.
fn set_program_action(i: usize, action: &libc::sigaction) {
    if action.sa_sigaction == libc::SIG_DFL {
        CURRENT[i].store(0, Ordering::Release);
        return;
    }
    let slot = NEXT_SLOT[i].fetch_add(1, Ordering::AcqRel) % SLOTS;
    // SAFETY: this slot is not the published one (the ring moved on), see `Saved`.
    unsafe { (*SAVED[i][slot].0.get()).write(*action) };
    CURRENT[i].store(slot + 1, Ordering::Release);
}

/// What to do after recording `signo`. Async-signal-safe.
pub fn after(signo: c_int) -> After {
    let Some(i) = index(signo) else {
        return After::NotInstalled;
    };
    if !INSTALLED[i].load(Ordering::Acquire) {
        return After::NotInstalled;
    }
    let action = program_action(i);
    if action.sa_sigaction == libc::SIG_DFL {
        After::Default
    } else {
        After::Chain(action)
    }
}

/// Before calling the program's handler of `signo`: `SA_RESETHAND` makes its disposition the
/// default action again, as the kernel would. Async-signal-safe.
pub fn note_chained(signo: c_int, action: &libc::sigaction) {
    if let Some(i) = index(signo) {
        if action.sa_flags & libc::SA_RESETHAND != 0 {
            CURRENT[i].store(0, Ordering::Release);
        }
    }
}

/// Installs `handler` (an `SA_SIGINFO` handler) for every watched signal; what was there
/// becomes the program's disposition. A signal the program inherited as ignored stays
/// ignored. Returns the signals now handled.
pub fn install(handler: usize) -> Vec<c_int> {
    let mut installed = Vec::new();
    for (i, &signo) in WATCHED.iter().enumerate() {
        let Some(current) = query(signo) else {
            continue;
        };
        if current.sa_sigaction == libc::SIG_IGN || current.sa_sigaction == handler {
            continue;
        }
        set_program_action(i, &current);
        let ours = action(handler);
        // SAFETY: a fully initialised action for a catchable signal.
        if unsafe { __sigaction(signo, &ours, std::ptr::null_mut()) } == 0 {
            INSTALLED[i].store(true, Ordering::Release);
            installed.push(signo);
        }
    }
    installed
}

/// Our action: siginfo, on the alternate stack where the thread has one, restarting
/// interrupted calls (the program's handlers mostly ask for that too), and not deferred, so
/// that a fault inside the handler re-enters it and is recognised there (see `handler`).
fn action(handler: usize) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is valid; the fields that matter are set below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER | libc::SA_RESTART;
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

/// While the program's handler runs where one more signal frame would not fit (see
/// `stacks::no_room_for_a_nested_signal`): gives `signo` the program's own disposition at the
/// kernel, so that a `signo` the program's handler raises (Rust's aborts after an overflow)
/// takes the program's action without a frame of ours, as it would without vkexit. Returns
/// whether ours must be put back with [`take_back`]. Async-signal-safe (one `sigaction`).
pub fn hand_back(signo: c_int) -> bool {
    let Some(i) = index(signo) else {
        return false;
    };
    if !INSTALLED[i].load(Ordering::Acquire) {
        return false;
    }
    let program = program_action(i);
    // SAFETY: the program's own action for this catchable signal.
    unsafe { __sigaction(signo, &program, std::ptr::null_mut()) == 0 }
}

/// Puts our `handler` back for `signo` after [`hand_back`]. Async-signal-safe.
pub fn take_back(signo: c_int, handler: usize) {
    let ours = action(handler);
    // SAFETY: a fully initialised action for a catchable signal.
    unsafe { __sigaction(signo, &ours, std::ptr::null_mut()) };
}

/// Sets `signo` to its default action now. Async-signal-safe (one `sigaction`).
pub fn set_default(signo: c_int) {
    // SAFETY: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
    let act: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a valid action for a catchable signal.
    unsafe { __sigaction(signo, &act, std::ptr::null_mut()) };
    if let Some(i) = index(signo) {
        INSTALLED[i].store(false, Ordering::Release);
    }
}

/// The preloaded `sigaction` asks this first: `Some(result)` when the call was answered here
/// (a watched signal while our handler `handler` is installed), `None` to pass the call on.
/// Async-signal-safe, as `sigaction` is.
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
    // The kernel's word, not ours: a raw system call may have replaced our handler.
    if query(signo)?.sa_sigaction != handler {
        return None;
    }
    let previous = program_action(i);
    if !act.is_null() {
        // SAFETY: the caller passes a valid action.
        let wanted = unsafe { *act };
        if wanted.sa_sigaction == libc::SIG_IGN {
            // The program wants it ignored from now on: ours steps aside.
            // SAFETY: the program's own action.
            let result = unsafe { __sigaction(signo, &wanted, std::ptr::null_mut()) };
            if result != 0 {
                return Some(result);
            }
            INSTALLED[i].store(false, Ordering::Release);
        } else if wanted.sa_sigaction != handler {
            set_program_action(i, &wanted);
        }
    }
    if !oldact.is_null() {
        // SAFETY: the caller passes a writable oldact.
        unsafe { *oldact = previous };
    }
    Some(0)
}

/// The preloaded `signal` asks this first, as [`program_sigaction`]: `Some(previous)` when
/// answered here. `signal` is glibc's BSD flavour: the signal blocked in its handler, calls
/// restarted.
pub fn program_signal(handler: usize, signo: c_int, wanted: sighandler_t) -> Option<sighandler_t> {
    // SAFETY: an all-zero sigaction is valid; the fields that matter are set below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = wanted;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: initialises and fills the mask inside `act`.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaddset(&mut act.sa_mask, signo);
    }
    // SAFETY: an all-zero sigaction is a valid output buffer.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both point to live structs.
    match unsafe { program_sigaction(handler, signo, &act, &mut previous) }? {
        0 => Some(previous.sa_sigaction),
        _ => Some(libc::SIG_ERR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_action_round_trips_through_the_ring() {
        let i = 3; // SIGFPE, untouched by other tests
        assert_eq!(program_action(i).sa_sigaction, libc::SIG_DFL);
        for n in 1..=3 * SLOTS {
            // SAFETY: all-zero is a valid sigaction.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = 0x1000 + n;
            action.sa_flags = libc::SA_SIGINFO;
            set_program_action(i, &action);
            assert_eq!(program_action(i).sa_sigaction, 0x1000 + n);
        }
        // SAFETY: all-zero is SIG_DFL.
        set_program_action(i, &unsafe { std::mem::zeroed() });
        assert_eq!(program_action(i).sa_sigaction, libc::SIG_DFL);
    }
}
