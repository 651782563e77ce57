//! Starting a run's program straight into its cgroup. `clone3` with
//! `CLONE_INTO_CGROUP` (Linux 5.7) makes the child a member from its first
//! instruction. Moving a process in afterwards (a write to `cgroup.procs`)
//! takes the kernel's cgroup thread-group lock for writing, and taking it
//! waits for an RCU grace period: 5–12 ms of a run's wall time, spent
//! asleep, once per run that starts after the lock went idle. Where `clone3`
//! is refused (an older kernel, a seccomp filter, qemu-user, which answers
//! it with ENOSYS) a plain fork is used and the child moves itself in as
//! before. `VKEXIT_SPAWN_WITHOUT_CLONE3=1` takes that path on any machine, so
//! that the tests hold it to the same verdicts.
//!
//! Everything the child needs is made before the clone: the child of a
//! multi-threaded process may only make system calls until it execs.

use super::cgroup::ChildSetup;
use super::unix::CommandSpec;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Set once `clone3` answered ENOSYS: it will not be asked again.
static CLONE3_MISSING: AtomicBool = AtomicBool::new(false);

/// Whether to try `clone3` at all: not after ENOSYS, nor when this process was prepared to
/// take the fork path (`run::Process::clone3`).
fn try_clone3() -> bool {
    super::process().clone3 && !CLONE3_MISSING.load(Ordering::Relaxed)
}

/// `struct clone_args` of Linux 5.7 (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// A started program: its pid and the read ends of its output.
pub struct Spawned {
    pub pid: libc::pid_t,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// What the child does between clone and exec, all of it prepared: made once
/// for the runs of one cell in one run directory (they differ only in the
/// extra variables of `spawn_prepared`), since copying the environment into C
/// strings costs more than the rest of a spawn.
pub struct Prepared {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
}

impl Prepared {
    /// `spec` as the child will get it, less the variables named in
    /// `extra`, which each spawn sets; an error names what cannot be passed
    /// to it (a NUL byte).
    pub fn new(spec: &CommandSpec, extra: &[&str]) -> io::Result<Prepared> {
        let extra: Vec<(&str, &str)> = extra.iter().map(|k| (*k, "")).collect();
        let mut env = environment(spec, &extra);
        env.truncate(env.len() - extra.len());
        Ok(Prepared {
            program: cstring(resolve(&spec.program, &env).as_os_str())?,
            argv: std::iter::once(spec.program.as_os_str())
                .chain(spec.args.iter().map(OsString::as_os_str))
                .map(cstring)
                .collect::<io::Result<_>>()?,
            envp: env
                .iter()
                .map(|(k, v)| env_entry(k.as_bytes(), v.as_bytes()))
                .collect::<io::Result<_>>()?,
            cwd: cstring(spec.cwd.as_os_str())?,
        })
    }
}

/// Starts `spec` with `extra_env` added, in its own process group, inside
/// the cgroup open at `cgroup` when there is one (else as `setup` says).
#[cfg(test)]
pub fn spawn(
    spec: &CommandSpec,
    extra_env: &[(&str, &str)],
    cgroup: Option<RawFd>,
    setup: ChildSetup,
) -> io::Result<Spawned> {
    let names: Vec<&str> = extra_env.iter().map(|(k, _)| *k).collect();
    spawn_prepared(&Prepared::new(spec, &names)?, extra_env, cgroup, setup)
}

/// As [`spawn`], from a command prepared with the names of `extra_env`.
pub fn spawn_prepared(
    prepared: &Prepared,
    extra_env: &[(&str, &str)],
    cgroup: Option<RawFd>,
    setup: ChildSetup,
) -> io::Result<Spawned> {
    let extra: Vec<CString> = extra_env
        .iter()
        .map(|(k, v)| env_entry(k.as_bytes(), v.as_bytes()))
        .collect::<io::Result<_>>()?;
    let argv = pointers(&prepared.argv);
    let envp: Vec<*const libc::c_char> = prepared
        .envp
        .iter()
        .chain(&extra)
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let stdin = open_null()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    // Tells the parent why exec failed; closed by a successful exec.
    let (status_r, status_w) = pipe()?;
    let child = ChildFds {
        stdin: stdin.as_raw_fd(),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        status: status_w.as_raw_fd(),
    };
    let pid = match cgroup.and_then(clone_into) {
        Some(Ok(0)) => child_side(prepared, &argv, &envp, &child, setup, true),
        Some(Ok(pid)) => pid,
        Some(Err(e)) => return Err(e),
        // SAFETY: the child only makes system calls until it execs or exits.
        None => match unsafe { libc::fork() } {
            0 => child_side(prepared, &argv, &envp, &child, setup, false),
            -1 => return Err(io::Error::last_os_error()),
            pid => pid,
        },
    };
    drop((stdin, out_w, err_w, status_w));
    let mut errno = [0u8; 4];
    let n = loop {
        // SAFETY: reads into a 4-byte buffer from a pipe we own.
        let n = unsafe { libc::read(status_r.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
        if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break n;
        }
    };
    if n == 4 {
        let mut status = 0;
        // SAFETY: reaps the child that failed to exec.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
    }
    Ok(Spawned {
        pid,
        stdout: out_r,
        stderr: err_r,
    })
}

/// `clone3` into the cgroup `fd`: `None` where the kernel or a filter
/// refuses it, so that the caller forks instead.
pub(super) fn clone_into(fd: RawFd) -> Option<io::Result<libc::pid_t>> {
    if !try_clone3() {
        return None;
    }
    let mut args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: fd as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM copies the address space like fork; the
    // child only makes system calls until it execs (`child_side`).
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if r >= 0 {
        return Some(Ok(r as libc::pid_t));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            CLONE3_MISSING.store(true, Ordering::Relaxed);
            None
        }
        Some(libc::EPERM | libc::EINVAL | libc::E2BIG | libc::EOPNOTSUPP) => None,
        _ => Some(Err(e)),
    }
}

#[derive(Clone, Copy)]
struct ChildFds {
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    status: RawFd,
}

/// In the child, between clone and exec: system calls only, no allocation,
/// no locks. Never returns.
fn child_side(
    p: &Prepared,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    fds: &ChildFds,
    setup: ChildSetup,
    in_cgroup: bool,
) -> ! {
    // SAFETY: every call below is a thin system call wrapper on memory that
    // was prepared before the clone and is not freed in this process.
    unsafe {
        let fail = |status: RawFd| -> ! {
            let errno = *libc::__errno_location();
            libc::write(status, errno.to_ne_bytes().as_ptr().cast(), 4);
            libc::_exit(127)
        };
        for (from, to) in [(fds.stdin, 0), (fds.stdout, 1), (fds.stderr, 2)] {
            if libc::dup2(from, to) < 0 {
                fail(fds.status);
            }
        }
        if libc::chdir(p.cwd.as_ptr()) != 0 {
            fail(fds.status);
        }
        // vkexit ignores SIGPIPE; an ignored signal stays ignored across exec.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::setpgid(0, 0);
        // If vkexit itself dies, its runs die with it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // A crashing scenario must not fill the disk with cores. 1, not 0:
        // the kernel ignores the limit when core_pattern pipes to a helper
        // (Debian's systemd-coredump then stores cores whatever the limit),
        // except for 1, which it takes as "no core"; 1 byte is also below the
        // smallest core file it would write.
        let no_core = libc::rlimit {
            rlim_cur: 1,
            rlim_max: 1,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        // Into the run's cgroups, under its process limit: from here on,
        // everything this program starts is counted and killable.
        if setup.apply(in_cgroup).is_err() {
            fail(fds.status);
        }
        libc::execve(p.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail(fds.status)
    }
}

/// The caller's environment less `env_remove`, with `env_set` and `extra`.
fn environment(spec: &CommandSpec, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    let set: Vec<(OsString, OsString)> = spec
        .env_set
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .chain(extra.iter().map(|(k, v)| (k.into(), v.into())))
        .collect();
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !spec.env_remove.iter().any(|r| OsStr::new(r) == k))
        .filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .collect();
    env.extend(set);
    env
}

/// A program named without a slash is looked up in the PATH it will run
/// with, as `execvp` would; any other is taken as it is.
fn resolve(program: &Path, env: &[(OsString, OsString)]) -> PathBuf {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return program.to_path_buf();
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| program.to_path_buf())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `KEY=VALUE` as one C string, in one allocation.
fn env_entry(key: &[u8], value: &[u8]) -> io::Result<CString> {
    let mut kv = Vec::with_capacity(key.len() + value.len() + 2);
    kv.extend_from_slice(key);
    kv.push(b'=');
    kv.extend_from_slice(value);
    CString::new(kv).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} holds a NUL byte", OsStr::from_bytes(&e.into_vec())),
        )
    })
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.to_os_string().into_vec()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{s:?} holds a NUL byte"),
        )
    })
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn open_null() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/dev/null")?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(program: &str, args: &[&str]) -> CommandSpec {
        CommandSpec {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            cwd: std::env::temp_dir(),
            env_set: vec![("VKEXIT_SPAWN_TEST".into(), "set".into())],
            env_remove: vec!["HOME".into()],
        }
    }

    fn wait(pid: libc::pid_t) -> i32 {
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        libc::WEXITSTATUS(status)
    }

    fn read_all(fd: OwnedFd) -> String {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).unwrap();
        text
    }

    #[test]
    fn the_program_gets_its_arguments_environment_and_directory() {
        let s = spec(
            "sh",
            &[
                "-c",
                "echo \"$1 $VKEXIT_SPAWN_TEST ${HOME-unset} $EXTRA\"; pwd; echo err >&2; exit 3",
                "sh",
                "arg",
            ],
        );
        let child = spawn(&s, &[("EXTRA", "x")], None, ChildSetup::none()).unwrap();
        let out = read_all(child.stdout);
        assert_eq!(read_all(child.stderr), "err\n");
        assert_eq!(wait(child.pid), 3);
        let dir = std::env::temp_dir().canonicalize().unwrap();
        assert_eq!(out, format!("arg set unset x\n{}\n", dir.display()));
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error_naming_why() {
        let e = spawn(
            &spec("/nonexistent/prog", &[]),
            &[],
            None,
            ChildSetup::none(),
        )
        .err()
        .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let mut s = spec("/bin/true", &[]);
        s.cwd = "/nonexistent-dir".into();
        assert!(spawn(&s, &[], None, ChildSetup::none()).is_err());
    }
}
