//! The trace: the file named by `VKEXIT_TRACE_FILE` and the lifetimes behind it, one per
//! process. Every method updates the lifetimes under the lock, releases it, then writes what
//! came back, each record copied into a shared mapping of the file before the call goes on
//! (`MappedLog`), so a crash loses nothing already recorded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use vkexit_evidence::{files, monotonic_ns, MappedLog};

use crate::identity::this_thread;

use crate::lifetimes::{Key, Lifetimes, Origin};
use crate::record::{Line, Record, LAYER_NAME};

/// Names the trace file; unset or empty, the layer is a pure pass-through and writes nothing.
pub const TRACE_FILE_VAR: &str = files::TRACE.var;

pub struct Tracer {
    log: MappedLog,
    lifetimes: Mutex<Lifetimes>,
}

static TRACER: OnceLock<Option<Tracer>> = OnceLock::new();

/// When the exit handler was registered (CLOCK_MONOTONIC ns), 0 before.
static EXIT_HANDLER_T_NS: AtomicU64 = AtomicU64::new(0);

/// The process's trace, opened on first use; `None` when there is none to write.
pub fn tracer() -> Option<&'static Tracer> {
    TRACER
        .get_or_init(|| {
            MappedLog::from_env(TRACE_FILE_VAR, LAYER_NAME).map(|log| Tracer {
                log,
                lifetimes: Mutex::new(Lifetimes::new()),
            })
        })
        .as_ref()
}

/// At clean exit, after every exit handler: cuts the NUL bytes the mapping left at the end of
/// the file. A record written later still lands (in a new chunk).
pub fn close_tail() {
    if let Some(tracer) = TRACER.get().and_then(Option::as_ref) {
        tracer.log.close_tail();
    }
}

/// Notes that the exit handler was just registered, for the `loaded` records.
pub fn exit_handler_registered() {
    EXIT_HANDLER_T_NS.store(monotonic_ns(), Ordering::Relaxed);
}

/// The exit handler, registered with `atexit` when the library is loaded.
///
/// Runs inside `exit()`, other threads still running. It is not async-signal-safe and need not
/// be (it is no signal handler): it takes the lifetimes lock, which a thread holds only while
/// updating the map and never while calling out, and allocates for the report.
pub extern "C" fn report_alive_at_exit() {
    let Some(tracer) = TRACER.get().and_then(Option::as_ref) else {
        return;
    };
    let mut out = Vec::new();
    tracer.lifetimes().report_at_exit(&mut out);
    out.push(Record::ExitHandlerEnd);
    tracer.write(&out);
    if std::env::var_os(FAULT_AT_EXIT_VAR).is_some_and(|v| v == "1") {
        fault_in_this_library();
    }
}

/// For vkexit's own tests: `1` makes the layer's exit handler fault after its records, as a
/// layer that tears down its own state at exit does (the validation layer 1.4 on Debian 13),
/// so that telling a layer's crash from the application's is tested with a real one.
pub const FAULT_AT_EXIT_VAR: &str = "VKEXIT_TRACE_FAULT_AT_EXIT";

/// Kept out of line, so the faulting instruction is this library's own code.
#[inline(never)]
fn fault_in_this_library() {
    // Address 8, in the never-mapped zero page (exactly 0 would trip a debug null check).
    let field = std::ptr::null_mut::<u64>().wrapping_add(1);
    // SAFETY: none; this write is meant to fault, on request only.
    unsafe { std::ptr::write_volatile(field, 0xdead) };
}

impl Tracer {
    /// The first record of each instance, written before it is created.
    pub fn loaded(&self) {
        self.write(&[Record::Loaded {
            version: env!("CARGO_PKG_VERSION"),
            exit_handler_t_ns: EXIT_HANDLER_T_NS.load(Ordering::Relaxed),
        }]);
    }

    /// `call` is about to pass `uses`: records those already dead.
    pub fn used(&self, call: &'static str, uses: &[Key]) {
        let mut out = Vec::new();
        self.lifetimes().check_uses(call, uses, &mut out);
        self.write(&out);
    }

    /// `call` created `objects`, children of `parent`.
    pub fn created(&self, call: &'static str, objects: &[Key], parent: Option<Key>) {
        let origin = origin_here();
        let mut out = Vec::with_capacity(objects.len());
        {
            let mut lifetimes = self.lifetimes();
            for &key in objects {
                lifetimes.create(call, key, parent, origin, &mut out);
            }
        }
        self.write(&out);
    }

    /// `call`, passing `uses`, is about to destroy `objects`.
    pub fn destroying(&self, call: &'static str, uses: &[Key], objects: &[Key]) {
        let mut out = Vec::new();
        self.lifetimes().destroy(call, uses, objects, &mut out);
        self.write(&out);
    }

    /// `call`, passing `uses`, is about to free every child of `pool`.
    pub fn freeing_children(&self, call: &'static str, uses: &[Key], pool: Key) {
        let mut out = Vec::new();
        self.lifetimes()
            .free_children_of(call, uses, pool, &mut out);
        self.write(&out);
    }

    fn lifetimes(&self) -> MutexGuard<'_, Lifetimes> {
        self.lifetimes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, records: &[Record]) {
        for record in records {
            // Nowhere to report a failed write to: the application's stderr is its own.
            let mut line = Line::start(record.ev().as_str());
            record.fill(&mut line);
            let _ = self.log.write(&mut line);
        }
    }
}

/// The calling thread and now.
fn origin_here() -> Origin {
    let (tid, thread) = this_thread();
    Origin {
        thread,
        tid,
        t_ns: monotonic_ns(),
    }
}
