//! Append-only JSON-lines evidence, written so that a crash loses nothing already recorded.
//!
//! Async-signal-safe and allocation-free, except where a function says otherwise
//! ([`EvidenceLog::open`], [`EvidenceLog::from_env`]): the crash handler and exit handlers
//! build and write records. Every record is built in a fixed buffer on the stack and written with one `write()` to a file
//! opened with `O_APPEND`: no allocation, no lock, no buffering. That makes [`Record`] and
//! [`EvidenceLog::write`] usable from exit handlers, and keeps records whole when several
//! threads or processes append to the same file.

use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crate::field;

/// The most bytes one record can hold, newline included. Fields that do not fit are left out
/// and the record ends with `"truncated":true`.
pub const RECORD_CAPACITY: usize = 4096;

/// Room kept at the end of every record for `,"truncated":true}` and the newline.
const TAIL: usize = 20;
const _: () = assert!(TAIL >= ",\"".len() + field::TRUNCATED.len() + "\":true}\n".len());

/// An evidence file, open for appending.
#[derive(Debug)]
pub struct EvidenceLog {
    fd: OwnedFd,
}

impl EvidenceLog {
    /// Opens (creating if needed, mode 0644) `path` with `O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC`.
    pub fn open(path: &Path) -> io::Result<Self> {
        open_append(path, libc::O_WRONLY).map(|fd| Self { fd })
    }

    /// Opens the file named by environment variable `var`; `None` when it is unset or empty.
    /// A file that cannot be opened is reported once on stderr (prefixed by `who`) and gives
    /// `None`: a run without its evidence must look different from a run with it.
    pub fn from_env(var: &str, who: &str) -> Option<Self> {
        open_from_env(var, who, Self::open)
    }

    /// Appends `record` as one line with a single `write()` (retried only on `EINTR`, and for
    /// the rest of a short write).
    pub fn write(&self, mut record: Record) -> io::Result<()> {
        write_all(self.fd.as_raw_fd(), record.finish_line())
    }
}

/// Opens (creating if needed, mode 0644) `path` with `access | O_APPEND | O_CREAT | O_CLOEXEC`.
pub(crate) fn open_append(path: &Path, access: libc::c_int) -> io::Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    let flags = access | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path; open has no other preconditions.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open` on the file named by environment variable `var`; `None` when it is unset or empty.
/// A file that cannot be opened is reported once on stderr, prefixed by `who`.
pub(crate) fn open_from_env<T>(
    var: &str,
    who: &str,
    open: impl FnOnce(&Path) -> io::Result<T>,
) -> Option<T> {
    let path = std::env::var_os(var).filter(|p| !p.is_empty())?;
    match open(Path::new(&path)) {
        Ok(log) => Some(log),
        Err(err) => {
            eprintln!(
                "{who}: cannot open {var}={}: {err}",
                Path::new(&path).display()
            );
            None
        }
    }
}

/// Writes all of `rest` to `fd`, retrying on `EINTR` and after a short write.
pub(crate) fn write_all(fd: libc::c_int, mut rest: &[u8]) -> io::Result<()> {
    while !rest.is_empty() {
        // SAFETY: writes from a live buffer of `rest.len()` bytes to our own descriptor.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        rest = &rest[n as usize..];
    }
    Ok(())
}

/// One evidence record: a JSON object on one line, starting with
/// `{"ev":…,"t_ns":…,"pid":…,"tid":…,"thread":…` (CLOCK_MONOTONIC nanoseconds, process id,
/// kernel thread id, thread name), then the fields added with the builder methods, in order.
///
/// Lives on the stack ([`RECORD_CAPACITY`] bytes); building and writing it never allocates.
/// The process id, thread id and thread name are read once per thread (again after `fork`),
/// and the name again when it is more than [`NAME_REFRESH_NS`] old: a record costs no system
/// call for them.
pub struct Record<const N: usize = RECORD_CAPACITY> {
    /// Bytes `..min(len, N - TAIL)` are written; the rest is never read. Not
    /// zeroed: clearing 4 KiB would cost more than building a typical record.
    buf: [MaybeUninit<u8>; N],
    len: usize,
    truncated: bool,
}

impl Record {
    /// A record of event `ev` (an `Event`'s `as_str()`), stamped now with the calling thread's
    /// identity.
    #[inline]
    pub fn new(ev: &str) -> Self {
        Self::start(ev)
    }
}

impl<const N: usize> Record<N> {
    /// A record of at most `N` bytes (at least 64), of event `ev`, stamped now with the calling
    /// thread's identity: for hot paths whose records are short, and cheaper to build small.
    #[inline]
    pub fn start(ev: &str) -> Self {
        const { assert!(N >= 64) };
        let mut record = Record {
            buf: [MaybeUninit::uninit(); N],
            len: 0,
            truncated: false,
        };
        record.push(b"{\"");
        record.push(field::EV.as_bytes());
        record.push(b"\":");
        record.push_json_str(ev.as_bytes());
        let now = monotonic_ns();
        let me = identity(now);
        record
            .u64(field::T_NS, now)
            .i64(field::PID, me.pid.into())
            .i64(field::TID, me.tid)
            .bytes_str(field::THREAD, &me.name[..usize::from(me.name_len)]);
        record
    }

    /// Adds a string field.
    #[inline]
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.bytes_str(key, value.as_bytes())
    }

    /// Adds a string field from bytes; invalid UTF-8 becomes U+FFFD.
    #[inline]
    pub fn bytes_str(&mut self, key: &str, value: &[u8]) -> &mut Self {
        self.field(key, |r| r.push_json_str(value))
    }

    /// Adds an unsigned number.
    #[inline]
    pub fn u64(&mut self, key: &str, value: u64) -> &mut Self {
        self.field(key, |r| r.push_decimal(false, value))
    }

    /// Adds a signed number.
    #[inline]
    pub fn i64(&mut self, key: &str, value: i64) -> &mut Self {
        self.field(key, |r| r.push_decimal(value < 0, value.unsigned_abs()))
    }

    /// Adds a boolean.
    #[inline]
    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.field(key, |r| r.push(if value { b"true" } else { b"false" }))
    }

    /// Adds a number as a hexadecimal string, `"0x7f12…"`: handles and addresses.
    #[inline]
    pub fn hex(&mut self, key: &str, value: u64) -> &mut Self {
        self.field(key, |r| r.push_hex(value))
    }

    /// Adds a field whose value is already JSON text (an array, an object, `null`); the caller
    /// is responsible for its validity.
    #[inline]
    pub fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        self.field(key, |r| r.push(json.as_bytes()))
    }

    /// The record's text so far (without the closing brace).
    pub fn as_bytes(&self) -> &[u8] {
        self.written()
    }

    /// Adds `"key":` and the value written by `value`, or nothing (marking the record
    /// truncated) if the field does not fit in full.
    #[inline]
    fn field(&mut self, key: &str, value: impl FnOnce(&mut Self)) -> &mut Self {
        let start = self.len;
        // Keys are the caller's literals: plain ASCII, pushed as they are.
        debug_assert!(key.bytes().all(|b| !NEEDS_ESCAPE[usize::from(b)]));
        self.push(b",\"");
        self.push(key.as_bytes());
        self.push(b"\":");
        value(self);
        if self.len > N - TAIL {
            self.len = start;
            self.truncated = true;
        }
        self
    }

    /// Closes the record and gives its line, newline included.
    #[inline]
    pub(crate) fn finish_line(&mut self) -> &[u8] {
        self.len = self.len.min(N - TAIL);
        if self.truncated {
            self.push_unchecked(b",\"");
            self.push_unchecked(field::TRUNCATED.as_bytes());
            self.push_unchecked(b"\":true");
        }
        self.push_unchecked(b"}\n");
        self.written()
    }

    #[inline]
    fn written(&self) -> &[u8] {
        let len = self.len.min(N);
        // SAFETY: every byte below `len` was written by `push` or `push_unchecked` (`len` only
        // passes what was written when a field overflows, and `field` then sets it back).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), len) }
    }

    #[inline]
    fn copy_in(&mut self, bytes: &[u8]) {
        assert!(self.len + bytes.len() <= N);
        // SAFETY: the destination range lies inside `buf` (asserted) and cannot overlap
        // `bytes`, which the caller borrows from elsewhere.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.buf.as_mut_ptr().add(self.len).cast::<u8>(),
                bytes.len(),
            );
        }
    }

    /// Appends bytes while they fit below the tail; beyond it, only advances `len` so that
    /// `field` notices the overflow.
    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        let room = (N - TAIL).saturating_sub(self.len);
        let n = bytes.len().min(room);
        self.copy_in(&bytes[..n]);
        self.len += bytes.len();
        if self.len > N - TAIL {
            self.len = N - TAIL + 1;
        }
    }

    #[inline]
    fn push_unchecked(&mut self, bytes: &[u8]) {
        self.copy_in(bytes);
        self.len += bytes.len();
    }

    /// Digits without `core::fmt`: records are built on hot paths.
    #[inline]
    fn push_decimal(&mut self, negative: bool, mut value: u64) {
        let mut digits = [0u8; 21];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        if negative {
            at -= 1;
            digits[at] = b'-';
        }
        self.push(&digits[at..]);
    }

    #[inline]
    fn push_hex(&mut self, value: u64) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 20];
        let mut at = text.len() - 1;
        text[at] = b'"';
        let mut rest = value;
        loop {
            at -= 1;
            text[at] = HEX[(rest & 0xf) as usize];
            rest >>= 4;
            if rest == 0 {
                break;
            }
        }
        at -= 3;
        text[at..at + 3].copy_from_slice(b"\"0x");
        self.push(&text[at..]);
    }

    /// Copies runs of bytes that need no escape in one go; only quotes,
    /// backslashes, control characters and invalid UTF-8 are handled one by one.
    #[inline]
    fn push_json_str(&mut self, value: &[u8]) {
        self.push(b"\"");
        if !value.iter().any(|&b| NEEDS_ESCAPE[usize::from(b)]) {
            self.push(value);
            self.push(b"\"");
            return;
        }
        for chunk in value.utf8_chunks() {
            let mut rest = chunk.valid().as_bytes();
            while !rest.is_empty() {
                let plain = rest
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                    .unwrap_or(rest.len());
                self.push(&rest[..plain]);
                let Some(&special) = rest.get(plain) else {
                    break;
                };
                match special {
                    b'"' => self.push(b"\\\""),
                    b'\\' => self.push(b"\\\\"),
                    b'\n' => self.push(b"\\n"),
                    b'\r' => self.push(b"\\r"),
                    b'\t' => self.push(b"\\t"),
                    c => {
                        const HEX: &[u8; 16] = b"0123456789abcdef";
                        self.push(&[
                            b'\\',
                            b'u',
                            b'0',
                            b'0',
                            HEX[(c >> 4) as usize],
                            HEX[(c & 0xf) as usize],
                        ]);
                    }
                }
                rest = &rest[plain + 1..];
            }
            if !chunk.invalid().is_empty() {
                self.push("\u{fffd}".as_bytes());
            }
        }
        self.push(b"\"");
    }
}

/// Bytes a JSON string cannot hold as they are: quotes, backslashes and control characters;
/// and bytes of multi-byte UTF-8, which must be checked.
static NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b < 0x20 || b >= 0x7f || b == b'"' as usize || b == b'\\' as usize;
        b += 1;
    }
    table
};

/// How old a thread's cached name may get before a record reads it again: a thread renamed
/// shows its new name in records from at most this long after.
pub const NAME_REFRESH_NS: u64 = 1_000_000;

/// Who is writing: the process, the thread and the thread's name.
#[derive(Clone, Copy)]
struct Identity {
    generation: u64,
    pid: i32,
    tid: i64,
    name: [u8; 16],
    name_len: u8,
    name_read_ns: u64,
}

thread_local! {
    static IDENTITY: Cell<Option<Identity>> = const { Cell::new(None) };
}

/// Bumped in each new process (at first use, and in the child of every `fork`): identities
/// cached in an older generation belong to the parent.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A word on a page the kernel hands a forked child zeroed (`MADV_WIPEONFORK`): it is nonzero
/// only in the process that set it. Null before first use; [`NO_WIPE_PAGE`] where the kernel
/// has no such pages (before Linux 4.14).
static WIPE_MARK: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
const NO_WIPE_PAGE: *mut AtomicU64 = std::ptr::dangling_mut();

/// Which process this is, as far as caches go: changes in the child of every `fork`, however
/// the child was made. Async-signal-safe (atomics, `mmap`, `madvise`): the crash handler builds
/// records too.
pub(crate) fn fork_generation() -> u64 {
    let mut mark = WIPE_MARK.load(Ordering::Acquire);
    if mark.is_null() {
        mark = wipe_on_fork_mark();
    }
    if mark == NO_WIPE_PAGE {
        // Nothing tells a child from its parent: nothing is cached.
        return GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    }
    // SAFETY: `mark` points into a page mapped for the life of the process, aligned for u64.
    let mark = unsafe { &*mark };
    if mark.load(Ordering::Relaxed) == 0 {
        // A new process (or a forked child, whose page came back zeroed).
        GENERATION.fetch_add(1, Ordering::Relaxed);
        mark.store(1, Ordering::Relaxed);
    }
    GENERATION.load(Ordering::Relaxed)
}

fn wipe_on_fork_mark() -> *mut AtomicU64 {
    // SAFETY: a fresh private anonymous page; madvise only marks it.
    let page = unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if page == libc::MAP_FAILED {
            NO_WIPE_PAGE
        } else if libc::madvise(page, 4096, libc::MADV_WIPEONFORK) != 0 {
            libc::munmap(page, 4096);
            NO_WIPE_PAGE
        } else {
            page.cast::<AtomicU64>()
        }
    };
    match WIPE_MARK.compare_exchange(
        std::ptr::null_mut(),
        page,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => page,
        Err(winner) => {
            if page != NO_WIPE_PAGE {
                // SAFETY: our page lost the race and was never shared.
                unsafe { libc::munmap(page.cast(), 4096) };
            }
            winner
        }
    }
}

/// The calling thread's identity, read again after `fork` and its name after
/// [`NAME_REFRESH_NS`].
fn identity(now: u64) -> Identity {
    let generation = fork_generation();
    let cached = IDENTITY.with(Cell::get);
    let mut me = match cached {
        Some(me) if me.generation == generation => me,
        _ => Identity {
            generation,
            // SAFETY: getpid has no preconditions.
            pid: unsafe { libc::getpid() },
            tid: thread_id(),
            name: [0; 16],
            name_len: 0,
            name_read_ns: 0,
        },
    };
    if cached.is_none_or(|c| c.generation != generation)
        || now.saturating_sub(me.name_read_ns) > NAME_REFRESH_NS
    {
        let mut buf = [0u8; 16];
        let len = thread_name(&mut buf).len();
        me.name = buf;
        me.name_len = len as u8;
        me.name_read_ns = now;
        IDENTITY.with(|c| c.set(Some(me)));
    }
    me
}

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's kernel thread id.
pub fn thread_id() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// The calling thread's name (`prctl(PR_GET_NAME)`, at most 15 bytes), read into `buf`.
pub fn thread_name(buf: &mut [u8; 16]) -> &[u8] {
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into a 16-byte buffer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_NAME,
            buf.as_mut_ptr() as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return &[];
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn line(mut record: Record) -> String {
        String::from_utf8(record.finish_line().to_vec()).unwrap()
    }

    #[test]
    fn record_starts_with_event_and_identity_then_fields_in_order() {
        let mut record = Record::new("worker-started");
        record
            .hex("device", 0xdead_beef)
            .str("worker", "vkexit-tegra-0")
            .u64("n", 3)
            .i64("neg", -1)
            .bool("ok", true)
            .raw("list", "[1,2]");
        let text = line(record);
        assert!(text.ends_with("}\n"));
        assert_eq!(text.matches('\n').count(), 1);
        assert!(
            text.starts_with("{\"ev\":\"worker-started\",\"t_ns\":"),
            "{text}"
        );
        let pid = std::process::id();
        assert!(
            text.contains(&format!(",\"pid\":{pid},\"tid\":{},", thread_id())),
            "{text}"
        );
        assert!(text.contains(
            ",\"device\":\"0xdeadbeef\",\"worker\":\"vkexit-tegra-0\",\"n\":3,\"neg\":-1,\"ok\":true,\"list\":[1,2]}"
        ));
    }

    #[test]
    fn a_forked_child_stamps_its_own_pid_and_tid() {
        let parent = line(Record::new("cache-me"));
        assert!(parent.contains(&format!("\"pid\":{},", std::process::id())));
        // SAFETY: the child only builds a record and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let text = line(Record::new("child"));
            // SAFETY: getpid has no preconditions.
            let me = unsafe { libc::getpid() };
            let ok = text.contains(&format!("\"pid\":{me},\"tid\":{me},"));
            // SAFETY: leaves the forked test process at once.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(status, 0, "the child's record carried the parent's ids");
    }

    #[test]
    fn strings_are_escaped() {
        let mut record = Record::new("e\"v");
        record.str("k", "a\\b\n\u{1}é").bytes_str("raw", b"x\xffy");
        let text = line(record);
        assert!(text.starts_with("{\"ev\":\"e\\\"v\""));
        assert!(text.contains("\"k\":\"a\\\\b\\n\\u0001é\""), "{text}");
        assert!(text.contains("\"raw\":\"x\u{fffd}y\""), "{text}");
    }

    #[test]
    fn thread_name_is_the_kernel_name() {
        let name = std::thread::Builder::new()
            .name("vkexit-named".into())
            .spawn(|| {
                let mut buf = [0; 16];
                String::from_utf8(thread_name(&mut buf).to_vec()).unwrap()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(name, "vkexit-named");
        let text = {
            let handle = std::thread::Builder::new()
                .name("vkexit-rec".into())
                .spawn(|| line(Record::new("x")))
                .unwrap();
            handle.join().unwrap()
        };
        assert!(text.contains("\"thread\":\"vkexit-rec\""), "{text}");
    }

    #[test]
    fn oversized_fields_are_dropped_and_marked() {
        let big = "x".repeat(RECORD_CAPACITY);
        let mut record = Record::new("oversized");
        record.str("small", "kept").str("big", &big).u64("after", 7);
        let text = line(record);
        assert!(text.len() <= RECORD_CAPACITY);
        assert!(text.contains("\"small\":\"kept\""));
        assert!(!text.contains("\"big\""));
        assert!(text.contains("\"after\":7"));
        assert!(text.ends_with(",\"truncated\":true}\n"), "{text}");
    }

    #[test]
    fn a_record_that_exactly_fills_the_buffer_still_closes() {
        let mut record = Record::new("fill");
        let room = RECORD_CAPACITY - TAIL - record.as_bytes().len() - ",\"k\":\"\"".len();
        record.str("k", &"y".repeat(room));
        let text = line(record);
        assert!(text.ends_with("\"}\n"));
        assert!(!text.contains("truncated"));
        assert_eq!(text.len(), RECORD_CAPACITY - TAIL + 2);
    }

    #[test]
    fn log_appends_whole_lines_from_many_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("evidence.jsonl");
        std::fs::write(&path, "{\"ev\":\"before\"}\n").unwrap();
        let log = std::sync::Arc::new(EvidenceLog::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = std::sync::Arc::clone(&log);
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let mut record = Record::new("n");
                        record.u64("t", t).u64("i", i).str("pad", &"p".repeat(500));
                        log.write(record).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let mut text = String::new();
        std::fs::File::open(&path)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 401);
        assert_eq!(lines[0], "{\"ev\":\"before\"}");
        assert!(lines[1..]
            .iter()
            .all(|l| l.starts_with("{\"ev\":\"n\"") && l.ends_with("\"}")));
    }

    #[test]
    fn from_env_is_none_when_unset_or_empty_or_unopenable() {
        assert!(EvidenceLog::from_env("VKEXIT_SUPPORT_TEST_SURELY_UNSET", "test").is_none());
        std::env::set_var("VKEXIT_SUPPORT_TEST_EMPTY", "");
        assert!(EvidenceLog::from_env("VKEXIT_SUPPORT_TEST_EMPTY", "test").is_none());
        std::env::set_var("VKEXIT_SUPPORT_TEST_BAD", "/nonexistent-dir/x.jsonl");
        assert!(EvidenceLog::from_env("VKEXIT_SUPPORT_TEST_BAD", "test").is_none());
    }

    #[test]
    fn the_file_is_close_on_exec_and_append_only() {
        let dir = tempfile::tempdir().unwrap();
        let log = EvidenceLog::open(&dir.path().join("e.jsonl")).unwrap();
        // SAFETY: F_GETFD/F_GETFL on our own open descriptor.
        let (fd_flags, fl_flags) = unsafe {
            (
                libc::fcntl(log.fd.as_raw_fd(), libc::F_GETFD),
                libc::fcntl(log.fd.as_raw_fd(), libc::F_GETFL),
            )
        };
        assert_ne!(fd_flags & libc::FD_CLOEXEC, 0);
        assert_ne!(fl_flags & libc::O_APPEND, 0);
    }
}
