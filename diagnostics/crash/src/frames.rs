//! The best-effort backtrace, symbolized in a forked child.
//!
//! Symbolizing allocates, takes the loader's lock and reads debug info: in the crashed process
//! that can deadlock (a crash inside `malloc` holding its lock is the common case for
//! `SIGABRT`) or fault again. So the handler forks (glibc's `_Fork`, or a raw `clone`: no
//! `atfork` handlers, no locks), and the child, a copy of the crashed thread with the same
//! stack, unwinds from there, symbolizes, and writes the frames into a pipe. The handler only
//! reads the pipe with a deadline and reaps (or kills) the child: async-signal-safe, bounded,
//! and whatever the child hits cannot touch the crashed process.

use std::ffi::CStr;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::c_int;
use vkexit_evidence::crash::frame_field;
use vkexit_evidence::monotonic_ns;

use crate::disposition;

/// Room for the frames' JSON text: what is left of one evidence record after its identity and
/// the other fields.
pub(crate) const TEXT_CAPACITY: usize = 3400;
/// The most frames unwound.
const MAX_FRAMES: usize = 128;
/// Longest symbol name and path kept per frame.
const MAX_SYMBOL: usize = 200;
const MAX_PATH: usize = 160;

/// glibc's `_Fork`, when it has one (2.34+); 0 → raw `clone`.
static FORK: AtomicUsize = AtomicUsize::new(0);

/// Looks up `_Fork` once, at install (not in the handler: `dlsym` is not async-signal-safe).
pub(crate) fn prepare() {
    let name: &CStr = c"_Fork";
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let fork = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    FORK.store(fork as usize, Ordering::Release);
}

/// What the child sent: the frames as a JSON array, and how many did not fit.
pub(crate) struct Captured<'a> {
    pub frames: &'a str,
    pub omitted: u64,
}

/// Runs in the signal handler: forks the child, reads its frames until `timeout_ms` has
/// passed, reaps it (killing it if it is late). Async-signal-safe.
pub(crate) fn capture(
    pc: u64,
    timeout_ms: u64,
    skip_own_object: bool,
    text: &mut [u8; TEXT_CAPACITY],
) -> Result<Captured<'_>, &'static str> {
    let deadline = monotonic_ns() + timeout_ms * 1_000_000;
    let mut fds = [0 as c_int; 2];
    // SAFETY: a two-element array for pipe2's output.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err("pipe failed");
    }
    let [read_end, write_end] = fds;
    let child = fork_process();
    if child == 0 {
        // SAFETY: the child's copy of the read end, closed once.
        unsafe { libc::close(read_end) };
        child_main(pc, skip_own_object, write_end);
    }
    // SAFETY: our copy of the write end, closed once (so EOF comes when the child is done).
    unsafe { libc::close(write_end) };
    if child < 0 {
        // SAFETY: closed once.
        unsafe { libc::close(read_end) };
        return Err("fork failed");
    }
    let (len, complete) = read_until(read_end, text, deadline);
    // SAFETY: closed once.
    unsafe { libc::close(read_end) };
    let ended = reap(child, deadline);
    if complete {
        if let Some(captured) = parse(&text[..len]) {
            return Ok(captured);
        }
    }
    Err(match ended {
        Ended::Late => "timed out",
        Ended::BySignal => "the backtrace child died of a signal",
        Ended::Exited => "the backtrace child sent no complete frame list",
    })
}

fn fork_process() -> libc::pid_t {
    let fork = FORK.load(Ordering::Acquire);
    if fork != 0 {
        // SAFETY: `_Fork` takes nothing and returns a pid; resolved by `prepare`.
        let fork: extern "C" fn() -> libc::pid_t = unsafe { std::mem::transmute(fork) };
        return fork();
    }
    // SAFETY: clone with only SIGCHLD and no new stack is fork without glibc's handlers.
    unsafe {
        libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) as libc::pid_t
    }
}

/// Reads until EOF, a full buffer or the deadline. Returns the length read and whether EOF
/// came.
fn read_until(fd: c_int, text: &mut [u8], deadline: u64) -> (usize, bool) {
    let mut len = 0;
    loop {
        let now = monotonic_ns();
        if now >= deadline || len == text.len() {
            return (len, false);
        }
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let wait_ms = ((deadline - now) / 1_000_000).clamp(1, i32::MAX as u64) as c_int;
        // SAFETY: one live pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, wait_ms) };
        if ready <= 0 {
            if ready < 0 && errno() == libc::EINTR {
                continue;
            }
            if ready < 0 {
                return (len, false);
            }
            continue;
        }
        let free = &mut text[len..];
        // SAFETY: reads at most `free.len()` bytes into the live buffer.
        let n = unsafe { libc::read(fd, free.as_mut_ptr().cast(), free.len()) };
        match n {
            0 => return (len, true),
            n if n < 0 => {
                if errno() != libc::EINTR {
                    return (len, false);
                }
            }
            n => len += n as usize,
        }
    }
}

/// How the backtrace child ended.
enum Ended {
    Exited,
    BySignal,
    /// Still running at the deadline: killed.
    Late,
}

/// Waits for the child until the deadline, then kills it.
fn reap(child: libc::pid_t, deadline: u64) -> Ended {
    let mut status = 0;
    loop {
        // SAFETY: our own child; `status` is a live out-parameter.
        let done = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if done == child {
            return if libc::WIFSIGNALED(status) {
                Ended::BySignal
            } else {
                Ended::Exited
            };
        }
        // ECHILD: a program that ignores SIGCHLD, or reaps every child itself, already did.
        if done < 0 && errno() != libc::EINTR {
            return Ended::Exited;
        }
        if monotonic_ns() >= deadline {
            // SAFETY: our own child; then a blocking reap of it.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                while libc::waitpid(child, &mut status, 0) < 0 && errno() == libc::EINTR {}
            }
            return Ended::Late;
        }
        let step = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        // SAFETY: a valid request, no remainder wanted.
        unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
    }
}

/// `<omitted>\n[…]` → the parts, if the text is whole.
fn parse(text: &[u8]) -> Option<Captured<'_>> {
    let newline = text.iter().position(|&b| b == b'\n')?;
    let omitted = std::str::from_utf8(&text[..newline]).ok()?.parse().ok()?;
    let frames = std::str::from_utf8(&text[newline + 1..]).ok()?;
    (frames.starts_with('[') && frames.ends_with(']')).then_some(Captured { frames, omitted })
}

fn errno() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// The child: a copy of the crashed thread. Here allocation is fine; a fault or a deadlock
/// only ends or stalls the child.
fn child_main(pc: u64, skip_own_object: bool, fd: c_int) -> ! {
    for signo in disposition::WATCHED {
        disposition::set_default(signo);
    }
    make_readable(pc);
    let own = skip_own_object
        .then(|| object_of(describe as *const () as usize))
        .flatten();
    let text = describe(pc, own.as_deref());
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        // SAFETY: writes from a live buffer to the pipe.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            break;
        }
        rest = &rest[n as usize..];
    }
    // SAFETY: leaves the child at once, running nothing of the crashed program's exit.
    unsafe { libc::_exit(0) }
}

/// Maps zero pages (in the child's copy of memory only) where the pc points into nothing, as
/// after the Tegra driver's unmap: the unwinder reads the code at the pc to recognise a signal
/// trampoline, and would fault there. It finds no frame information in zeroes and stops.
fn make_readable(pc: u64) {
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let first = pc & !(page - 1);
    // The unwinder reads a few bytes from the pc on: the next page too.
    for address in [first, first + page] {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces a mapping: it fails where one exists.
        let mapped = unsafe {
            libc::mmap(
                address as *mut libc::c_void,
                page as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED && mapped as u64 != address {
            // A kernel without MAP_FIXED_NOREPLACE took it as a hint: undo.
            // SAFETY: the mapping just made, used by nothing.
            unsafe { libc::munmap(mapped, page as usize) };
        }
    }
}

/// The frames from the faulting pc outwards (the handler's own frames above it are left
/// out), as `<omitted>\n[{"ip":…,"object":…,"symbol":…,"file":…,"line":…},…]`. Frames in
/// object `own` (the preloaded library's trampolines) keep only their object: reading its
/// debug information would cost more than the name tells.
fn describe(pc: u64, own: Option<&str>) -> String {
    let mut frames = Vec::new();
    // SAFETY: the child is single-threaded; nothing else unwinds concurrently.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            frames.push(frame.clone());
            frames.len() < MAX_FRAMES
        })
    };
    let start = frames
        .iter()
        .position(|f| pc != 0 && f.ip() as u64 == pc)
        .unwrap_or(0);
    let mut list = String::from("[");
    let mut omitted = 0u64;
    for frame in &frames[start..] {
        let entry = describe_frame(frame, own);
        // Room for the omitted count's line and the closing bracket.
        if omitted > 0 || list.len() + entry.len() + 1 + 24 > TEXT_CAPACITY {
            omitted += 1;
            continue;
        }
        if list.len() > 1 {
            list.push(',');
        }
        list.push_str(&entry);
    }
    list.push(']');
    format!("{omitted}\n{list}")
}

fn describe_frame(frame: &backtrace::Frame, own: Option<&str>) -> String {
    let ip = frame.ip() as usize;
    let mut entry = format!("{{\"{}\":\"{ip:#x}\"", frame_field::IP);
    let object = object_of(ip);
    if let Some(object) = &object {
        push_key(&mut entry, frame_field::OBJECT);
        push_json_str(&mut entry, keep_tail(object, MAX_PATH));
    }
    if own.is_some() && object.as_deref() == own {
        entry.push('}');
        return entry;
    }
    let mut resolved = false;
    // SAFETY: as for the trace: the child is single-threaded.
    unsafe {
        backtrace::resolve_frame_unsynchronized(frame, |symbol| {
            if std::mem::replace(&mut resolved, true) {
                return; // inlined callers of the same address: the innermost is enough
            }
            if let Some(name) = symbol.name() {
                push_key(&mut entry, frame_field::SYMBOL);
                push_json_str(&mut entry, keep_head(&format!("{name:#}"), MAX_SYMBOL));
            }
            if let Some(file) = symbol.filename() {
                push_key(&mut entry, frame_field::FILE);
                push_json_str(&mut entry, keep_tail(&file.display().to_string(), MAX_PATH));
            }
            if let Some(line) = symbol.lineno() {
                push_key(&mut entry, frame_field::LINE);
                let _ = write!(entry, "{line}");
            }
        })
    };
    entry.push('}');
    entry
}

/// `,"key":` after a frame's first field.
fn push_key(entry: &mut String, key: &str) {
    entry.push_str(",\"");
    entry.push_str(key);
    entry.push_str("\":");
}

/// The file of the object holding `ip` (`dladdr`).
fn object_of(ip: usize) -> Option<String> {
    // SAFETY: an all-zero Dl_info is a valid output buffer.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address's value; `info` is live.
    if unsafe { libc::dladdr(ip as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(name.to_string_lossy().into_owned())
}

/// At most `max` bytes of `s`, from its start, marked with `…` when cut.
pub(crate) fn keep_head(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max - '…'.len_utf8();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// At most `max` bytes of `s`, from its end (where a path's file name is), marked with `…`.
pub(crate) fn keep_tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut start = s.len() - (max - '…'.len_utf8());
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

/// Appends `s` as a JSON string.
pub(crate) fn push_json_str(out: &mut String, s: impl AsRef<str>) {
    out.push('"');
    for c in s.as_ref().chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_cut_at_char_boundaries_and_marked() {
        assert_eq!(keep_head("short", 10), "short");
        let cut = keep_head("ééééééééé", 8);
        assert!(cut.len() <= 8 && cut.ends_with('…'), "{cut}");
        let tail = keep_tail("/a/very/long/path/libfoo.so", 14);
        assert!(
            tail.starts_with('…') && tail.ends_with("libfoo.so"),
            "{tail}"
        );
        assert!(tail.len() <= 14);
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        let mut out = String::new();
        push_json_str(&mut out, "a\"b\\c\n\u{1}");
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\u0001\"");
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value, "a\"b\\c\n\u{1}");
    }

    #[test]
    fn the_child_text_parses_only_when_whole() {
        let whole = parse(b"3\n[{\"ip\":\"0x1\"}]").unwrap();
        assert_eq!((whole.frames, whole.omitted), ("[{\"ip\":\"0x1\"}]", 3));
        assert!(parse(b"0\n[{\"ip\":").is_none());
        assert!(parse(b"[]").is_none());
    }

    #[test]
    fn a_description_is_json_that_fits_and_names_its_frames() {
        // Without a pc the list starts at the innermost frame.
        let text = describe(0, None);
        let (omitted, list) = text.split_once('\n').unwrap();
        assert!(list.len() < TEXT_CAPACITY);
        let _: u64 = omitted.parse().unwrap();
        let frames: Vec<serde_json::Value> = serde_json::from_str(list).unwrap();
        assert!(frames[0]["ip"].as_str().unwrap().starts_with("0x"));
        assert!(
            frames.iter().any(|f| f["symbol"]
                .as_str()
                .is_some_and(|s| s.contains("a_description_is_json"))),
            "{list}"
        );
        let exe = std::env::current_exe().unwrap();
        assert!(
            frames.iter().any(|f| f["object"] == exe.to_str().unwrap()),
            "{list}"
        );
    }
}
