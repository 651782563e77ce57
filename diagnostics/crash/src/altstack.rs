//! An alternate signal stack for the installing thread, so that its handler runs even when the
//! fault is a stack overflow.
//!
//! `sigaltstack` is per thread and cannot be set up from inside a handler, so only the thread
//! that installs (the main thread, for the preloaded library) gets one. Other threads run the
//! handler on their own stack (the action has `SA_ONSTACK`, so a thread that has an alternate
//! stack of its own uses it); on a thread whose stack overflowed, the kernel cannot deliver the
//! signal, and the process dies by it unrecorded.

use std::io;

/// Generous: the handler itself needs about 20 KiB (one record, the maps buffer, the
/// backtrace pipe's buffer), and the backtrace child unwinds and symbolizes on a copy of it.
pub const SIZE: usize = 1 << 20;

/// Gives the calling thread an alternate signal stack of [`SIZE`] bytes (plus a guard page
/// below it), unless it already has one. Returns whether it has one now.
pub fn ensure() -> io::Result<bool> {
    // SAFETY: an all-zero stack_t is a valid output buffer.
    let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: queries only.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if current.ss_flags & libc::SS_DISABLE == 0 {
        return Ok(true);
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page + SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the lowest page of our own mapping becomes the guard against overrunning it.
    unsafe { libc::mprotect(base, page, libc::PROT_NONE) };
    let stack = libc::stack_t {
        // SAFETY: `page` bytes into a mapping of `page + SIZE` bytes.
        ss_sp: unsafe { base.cast::<u8>().add(page) }.cast(),
        ss_flags: 0,
        ss_size: SIZE,
    };
    // SAFETY: the stack is our mapping, which is never unmapped.
    if unsafe { libc::sigaltstack(&stack, std::ptr::null_mut()) } != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: unmapping our own mapping, which nothing references.
        unsafe { libc::munmap(base, page + SIZE) };
        return Err(err);
    }
    Ok(true)
}
