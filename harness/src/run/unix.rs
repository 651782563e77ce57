//! Platform code of the runner, and the only place that knows it: process
//! groups, pidfds, poll, signals, rlimits, cgroups (in `cgroup`).

use super::observed::Termination;
use crate::run::capture::Capture;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One program to run, fully described.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    pub env_set: Vec<(String, String)>,
    pub env_remove: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    /// After SIGTERM, how long before SIGKILL.
    pub term_grace: Duration,
    /// After the program exits, how long its descendants may keep its
    /// output pipes open before they are killed.
    pub pipe_grace: Duration,
    pub capture_keep: usize,
    /// Also write the program's stdout and stderr to vkexit's own, as they come (`vkexit exec`).
    pub echo: bool,
}

/// How one run ended, as its supervisor saw it.
pub struct Ended {
    pub termination: Termination,
    pub stdout: Capture,
    pub stderr: Capture,
    pub duration: Duration,
    /// What went wrong around the program that makes its own result
    /// untrustworthy: the process limit was hit, the disk filled up.
    pub faults: Vec<String>,
    /// The process started, when one was: which crash report is its own.
    pub pid: Option<libc::pid_t>,
    /// The run's orphans that vkexit reaped dead of a signal it did not send.
    pub orphans: Vec<super::observed::OrphanDeath>,
}

/// `spec` made ready for [`run_prepared`], as many times as it runs.
pub fn prepare(spec: &CommandSpec) -> std::io::Result<super::spawn::Prepared> {
    super::spawn::Prepared::new(spec, &[crate::support::env::RUN_TOKEN])
}

/// As [`run`], with `spec` prepared by [`prepare`], in the cgroup of the
/// caller's last run when `cgroups` holds it.
pub fn run_prepared(
    spec: &CommandSpec,
    prepared: Result<&super::spawn::Prepared, &std::io::Error>,
    cgroups: &mut super::cgroup::Reuse,
    limits: &Limits,
    on_hang: &mut dyn FnMut(libc::pid_t, &Capture),
) -> Ended {
    let start = Instant::now();
    let not_started = |reason: String| Ended {
        termination: Termination::NotStarted { reason },
        stdout: Capture::new(limits.capture_keep),
        stderr: Capture::new(limits.capture_keep),
        duration: start.elapsed(),
        faults: Vec::new(),
        pid: None,
        orphans: Vec::new(),
    };
    if let Some(full) = disk_full(&spec.cwd) {
        return not_started(full);
    }
    let token = super::reaper::new_token();
    let bound = match super::cgroup::RunBound::new(&token, cgroups) {
        Ok(b) => b,
        Err(reason) => return not_started(reason.to_string()),
    };
    let extra_env = [(crate::support::env::RUN_TOKEN, token.as_str())];
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => return not_started(format!("{}: {e}", spec.program.display())),
    };
    let spawned = super::reaper::spawn(&token, bound.reaper_key(), || {
        super::spawn::spawn_prepared(prepared, &extra_env, bound.cgroup_fd(), bound.child_setup())
            .map(|s| (s.pid, s))
    });
    let child = match spawned {
        Ok(c) => c,
        Err(e) => return not_started(format!("{}: {e}", spec.program.display())),
    };
    let pid = child.pid;
    let _group = super::interrupt::GroupSlot::new(pid);
    set_nonblocking(child.stdout.as_raw_fd());
    set_nonblocking(child.stderr.as_raw_fd());
    let mut watch = Watch {
        pid,
        pidfd: pidfd_open(pid),
        pipes: [Some(child.stdout), Some(child.stderr)],
        captures: [
            Capture::new(limits.capture_keep),
            Capture::new(limits.capture_keep),
        ],
        status: None,
        echo: limits.echo,
    };
    let termination = watch.supervise(start, limits, on_hang);
    kill_group(pid, libc::SIGKILL);
    let settle = bound.settle();
    let mut faults = bound.finish(cgroups);
    let orphans = super::reaper::finished(&token, pid, &|| settle.settled());
    faults.extend(disk_full(&spec.cwd));
    let [stdout, stderr] = watch.captures;
    Ended {
        pid: Some(pid),
        orphans,
        termination,
        stdout,
        stderr,
        duration: start.elapsed(),
        faults,
    }
}

/// Below this much free space in the run directory, the evidence of a run
/// (the validation log first) may have been cut short without a trace.
pub const MIN_FREE_BYTES: u64 = 1 << 20;

/// Says so when the file system of `dir` is full or nearly: a run whose
/// validation log could not be written must not pass.
pub fn disk_full(dir: &std::path::Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain integers, for which all zero bytes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and outlives the call; `st` is ours to fill.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // A file system without a size (tmpfs with size=0, some FUSE ones)
    // reports no blocks at all: nothing to judge by.
    if st.f_blocks == 0 {
        return None;
    }
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    // Root may write into the blocks ext4 reserves; others may not.
    let blocks = if root { st.f_bfree } else { st.f_bavail };
    let free = (blocks as u64).saturating_mul(st.f_frsize as u64);
    (free < MIN_FREE_BYTES).then(|| {
        format!(
            "the artifacts file system is full ({free} bytes free at {}): the run's evidence may be incomplete",
            dir.display()
        )
    })
}

struct Watch {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    pipes: [Option<OwnedFd>; 2],
    captures: [Capture; 2],
    status: Option<libc::c_int>,
    echo: bool,
}

impl Watch {
    fn supervise(
        &mut self,
        start: Instant,
        limits: &Limits,
        on_hang: &mut dyn FnMut(libc::pid_t, &Capture),
    ) -> Termination {
        let deadline = start + limits.timeout;
        let mut exited_at: Option<Instant> = None;
        loop {
            if self.status.is_none() && self.try_reap() {
                exited_at = Some(Instant::now());
            }
            let pipes_open = self.pipes.iter().any(Option::is_some);
            match exited_at {
                Some(_) if !pipes_open => break,
                Some(t) if t.elapsed() >= limits.pipe_grace => break,
                _ => {}
            }
            if exited_at.is_none() && Instant::now() >= deadline {
                on_hang(self.pid, &self.captures[0]);
                self.stop(limits);
                return Termination::TimedOut {
                    after_ms: start.elapsed().as_millis() as u64,
                };
            }
            if exited_at.is_none() && super::interrupt::interrupted() {
                self.stop(limits);
                return Termination::Interrupted;
            }
            let until = match exited_at {
                Some(t) => t + limits.pipe_grace,
                None => deadline,
            };
            self.poll_once(until);
        }
        let status = self.status.expect("reaped");
        let status = std::process::ExitStatus::from_raw(status);
        match (status.code(), status.signal()) {
            (Some(code), _) => Termination::Exited { code },
            (None, Some(signal)) => Termination::Signaled {
                signal,
                core_dumped: status.core_dumped(),
            },
            (None, None) => Termination::NotStarted {
                reason: format!("unexpected wait status {status:?}"),
            },
        }
    }

    /// Waits for output, the exit, or `until`, and takes what came.
    fn poll_once(&mut self, until: Instant) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(3);
        for pipe in self.pipes.iter().flatten() {
            fds.push(pollfd(pipe.as_raw_fd()));
        }
        let watching_exit = self.status.is_none();
        if watching_exit {
            if let Some(pidfd) = &self.pidfd {
                fds.push(pollfd(pidfd.as_raw_fd()));
            }
            fds.extend(super::interrupt::fd().map(pollfd));
        }
        let mut wait = until.saturating_duration_since(Instant::now());
        if watching_exit && self.pidfd.is_none() {
            // No pidfd (old kernel): look at the child every few ms.
            wait = wait.min(Duration::from_millis(5));
        }
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of initialised pollfd for its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            return;
        }
        for i in 0..2 {
            self.drain(i);
        }
    }

    /// Reads what a pipe has now; closes it at end of file.
    fn drain(&mut self, i: usize) {
        let Some(fd) = self.pipes[i].as_ref().map(|p| p.as_raw_fd()) else {
            return;
        };
        // Not zeroed: clearing 64 KiB on every wake-up cost more than the
        // rest of a short run's supervision.
        let mut buf = std::mem::MaybeUninit::<[u8; 64 * 1024]>::uninit();
        let len = std::mem::size_of_val(&buf);
        loop {
            // SAFETY: `buf` is writable for `len` bytes and `fd` is open.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), len) };
            if n > 0 {
                // SAFETY: read initialised the first `n` bytes.
                let got =
                    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
                self.captures[i].push(got);
                if self.echo {
                    echo(i, got);
                }
                continue;
            }
            let err = std::io::Error::last_os_error();
            if n < 0 && err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n < 0 && err.kind() == std::io::ErrorKind::WouldBlock {
                return;
            }
            self.pipes[i] = None;
            return;
        }
    }

    fn try_reap(&mut self) -> bool {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r == self.pid {
            self.status = Some(status);
            return true;
        }
        false
    }

    /// TERM to the group, a grace period, then KILL; the child is reaped.
    fn stop(&mut self, limits: &Limits) {
        kill_group(self.pid, libc::SIGTERM);
        let grace_end = Instant::now() + limits.term_grace;
        while Instant::now() < grace_end {
            if self.try_reap() {
                return;
            }
            self.poll_once(grace_end.min(Instant::now() + Duration::from_millis(20)));
        }
        kill_group(self.pid, libc::SIGKILL);
        let mut status = 0;
        // SAFETY: blocking waitpid on our own child, which was just killed.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        self.status = Some(status);
        for i in 0..2 {
            self.drain(i);
        }
    }
}

/// Passes output through to vkexit's stdout (`i` 0) or stderr (1), unbuffered; a closed or
/// failing stream loses the copy, never the capture or the run's supervision.
fn echo(i: usize, bytes: &[u8]) {
    use std::io::Write;
    let _ = match i {
        0 => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
        _ => std::io::stderr().lock().write_all(bytes),
    };
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 && flags & libc::O_NONBLOCK == 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: the syscall takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a descriptor nobody else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn kill_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill with a negative pid signals the process group we created.
    unsafe { libc::kill(-pgid, signal) };
}
