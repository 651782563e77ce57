//! The driver's worker threads: one per `VkDevice`, running the loop in the region until
//! `vkDestroyDevice` stops it.

use crate::region;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Workers that are running code in the region now. Read by the exit handler without a lock.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Numbers the workers' names, `vkexit-tegra-N`.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// How many workers are running code in the region.
pub fn live() -> usize {
    LIVE.load(Ordering::Acquire)
}

/// A running worker.
pub struct Worker {
    /// The thread's name, `vkexit-tegra-N` (Linux keeps at most 15 bytes).
    pub name: String,
    /// The thread's kernel id.
    pub tid: i64,
    stop: Arc<AtomicU32>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Worker {
    /// Starts a worker in the region, sleeping `sleep` between rounds; returns once the thread
    /// runs. With `randomize_phase`, the thread first sleeps a random part of `sleep`, so that
    /// where in its round the process exits is random rather than fixed by the program's
    /// timing. Fails when no region is mapped or the thread cannot be spawned.
    pub fn start(sleep: Duration, randomize_phase: bool) -> io::Result<Worker> {
        let code = region::worker_code()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no region is mapped"))?;
        let name = format!("vkexit-tegra-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let stop = Arc::new(AtomicU32::new(0));
        let started = Arc::new((Mutex::new(None), Condvar::new()));
        let (flag, report) = (Arc::clone(&stop), Arc::clone(&started));
        LIVE.fetch_add(1, Ordering::AcqRel);
        let spawned = thread::Builder::new().name(name.clone()).spawn(move || {
            *report.0.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(vkexit_evidence::thread_id());
            report.1.notify_one();
            drop(report);
            if randomize_phase {
                thread::sleep(random_below(sleep));
            }
            let request = libc::timespec {
                tv_sec: sleep.as_secs() as libc::time_t,
                tv_nsec: sleep.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `code` is the loop in the region; `flag` (owned by this closure) and
            // `request` outlive the call. If the region is unmapped first, the call faults:
            // that is the crash being reproduced.
            unsafe { code(Arc::as_ptr(&flag), &request) };
            LIVE.fetch_sub(1, Ordering::AcqRel);
        });
        let thread = match spawned {
            Ok(thread) => thread,
            Err(err) => {
                LIVE.fetch_sub(1, Ordering::AcqRel);
                return Err(err);
            }
        };
        let tid = wait_for_tid(&started);
        Ok(Worker {
            name,
            tid,
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Sets the stop flag and waits for the thread to leave the region and end, as
    /// `vkDestroyDevice` does.
    pub fn stop(&self) {
        self.stop.store(1, Ordering::Release);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// Waits until the new thread has written its kernel id.
fn wait_for_tid(started: &(Mutex<Option<i64>>, Condvar)) -> i64 {
    let mut tid = started.0.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(tid) = *tid {
            return tid;
        }
        tid = started.1.wait(tid).unwrap_or_else(PoisonError::into_inner);
    }
}

/// A random duration in `[0, limit)`, from the kernel's random source (the clock if that fails).
fn random_below(limit: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    // SAFETY: writes at most 8 bytes into a local 8-byte buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    let random = if got == 8 {
        u64::from_ne_bytes(bytes)
    } else {
        vkexit_evidence::monotonic_ns().wrapping_mul(0x9e37_79b9_7f4a_7c15)
    };
    let limit_ns = limit.as_nanos().max(1) as u64;
    Duration::from_nanos(random % limit_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::atomic::AtomicUsize;

    const CHILD_VAR: &str = "VKEXIT_TEGRA_FAULT_CHILD";
    const FAULT_EXIT: i32 = 86;

    static FAULT_START: AtomicUsize = AtomicUsize::new(0);
    static FAULT_END: AtomicUsize = AtomicUsize::new(0);

    /// Runs as a SIGSEGV handler: reports where the fault was, with `write` only, and exits.
    extern "C" fn on_fault(_: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // SAFETY: the kernel passes valid siginfo and ucontext pointers to an SA_SIGINFO handler.
        let (addr, pc) = unsafe { ((*info).si_addr() as usize, fault_pc(context)) };
        let range = FAULT_START.load(Ordering::SeqCst)..FAULT_END.load(Ordering::SeqCst);
        let mut name = [0u8; 16];
        let name = vkexit_evidence::thread_name(&mut name);
        let verdict: &[u8] = match (range.contains(&addr), range.contains(&pc)) {
            (true, true) => b"fault addr and pc in region on ",
            _ => b"fault outside the region on ",
        };
        // SAFETY: write and _exit are async-signal-safe; the buffers are live.
        unsafe {
            libc::write(2, verdict.as_ptr().cast(), verdict.len());
            libc::write(2, name.as_ptr().cast(), name.len());
            libc::write(2, b"\n".as_ptr().cast(), 1);
            libc::_exit(FAULT_EXIT);
        }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn fault_pc(context: *mut libc::c_void) -> usize {
        // SAFETY: the caller passes the handler's ucontext.
        unsafe {
            (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
        }
    }

    #[cfg(target_arch = "aarch64")]
    unsafe fn fault_pc(context: *mut libc::c_void) -> usize {
        // SAFETY: the caller passes the handler's ucontext.
        unsafe { (*context.cast::<libc::ucontext_t>()).uc_mcontext.pc as usize }
    }

    fn install_fault_reporter() {
        // SAFETY: a zeroed sigaction with our SA_SIGINFO handler is a valid argument.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fault as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut());
        }
    }

    /// In a child process (this test, re-run alone): a worker whose region is unmapped under it
    /// faults with its pc inside the region, on its own thread.
    #[test]
    fn a_worker_faults_with_its_pc_in_the_region_once_it_is_unmapped() {
        if std::env::var_os(CHILD_VAR).is_some() {
            let range = region::map()
                .unwrap()
                .expect("the child maps the region first");
            FAULT_START.store(range.start, Ordering::SeqCst);
            FAULT_END.store(range.end, Ordering::SeqCst);
            install_fault_reporter();
            let worker = Worker::start(Duration::from_millis(1), false).unwrap();
            assert!(worker.name.starts_with("vkexit-tegra-"));
            assert_eq!(live(), 1);
            thread::sleep(Duration::from_millis(5));
            region::unmap().unwrap();
            thread::sleep(Duration::from_secs(5));
            panic!("no fault within 5 s of the unmap");
        }
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "worker::tests::a_worker_faults_with_its_pc_in_the_region_once_it_is_unmapped",
            ])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD_VAR, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(FAULT_EXIT), "{stderr}");
        assert!(
            stderr.contains("fault addr and pc in region on vkexit-tegra-"),
            "{stderr}"
        );
    }

    /// A worker stopped before the unmap leaves the region and ends; nothing faults (in a
    /// child process too, since the region is process-wide).
    #[test]
    fn stopped_workers_leave_the_region_and_the_unmap_is_harmless() {
        if std::env::var_os(CHILD_VAR).is_none() {
            let output = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "worker::tests::stopped_workers_leave_the_region_and_the_unmap_is_harmless",
                ])
                .args(["--nocapture", "--test-threads=1"])
                .env(CHILD_VAR, "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{stdout}{stderr}");
            assert!(stdout.contains("1 passed"), "{stdout}");
            return;
        }
        region::map().unwrap();
        let workers: Vec<Worker> = (0..3)
            .map(|_| Worker::start(Duration::from_millis(1), true).unwrap())
            .collect();
        assert_eq!(live(), 3);
        assert!(workers.iter().all(|w| w.tid > 0));
        for worker in &workers {
            worker.stop();
            worker.stop();
        }
        assert_eq!(live(), 0);
        assert!(region::unmap().is_some());
        assert!(region::unmap().is_none());
        thread::sleep(Duration::from_millis(20));
    }
}
