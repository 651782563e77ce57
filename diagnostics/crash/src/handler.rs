//! The crash handler.
//!
//! Runs as a signal handler, on whichever thread faulted (or received the signal), while the
//! other threads keep running. Everything here is async-signal-safe: atomics, `write`, `read`,
//! `open`, `sigaction`, `nanosleep`, `tgkill`, fixed buffers on the stack; no allocation, no
//! lock. The one exception, the symbolized backtrace, runs in a forked child (see `frames`).
//!
//! Order: the `crash` record first (the essentials are on disk before anything can go wrong),
//! then the backtrace (first crash only, bounded in time), then the signal's own outcome: the
//! handler that was there before ours, or the default action — by returning, so that the
//! faulting instruction faults again with its real context, or by sending the signal again.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use libc::{c_int, c_void, siginfo_t};
use vkexit_evidence::crash::{self as schema, field, Event, MappingFields, Then, Writer};
use vkexit_evidence::{monotonic_ns, thread_id, EvidenceLog, Record};

use crate::context::Delivery;
use crate::disposition::{self, After};
use crate::exit_state::Phase;
use crate::maps::{self, Lookup};
use crate::{frames, names, stacks};

/// What the handler needs, fixed at install.
pub(crate) struct Config {
    pub log: EvidenceLog,
    /// Which copy of this crate writes the records.
    pub writer: Writer,
    /// How long the backtrace may take; 0 turns it off.
    pub backtrace_ms: u64,
}

pub(crate) static CONFIG: OnceLock<Config> = OnceLock::new();

/// The thread that took the first crash, 0 before any.
static FIRST: AtomicI32 = AtomicI32::new(0);

/// Slack on top of the backtrace time that a second crashing thread, or an exiting one, waits
/// for the first crash's handler.
const WAIT_SLACK_MS: u64 = 2000;

/// The handler's address, as installed in the dispositions.
pub(crate) fn address() -> usize {
    on_crash as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as usize
}

/// Runs as a signal handler (see the module documentation): async-signal-safe throughout.
extern "C" fn on_crash(signo: c_int, info: *mut siginfo_t, context: *mut c_void) {
    // SAFETY: __errno_location returns this thread's errno; restored before returning.
    let errno = unsafe { *libc::__errno_location() };
    let tid = thread_id() as i32;
    if let Some(first_signo) = inside::nested(tid) {
        // A fault inside this handler, or a signal while it runs on this thread: end the
        // process with the signal that brought us here, recording nothing more.
        end_with(if first_signo > 0 { first_signo } else { signo });
        disposition::set_default(signo);
        return;
    }
    let slot = inside::enter(tid, signo);
    // SAFETY: the kernel's pointers for this delivery.
    let delivery = unsafe { Delivery::read(signo, info, context) };
    // The same fault again on the same thread: the program's handler returned without
    // curing it (Rust's does, after restoring the default action). Recorded once.
    let repeated = last::is_repeat(tid, &delivery);
    let after = disposition::after(signo);
    if let (Some(config), false) = (CONFIG.get(), repeated) {
        let first = FIRST
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        // The records need more stack than a thread's alternate stack may have.
        stacks::run_with_room(&mut || {
            write_crash(config, &delivery, &after);
            if first && config.backtrace_ms > 0 {
                write_backtrace(config, &delivery);
            }
        });
        if !first {
            wait_while_others_inside(tid, config.backtrace_ms + WAIT_SLACK_MS);
        }
    }
    if let (Some(config), true, After::Default) = (CONFIG.get(), repeated, &after) {
        // The program's handler returned without curing the fault (Rust's does, after
        // restoring the default action): the crash recorded before ends the process now.
        write_fatal(config, &delivery);
    }
    inside::leave(slot);
    match after {
        After::Chain(action) => {
            // SAFETY: the program installed this action for this signal and expects exactly
            // these arguments.
            unsafe { chain(&action, signo, info, context) };
        }
        After::Default | After::NotInstalled => {
            disposition::set_default(signo);
            if !delivery.refaults() {
                end_with(signo);
            }
            // A fault: returning re-executes the instruction, which faults again and takes
            // the default action with its own context (core dumps show the real crash).
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Writes the `crash` record. Its buffers (the record, the maps) stay out of the handler's
/// entry frame.
#[inline(never)]
fn write_crash(config: &Config, delivery: &Delivery, after: &After) {
    let [pc_map, addr_map] = maps::lookup([delivery.pc, delivery.addr.unwrap_or(0)]);
    let phase = Phase::now();
    let mut cmdline = [0u8; CMDLINE_CAPACITY];
    let mut record = Record::new(Event::Crash.as_str());
    // SAFETY: getppid has no preconditions and cannot fail.
    let ppid = unsafe { libc::getppid() };
    record
        .i64(field::PPID, ppid.into())
        .bytes_str(field::CMDLINE, read_cmdline(&mut cmdline))
        .str(
            field::THEN,
            match after {
                After::Chain(_) => Then::ProgramHandler,
                After::Default | After::NotInstalled => Then::DefaultAction,
            }
            .as_str(),
        )
        .str(field::SIGNAL, names::signal_name(delivery.signo))
        .i64(field::SIGNO, delivery.signo.into())
        .i64(field::SI_CODE, delivery.code.into())
        .str(
            field::SI_CODE_NAME,
            names::si_code_name(delivery.signo, delivery.code),
        );
    match delivery.addr {
        Some(addr) => record.hex(field::ADDR, addr),
        None => record.raw(field::ADDR, "null"),
    };
    if let Some(pid) = delivery.sender_pid {
        record.i64(field::SENDER_PID, pid);
    }
    record.hex(field::PC, delivery.pc);
    mapping_fields(&mut record, schema::PC_MAPPING, pc_map, delivery.pc);
    match delivery.addr {
        Some(addr) => mapping_fields(&mut record, schema::ADDR_MAPPING, addr_map, addr),
        None => {
            record.raw(schema::ADDR_MAPPING.mapping, "null");
        }
    }
    optional_bool(&mut record, field::MAIN_RETURNED, phase.main_returned);
    optional_bool(&mut record, field::EXIT_CALLED, phase.exit_called);
    optional_bool(&mut record, field::EXITING, phase.exiting());
    record.str(field::HANDLER, config.writer.as_str());
    let _ = config.log.write(record);
}

/// The `fatal` record: the default action ends the process now, after a program handler that
/// returned without curing the fault recorded before.
#[inline(never)]
fn write_fatal(config: &Config, delivery: &Delivery) {
    let mut record = Record::new(Event::Fatal.as_str());
    record
        .str(field::SIGNAL, names::signal_name(delivery.signo))
        .hex(field::PC, delivery.pc);
    let _ = config.log.write(record);
}

/// The most bytes of `/proc/self/cmdline` a record keeps.
const CMDLINE_CAPACITY: usize = 1024;

/// The process's command line, arguments joined by spaces, cut at the buffer's end; empty when
/// it cannot be read. Async-signal-safe: `open`, `read`, `close` into `buffer`.
fn read_cmdline(buffer: &mut [u8; CMDLINE_CAPACITY]) -> &[u8] {
    // SAFETY: a NUL-terminated path; open has no other preconditions.
    let fd = unsafe {
        libc::open(
            c"/proc/self/cmdline".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return &[];
    }
    let mut len = 0;
    while len < buffer.len() {
        let free = &mut buffer[len..];
        // SAFETY: reads at most `free.len()` bytes into the live buffer `free`.
        let n = unsafe { libc::read(fd, free.as_mut_ptr().cast(), free.len()) };
        if n <= 0 {
            // SAFETY: __errno_location returns the calling thread's errno.
            if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            break;
        }
        len += n as usize;
    }
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(fd) };
    // Arguments end in NUL: the last one ends the line, the others become spaces.
    while len > 0 && buffer[len - 1] == 0 {
        len -= 1;
    }
    for byte in &mut buffer[..len] {
        if *byte == 0 {
            *byte = b' ';
        }
    }
    &buffer[..len]
}

/// Where `address` lies: the file (or `[anonymous]`, `[stack]`, …), `unmapped` or `unknown`;
/// the mapping's `rwxp`; the address as a file offset, for `addr2line` (file mappings only).
fn mapping_fields(record: &mut Record, keys: MappingFields, lookup: Lookup, address: u64) {
    match lookup {
        Lookup::Mapped(m) if m.path().is_empty() => {
            record
                .str(keys.mapping, schema::ANONYMOUS)
                .bytes_str(keys.perms, &m.perms);
        }
        Lookup::Mapped(m) => {
            record
                .bytes_str(keys.mapping, m.path())
                .bytes_str(keys.perms, &m.perms)
                .hex(keys.offset, m.file_offset(address));
        }
        Lookup::Unmapped => {
            record.str(keys.mapping, schema::UNMAPPED);
        }
        Lookup::Unknown => {
            record.str(keys.mapping, schema::UNKNOWN);
        }
    }
}

fn optional_bool(record: &mut Record, key: &str, value: Option<bool>) {
    match value {
        Some(value) => record.bool(key, value),
        None => record.raw(key, "null"),
    };
}

/// Writes the `backtrace` record: the frames from a forked child, or why there are none.
#[inline(never)]
fn write_backtrace(config: &Config, delivery: &Delivery) {
    let mut text = [0u8; frames::TEXT_CAPACITY];
    let own = config.writer == Writer::Preload;
    let captured = frames::capture(delivery.pc, config.backtrace_ms, own, &mut text);
    // Stamped when the frames are in, so the two records' times show how long it took.
    let mut record = Record::new(Event::Backtrace.as_str());
    match captured {
        Ok(captured) => {
            record
                .raw(field::FRAMES, captured.frames)
                .u64(field::FRAMES_OMITTED, captured.omitted);
        }
        Err(why) => {
            record.raw(field::FRAMES, "[]").str(field::ERROR, why);
        }
    }
    let _ = config.log.write(record);
}

/// Lets the first crash's handler finish (its backtrace) before this thread's signal ends the
/// process, up to `limit_ms`.
fn wait_while_others_inside(tid: i32, limit_ms: u64) {
    let deadline = monotonic_ns() + limit_ms * 1_000_000;
    while inside::others(tid) && monotonic_ns() < deadline {
        sleep_1ms();
    }
}

/// An exiting thread calls this at each exit-handler boundary: while another thread is inside
/// the crash handler, it waits (up to the backtrace time plus slack), so that the crash, not
/// the exit racing it, decides how the process ends. Async-signal-safe.
pub fn hold_exit_while_crash_is_reported() {
    let tid = thread_id() as i32;
    if !inside::others(tid) {
        return;
    }
    let limit = CONFIG.get().map_or(0, |c| c.backtrace_ms) + WAIT_SLACK_MS;
    wait_while_others_inside(tid, limit);
}

fn sleep_1ms() {
    let step = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    // SAFETY: a valid request on the stack, no remainder wanted.
    unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
}

/// Ends the process with `signo` by its default action: set, unblocked, sent to this thread.
fn end_with(signo: c_int) {
    disposition::set_default(signo);
    // SAFETY: sigset operations on a local set; unblocking only widens delivery; tgkill to our
    // own thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::syscall(libc::SYS_gettid),
            signo,
        );
    }
}

/// Calls the program's handler, as the kernel would have: with its mask (and the signal itself
/// unless `SA_NODEFER`) blocked, resetting the disposition first for `SA_RESETHAND`.
///
/// # Safety
/// `action` is the program's action for `signo`; `info` and `context` are the kernel's.
unsafe fn chain(
    action: &libc::sigaction,
    signo: c_int,
    info: *mut siginfo_t,
    context: *mut c_void,
) {
    disposition::note_chained(signo, action);
    let mut mask = action.sa_mask;
    // SAFETY: an all-zero sigset_t is a valid output buffer.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigset operations on locals; the old mask is restored below.
    unsafe {
        if action.sa_flags & libc::SA_NODEFER == 0 {
            libc::sigaddset(&mut mask, signo);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &mask, &mut previous);
    }
    // An abort raised by the program's handler, where its frame and ours would not fit on
    // this alternate stack, would end the process with SIGSEGV: it takes the program's own
    // action instead, unrecorded but with the program's own end.
    let handed_back = signo != libc::SIGABRT
        && stacks::no_room_for_a_nested_signal()
        && disposition::hand_back(libc::SIGABRT);
    if action.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: an SA_SIGINFO action's handler has this signature.
        let handler: extern "C" fn(c_int, *mut siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(action.sa_sigaction) };
        handler(signo, info, context);
    } else {
        // SAFETY: a plain action's handler has this signature.
        let handler: extern "C" fn(c_int) = unsafe { std::mem::transmute(action.sa_sigaction) };
        handler(signo);
    }
    if handed_back {
        disposition::take_back(libc::SIGABRT, address());
    }
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
}

/// The last fault recorded, to tell a repeat of it.
mod last {
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

    use crate::context::Delivery;

    static TID: AtomicI32 = AtomicI32::new(0);
    static PC: AtomicU64 = AtomicU64::new(0);
    static ADDR: AtomicU64 = AtomicU64::new(0);

    /// Whether `delivery` repeats the last instruction fault on thread `tid`; remembers it
    /// otherwise.
    pub fn is_repeat(tid: i32, delivery: &Delivery) -> bool {
        if !delivery.refaults() {
            return false;
        }
        let addr = delivery.addr.unwrap_or(0);
        if TID.load(Ordering::Acquire) == tid
            && PC.load(Ordering::Acquire) == delivery.pc
            && ADDR.load(Ordering::Acquire) == addr
        {
            return true;
        }
        PC.store(delivery.pc, Ordering::Release);
        ADDR.store(addr, Ordering::Release);
        TID.store(tid, Ordering::Release);
        false
    }
}

/// Which threads are inside the handler now, and with which signal: how a fault inside the
/// handler is told from a new crash, without thread-local storage (not safe in a handler).
mod inside {
    use std::sync::atomic::{AtomicI32, Ordering};

    const SLOTS: usize = 32;
    static TID: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
    static SIGNO: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

    /// The signal this thread is already handling, if it is inside the handler.
    pub fn nested(tid: i32) -> Option<i32> {
        let slot = TID.iter().position(|t| t.load(Ordering::Acquire) == tid)?;
        Some(SIGNO[slot].load(Ordering::Acquire))
    }

    /// Marks this thread inside; `None` when every slot is taken (then nesting goes unseen
    /// for this thread, and the kernel's own rules apply to a fault in the handler).
    pub fn enter(tid: i32, signo: i32) -> Option<usize> {
        // The signal is stored after the slot is won; only this thread reads it back, in a
        // nested entry that cannot begin before this store.
        let slot = (0..SLOTS).find(|&i| {
            TID[i]
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })?;
        SIGNO[slot].store(signo, Ordering::Release);
        Some(slot)
    }

    pub fn leave(slot: Option<usize>) {
        if let Some(i) = slot {
            TID[i].store(0, Ordering::Release);
        }
    }

    /// Whether a thread other than `tid` is inside.
    pub fn others(tid: i32) -> bool {
        TID.iter().any(|t| {
            let t = t.load(Ordering::Acquire);
            t != 0 && t != tid
        })
    }
}
