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
    ] {
        next.get();
    }
}
