//! A slower device's teardown (`VKEXIT_SLOW_TEARDOWN`, `vkexit run --slow-teardown`): the layer
//! reports each destroy and free call, once it returned, to the preloaded library, which holds
//! the calling thread there during exit (`vkexit_evidence::slow_teardown`). The layer only
//! tells; the library knows when exit is under way and which threads are asleep.

use std::ffi::{c_char, CStr};
use std::sync::OnceLock;

use vkexit_evidence::slow_teardown::{asked, RETURNED_SYMBOL, VAR, WATCHED_SYMBOL};

type Watched = unsafe extern "C" fn();
type Returned = unsafe extern "C" fn(*const c_char);

/// The preloaded library's two entries, when this run asked for a slow teardown and the
/// library is in the process.
fn entries() -> Option<&'static (Watched, Returned)> {
    static ENTRIES: OnceLock<Option<(Watched, Returned)>> = OnceLock::new();
    ENTRIES
        .get_or_init(|| {
            if !asked(std::env::var(VAR).ok().as_deref()) {
                return None;
            }
            // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names only looks symbols up.
            let (watched, returned) = unsafe {
                (
                    libc::dlsym(libc::RTLD_DEFAULT, WATCHED_SYMBOL.as_ptr()),
                    libc::dlsym(libc::RTLD_DEFAULT, RETURNED_SYMBOL.as_ptr()),
                )
            };
            if watched.is_null() || returned.is_null() {
                return None;
            }
            // SAFETY: the preloaded library defines both with these signatures
            // (vkexit_evidence::slow_teardown).
            Some(unsafe {
                (
                    std::mem::transmute::<*mut libc::c_void, Watched>(watched),
                    std::mem::transmute::<*mut libc::c_void, Returned>(returned),
                )
            })
        })
        .as_ref()
}

/// Whether the destroy and free calls are reported: they must then be intercepted.
pub fn reporting() -> bool {
    entries().is_some()
}

/// At the layer's load: tells the library that the destroy calls will be seen.
pub fn announce() {
    if let Some((watched, _)) = entries() {
        // SAFETY: the library's entry, which takes nothing.
        unsafe { watched() }
    }
}

/// After the destroy or free call `call` (`vkDestroyDevice`) returned: the library may hold
/// this thread there.
pub fn returned(call: &str) {
    let Some((_, returned)) = entries() else {
        return;
    };
    let mut name = [0u8; 64];
    let len = call.len().min(name.len() - 1);
    name[..len].copy_from_slice(&call.as_bytes()[..len]);
    let Ok(name) = CStr::from_bytes_until_nul(&name) else {
        return;
    };
    // SAFETY: the library's entry, given a NUL-terminated name.
    unsafe { returned(name.as_ptr()) }
}
