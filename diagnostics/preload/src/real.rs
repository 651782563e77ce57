//! glibc's own definitions of the functions this library interposes, found with
//! `dlsym(RTLD_NEXT, …)`: on first use, and all of them at load, so that no later call (an exit
//! handler, `exit` from a signal handler) has to look one up.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The next definition of one symbol after this library's.
pub(crate) struct Next {
    name: &'static CStr,
    address: AtomicUsize,
}

impl Next {
    const fn new(name: &'static CStr) -> Self {
        Next {
            name,
            address: AtomicUsize::new(0),
        }
    }

    /// The address. glibc defines every one of these; if it is missing anyway, nothing can
    /// stand in for it, so the process aborts with a message.
    pub(crate) fn get(&self) -> usize {
        let address = self.address.load(Ordering::Acquire);
        if address != 0 {
            return address;
        }
        // SAFETY: a NUL-terminated name; RTLD_NEXT searches the objects after this one.
        let address = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        if address == 0 {
            missing(self.name);
        }
        self.address.store(address, Ordering::Release);
        address
    }
}

fn missing(name: &CStr) -> ! {
    let message = b"vkexit-preload: the C library does not define ";
    // SAFETY: writes from live buffers to stderr, then aborts.
    unsafe {
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::write(2, name.as_ptr().cast(), name.to_bytes().len());
        libc::write(2, b"\n".as_ptr().cast(), 1);
        libc::abort()
    }
}

pub(crate) static LIBC_START_MAIN: Next = Next::new(c"__libc_start_main");
pub(crate) static EXIT: Next = Next::new(c"exit");
pub(crate) static CXA_ATEXIT: Next = Next::new(c"__cxa_atexit");
pub(crate) static DLOPEN: Next = Next::new(c"dlopen");
pub(crate) static DLCLOSE: Next = Next::new(c"dlclose");
pub(crate) static SIGNAL: Next = Next::new(c"signal");
pub(crate) static FOPEN: Next = Next::new(c"fopen");
pub(crate) static FOPEN64: Next = Next::new(c"fopen64");
pub(crate) static OPEN: Next = Next::new(c"open");
pub(crate) static OPEN64: Next = Next::new(c"open64");
pub(crate) static OPENAT: Next = Next::new(c"openat");
pub(crate) static OPENAT64: Next = Next::new(c"openat64");
pub(crate) static OPEN_2: Next = Next::new(c"__open_2");
pub(crate) static OPEN64_2: Next = Next::new(c"__open64_2");
pub(crate) static OPENAT_2: Next = Next::new(c"__openat_2");
pub(crate) static OPENAT64_2: Next = Next::new(c"__openat64_2");
pub(crate) static CREAT: Next = Next::new(c"creat");
pub(crate) static CREAT64: Next = Next::new(c"creat64");
pub(crate) static MKDIR: Next = Next::new(c"mkdir");
pub(crate) static MKDIRAT: Next = Next::new(c"mkdirat");
pub(crate) static UNLINK: Next = Next::new(c"unlink");
pub(crate) static UNLINKAT: Next = Next::new(c"unlinkat");
pub(crate) static RMDIR: Next = Next::new(c"rmdir");
pub(crate) static REMOVE: Next = Next::new(c"remove");
pub(crate) static RENAME: Next = Next::new(c"rename");
pub(crate) static RENAMEAT: Next = Next::new(c"renameat");
pub(crate) static RENAMEAT2: Next = Next::new(c"renameat2");

/// Looks every one up now (from the library's constructor).
pub(crate) fn resolve_all() {
    for next in [
        &LIBC_START_MAIN,
        &EXIT,
        &CXA_ATEXIT,
        &DLOPEN,
        &DLCLOSE,
        &SIGNAL,
        &FOPEN,
        &FOPEN64,
        &OPEN,
        &OPEN64,
        &OPENAT,
        &OPENAT64,
        &OPEN_2,
        &OPEN64_2,
        &OPENAT_2,
        &OPENAT64_2,
        &CREAT,
        &CREAT64,
        &MKDIR,
        &MKDIRAT,
        &UNLINK,
        &UNLINKAT,
        &RMDIR,
        &REMOVE,
        &RENAME,
        &RENAMEAT,
        &RENAMEAT2,
    ] {
        next.get();
    }
}
