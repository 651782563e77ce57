//! The stand-in for `libnvidia-eglcore`: a separately mapped executable region that holds the
//! code the driver's worker threads run, and that the exit handler unmaps.
//!
//! The code is hand-written assembly (below), assembled into this library and copied into the
//! region at map time: a loop that returns when the stop flag is set, and otherwise sleeps with
//! a raw `nanosleep` system call. A worker spends nearly all its time inside that system call,
//! so after the unmap it faults on the way back, with its pc inside the unmapped range.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// The worker loop: `stop` is read each round (nonzero → return), `sleep` is the `nanosleep`
/// request between rounds. Only system calls, no calls out of the region, no stack use.
pub type WorkerCode = unsafe extern "C" fn(stop: *const AtomicU32, sleep: *const libc::timespec);

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text",
    ".p2align 4",
    ".globl vkexit_tegra_worker_code_start",
    ".hidden vkexit_tegra_worker_code_start",
    ".globl vkexit_tegra_worker_code_end",
    ".hidden vkexit_tegra_worker_code_end",
    "vkexit_tegra_worker_code_start:",
    // rdi = stop flag, rsi = timespec. `syscall` keeps every register but rax, rcx and r11.
    "    mov r8, rdi",
    "    mov rdi, rsi",
    "    xor esi, esi",
    "2:",
    "    mov eax, dword ptr [r8]",
    "    test eax, eax",
    "    jnz 3f",
    "    mov eax, 35", // SYS_nanosleep(rdi = request, rsi = NULL)
    "    syscall",
    "    jmp 2b",
    "3:",
    "    ret",
    "vkexit_tegra_worker_code_end:",
    ".popsection",
);

#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".pushsection .text",
    ".p2align 4",
    ".globl vkexit_tegra_worker_code_start",
    ".hidden vkexit_tegra_worker_code_start",
    ".globl vkexit_tegra_worker_code_end",
    ".hidden vkexit_tegra_worker_code_end",
    "vkexit_tegra_worker_code_start:",
    // x0 = stop flag, x1 = timespec. `svc` keeps every register but x0.
    "    mov x9, x0",
    "    mov x11, x1",
    "2:",
    "    ldar w10, [x9]",
    "    cbnz w10, 3f",
    "    mov x0, x11",
    "    mov x1, xzr",
    "    mov x8, #101", // __NR_nanosleep(x0 = request, x1 = NULL)
    "    svc #0",
    "    b 2b",
    "3:",
    "    ret",
    "vkexit_tegra_worker_code_end:",
    ".popsection",
);

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("VK_LAYER_VKEXIT_tegra_exit has worker code for x86_64 and aarch64 only");

extern "C" {
    static vkexit_tegra_worker_code_start: u8;
    static vkexit_tegra_worker_code_end: u8;
}

#[cfg(target_arch = "aarch64")]
extern "C" {
    fn __clear_cache(start: *mut libc::c_char, end: *mut libc::c_char);
}

/// Start of the mapped region, 0 while none is mapped. Read by the exit handler and workers
/// without a lock.
static START: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
/// Serialises mapping; the exit handler never takes it.
static MAPPING: Mutex<()> = Mutex::new(());

/// A mapped range, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The first address.
    pub start: usize,
    /// One past the last address.
    pub end: usize,
}

impl Range {
    /// Whether `address` lies in the range.
    pub fn contains(&self, address: usize) -> bool {
        (self.start..self.end).contains(&address)
    }
}

/// Maps the region if it is not mapped: returns the new range, or `None` when one was
/// already mapped.
pub fn map() -> io::Result<Option<Range>> {
    let _guard = MAPPING.lock().unwrap_or_else(PoisonError::into_inner);
    if START.load(Ordering::Acquire) != 0 {
        return Ok(None);
    }
    let code = worker_code_bytes();
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let len = code.len().div_ceil(page).max(1) * page;
    // SAFETY: a fresh anonymous private mapping; no existing memory is affected.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `base` is a writable mapping of `len >= code.len()` bytes that nothing else uses.
    unsafe { ptr::copy_nonoverlapping(code.as_ptr(), base.cast::<u8>(), code.len()) };
    // SAFETY: changes the protection of our own mapping only.
    if unsafe { libc::mprotect(base, len, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: unmapping the mapping made above, which nothing references yet.
        unsafe { libc::munmap(base, len) };
        return Err(err);
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the range is our freshly written code; this makes the instruction cache see it.
    unsafe {
        __clear_cache(base.cast(), base.cast::<libc::c_char>().add(code.len()))
    };
    LEN.store(len, Ordering::Release);
    START.store(base as usize, Ordering::Release);
    let start = base as usize;
    Ok(Some(Range {
        start,
        end: start + len,
    }))
}

/// The mapped range, if any.
pub fn mapped() -> Option<Range> {
    let start = START.load(Ordering::Acquire);
    (start != 0).then(|| Range {
        start,
        end: start + LEN.load(Ordering::Acquire),
    })
}

/// The worker loop inside the region, if it is mapped.
pub fn worker_code() -> Option<WorkerCode> {
    let start = START.load(Ordering::Acquire);
    if start == 0 {
        return None;
    }
    // SAFETY: the region starts with the worker loop, copied there by `map` and executable.
    Some(unsafe { std::mem::transmute::<usize, WorkerCode>(start) })
}

/// Unmaps the region: what libEGL_nvidia's exit handler does to libnvidia-eglcore.
/// Returns the range that was unmapped.
///
/// Async-signal-safe: one atomic swap and `munmap`, no lock, no allocation.
pub fn unmap() -> Option<Range> {
    let start = START.swap(0, Ordering::AcqRel);
    if start == 0 {
        return None;
    }
    let len = LEN.load(Ordering::Acquire);
    // SAFETY: the range is the region mapped by `map`; the swap above made this the only
    // unmap. Workers still running in it fault, which is the point.
    unsafe { libc::munmap(start as *mut libc::c_void, len) };
    Some(Range {
        start,
        end: start + len,
    })
}

fn worker_code_bytes() -> &'static [u8] {
    // SAFETY: both symbols are defined by the assembly above, in one section, start before
    // end; the bytes between them are the loop's code, mapped read-only with this library.
    unsafe {
        let start = ptr::addr_of!(vkexit_tegra_worker_code_start);
        let end = ptr::addr_of!(vkexit_tegra_worker_code_end);
        std::slice::from_raw_parts(start, end as usize - start as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_code_is_small_and_ends_in_a_return() {
        let code = worker_code_bytes();
        assert!(!code.is_empty() && code.len() < 64, "{} bytes", code.len());
        #[cfg(target_arch = "x86_64")]
        assert_eq!(code.last(), Some(&0xc3));
        #[cfg(target_arch = "aarch64")]
        assert_eq!(code[code.len() - 4..], [0xc0, 0x03, 0x5f, 0xd6]);
    }
}
