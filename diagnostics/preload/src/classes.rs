//! Who registered an exit handler, and when: what the exit orders ([`crate::exit_order`]) may
//! move. The program's own handlers, the runtime libraries', the Vulkan stack's (the loader,
//! the layers and drivers it loads, and everything those load), and the system's.
//!
//! The Vulkan stack is known by what loaded it: an object `dlopen`ed by the Vulkan loader or
//! by another object of the stack, or one that registered a handler while such a `dlopen` was
//! under way (a driver's dependencies, LLVM under lavapipe), is of the stack from then on.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::exit_order::{Class, Phase};
use crate::objects::{self, Object};

static MAIN_STARTED: AtomicBool = AtomicBool::new(false);
/// `dlopen` calls under way (observed ones), and those made by the Vulkan stack.
static DLOPEN_DEPTH: AtomicUsize = AtomicUsize::new(0);
static VULKAN_DLOPEN_DEPTH: AtomicUsize = AtomicUsize::new(0);

const STACK_CAPACITY: usize = 256;
/// Load addresses of the Vulkan stack's objects.
static STACK: [AtomicUsize; STACK_CAPACITY] = [const { AtomicUsize::new(0) }; STACK_CAPACITY];
static STACK_COUNT: AtomicUsize = AtomicUsize::new(0);

/// `main` is about to be called.
pub(crate) fn main_starts() {
    MAIN_STARTED.store(true, Ordering::Release);
}

/// When a handler registered now was registered.
pub(crate) fn phase_now() -> Phase {
    if !MAIN_STARTED.load(Ordering::Acquire) {
        Phase::BeforeMain
    } else if DLOPEN_DEPTH.load(Ordering::Acquire) > 0 {
        Phase::InDlopen
    } else {
        Phase::Running
    }
}

/// A `dlopen` by `caller` begins; whether it is the Vulkan stack's (pass it to [`dlopen_ends`]).
pub(crate) fn dlopen_begins(caller: Option<&Object>) -> bool {
    DLOPEN_DEPTH.fetch_add(1, Ordering::AcqRel);
    let by_stack = VULKAN_DLOPEN_DEPTH.load(Ordering::Acquire) > 0
        || caller.is_some_and(|c| is_stack_object(c.base) || named_as_stack(c.name));
    if by_stack {
        VULKAN_DLOPEN_DEPTH.fetch_add(1, Ordering::AcqRel);
    }
    by_stack
}

/// The `dlopen` begun with [`dlopen_begins`] returned `opened` (a load address).
pub(crate) fn dlopen_ends(by_stack: bool, opened: Option<usize>) {
    if by_stack {
        if let Some(base) = opened {
            mark_stack(base);
        }
        VULKAN_DLOPEN_DEPTH.fetch_sub(1, Ordering::AcqRel);
    }
    DLOPEN_DEPTH.fetch_sub(1, Ordering::AcqRel);
}

/// How many objects are loaded: before a `dlopen` of the Vulkan stack's, for
/// [`loaded_since`].
pub(crate) fn loaded_count() -> usize {
    let mut count = 0usize;
    // SAFETY: `count_one` only counts, through the pointer handed to it.
    unsafe { libc::dl_iterate_phdr(Some(count_one), std::ptr::from_mut(&mut count).cast()) };
    count
}

unsafe extern "C" fn count_one(_: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: the counter `loaded_count` handed over.
    unsafe { *data.cast::<usize>() += 1 };
    0
}

/// A `dlopen` of the Vulkan stack's returned: every object it loaded (the loader lists new
/// objects after those it had, `before` of them) is of the stack, whether or not it registers
/// an exit handler (a driver's dependencies have library destructors too).
pub(crate) fn loaded_since(before: usize) {
    let mut seen = (0usize, before);
    // SAFETY: `mark_new` reads the loader's entry during the call and counts through the pointer.
    unsafe { libc::dl_iterate_phdr(Some(mark_new), std::ptr::from_mut(&mut seen).cast()) };
}

unsafe extern "C" fn mark_new(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: the loader's entry and the counters `loaded_since` handed over.
    let (info, seen) = unsafe { (&*info, &mut *data.cast::<(usize, usize)>()) };
    if seen.0 >= seen.1 {
        mark_stack(info.dlpi_addr as usize);
    }
    seen.0 += 1;
    0
}

/// The class of a handler's registrant (registering now).
pub(crate) fn class_of(registrant: Option<&Object>) -> Class {
    let Some(object) = registrant else {
        return Class::System;
    };
    if object.name.is_some() && object.name == objects::program() {
        return Class::App;
    }
    let file = object
        .name
        .map(|n| {
            let bytes = n.to_bytes();
            bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes)
        })
        .unwrap_or_default();
    if SYSTEM.iter().any(|p| file.starts_with(p)) || file.is_empty() {
        return Class::System;
    }
    if VULKAN_DLOPEN_DEPTH.load(Ordering::Acquire) > 0 {
        mark_stack(object.base);
    }
    if is_stack_object(object.base) || named_as_stack(object.name) {
        return Class::Vulkan;
    }
    Class::Runtime
}

/// The dynamic loader (`ld-linux-x86-64.so.2`, `ld-linux-aarch64.so.1`), by its file name.
pub(crate) fn is_dynamic_loader(object: &Object) -> bool {
    object.name.is_some_and(|n| {
        let bytes = n.to_bytes();
        let file = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
        file.starts_with(b"ld-linux")
    })
}

/// Libraries whose handlers belong to the C and C++ runtimes, the dynamic loader or vkexit.
const SYSTEM: [&[u8]; 10] = [
    b"libc.so",
    b"libstdc++.so",
    b"libgcc_s.so",
    b"ld-linux",
    b"libm.so",
    b"libpthread.so",
    b"libdl.so",
    b"librt.so",
    b"libc++",
    b"libvkexit_preload.so",
];

fn named_as_stack(name: Option<&CStr>) -> bool {
    let Some(name) = name else {
        return false;
    };
    let bytes = name.to_bytes();
    let file = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
    file.starts_with(b"libvulkan.so") || file.starts_with(b"libVkLayer")
}

fn is_stack_object(base: usize) -> bool {
    let count = STACK_COUNT.load(Ordering::Acquire).min(STACK_CAPACITY);
    STACK[..count]
        .iter()
        .any(|s| s.load(Ordering::Relaxed) == base)
}

fn mark_stack(base: usize) {
    if base == 0 || is_stack_object(base) {
        return;
    }
    let slot = STACK_COUNT.fetch_add(1, Ordering::AcqRel);
    if slot < STACK_CAPACITY {
        STACK[slot].store(base, Ordering::Release);
    }
}
