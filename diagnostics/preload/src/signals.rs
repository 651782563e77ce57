//! `sigaction` and `signal`, so that a program asking for a watched signal's default action
//! keeps the crash handler in front of it (see `vkexit_crash::disposition`). Every other call
//! passes through unchanged.

use std::ffi::c_int;

use libc::sighandler_t;

use crate::real;

extern "C" {
    /// glibc's own name for `sigaction`, which nobody interposes.
    fn __sigaction(
        signo: c_int,
        act: *const libc::sigaction,
        oldact: *mut libc::sigaction,
    ) -> c_int;
}

/// `sigaction(signo, act, oldact)`.
///
/// # Safety
/// As `sigaction`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigaction(
    signo: c_int,
    act: *const libc::sigaction,
    oldact: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's own arguments.
    unsafe {
        vkexit_crash::interpose::sigaction(signo, act, oldact)
            .unwrap_or_else(|| __sigaction(signo, act, oldact))
    }
}

/// `signal(signo, handler)`.
///
/// # Safety
/// As `signal`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn signal(signo: c_int, handler: sighandler_t) -> sighandler_t {
    if let Some(previous) = vkexit_crash::interpose::signal(signo, handler) {
        return previous;
    }
    // SAFETY: glibc's signal has this signature.
    let signal: unsafe extern "C" fn(c_int, sighandler_t) -> sighandler_t =
        unsafe { std::mem::transmute(real::SIGNAL.get()) };
    // SAFETY: the caller's own arguments.
    unsafe { signal(signo, handler) }
}
