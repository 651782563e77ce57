//! Stacks for the handler.
//!
//! - The installing thread (the main thread, for the preloaded library) gets an alternate
//!   signal stack, so that its handler runs even after a stack overflow. `sigaltstack` is per
//!   thread and cannot be set up from inside a handler: other threads use their own alternate
//!   stack if they have one (Rust gives every thread one, of 8 KiB), else their own stack, and
//!   on an overflowed thread without one the kernel cannot deliver the signal at all.
//! - The record and the backtrace need more than an 8 KiB alternate stack holds (one record
//!   alone is 4 KiB), so they run on an emergency stack of their own, mapped at install. The
//!   switch keeps unwind information, so the backtrace crosses it back to the faulting frame.
//!   One thread at a time has it; another crashing meanwhile records on its own stack if that
//!   has room, or not at all.

use std::ffi::c_void;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The main thread's alternate stack: the kernel's signal frame, the handler's small entry
/// frame and the program's own handler, which the handler may call.
pub const ALTSTACK_SIZE: usize = 64 << 10;
/// The emergency stack: the records, and the backtrace child, which unwinds and symbolizes on
/// its copy of it.
pub const EMERGENCY_SIZE: usize = 512 << 10;
/// Below this much room on an alternate stack, a handler without the emergency stack records
/// nothing.
const MIN_ROOM: usize = 48 << 10;

/// Room a signal of ours raised inside the program's handler needs on top of the kernel's
/// frame: our handler's entry frames before it moves to the emergency stack, and what the
/// program's handler itself still uses below the point where it raises.
const NESTED_HANDLER_ROOM: usize = 8 << 10;
/// The kernel's signal frame on this machine (`AT_MINSIGSTKSZ`: 3.3 KiB with AVX-512 state,
/// more with AMX), read at install; 0 until then.
static SIGNAL_FRAME: AtomicUsize = AtomicUsize::new(0);

static EMERGENCY_TOP: AtomicUsize = AtomicUsize::new(0);
static EMERGENCY_BUSY: AtomicBool = AtomicBool::new(false);

/// Gives the calling thread an alternate signal stack, unless it has one, and maps the
/// emergency stack. Failures only cost the cases above.
pub fn prepare() {
    // SAFETY: getauxval has no preconditions; 0 when the kernel does not say.
    let frame = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
    SIGNAL_FRAME.store(frame.max(libc::MINSIGSTKSZ), Ordering::Release);
    let _ = ensure_altstack();
    if EMERGENCY_TOP.load(Ordering::Acquire) == 0 {
        if let Ok((_, top)) = map_stack(EMERGENCY_SIZE) {
            EMERGENCY_TOP.store(top, Ordering::Release);
        }
    }
}

fn ensure_altstack() -> io::Result<()> {
    // SAFETY: an all-zero stack_t is a valid output buffer.
    let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: queries only.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if current.ss_flags & libc::SS_DISABLE == 0 {
        return Ok(());
    }
    let (base, _) = map_stack(ALTSTACK_SIZE)?;
    let stack = libc::stack_t {
        ss_sp: base as *mut c_void,
        ss_flags: 0,
        ss_size: ALTSTACK_SIZE,
    };
    // SAFETY: the stack is our mapping, which is never unmapped.
    if unsafe { libc::sigaltstack(&stack, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Maps `size` bytes of stack with an inaccessible guard page below. Returns its lowest usable
/// address and its top.
fn map_stack(size: usize) -> io::Result<(usize, usize)> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page + size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the lowest page of our own mapping becomes the guard.
    unsafe { libc::mprotect(base, page, libc::PROT_NONE) };
    let low = base as usize + page;
    Ok((low, low + size))
}

/// Runs `f` on the emergency stack if this thread can have it now, else on the current stack
/// if it has room. Returns whether `f` ran. Async-signal-safe (an atomic flag and a stack
/// switch).
pub fn run_with_room(f: &mut dyn FnMut()) -> bool {
    let top = EMERGENCY_TOP.load(Ordering::Acquire);
    if top != 0 && !EMERGENCY_BUSY.swap(true, Ordering::AcqRel) {
        let mut f = f;
        // SAFETY: `top` is the top of our mapped stack, which this thread now holds alone;
        // the trampoline calls `call` with `&mut f` and switches back before returning.
        unsafe {
            vkexit_crash_call_on_stack(std::ptr::from_mut(&mut f).cast(), call, top as *mut u8)
        };
        EMERGENCY_BUSY.store(false, Ordering::Release);
        return true;
    }
    if room_here() < MIN_ROOM {
        return false;
    }
    f();
    true
}

extern "C" fn call(f: *mut c_void) {
    // SAFETY: `run_with_room` passes a pointer to its `&mut dyn FnMut()`, alive for the call.
    let f = unsafe { &mut *f.cast::<&mut dyn FnMut()>() };
    f();
}

/// Whether another signal delivered here, on an alternate stack, would find no room for the
/// kernel's frame and our handler: on a thread's small alternate stack (Rust gives each thread
/// 8 KiB) below the frames of the signal being handled. The kernel then cannot deliver it and
/// kills the process with SIGSEGV instead. Async-signal-safe.
pub fn no_room_for_a_nested_signal() -> bool {
    let frame = SIGNAL_FRAME.load(Ordering::Acquire).max(libc::MINSIGSTKSZ);
    room_here() < frame + NESTED_HANDLER_ROOM
}

/// The room left below this frame when on an alternate stack; plenty (usize::MAX) on a
/// thread's own stack, whose limits are not known here.
fn room_here() -> usize {
    // SAFETY: an all-zero stack_t is a valid output buffer.
    let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: queries only.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut current) } != 0
        || current.ss_flags & libc::SS_ONSTACK == 0
    {
        return usize::MAX;
    }
    let here = std::ptr::from_ref(&current) as usize;
    here.saturating_sub(current.ss_sp as usize)
}

extern "C" {
    /// Calls `f(arg)` with the stack pointer at `top`, then returns on the caller's stack.
    fn vkexit_crash_call_on_stack(arg: *mut c_void, f: extern "C" fn(*mut c_void), top: *mut u8);
}

// The caller's stack pointer lives in the frame pointer register while `f` runs, and the
// unwind information says so: an unwinder (the backtrace) goes from `f` back to the caller's
// frame on the other stack.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.vkexit_crash_call_on_stack,\"ax\",@progbits",
    ".p2align 4",
    ".globl vkexit_crash_call_on_stack",
    ".hidden vkexit_crash_call_on_stack",
    ".type vkexit_crash_call_on_stack, @function",
    "vkexit_crash_call_on_stack:",
    ".cfi_startproc",
    "    push rbp",
    ".cfi_def_cfa_offset 16",
    ".cfi_offset rbp, -16",
    "    mov rbp, rsp",
    ".cfi_def_cfa_register rbp",
    "    mov rsp, rdx",
    "    call rsi",
    "    mov rsp, rbp",
    "    pop rbp",
    ".cfi_def_cfa rsp, 8",
    "    ret",
    ".cfi_endproc",
    ".size vkexit_crash_call_on_stack, .-vkexit_crash_call_on_stack",
    ".popsection",
);

#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".pushsection .text.vkexit_crash_call_on_stack,\"ax\",@progbits",
    ".p2align 4",
    ".globl vkexit_crash_call_on_stack",
    ".hidden vkexit_crash_call_on_stack",
    ".type vkexit_crash_call_on_stack, @function",
    "vkexit_crash_call_on_stack:",
    ".cfi_startproc",
    "    stp x29, x30, [sp, #-16]!",
    ".cfi_def_cfa_offset 16",
    ".cfi_offset x29, -16",
    ".cfi_offset x30, -8",
    "    mov x29, sp",
    ".cfi_def_cfa_register x29",
    "    mov sp, x2",
    "    blr x1",
    "    mov sp, x29",
    "    ldp x29, x30, [sp], #16",
    ".cfi_def_cfa sp, 0",
    ".cfi_restore x29",
    ".cfi_restore x30",
    "    ret",
    ".cfi_endproc",
    ".size vkexit_crash_call_on_stack, .-vkexit_crash_call_on_stack",
    ".popsection",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closure_runs_on_the_emergency_stack_and_unwinds_back() {
        prepare();
        let top = EMERGENCY_TOP.load(Ordering::Acquire);
        assert_ne!(top, 0);
        let mut seen = 0usize;
        let mut frames_back_home = false;
        let ran = run_with_room(&mut || {
            let here = 0u8;
            seen = std::ptr::from_ref(&here) as usize;
            // The unwinder crosses the switch back to this test's frames.
            // SAFETY: unwinds this thread's stack only.
            unsafe {
                backtrace::trace_unsynchronized(|frame| {
                    let mut named = false;
                    backtrace::resolve_frame_unsynchronized(frame, |s| {
                        named |= s.name().is_some_and(|n| {
                            n.to_string()
                                .contains("a_closure_runs_on_the_emergency_stack")
                        });
                    });
                    frames_back_home |= named;
                    !frames_back_home
                })
            };
        });
        assert!(ran);
        assert!((top - EMERGENCY_SIZE..top).contains(&seen), "{seen:#x}");
        assert!(frames_back_home);
        assert!(!EMERGENCY_BUSY.load(Ordering::Acquire));
    }
}
