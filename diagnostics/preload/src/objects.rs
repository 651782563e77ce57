//! Which loaded object holds an address, cheaply enough for every registration of a process
//! that registers thousands of C++ static destructors (LLVM, in lavapipe, registers over
//! 3000): glibc's `_dl_find_object` (2.35+, lock-free, logarithmic), else `dladdr1`.
//! Symbol names come from `dladdr`, which scans the object's whole symbol table: asked only
//! where few are needed.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The public head of glibc's `struct link_map`.
#[repr(C)]
pub(crate) struct LinkMap {
    /// Load bias: an address minus this is the ELF virtual address `addr2line` takes.
    pub addr: usize,
    /// The file name; empty for the main program.
    pub name: *const c_char,
}

/// glibc's `struct dl_find_object` on x86_64 and aarch64, with room to spare.
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *const LinkMap,
    eh_frame: *mut c_void,
    reserved: [u64; 12],
}

/// `dladdr1`'s request for the link_map (dlfcn.h).
const RTLD_DL_LINKMAP: c_int = 2;

type FindObject = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> c_int;

/// `_dl_find_object`, 0 when this glibc has none.
static FIND_OBJECT: AtomicUsize = AtomicUsize::new(0);
static PROGRAM: OnceLock<Option<CString>> = OnceLock::new();

/// Looks up `_dl_find_object` and the program's path (from the library's constructor).
pub(crate) fn prepare() {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let find = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
    FIND_OBJECT.store(find as usize, Ordering::Release);
    program();
}

/// An object holding an address.
pub(crate) struct Object {
    /// Its file (the main program's full path rather than its `argv[0]`).
    pub name: Option<&'static CStr>,
    /// Its load bias.
    pub base: usize,
}

/// The object holding `address`, if any. Not for signal handlers (`dladdr1` takes a lock).
pub(crate) fn object_of(address: usize) -> Option<Object> {
    if address == 0 {
        return None;
    }
    let map = link_map_of(address)?;
    // SAFETY: the loader keeps a loaded object's link_map and name alive.
    let (base, name) = unsafe { ((*map).addr, (*map).name) };
    // SAFETY: as above; l_name is NUL-terminated.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
    let name = match name {
        Some(name) if name.is_empty() => program(),
        other => other,
    };
    Some(Object { name, base })
}

fn link_map_of(address: usize) -> Option<*const LinkMap> {
    let find = FIND_OBJECT.load(Ordering::Acquire);
    if find != 0 {
        // SAFETY: `_dl_find_object` has this signature (dlfcn.h).
        let find: FindObject = unsafe { std::mem::transmute(find) };
        // SAFETY: an all-zero result is a valid output buffer.
        let mut found: DlFindObject = unsafe { std::mem::zeroed() };
        // SAFETY: the address is only compared; `found` is live.
        let ok = unsafe { find(address as *mut c_void, &mut found) } == 0;
        return (ok && !found.link_map.is_null()).then_some(found.link_map);
    }
    // SAFETY: all-zero outputs are valid buffers.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: RTLD_DL_LINKMAP writes the link_map pointer into `map`.
    let ok = unsafe {
        libc::dladdr1(
            address as *const c_void,
            &mut info,
            std::ptr::from_mut(&mut map).cast(),
            RTLD_DL_LINKMAP,
        )
    } != 0;
    (ok && !map.is_null()).then_some(map)
}

/// The exported symbol that starts exactly at `address` (a nearby one would name the wrong
/// function). Slow in objects with large symbol tables.
pub(crate) fn symbol_at(address: usize) -> Option<&'static CStr> {
    // SAFETY: an all-zero Dl_info is a valid output buffer.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only compares the address's value against loaded objects.
    if unsafe { libc::dladdr(address as *const c_void, &mut info) } == 0
        || info.dli_sname.is_null()
        || info.dli_saddr as usize != address
    {
        return None;
    }
    // SAFETY: the loader's NUL-terminated symbol name.
    Some(unsafe { CStr::from_ptr(info.dli_sname) })
}

/// The main program's path (`/proc/self/exe`).
pub(crate) fn program() -> Option<&'static CStr> {
    PROGRAM
        .get_or_init(|| {
            let path = std::fs::read_link("/proc/self/exe").ok()?;
            CString::new(path.into_os_string().into_encoded_bytes()).ok()
        })
        .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_and_a_library_are_found_with_their_bases() {
        prepare();
        let here =
            object_of(the_program_and_a_library_are_found_with_their_bases as *const () as usize)
                .unwrap();
        let exe = std::env::current_exe().unwrap();
        assert_eq!(
            here.name.unwrap().to_bytes(),
            exe.as_os_str().as_encoded_bytes()
        );
        let libc_fn = object_of(libc::getpid as *const () as usize).unwrap();
        assert!(libc_fn.name.unwrap().to_bytes().ends_with(b"libc.so.6"));
        assert_ne!(libc_fn.base, 0);
        assert!(object_of(0).is_none());
        // glibc exports getpid under two names at one address; dladdr gives either.
        let symbol = symbol_at(libc::getpid as *const () as usize).unwrap();
        assert!(symbol.to_bytes().ends_with(b"getpid"), "{symbol:?}");
    }
}
