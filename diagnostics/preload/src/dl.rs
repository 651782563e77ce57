//! `dlopen` and `dlclose`: which object was loaded or unloaded, when, by whom.
//!
//! glibc's `dlopen` looks at its return address to find the calling object: a bare name is
//! searched in the caller's `DT_RUNPATH` (and the `DT_RPATH`s of the objects that loaded it),
//! and `$ORIGIN` expands to the caller's directory. Called from here, the caller would be this
//! library, and such a load could find another file or none. So the entry is a naked function
//! that sees its return address and decides:
//! - when the result cannot depend on the caller (no name, a path with a slash and no `$`, or a
//!   bare name while no such search path is in play), it calls `dlopen` itself and records the
//!   outcome (`handle`, `ok`);
//! - otherwise it records the call (`observed: false`) and jumps to glibc's `dlopen` with the
//!   caller's own return address, so glibc sees the real caller; the outcome is not observed.

use std::ffi::{c_char, c_int, c_void, CStr};

use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::{monotonic_ns, Record};

use crate::objects::LinkMap;
use crate::{objects, real, timeline};

type Dlopen = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
type Dlclose = unsafe extern "C" fn(*mut c_void) -> c_int;

/// `dlopen(file, mode)`.
///
/// # Safety
/// As `dlopen`.
#[unsafe(naked)]
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dlopen(_file: *const c_char, _mode: c_int) -> *mut c_void {
    // `choose(file, mode, caller)` returns where to go with the original arguments: glibc's
    // dlopen (the return address still the caller's) or `dlopen_observed(file, mode, caller)`.
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "mov rdx, [rsp + 24]",
        "call {choose}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "mov rdx, [rsp]",
        "jmp rax",
        choose = sym choose,
    );
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-32]!",
        "mov x29, sp",
        "stp x0, x1, [sp, #16]",
        "mov x2, x30",
        "bl {choose}",
        "mov x16, x0",
        "ldp x0, x1, [sp, #16]",
        "ldp x29, x30, [sp], #32",
        "mov x2, x30",
        "br x16",
        choose = sym choose,
    );
}

unsafe extern "C" fn choose(file: *const c_char, mode: c_int, caller: usize) -> usize {
    crate::ensure_loaded();
    let glibc = real::DLOPEN.get();
    if timeline::get().is_none() {
        return glibc;
    }
    // SAFETY: dlopen's file is null or a NUL-terminated string.
    let name = (!file.is_null()).then(|| unsafe { CStr::from_ptr(file) });
    if !name.is_some_and(|n| depends_on_caller(n.to_bytes(), caller)) {
        return dlopen_observed as *const () as usize;
    }
    let mut record = Record::new(Event::Dlopen.as_str());
    timeline::c_str_field(&mut record, field::PATH, name);
    record
        .hex(field::MODE, mode as u32 as u64)
        .raw(field::HANDLE, "null")
        .raw(field::OK, "null")
        .bool(field::OBSERVED, false);
    timeline::c_str_field(
        &mut record,
        field::CALLER,
        objects::object_of(attributed(caller)).and_then(|o| o.name),
    );
    timeline::write(record);
    glibc
}

/// The runtimes of the sanitizers, whose interceptor of `dlopen` calls it for the program.
const SANITIZER_RUNTIMES: [&[u8]; 6] = [
    b"libasan.so",
    b"libtsan.so",
    b"liblsan.so",
    b"libubsan.so",
    b"libhwasan.so",
    b"libclang_rt.",
];

/// The caller a `dlopen` is put down to: 0 (unknown) when the call came through another
/// interposer of `dlopen` (a sanitizer's interceptor, in its runtime or linked into the
/// program), which hides who called it; else `caller`.
fn attributed(caller: usize) -> usize {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr reads the link map for an address and fills `info`, which outlives it.
    let found = unsafe { libc::dladdr(caller as *const c_void, &mut info) } != 0;
    // SAFETY: names dladdr gave are NUL-terminated strings of a loaded object.
    let text = |p: *const c_char| (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes());
    let in_wrapper = text(info.dli_sname).is_some_and(|s| s.ends_with(b"dlopen"));
    let file = text(info.dli_fname).unwrap_or_default();
    let file = file.rsplit(|&b| b == b'/').next().unwrap_or_default();
    let sanitizer = SANITIZER_RUNTIMES.iter().any(|r| file.starts_with(r));
    let wrapper = found && (in_wrapper || sanitizer);
    match wrapper {
        true => 0,
        false => caller,
    }
}

unsafe extern "C" fn dlopen_observed(
    file: *const c_char,
    mode: c_int,
    caller: usize,
) -> *mut c_void {
    // SAFETY: glibc's dlopen has this signature.
    let dlopen: Dlopen = unsafe { std::mem::transmute(real::DLOPEN.get()) };
    let call_ns = monotonic_ns();
    let caller = objects::object_of(attributed(caller));
    let by_stack = crate::classes::dlopen_begins(caller.as_ref());
    let loaded = by_stack.then(crate::classes::loaded_count);
    // SAFETY: the caller's own arguments.
    let handle = unsafe { dlopen(file, mode) };
    // SAFETY: a handle from glibc's dlopen is the object's link_map.
    let opened = (!handle.is_null()).then(|| unsafe { (*handle.cast::<LinkMap>()).addr });
    if let Some(loaded) = loaded {
        crate::classes::loaded_since(loaded);
    }
    crate::classes::dlopen_ends(by_stack, opened);
    let mut record = Record::new(Event::Dlopen.as_str());
    // SAFETY: as in `choose`.
    let name = (!file.is_null()).then(|| unsafe { CStr::from_ptr(file) });
    timeline::c_str_field(&mut record, field::PATH, name);
    record.hex(field::MODE, mode as u32 as u64);
    if handle.is_null() {
        record.raw(field::HANDLE, "null");
    } else {
        record.hex(field::HANDLE, handle as u64);
    }
    record
        .bool(field::OK, !handle.is_null())
        .bool(field::OBSERVED, true)
        .u64(field::CALL_NS, call_ns);
    let caller = caller.and_then(|o| o.name);
    timeline::c_str_field(&mut record, field::CALLER, caller);
    timeline::write(record);
    if !handle.is_null() {
        let mut path = [0u8; 512];
        // SAFETY: a live handle that dlopen just returned.
        let opened = unsafe { object_path(handle, &mut path) };
        crate::vulkan::scan(Some(opened), caller);
    }
    handle
}

/// Whether glibc would resolve `file` differently for `caller` than for this library.
fn depends_on_caller(file: &[u8], caller: usize) -> bool {
    if file.contains(&b'$') {
        return true;
    }
    if file.contains(&b'/') {
        return false;
    }
    search_paths_in_play(caller)
}

/// For a bare name: the caller's `DT_RUNPATH` is searched (the main program's `DT_RPATH` is
/// searched for every caller), and so are the `DT_RPATH`s of the objects that loaded the
/// caller. Any `DT_RPATH` outside the main program counts, since that chain is not visible.
fn search_paths_in_play(caller: usize) -> bool {
    struct Scan {
        caller: usize,
        first: bool,
        in_play: bool,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes our Scan and a valid entry for one loaded object.
        let (scan, info) = unsafe { (&mut *data.cast::<Scan>(), &*info) };
        let main_program = std::mem::replace(&mut scan.first, false);
        // SAFETY: the object's program headers, as the loader describes them.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let base = info.dlpi_addr as usize;
        let holds_caller = headers.iter().any(|h| {
            h.p_type == libc::PT_LOAD
                && (base + h.p_vaddr as usize..base + (h.p_vaddr + h.p_memsz) as usize)
                    .contains(&scan.caller)
        });
        let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) else {
            return 0;
        };
        let mut entry = (base + dynamic.p_vaddr as usize) as *const Dyn;
        loop {
            // SAFETY: the dynamic section is mapped and ends with DT_NULL.
            let tag = unsafe { (*entry).tag };
            match tag {
                DT_NULL => break,
                DT_RUNPATH if holds_caller => scan.in_play = true,
                DT_RPATH if !main_program => scan.in_play = true,
                _ => {}
            }
            // SAFETY: not past DT_NULL.
            entry = unsafe { entry.add(1) };
        }
        0
    }
    let mut scan = Scan {
        caller,
        first: true,
        in_play: false,
    };
    // SAFETY: `visit` only reads the entries; `scan` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), std::ptr::from_mut(&mut scan).cast()) };
    scan.in_play
}

/// An `Elf64_Dyn` entry (both supported targets are 64-bit).
#[repr(C)]
struct Dyn {
    tag: i64,
    _value: u64,
}

const DT_NULL: i64 = 0;
const DT_RPATH: i64 = 15;
const DT_RUNPATH: i64 = 29;

/// `dlclose(handle)`: records the object's path (read before it goes), the handle, the result,
/// and when the call began (`call_ns`; the record's `t_ns` is when it returned: handlers that
/// ran inside it fall between the two).
///
/// # Safety
/// As `dlclose`: `handle` came from `dlopen`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    crate::ensure_loaded();
    // SAFETY: glibc's dlclose has this signature.
    let dlclose: Dlclose = unsafe { std::mem::transmute(real::DLCLOSE.get()) };
    if timeline::get().is_none() || handle.is_null() {
        // SAFETY: the caller's own argument.
        return unsafe { dlclose(handle) };
    }
    let mut path = [0u8; 512];
    // SAFETY: a handle from dlopen is the object's link_map in glibc.
    let path = unsafe { object_path(handle, &mut path) };
    let call_ns = monotonic_ns();
    // SAFETY: the caller's own argument.
    let result = unsafe { dlclose(handle) };
    let mut record = Record::new(Event::Dlclose.as_str());
    record
        .bytes_str(field::PATH, path)
        .hex(field::HANDLE, handle as u64)
        .i64(field::RESULT, result.into())
        .u64(field::CALL_NS, call_ns);
    timeline::write(record);
    result
}

/// The object's file name, copied into `buffer` (cut to fit).
///
/// # Safety
/// `handle` is a live handle from `dlopen`.
unsafe fn object_path(handle: *mut c_void, buffer: &mut [u8; 512]) -> &[u8] {
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: RTLD_DI_LINKMAP writes the handle's link_map pointer into `map`.
    let found = unsafe {
        libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            std::ptr::from_mut(&mut map).cast(),
        )
    };
    if found != 0 || map.is_null() {
        return &[];
    }
    // SAFETY: the loader keeps l_name NUL-terminated while the object is loaded.
    let name = unsafe { (*map).name };
    if name.is_null() {
        return &[];
    }
    // SAFETY: as above.
    let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
    let len = bytes.len().min(buffer.len());
    buffer[..len].copy_from_slice(&bytes[..len]);
    &buffer[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_a_slash_never_depend_on_the_caller_and_dollar_names_always_do() {
        let caller = paths_with_a_slash_never_depend_on_the_caller_and_dollar_names_always_do
            as *const () as usize;
        assert!(!depends_on_caller(b"/usr/lib/libm.so.6", caller));
        assert!(!depends_on_caller(b"./libfoo.so", caller));
        assert!(depends_on_caller(b"$ORIGIN/libfoo.so", caller));
        assert!(depends_on_caller(b"${LIB}/libfoo.so", caller));
    }

    #[test]
    fn a_bare_name_depends_on_the_caller_only_with_search_paths_in_play() {
        let caller =
            a_bare_name_depends_on_the_caller_only_with_search_paths_in_play as *const () as usize;
        // Cargo test binaries carry no DT_RUNPATH, and nothing here has a DT_RPATH.
        assert!(!depends_on_caller(b"libm.so.6", caller));
    }
}
