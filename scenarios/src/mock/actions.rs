//! What each mock option does, one function per verdict it provokes.

use std::time::Duration;

use ash::vk;
use ash::vk::Handle;

use super::Signal;
use vkexit_fixtures::step::write_all;
use vkexit_fixtures::{exit_handler_starts, register_exit_handler, setup_failed, step};

/// Double-forks a grandchild that leaves the process group (setsid), keeps the inherited stdout
/// and stderr open and sleeps `secs` seconds. The intermediate child exits at once, so the mock
/// can return without waiting: a harness that waits for EOF on the pipes, or kills only the
/// process group, hangs on the grandchild.
pub fn grandchild_holds_pipes(secs: u64) {
    step!("double-fork a grandchild that calls setsid and holds stdout and stderr for {secs} s");
    // Formatted before fork: the children only make async-signal-safe calls.
    let line = format!("vkexit-step: grandchild holds stdout and stderr for {secs} s\n");
    // SAFETY: fork takes no arguments; in the children only fork, setsid, write, nanosleep and
    // _exit follow, all async-signal-safe, and none of them returns into Rust code that would
    // run the parent's exit handlers or destructors twice.
    let child = unsafe { libc::fork() };
    match child {
        -1 => setup_failed(format_args!("fork: {}", std::io::Error::last_os_error())),
        // SAFETY: see above; the intermediate child does nothing but fork once more and leave.
        0 => unsafe {
            if libc::fork() == 0 {
                libc::setsid();
                let _ = write_all(libc::STDOUT_FILENO, line.as_bytes());
                std::thread::sleep(Duration::from_secs(secs));
            }
            libc::_exit(0)
        },
        _ => {
            let mut status = 0;
            // SAFETY: `child` is our own child and `status` a live out-parameter.
            unsafe { libc::waitpid(child, &mut status, 0) };
        }
    }
}

/// Double-forks a helper that leaves the session (setsid), puts stdin, stdout and stderr on
/// /dev/null, sleeps `secs` seconds and exits 0, as a benign daemon a program starts does. The
/// program returns without waiting: the helper outlives it, and only the harness ends it.
pub fn detached_helper(secs: u64) {
    step!("double-fork a detached helper (setsid, no stdio) that sleeps {secs} s and exits 0");
    double_fork(|| {
        // SAFETY: between fork and _exit only async-signal-safe calls: setsid, open, dup2,
        // nanosleep.
        unsafe {
            libc::setsid();
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        std::thread::sleep(Duration::from_secs(secs));
    });
}

/// Registers the exit handler that ignores SIGTERM and never returns.
pub fn spin_at_exit_ignoring_term() {
    register_exit_handler("spin-at-exit-ignoring-term", spin_at_exit_handler);
}

/// Runs as an exit handler, after main returned: ignores SIGTERM and loops forever, as a
/// teardown that waits on a device that never answers and will not be asked to stop. Only
/// SIGKILL ends it.
extern "C" fn spin_at_exit_handler() {
    exit_handler_starts("spin-at-exit-ignoring-term");
    // SAFETY: sets a signal's disposition to ignore; no handler runs.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    step!("ignore SIGTERM and loop forever");
    loop {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Double-forks a helper that leaves the session, closes every descriptor it has (what
/// daemons do) and raises SIGSEGV: no crash record can be written, only its wait status says
/// how it died. Waits until the helper is dead (a zombie of whoever reaps orphans, or gone),
/// so the crash happens while the program runs.
pub fn daemon_crash() {
    step!("double-fork a helper that calls setsid, closes every descriptor and raises SIGSEGV");
    let helper = double_fork(|| {
        // SAFETY: between fork and the signal only async-signal-safe calls: setsid, close,
        // signal, raise.
        unsafe {
            libc::setsid();
            for fd in 0..4096 {
                libc::close(fd);
            }
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            libc::raise(libc::SIGSEGV);
        }
    });
    if helper <= 0 {
        setup_failed("the helper's pid did not come back");
    }
    step!("helper {helper} started; wait until it is dead");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let stat = std::fs::read_to_string(format!("/proc/{helper}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next());
        if matches!(state, None | Some("Z" | "X")) {
            step!("helper {helper} is dead");
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    setup_failed(format_args!(
        "the helper {helper} was still alive after 30 s"
    ));
}

/// Forks a child that forks `helper`'s process and exits at once, so the helper is an orphan;
/// the child is reaped here. Returns the helper's pid, which the child sends back on a pipe (0
/// when it could not).
fn double_fork(helper: impl FnOnce()) -> libc::pid_t {
    let mut fds = [0; 2];
    // SAFETY: pipe fills two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        setup_failed(format_args!("pipe: {}", std::io::Error::last_os_error()));
    }
    let [read_end, write_end] = fds;
    // SAFETY: fork takes no arguments; the children only make async-signal-safe calls (close,
    // fork, write, _exit, and what `helper` makes), and never return into the parent's code.
    let child = unsafe { libc::fork() };
    match child {
        -1 => setup_failed(format_args!("fork: {}", std::io::Error::last_os_error())),
        // SAFETY: see above.
        0 => unsafe {
            libc::close(read_end);
            let grandchild = libc::fork();
            if grandchild == 0 {
                libc::close(write_end);
                helper();
                libc::_exit(0);
            }
            let bytes = grandchild.to_ne_bytes();
            libc::write(write_end, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0)
        },
        _ => {
            let mut status = 0;
            let mut bytes = [0u8; std::mem::size_of::<libc::pid_t>()];
            // SAFETY: `child` is our own child and `status` a live out-parameter; the read
            // fills a buffer of its own length from our pipe, whose descriptors are then
            // closed.
            let n = unsafe {
                libc::close(write_end);
                libc::waitpid(child, &mut status, 0);
                let n = libc::read(read_end, bytes.as_mut_ptr().cast(), bytes.len());
                libc::close(read_end);
                n
            };
            match usize::try_from(n) == Ok(bytes.len()) {
                true => libc::pid_t::from_ne_bytes(bytes),
                false => 0,
            }
        }
    }
}

/// Writes `bytes` bytes to stdout and as many to stderr, alternating 64 KiB chunks of text lines,
/// so a reader that drains one pipe before the other deadlocks as soon as the other fills.
pub fn flood(bytes: u64) {
    step!("flood {bytes} bytes to stdout and {bytes} bytes to stderr");
    const LINE: &[u8; 64] = b"vkexit-mock flood .............................................\n";
    let chunk: Vec<u8> = LINE.iter().copied().cycle().take(64 << 10).collect();
    let mut left = bytes;
    while left > 0 {
        let len = left.min(chunk.len() as u64) as usize;
        left -= len as u64;
        let mut piece = &chunk[..len];
        let last_line;
        if left == 0 && !piece.ends_with(b"\n") {
            // End on a newline, so the step line that follows starts a line of its own.
            last_line = [&piece[..len - 1], b"\n"].concat();
            piece = &last_line;
        }
        for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
            // A closed pipe kills us with SIGPIPE, or fails here: either way there is no reader.
            let _ = write_all(fd, piece);
        }
    }
    step!("flood done");
}

/// Points stdout and stderr at /dev/null for the rest of the process, children and exit
/// handlers included, so whatever goes wrong can only be seen in the files the layers write.
pub fn quiet() {
    // SAFETY: open takes a NUL-terminated path; dup2 and close take plain descriptors, and the
    // new descriptor is closed only after it has been duplicated onto 1 and 2.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if null < 0 {
            setup_failed(format_args!(
                "open /dev/null: {}",
                std::io::Error::last_os_error()
            ));
        }
        for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
            if libc::dup2(null, fd) < 0 {
                setup_failed(format_args!("dup2: {}", std::io::Error::last_os_error()));
            }
        }
        libc::close(null);
    }
}

/// Sleeps until killed; `place` (in main, in an exit handler) is for the log.
pub fn hang(place: &str) -> ! {
    step!("hang {place}: sleep until killed");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Starts a copy of this program with `args` (fork and exec: the preloaded crash report must
/// come with the exec), waits for it and says how it ended, then goes on as a parent that
/// ignores its children's crashes does.
pub fn run_crashing_child(args: &[String]) {
    let me = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => setup_failed(format_args!("cannot find this program to start again: {e}")),
    };
    step!("start a child: {} {}", me.display(), args.join(" "));
    match std::process::Command::new(&me).args(args).status() {
        Ok(status) => step!("child ended: {status}; ignored"),
        Err(e) => setup_failed(format_args!("cannot start {}: {e}", me.display())),
    }
}

/// Starts a copy of this program that destroys its VkDevice with a live VkBuffer (`--vuid`),
/// and waits for it: called while this process's own instance is alive, so that two processes
/// of the run have the validation layer's log open at once. Its status is only logged: the
/// child exits 0.
pub fn run_leaking_child(device: u32) {
    let me = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => setup_failed(format_args!("cannot find this program to start again: {e}")),
    };
    let args = ["--vuid", "--device", &device.to_string()].map(str::to_string);
    step!("start a leaking child: {} {}", me.display(), args.join(" "));
    match std::process::Command::new(&me).args(&args).status() {
        Ok(status) => step!("leaking child ended: {status}"),
        Err(e) => setup_failed(format_args!("cannot start {}: {e}", me.display())),
    }
}

/// Replaces this process image with `program` (the first item is the program, found in `PATH`
/// when it has no slash), keeping the pid and the environment: the exit handlers of this image
/// never run.
pub fn exec(program: &[String]) -> ! {
    use std::os::unix::process::CommandExt;
    step!("exec {}", program.join(" "));
    let err = std::process::Command::new(&program[0])
        .args(&program[1..])
        .exec();
    setup_failed(format_args!("cannot exec {}: {err}", program[0]))
}

/// Forks a child that raises SIGSEGV with its default action and never execs, as a worker of
/// a forking pool dies; waits for it and goes on, ignoring how it ended.
pub fn fork_crashing_child() {
    step!("fork a child that raises SIGSEGV");
    // SAFETY: fork takes no arguments. The child (of a process with Vulkan's threads) makes
    // only async-signal-safe calls: signal, raise and _exit.
    let child = unsafe { libc::fork() };
    match child {
        -1 => setup_failed(format_args!("fork: {}", std::io::Error::last_os_error())),
        // SAFETY: see above; `_exit` is reached only if the signal did not end the child.
        0 => unsafe {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            libc::raise(libc::SIGSEGV);
            libc::_exit(0)
        },
        _ => {
            let mut status = 0;
            // SAFETY: `child` is our own child and `status` a live out-parameter.
            unsafe { libc::waitpid(child, &mut status, 0) };
            step!("forked child ended with wait status {status}; ignored");
        }
    }
}

/// Registers the exit handler that crashes with SIGSEGV.
pub fn crash_at_exit() {
    register_exit_handler("crash-at-exit", crash_at_exit_handler);
}

/// Draws once and, with probability `p`, registers the crashing exit handler; the draw is logged
/// so a flaky run can be told from a broken one.
pub fn crash_at_exit_with_probability(p: f64) {
    let draw = uniform_draw();
    if draw < p {
        step!("crash probability {p}: drew {draw:.4}, will crash at exit");
        crash_at_exit();
    } else {
        step!("crash probability {p}: drew {draw:.4}, will exit cleanly");
    }
}

/// Registers the exit handler that hands the loader a VkDevice that is not one.
pub fn invalid_device_at_exit() {
    register_exit_handler("invalid-device-at-exit", invalid_device_at_exit_handler);
}

/// Registers the exit handler that never returns.
pub fn hang_at_exit() {
    register_exit_handler("hang-at-exit", hang_at_exit_handler);
}

/// Runs as an exit handler, after main returned. Faults like a runtime touching freed state at
/// exit; it logs once before and touches nothing else.
extern "C" fn crash_at_exit_handler() {
    exit_handler_starts("crash-at-exit");
    step!("write through a null pointer");
    // Address 8: a field of a struct behind a null pointer, in the never-mapped zero page. Exactly
    // 0 would trip the null check that debug builds add to write_volatile, which aborts instead.
    let field = std::ptr::null_mut::<u64>().wrapping_add(1);
    // SAFETY: none; this write is meant to fault. Rust's own SIGSEGV handler sees a fault outside
    // any stack guard page, restores the default action and lets the write fault again.
    unsafe { std::ptr::write_volatile(field, 0xdead) };
    // Only reached if page zero is mapped; a raised SIGSEGV is the same verdict.
    Signal::SEGV.raise_with_default_action();
}

/// What a VkDevice handle points at: the loader's dispatch table pointer first. Zeroed, like
/// device memory the allocator cleared after vkDestroyDevice, so the loader finds no table.
static NOT_A_DEVICE: [u64; 8] = [0; 8];

/// Runs as an exit handler, after main returned: calls vkDeviceWaitIdle through the loader's
/// exported trampoline with a handle that is not a device, as a runtime's teardown does with a
/// device freed before it. The loader (1.3.239 here) reads the handle's dispatch table, finds
/// none and aborts; with VK_LOADER_DEBUG=error it first logs
/// `vkDeviceWaitIdle: Invalid device [VUID-vkDeviceWaitIdle-device-parameter]`.
extern "C" fn invalid_device_at_exit_handler() {
    exit_handler_starts("invalid-device-at-exit");
    // Opened again: the mock's own handle on the loader may be closed by now.
    // SAFETY: dlopen takes a NUL-terminated name; the loader's initialisers are its own.
    let loader = unsafe { libc::dlopen(c"libvulkan.so.1".as_ptr(), libc::RTLD_NOW) };
    if loader.is_null() {
        setup_failed("dlopen libvulkan.so.1 failed in the exit handler");
    }
    // SAFETY: `loader` is a live handle from dlopen and the name is NUL-terminated.
    let symbol = unsafe { libc::dlsym(loader, c"vkDeviceWaitIdle".as_ptr()) };
    if symbol.is_null() {
        setup_failed("the loader exports no vkDeviceWaitIdle");
    }
    // SAFETY: the loader exports vkDeviceWaitIdle with exactly this signature.
    let device_wait_idle: vk::PFN_vkDeviceWaitIdle = unsafe { std::mem::transmute(symbol) };
    let device = vk::Device::from_raw(NOT_A_DEVICE.as_ptr() as u64);
    step!("vkDeviceWaitIdle through the loader on a VkDevice that is not one");
    // SAFETY: none by design: the handle is invalid. The loader only reads the first word of the
    // zeroed static it points at before it decides to abort.
    let result = unsafe { device_wait_idle(device) };
    step!("the loader returned {result:?} instead of aborting: it has no invalid-handle check");
}

/// Runs as an exit handler, after main returned: sleeps until killed, like a teardown that
/// waits forever for a device that is already gone.
extern "C" fn hang_at_exit_handler() {
    exit_handler_starts("hang-at-exit");
    hang("in an exit handler");
}

/// A uniform draw in [0, 1) from /dev/urandom, or from the clock and pid if that is unreadable.
fn uniform_draw() -> f64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let seed = match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes))
    {
        Ok(()) => u64::from_ne_bytes(bytes),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            // The pid separates runs started in the same clock tick.
            let mixed = nanos ^ (u64::from(std::process::id()) << 32);
            // Spread the low-entropy mix over all bits (splitmix64 finalizer).
            let mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            mixed ^ (mixed >> 31)
        }
    };
    // The top 53 bits fill an f64 mantissa exactly.
    (seed >> 11) as f64 / (1u64 << 53) as f64
}
