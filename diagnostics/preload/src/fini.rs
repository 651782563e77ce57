//! Library destructors: each loaded object's `.fini_array` (functions marked
//! `__attribute__((destructor))`, and the C++ runtime's hook that runs what is left of the
//! object's static destructors), which the dynamic loader's finalization runs after every exit
//! handler, object by object in the reverse of the order it initialised them. They are never
//! registered with `__cxa_atexit`, so [`crate::handlers`] does not see them.
//!
//! When the loader's finalization begins ([`crate::start`]), every entry of every loaded
//! object's `.fini_array` is replaced by a trampoline of this library's (the array made
//! writable for the moment it takes, where it lies in the read-only part of the object's data):
//! the loader then calls each trampoline where it would have called the function, and the
//! trampoline records `library-destructor-start` and `library-destructor-end` around the real
//! call. An exit order's `destructors:FIRST:before:THEN` steps are carried out there: when
//! THEN's first destructor comes due, FIRST's run first (`moved_before`), and when the loader
//! reaches FIRST's later they do not run again. Objects are named by file name; the program by
//! its own.
//!
//! Runs inside `exit()`, on the exiting thread, after every exit handler; nothing here runs in
//! a signal handler. The loader does not hold its lock while it calls destructors.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use vkexit_evidence::exit_order::{symbol_hash, DestructorsBefore};
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::exit_order::Class;
use crate::{objects, timeline};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_W: u32 = 2;
const DT_NULL: i64 = 0;
const DT_FINI_ARRAY: i64 = 26;
const DT_FINI_ARRAYSZ: i64 = 28;

type Fini = unsafe extern "C" fn();

#[repr(C)]
struct Dyn {
    tag: i64,
    value: u64,
}

/// How many destructors are wrapped at most; an object whose entries do not all fit keeps its
/// own, unseen.
const CAPACITY: usize = 128;

/// One wrapped entry.
#[derive(Clone, Copy)]
struct Slot {
    function: usize,
    /// Its object, an index into [`State::objects`].
    object: usize,
    ran: bool,
}

/// An object whose entries are wrapped.
#[derive(Clone, Copy)]
struct Wrapped {
    name: Option<&'static CStr>,
    base: usize,
    /// The [`symbol_hash`] of its file name.
    file: u64,
    class: Class,
    /// Its slots, in the array's order (the loader calls them from the last).
    slots: (usize, usize),
    started: bool,
}

struct State {
    slots: Vec<Slot>,
    objects: Vec<Wrapped>,
    steps: Vec<DestructorsBefore>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// The number of the next destructor to start, from 1, in the order they run.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The loader's finalization begins: every library destructor of every loaded object (but the
/// dynamic loader's and this library's) is wrapped, `steps` to be carried out.
pub(crate) fn wrap_all(steps: Vec<DestructorsBefore>) {
    if timeline::get().is_none() {
        return;
    }
    let mut found = Found {
        state: State {
            slots: Vec::with_capacity(CAPACITY),
            objects: Vec::new(),
            steps,
        },
        // SAFETY: getauxval reads the auxiliary vector; AT_BASE is the interpreter's address.
        interpreter: unsafe { libc::getauxval(libc::AT_BASE) } as usize,
        own: objects::object_of(wrap_all as *const () as usize).map_or(0, |o| o.base),
    };
    // SAFETY: `collect` only reads the loader's entries during the call and writes `found`.
    unsafe {
        libc::dl_iterate_phdr(
            Some(collect),
            std::ptr::from_mut(&mut found).cast::<c_void>(),
        )
    };
    for object in &mut found.state.objects {
        object.class = crate::classes::class_of(Some(&objects::Object {
            name: object.name,
            base: object.base,
        }));
    }
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(found.state);
}

struct Found {
    state: State,
    interpreter: usize,
    own: usize,
}

/// `dl_iterate_phdr`'s callback: wraps the entries of one object.
unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: the loader's entry and the `Found` that `wrap_all` handed over.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Found>()) };
    let base = info.dlpi_addr as usize;
    if base == found.interpreter || base == found.own {
        return 0;
    }
    // SAFETY: the object's program headers, `dlpi_phnum` of them, kept loaded during the call.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
    // SAFETY: as above.
    let Some((array, count)) = (unsafe { fini_array(base, headers) }) else {
        return 0;
    };
    let first = found.state.slots.len();
    if count == 0 || first + count > CAPACITY {
        return 0;
    }
    let name = match info.dlpi_name.is_null() {
        true => None,
        // SAFETY: the loader's NUL-terminated name of a loaded object.
        false => Some(unsafe { CStr::from_ptr(info.dlpi_name) }),
    };
    let name = match name {
        Some(n) if !n.is_empty() => Some(n),
        _ => objects::program(),
    };
    let index = found.state.objects.len();
    let writable = Writable::of(array, count, base, headers);
    let Some(writable) = writable else {
        return 0;
    };
    let mut wrapped = 0;
    for i in 0..count {
        // SAFETY: the array holds `count` entries.
        let entry = unsafe { array.add(i) };
        // SAFETY: as above.
        let function = unsafe { *entry };
        if function == 0 || function == usize::MAX {
            continue;
        }
        let k = first + wrapped;
        found.state.slots.push(Slot {
            function,
            object: index,
            ran: false,
        });
        // SAFETY: the entry is writable while `writable` lives, and TRAMPOLINES[k] runs slot k.
        unsafe { *entry = TRAMPOLINES[k] as usize };
        wrapped += 1;
    }
    drop(writable);
    if wrapped > 0 {
        let file = name.map_or(&[][..], |n| file_name(n.to_bytes()));
        found.state.objects.push(Wrapped {
            name,
            base,
            file: symbol_hash(file),
            class: Class::System,
            slots: (first, first + wrapped),
            started: false,
        });
    }
    0
}

fn file_name(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').next().unwrap_or(path)
}

/// The object's `.fini_array` and its number of entries.
///
/// # Safety
/// `headers` are the program headers of the object loaded at `base`, kept loaded.
unsafe fn fini_array(base: usize, headers: &[libc::Elf64_Phdr]) -> Option<(*mut usize, usize)> {
    let dynamic = headers.iter().find(|h| h.p_type == PT_DYNAMIC)?;
    let (mut array, mut size) = (0u64, 0u64);
    let mut entry = (base + dynamic.p_vaddr as usize) as *const Dyn;
    // SAFETY: the dynamic section ends with DT_NULL; each entry is read in place.
    unsafe {
        while (*entry).tag != DT_NULL {
            match (*entry).tag {
                DT_FINI_ARRAY => array = (*entry).value,
                DT_FINI_ARRAYSZ => size = (*entry).value,
                _ => {}
            }
            entry = entry.add(1);
        }
    }
    if array == 0 {
        return None;
    }
    // glibc leaves DT_FINI_ARRAY a link-time address, which lies below a shared object's load
    // address; an executable linked at a fixed address has its own.
    let array = array as usize;
    let at = if array < base { base + array } else { array };
    Some((
        at as *mut usize,
        size as usize / std::mem::size_of::<usize>(),
    ))
}

/// An array made writable for as long as this lives: where it lies in the part of the data the
/// loader made read-only after relocation (`PT_GNU_RELRO`), its pages are made writable and
/// then read-only again; in a writable segment, nothing is needed.
struct Writable {
    pages: Option<(usize, usize)>,
}

impl Writable {
    fn of(
        array: *mut usize,
        count: usize,
        base: usize,
        headers: &[libc::Elf64_Phdr],
    ) -> Option<Writable> {
        let start = array as usize;
        let end = start + count * std::mem::size_of::<usize>();
        let within = |h: &libc::Elf64_Phdr| {
            let from = base + h.p_vaddr as usize;
            from <= start && end <= from + h.p_memsz as usize
        };
        let writable_load = headers
            .iter()
            .any(|h| h.p_type == PT_LOAD && h.p_flags & PF_W != 0 && within(h));
        if !writable_load {
            return None;
        }
        if !headers
            .iter()
            .any(|h| h.p_type == PT_GNU_RELRO && within(h))
        {
            return Some(Writable { pages: None });
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let from = start & !(page - 1);
        let len = (end - from).div_ceil(page) * page;
        // SAFETY: pages of the object's own mapping; read access is kept throughout.
        let ok =
            unsafe { libc::mprotect(from as *mut c_void, len, libc::PROT_READ | libc::PROT_WRITE) }
                == 0;
        ok.then_some(Writable {
            pages: Some((from, len)),
        })
    }
}

impl Drop for Writable {
    fn drop(&mut self) {
        if let Some((from, len)) = self.pages {
            // SAFETY: the pages made writable above, read-only again as the loader left them.
            unsafe { libc::mprotect(from as *mut c_void, len, libc::PROT_READ) };
        }
    }
}

/// The loader calls slot `k`'s destructor: the objects an exit order puts before its object
/// run first, then it, once.
fn enter(k: usize) {
    let Some((object, due)) = due(k) else {
        return;
    };
    let then = STATE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|s| s.objects[object].name);
    for other in due {
        run_object(other, then);
    }
    run_slot(k, None);
}

/// Slot `k`'s object, and the other objects to run first (marked started); `None` when slot
/// `k` ran already.
fn due(k: usize) -> Option<(usize, Vec<usize>)> {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let state = guard.as_mut()?;
    let slot = *state.slots.get(k)?;
    if slot.ran {
        return None;
    }
    let object = slot.object;
    if state.objects[object].started || state.steps.is_empty() {
        state.objects[object].started = true;
        return Some((object, Vec::new()));
    }
    let ran: Vec<u64> = state
        .objects
        .iter()
        .filter(|o| o.started)
        .map(|o| o.file)
        .collect();
    let files = DestructorsBefore::due(state.objects[object].file, &state.steps, &ran);
    let mut others = Vec::new();
    for file in files {
        for (i, o) in state.objects.iter_mut().enumerate() {
            if o.file == file && !o.started {
                o.started = true;
                if i != object {
                    others.push(i);
                }
            }
        }
    }
    state.objects[object].started = true;
    Some((object, others))
}

/// Runs every destructor of `object` not run yet, as the loader would: from the array's last.
fn run_object(object: usize, before: Option<&'static CStr>) {
    let slots = STATE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|s| s.objects[object].slots);
    let Some((first, end)) = slots else {
        return;
    };
    for k in (first..end).rev() {
        run_slot(k, Some(before));
    }
}

/// Runs slot `k`'s destructor once, recorded; `moved` when an exit order ran it before the
/// destructors of the object named (or an unknown one).
fn run_slot(k: usize, moved: Option<Option<&'static CStr>>) {
    let taken = {
        let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_mut().and_then(|state| {
            let slot = state.slots.get_mut(k)?;
            if slot.ran {
                return None;
            }
            slot.ran = true;
            Some((*slot, state.objects[slot.object]))
        })
    };
    let Some((slot, object)) = taken else {
        return;
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut start = Record::new(Event::LibraryDestructorStart.as_str());
    start.u64(field::ID, id);
    timeline::c_str_field(&mut start, field::OBJECT, object.name);
    start
        .str(field::CLASS, object.class.name())
        .hex(field::FUNCTION_OFFSET, (slot.function - object.base) as u64);
    timeline::c_str_field(&mut start, field::SYMBOL, objects::symbol_at(slot.function));
    if let Some(then) = moved {
        let name = then.map_or(&b"?"[..], |n| file_name(n.to_bytes()));
        start.bytes_str(field::MOVED_BEFORE, name);
    }
    timeline::write(start);
    // SAFETY: the object's own destructor, taken from its `.fini_array`, called once where
    // the loader would have called it (or earlier, as the exit order asked).
    unsafe { std::mem::transmute::<usize, Fini>(slot.function)() };
    let mut end = Record::new(Event::LibraryDestructorEnd.as_str());
    end.u64(field::ID, id);
    timeline::write(end);
}

/// Slot `K`'s trampoline, as the loader calls it.
extern "C" fn trampoline<const K: usize>() {
    enter(K);
}

macro_rules! trampolines {
    ($($k:literal)*) => { [$(trampoline::<$k> as Fini),*] };
}

/// One trampoline a slot.
static TRAMPOLINES: [Fini; CAPACITY] = trampolines!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
    96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119
    120 121 122 123 124 125 126 127
);
