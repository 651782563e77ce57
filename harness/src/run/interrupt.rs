//! Ctrl-C and SIGTERM. The first one stops the run: no new run starts,
//! every running program and its process group get TERM, a grace period,
//! then KILL, and the results gathered so far are written, marked
//! interrupted. A second one kills every process group at once and exits.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Process groups of the runs in progress, for the second signal's handler,
/// which may not lock or allocate. 0 marks a free slot.
static GROUPS: [AtomicI32; 512] = [const { AtomicI32::new(0) }; 512];
/// Read end polled by every supervisor; the handler writes one byte.
static PIPE: OnceLock<(OwnedFd, OwnedFd)> = OnceLock::new();

pub const EXIT_CODE: u8 = vkexit_evidence::exit_code::INTERRUPTED;

/// Installs the handlers once; later calls do nothing.
pub fn install() -> std::io::Result<()> {
    if PIPE.get().is_some() {
        return Ok(());
    }
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let pipe = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let write_end = pipe.1.as_raw_fd();
    if PIPE.set(pipe).is_err() {
        return Ok(());
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches atomics and calls kill, write and
        // _exit, which are async-signal-safe.
        unsafe {
            signal_hook::low_level::register(signal, move || on_signal(write_end))?;
        }
    }
    Ok(())
}

/// Runs inside the signal handler: async-signal-safe only.
fn on_signal(write_end: RawFd) {
    if !INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: writes one byte from a static buffer to our own pipe.
        unsafe { libc::write(write_end, b"!".as_ptr().cast(), 1) };
        return;
    }
    // Every process of every run, even one that left its process group.
    super::cgroup::kill_all_from_signal_handler();
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: kill on a process group this process created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    // SAFETY: _exit ends the process without running anything else; the
    // direct children die with it through PR_SET_PDEATHSIG.
    unsafe { libc::_exit(EXIT_CODE as i32) };
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The descriptor that becomes readable on the first signal.
pub fn fd() -> Option<RawFd> {
    PIPE.get().map(|(read, _)| read.as_raw_fd())
}

/// Registers a run's process group while it lives.
pub struct GroupSlot(Option<usize>);

impl GroupSlot {
    pub fn new(pgid: libc::pid_t) -> Self {
        for (i, slot) in GROUPS.iter().enumerate() {
            if slot
                .compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return GroupSlot(Some(i));
            }
        }
        GroupSlot(None)
    }
}

impl Drop for GroupSlot {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            GROUPS[i].store(0, Ordering::SeqCst);
        }
    }
}
