//! `__cxa_atexit`: every exit handler, named and timed.
//!
//! glibc's `atexit()` is a static stub in each object that calls `__cxa_atexit(f, NULL,
//! __dso_handle)`; C++ static destructors call `__cxa_atexit(dtor, &object, __dso_handle)`.
//! Both come through here. Each registration is recorded (`handler-registered`: id, kind,
//! registering object, function) and replaced by a trampoline registered at the same moment,
//! with the same `dso_handle`: it runs in the same place of the last-in-first-out order, and
//! still at the `dlclose` of the registering object. The trampoline records `handler-start` and
//! `handler-end` around the real call.
//!
//! Without a timeline file nothing is recorded and registrations pass through untouched. With
//! `VKEXIT_TIMELINE_HANDLERS=atexit`, C++ static destructors are not wrapped, and their
//! registrations are recorded one `handlers-registered` record per run of consecutive ones by one
//! object (`first_id`, `last_id`, `count`, `registrant`, `first_t_ns`). That keeps both the
//! start-up and the exit path about as fast as without the library.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use vkexit_evidence::timeline::{field, Event, HandlerKind};
use vkexit_evidence::Record;

use crate::exit_order::{Class, Entry, Phase};
use crate::{objects, real, timeline};
use vkexit_evidence::exit_order::symbol_hash;

/// What glibc calls: `f(arg, status)`; `atexit` functions ignore both.
type Handler = unsafe extern "C" fn(*mut c_void, c_int);
type CxaAtexit = unsafe extern "C" fn(Option<Handler>, *mut c_void, *mut c_void) -> c_int;

/// Registration ids, in registration order, from 1.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Says which handlers get the trampoline: `all` (the default) or `atexit` (C++ static
/// destructors are recorded when registered, and then run unwrapped).
pub const HANDLERS_VAR: &str = "VKEXIT_TIMELINE_HANDLERS";

/// Whether C++ static destructors get the trampoline too. Each costs two records at exit;
/// lavapipe's LLVM alone registers over 3000, which adds tens of milliseconds after `main`
/// returns: enough to change the outcome of a race between exit and another thread.
static WRAP_CXX_DESTRUCTORS: AtomicBool = AtomicBool::new(true);

/// Reads [`HANDLERS_VAR`] (from the library's constructor).
/// Every handler is wrapped when the exit order is to be changed, whatever it says.
pub(crate) fn configure(reordering: bool) {
    let atexit_only = std::env::var(HANDLERS_VAR).is_ok_and(|v| v.trim() == "atexit");
    WRAP_CXX_DESTRUCTORS.store(!atexit_only || reordering, Ordering::Relaxed);
}

/// `__cxa_atexit(f, arg, dso_handle)`.
///
/// # Safety
/// As `__cxa_atexit`.
#[unsafe(naked)]
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __cxa_atexit(
    _f: Option<Handler>,
    _arg: *mut c_void,
    _dso_handle: *mut c_void,
) -> c_int {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("mov rcx, [rsp]", "jmp {register}", register = sym register);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("mov x3, x30", "b {register}", register = sym register);
}

unsafe extern "C" fn register(
    f: Option<Handler>,
    arg: *mut c_void,
    dso_handle: *mut c_void,
    caller: usize,
) -> c_int {
    crate::ensure_loaded();
    // SAFETY: glibc's __cxa_atexit has this signature.
    let real: CxaAtexit = unsafe { std::mem::transmute(real::CXA_ATEXIT.get()) };
    let (Some(f), Some(_)) = (f, timeline::get()) else {
        // SAFETY: the caller's own arguments.
        return unsafe { real(f, arg, dso_handle) };
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let wrapped = arg.is_null() || WRAP_CXX_DESTRUCTORS.load(Ordering::Relaxed);
    if !wrapped {
        note_unwrapped_destructor(id, dso_handle, caller);
        // SAFETY: the caller's own arguments.
        return unsafe { real(Some(f), arg, dso_handle) };
    }
    flush_registrations();
    let registrant = registrant_of(dso_handle as usize, caller, f as usize);
    let mut entry = Entry {
        id,
        class: crate::classes::class_of(registrant.as_ref()),
        phase: crate::classes::phase_now(),
        destructor: !arg.is_null(),
        group: registrant.as_ref().map_or(0, |o| o.base),
        symbol: 0,
    };
    entry.symbol = record_registration(&entry, f, arg, registrant.as_ref(), wrapped, caller);
    let slot = Slot::claim(f, arg, entry);
    // SAFETY: the trampoline has glibc's handler signature; the slot outlives the
    // registration (it is released only after the handler ran).
    let result = unsafe {
        real(
            Some(run_handler),
            std::ptr::from_ref(slot).cast_mut().cast(),
            dso_handle,
        )
    };
    if result != 0 {
        slot.release();
    }
    result
}

/// Consecutive C++ static destructors registered by one object and not
/// wrapped: they come by the thousand (LLVM alone registers over 3000), so
/// they are written as one `handlers-registered` record per run instead of
/// one record each.
struct Run {
    dso: usize,
    first_id: u64,
    last_id: u64,
    first_t_ns: u64,
    caller: usize,
    /// When the first was registered.
    phase: Phase,
}

static PENDING: std::sync::Mutex<Option<Run>> = std::sync::Mutex::new(None);

fn note_unwrapped_destructor(id: u64, dso_handle: *mut c_void, caller: usize) {
    let dso = dso_handle as usize;
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    match pending.as_mut() {
        Some(run) if dso != 0 && run.dso == dso && run.last_id + 1 == id => run.last_id = id,
        _ => {
            if let Some(done) = pending.take() {
                write_run(&done);
            }
            *pending = Some(Run {
                dso,
                first_id: id,
                last_id: id,
                first_t_ns: vkexit_evidence::monotonic_ns(),
                caller,
                phase: crate::classes::phase_now(),
            });
        }
    }
}

/// Writes the run of unwrapped registrations still pending. Called before
/// any other registration record, and when main returns or `exit` is
/// called, so that every registration is on record before exit begins.
pub(crate) fn flush_registrations() {
    let done = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(run) = done {
        write_run(&run);
    }
}

fn write_run(run: &Run) {
    let registrant = registrant_of(run.dso, run.caller, 0);
    let mut record = Record::new(Event::HandlersRegistered.as_str());
    record
        .u64(field::FIRST_ID, run.first_id)
        .u64(field::LAST_ID, run.last_id)
        .u64(field::COUNT, run.last_id - run.first_id + 1)
        .str(field::KIND, HandlerKind::CxaAtexit.as_str())
        .u64(field::FIRST_T_NS, run.first_t_ns)
        .bool(field::WRAPPED, false)
        .str(
            field::CLASS,
            crate::classes::class_of(registrant.as_ref()).name(),
        )
        .str(field::PHASE, run.phase.name());
    timeline::c_str_field(
        &mut record,
        field::REGISTRANT,
        registrant.and_then(|o| o.name),
    );
    timeline::write(record);
}

/// The object that registered a handler: the one its `dso_handle` points into, else the one
/// that called, else the one the handler's code is in. glibc's `atexit` stub passes the value
/// of the object's `__dso_handle`, which gcc's `crtbeginS.o` sets to its own address; lld
/// (zig's linker, the portable bundles) leaves it as the first bytes of the ELF header,
/// `0x10102464c457f`, in no object at all. The caller is then the return address: where a
/// library's constructor ends in its `atexit` call (a tail call), that is in the dynamic
/// loader that ran the constructor, which registers no handler of its own, so the object that
/// holds the handler names the registrant.
fn registrant_of(dso_handle: usize, caller: usize, handler: usize) -> Option<objects::Object> {
    objects::object_of(dso_handle)
        .or_else(|| objects::object_of(caller).filter(|o| !crate::classes::is_dynamic_loader(o)))
        .or_else(|| objects::object_of(handler))
        .or_else(|| objects::object_of(caller))
}

/// Writes the `handler-registered` record of `entry`, registered by `registrant`; the
/// [`symbol_hash`] of its symbol, 0 without one.
fn record_registration(
    entry: &Entry,
    f: Handler,
    arg: *mut c_void,
    registrant: Option<&objects::Object>,
    wrapped: bool,
    caller: usize,
) -> u64 {
    let id = entry.id;
    let function = objects::object_of(f as usize);
    let atexit = arg.is_null();
    let kind = if atexit {
        HandlerKind::Atexit
    } else {
        HandlerKind::CxaAtexit
    };
    let mut record = Record::new(Event::HandlerRegistered.as_str());
    record.u64(field::ID, id).str(field::KIND, kind.as_str());
    timeline::c_str_field(
        &mut record,
        field::REGISTRANT,
        registrant.and_then(|o| o.name),
    );
    record
        .str(field::CLASS, entry.class.name())
        .str(field::PHASE, entry.phase.name());
    record.hex(field::FUNCTION, f as usize as u64);
    // Named for `atexit` handlers only: dladdr scans the whole symbol table, and C++ static
    // destructors come by the thousand.
    let symbol = if atexit {
        objects::symbol_at(f as usize)
    } else {
        None
    };
    timeline::c_str_field(&mut record, field::SYMBOL, symbol);
    timeline::c_str_field(
        &mut record,
        field::FUNCTION_OBJECT,
        function.as_ref().and_then(|o| o.name),
    );
    if let Some(function) = &function {
        record.hex(field::FUNCTION_OFFSET, (f as usize - function.base) as u64);
    }
    if !atexit {
        record.hex(field::ARG, arg as u64);
    }
    // Where it was registered: the return address of the call to `atexit` (glibc's stub
    // hands on to `__cxa_atexit` with a jump) or of a static object's registration.
    if let Some(object) = objects::object_of(caller) {
        timeline::c_str_field(&mut record, field::CALL_OBJECT, object.name);
        record.hex(field::CALL_OFFSET, (caller - object.base) as u64);
    }
    record.bool(field::WRAPPED, wrapped);
    timeline::write(record);
    symbol.map_or(0, |s| symbol_hash(s.to_bytes()))
}

/// Runs as an exit handler: inside `exit()`, in the registration's place, or inside the
/// `dlclose` of the registering object. Async-signal-safe around the real handler: atomic
/// loads, records on the stack, one `write` each.
unsafe extern "C" fn run_handler(slot: *mut c_void, status: c_int) {
    // SAFETY: `register` passed a pointer to a claimed slot, which stays claimed until here.
    let slot = unsafe { &*slot.cast::<Slot>() };
    // A handler the reordered exit ran already: glibc's call only gives the slot back.
    if slot.take_run() {
        // SAFETY: the call glibc would have made.
        unsafe { slot.call(status) };
    }
    slot.release();
}

impl Slot {
    /// Whether the caller is the one to run the handler (it had not run).
    fn take_run(&self) -> bool {
        self.ran
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Runs the real handler between its `handler-start` and `handler-end` records.
    ///
    /// # Safety
    /// The slot is claimed, and [`Slot::take_run`] said this caller runs it.
    unsafe fn call(&self, status: c_int) {
        let id = self.id.load(Ordering::Acquire);
        // SAFETY: stored from a valid `Handler` when the slot was claimed.
        let f: Handler = unsafe { std::mem::transmute(self.f.load(Ordering::Acquire)) };
        let arg = self.arg.load(Ordering::Acquire) as *mut c_void;
        vkexit_crash::hold_exit_while_crash_is_reported();
        let mut start = Record::new(Event::HandlerStart.as_str());
        start.u64(field::ID, id);
        timeline::write(start);
        // SAFETY: the call glibc would have made.
        unsafe { f(arg, status) };
        let mut end = Record::new(Event::HandlerEnd.as_str());
        end.u64(field::ID, id);
        timeline::write(end);
    }

    fn entry(&self) -> Entry {
        Entry {
            id: self.id.load(Ordering::Acquire),
            class: Class::from_u8(self.class.load(Ordering::Acquire)),
            phase: Phase::from_u8(self.phase.load(Ordering::Acquire)),
            destructor: self.destructor.load(Ordering::Acquire),
            group: self.group.load(Ordering::Acquire),
            symbol: self.symbol.load(Ordering::Acquire),
        }
    }
}

/// A handler registered and not yet run, as exit begins.
pub(crate) struct Pending {
    slot: &'static Slot,
    pub(crate) entry: Entry,
}

/// Every wrapped handler not yet run, in registration order. Not for signal handlers.
pub(crate) fn pending() -> Vec<Pending> {
    let leaked = LEAKED.lock().unwrap_or_else(|e| e.into_inner());
    let mut all: Vec<Pending> = POOL
        .iter()
        .chain(leaked.iter().copied())
        .filter(|s| s.busy.load(Ordering::Acquire) && !s.ran.load(Ordering::Acquire))
        .map(|slot| Pending {
            slot,
            entry: slot.entry(),
        })
        .collect();
    drop(leaked);
    all.sort_by_key(|p| p.entry.id);
    all
}

/// Runs a pending handler now, unless it ran meanwhile (in a `dlclose`) or its slot went to
/// another registration. Its slot stays claimed: glibc still calls the trampoline once.
pub(crate) fn run_pending(p: &Pending, status: c_int) {
    let slot = p.slot;
    if !slot.busy.load(Ordering::Acquire) || slot.id.load(Ordering::Acquire) != p.entry.id {
        return;
    }
    if slot.take_run() {
        // SAFETY: claimed, and this caller took the run.
        unsafe { slot.call(status) };
    }
}

/// One registration's real handler, until it ran. A static pool, so that the trampoline frees
/// nothing (an exit handler must not call `free`); past the pool, slots are leaked.
struct Slot {
    busy: AtomicBool,
    /// The handler ran (from glibc's call, or from the reordered exit).
    ran: AtomicBool,
    f: AtomicUsize,
    arg: AtomicUsize,
    id: AtomicU64,
    /// What the exit orders need of the registration ([`Entry`]).
    class: AtomicU8,
    phase: AtomicU8,
    destructor: AtomicBool,
    group: AtomicUsize,
    symbol: AtomicU64,
}

/// The slots past the pool, for [`pending`] to find.
static LEAKED: std::sync::Mutex<Vec<&'static Slot>> = std::sync::Mutex::new(Vec::new());

const POOL_SIZE: usize = 1024;
static POOL: [Slot; POOL_SIZE] = [const { Slot::new() }; POOL_SIZE];
/// Where the next search for a free slot starts.
static NEXT_FREE: AtomicUsize = AtomicUsize::new(0);
/// Slots of the pool in use: once all are, registrations go straight to leaked slots (slots
/// come free only as handlers run, mostly at exit).
static IN_USE: AtomicUsize = AtomicUsize::new(0);

impl Slot {
    const fn new() -> Self {
        Slot {
            busy: AtomicBool::new(false),
            ran: AtomicBool::new(false),
            f: AtomicUsize::new(0),
            arg: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            class: AtomicU8::new(0),
            phase: AtomicU8::new(0),
            destructor: AtomicBool::new(false),
            group: AtomicUsize::new(0),
            symbol: AtomicU64::new(0),
        }
    }

    /// A free slot of the pool, or a leaked one, holding this registration. The search starts
    /// after the slot claimed last, so that filling the pool in order stays linear.
    fn claim(f: Handler, arg: *mut c_void, entry: Entry) -> &'static Slot {
        let start = NEXT_FREE.load(Ordering::Relaxed);
        let pool_full = IN_USE.load(Ordering::Relaxed) >= POOL_SIZE;
        let found = (0..if pool_full { 0 } else { POOL_SIZE })
            .map(|k| (start + k) % POOL_SIZE)
            .find(|&i| {
                !POOL[i].busy.load(Ordering::Relaxed)
                    && POOL[i]
                        .busy
                        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
            });
        let slot = match found {
            Some(i) => {
                NEXT_FREE.store((i + 1) % POOL_SIZE, Ordering::Relaxed);
                IN_USE.fetch_add(1, Ordering::Relaxed);
                &POOL[i]
            }
            None => {
                let leaked: &'static Slot = Box::leak(Box::new(Slot::new()));
                leaked.busy.store(true, Ordering::Release);
                LEAKED
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(leaked);
                leaked
            }
        };
        slot.ran.store(false, Ordering::Release);
        slot.f.store(f as usize, Ordering::Release);
        slot.arg.store(arg as usize, Ordering::Release);
        slot.id.store(entry.id, Ordering::Release);
        slot.class.store(entry.class as u8, Ordering::Release);
        slot.phase.store(entry.phase as u8, Ordering::Release);
        slot.destructor.store(entry.destructor, Ordering::Release);
        slot.group.store(entry.group, Ordering::Release);
        slot.symbol.store(entry.symbol, Ordering::Release);
        slot
    }

    fn release(&self) {
        self.busy.store(false, Ordering::Release);
        if POOL.as_ptr_range().contains(&std::ptr::from_ref(self)) {
            IN_USE.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn noop(_: *mut c_void, _: c_int) {}

    fn entry(id: u64) -> Entry {
        Entry {
            id,
            class: Class::App,
            phase: Phase::Running,
            destructor: false,
            group: 0,
            symbol: 0,
        }
    }

    /// What an object linked by lld passes to `__cxa_atexit` through glibc's `atexit` stub.
    const LLD_DSO_HANDLE_VALUE: usize = 0x0001_0102_464c_457f;

    #[test]
    fn a_registrant_whose_handle_is_in_no_object_is_named_by_its_caller() {
        let caller = noop as *const () as usize;
        let expected = objects::object_of(caller).expect("the test program holds its code");
        assert!(objects::object_of(LLD_DSO_HANDLE_VALUE).is_none());
        let named = registrant_of(LLD_DSO_HANDLE_VALUE, caller, 0).expect("named by the caller");
        assert_eq!(named.base, expected.base);
        // A handle inside an object still names that object, whoever called.
        let by_handle = registrant_of(caller, 0, 0).expect("named by the handle");
        assert_eq!(by_handle.base, expected.base);
    }

    /// A library's constructor that ends in `atexit(teardown)` returns, through the tail call,
    /// into the dynamic loader that ran it: with lld's `__dso_handle` the registrant is the
    /// object holding `teardown`, not the loader.
    #[test]
    fn a_registration_returning_into_the_dynamic_loader_is_named_by_its_handler() {
        // SAFETY: a symbol lookup; `_r_debug` is the dynamic loader's, in every glibc.
        let in_loader = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_r_debug".as_ptr()) } as usize;
        let loader = objects::object_of(in_loader).expect("the dynamic loader holds _r_debug");
        assert!(crate::classes::is_dynamic_loader(&loader));
        let handler = noop as *const () as usize;
        let expected = objects::object_of(handler).expect("the test program holds its code");
        let named = registrant_of(LLD_DSO_HANDLE_VALUE, in_loader, handler).expect("named");
        assert_eq!(named.base, expected.base);
        // With no handler to go by, the loader is still the one that called.
        let caller = registrant_of(LLD_DSO_HANDLE_VALUE, in_loader, 0).expect("named");
        assert_eq!(caller.base, loader.base);
    }

    #[test]
    fn slots_are_claimed_once_and_reused_after_release() {
        let a = Slot::claim(noop, std::ptr::null_mut(), entry(1));
        let b = Slot::claim(noop, 8 as *mut c_void, entry(2));
        assert!(!std::ptr::eq(a, b));
        assert_eq!(b.arg.load(Ordering::Acquire), 8);
        a.release();
        // The pool is searched onwards from the last claim, and wraps around to `a`.
        let taken: Vec<&Slot> = (0..POOL_SIZE - 2)
            .map(|i| Slot::claim(noop, std::ptr::null_mut(), entry(100 + i as u64)))
            .collect();
        let c = Slot::claim(noop, std::ptr::null_mut(), entry(3));
        assert!(std::ptr::eq(a, c));
        let leaked = Slot::claim(noop, std::ptr::null_mut(), entry(4));
        assert!(!POOL.iter().any(|s| std::ptr::eq(s, leaked)));
        taken.iter().for_each(|s| s.release());
        assert_eq!(c.id.load(Ordering::Acquire), 3);
        b.release();
        c.release();
    }
}
