//! A slower device's teardown (`VKEXIT_SLOW_TEARDOWN`): each `vkDestroy*`/`vkFree*` call made
//! during exit takes as long as it would on a device whose teardown is slow (a Jetson's takes
//! far longer than a desktop GPU's or lavapipe's), long enough for the threads asleep at the
//! call to wake into what it destroyed.
//!
//! This library cannot see Vulkan calls; vkexit's trace layer, which the harness puts into the
//! chain of such a run, can (`vkexit_evidence::slow_teardown`). After each destroy or free call
//! returns, the layer calls [`vkexit_preload_destroy_returned`]; during exit (`main` returned
//! or `exit` called), the thread that made the call is held there until every thread asleep at
//! it has woken and the others have stopped running (slept again, blocked or ended), at most
//! [`HOLD_LIMIT_NS`] a call and [`TOTAL_LIMIT_NS`] in all. A thread blocked at the call is
//! counted, not waited for: what it waits on is not a timer. Each call during exit leaves a
//! `teardown-hold` record, up to [`MAX_RECORDS`].

use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use vkexit_crash::exit_state::Phase;
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::threads::{self, State};
use crate::timeline;

/// How long one call's thread is held at most.
const HOLD_LIMIT_NS: u64 = 1_000_000_000;
/// How long all the holds of a process last at most.
const TOTAL_LIMIT_NS: u64 = 3_000_000_000;
/// At most this many calls are recorded (and held) in a process.
const MAX_RECORDS: u32 = 64;

static ASKED: AtomicBool = AtomicBool::new(false);
static WATCHED: AtomicBool = AtomicBool::new(false);
static RECORDED: AtomicU32 = AtomicU32::new(0);
static HELD_NS: AtomicU64 = AtomicU64::new(0);
/// One call held at a time: two threads destroying at once are each held in turn, as one
/// slow device would.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Reads [`vkexit_evidence::slow_teardown::VAR`] (from the library's set-up).
pub(crate) fn configure() {
    let value = std::env::var(vkexit_evidence::slow_teardown::VAR).ok();
    ASKED.store(
        vkexit_evidence::slow_teardown::asked(value.as_deref()),
        Ordering::Relaxed,
    );
}

/// The layer that reports the destroy calls is in the process: said once in the timeline, so
/// that a run without it is not read as one that made no destroy call.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn vkexit_preload_teardown_watched() {
    crate::ensure_loaded();
    if !ASKED.load(Ordering::Relaxed) || WATCHED.swap(true, Ordering::AcqRel) {
        return;
    }
    timeline::write(Record::new(Event::TeardownWatched.as_str()));
}

/// The destroy or free call `call` (a NUL-terminated name) returned on this thread. During
/// exit it runs inside an exit handler (or the loader's finalization): it reads `/proc` and
/// sleeps, as a slow driver's call would, and takes no lock the program could hold.
///
/// # Safety
/// `call` is null or a NUL-terminated string.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn vkexit_preload_destroy_returned(call: *const c_char) {
    if !ASKED.load(Ordering::Relaxed) || Phase::now().exiting() != Some(true) || call.is_null() {
        return;
    }
    // SAFETY: the caller passes a NUL-terminated name.
    let call = unsafe { CStr::from_ptr(call) };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if RECORDED.fetch_add(1, Ordering::Relaxed) >= MAX_RECORDS {
        return;
    }
    hold(call);
}

/// Holds this thread after `call` and records it.
fn hold(call: &CStr) {
    let start = vkexit_evidence::monotonic_ns();
    let at_call = threads::others();
    let counts = threads::Counts::of(&at_call);
    let sleepers: Vec<threads::Thread> = at_call
        .iter()
        .filter(|t| t.state == State::Asleep)
        .copied()
        .collect();
    let spent = HELD_NS.load(Ordering::Relaxed);
    let limit = HOLD_LIMIT_NS.min(TOTAL_LIMIT_NS.saturating_sub(spent));
    let mut woke = 0;
    let mut now = start;
    if counts.runnable + counts.asleep > 0 {
        loop {
            let current = threads::others();
            woke = sleepers.iter().filter(|s| has_woken(s, &current)).count() as u64;
            let running = current.iter().any(|t| t.state == State::Runnable);
            if (woke == sleepers.len() as u64 && !running) || now - start >= limit {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            now = vkexit_evidence::monotonic_ns();
        }
    }
    HELD_NS.fetch_add(now - start, Ordering::Relaxed);
    let mut record = Record::new(Event::TeardownHold.as_str());
    record
        .bytes_str(field::CALL, call.to_bytes())
        .u64(field::HELD_NS, now - start);
    counts.write(&mut record);
    record.u64(field::WOKE, woke);
    timeline::write(record);
}

/// Whether `sleeper`, asleep at the call, has woken since: it ended, it is no longer asleep,
/// or it ran (and slept again) in between.
fn has_woken(sleeper: &threads::Thread, now: &[threads::Thread]) -> bool {
    match now.iter().find(|t| t.tid == sleeper.tid) {
        None => true,
        Some(t) => t.state != State::Asleep || t.switches != sleeper.switches,
    }
}
