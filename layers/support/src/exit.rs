//! Exit-time code: a library constructor, and exit handlers that run at the library's unload.

use std::ffi::{c_int, c_void};

extern "C" {
    /// A hidden symbol of each linked object (gcc's `crtbeginS.o` defines it, and so does lld,
    /// zig's linker): its address is this library's own, whichever linked it.
    static __dso_handle: u8;
    fn __cxa_atexit(
        f: unsafe extern "C" fn(*mut c_void),
        arg: *mut c_void,
        dso: *mut c_void,
    ) -> c_int;
    fn __cxa_finalize(dso: *mut c_void);
}

/// The handle this library's exit handlers are registered under.
fn this_library() -> *mut c_void {
    // Only the symbol's address is taken (no unsafe needed for that); it is never read.
    std::ptr::addr_of!(__dso_handle).cast_mut().cast()
}

/// Registers `handler` as this library's exit handler, as `atexit` does (`__cxa_atexit` with no
/// argument): it runs at `exit()` in last-in, first-out order with every other handler, or at
/// the library's `dlclose`, whichever comes first. The handler runs inside `exit()` while other
/// threads still run: it must say so at its top, and avoid allocation and locks that another
/// thread could hold. Returns whether glibc accepted it.
///
/// Not `atexit` itself: glibc's `atexit` stub passes the *value* of `__dso_handle`, which
/// `crtbeginS.o` sets to its own address but lld leaves as the first bytes of the ELF header,
/// the same for every library it links. The handle here is the symbol's address, unique either
/// way, and [`RUN_EXIT_HANDLERS_AT_UNLOAD`] finalizes it.
pub fn register_exit_handler(handler: extern "C" fn()) -> bool {
    // The finalizer is referenced so that the linker keeps it in every library that registers.
    std::hint::black_box(&RUN_EXIT_HANDLERS_AT_UNLOAD);
    // SAFETY: glibc calls the handler with one argument, which a C `void (*)(void)` ignores;
    // `atexit` makes the same cast. The handle is this library's, for `__cxa_finalize` below.
    unsafe {
        let handler =
            std::mem::transmute::<extern "C" fn(), unsafe extern "C" fn(*mut c_void)>(handler);
        __cxa_atexit(handler, std::ptr::null_mut(), this_library()) == 0
    }
}

/// Runs from this library's `.fini_array`: at its `dlclose`, or at the end of `exit()`.
///
/// glibc's `dlclose` does not run a library's exit handlers itself: the library's own
/// destructor must call `__cxa_finalize`. gcc links that destructor into every shared library
/// (`crtbeginS.o`); zig's linker (`cargo zigbuild`, the portable bundles) links none, so there a
/// handler outlived the library's unmapping and `exit()` called into the hole (SIGSEGV, pc in
/// no mapping). This is that destructor. Runs inside `dlclose` or `exit()`: no allocation.
extern "C" fn run_exit_handlers_at_unload() {
    // SAFETY: runs and unregisters only the handlers registered under this library's handle;
    // glibc marks each as done, so a second call (`crtbeginS.o`'s, under gcc) finds none.
    unsafe { __cxa_finalize(this_library()) }
}

#[used]
#[link_section = ".fini_array"]
static RUN_EXIT_HANDLERS_AT_UNLOAD: extern "C" fn() = run_exit_handlers_at_unload;

/// Runs `$f` (a `fn()`) when the library is loaded, from its `.init_array`: at `dlopen`, or at
/// program start for a linked library. Use at most once per crate.
///
/// Code in `$f` runs before `main` or inside `dlopen` (under the loader's lock): keep it short,
/// do not call back into the Vulkan loader, and do not panic (a panic aborts).
#[macro_export]
macro_rules! on_library_load {
    ($f:path) => {
        #[used]
        #[link_section = ".init_array"]
        static VKEXIT_ON_LIBRARY_LOAD: extern "C" fn() = {
            extern "C" fn on_library_load() {
                $f()
            }
            on_library_load
        };
    };
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    static LOADED: AtomicBool = AtomicBool::new(false);

    fn loaded() {
        LOADED.store(true, Ordering::SeqCst);
    }

    crate::on_library_load!(loaded);

    #[test]
    fn the_constructor_ran_before_the_tests() {
        assert!(LOADED.load(Ordering::SeqCst));
    }

    extern "C" fn noop() {}

    #[test]
    fn atexit_accepts_a_handler() {
        assert!(super::register_exit_handler(noop));
    }
}
