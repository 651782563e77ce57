//! Exit-time code: a library constructor and `atexit`.

/// Registers `handler` with `atexit`.
///
/// Called from a shared library, glibc binds the handler to that library (`__cxa_atexit` with
/// its `__dso_handle`): it runs at `exit()` in last-in, first-out order with every other
/// handler, or at the library's `dlclose`, whichever comes first. The handler runs inside
/// `exit()` while other threads still run: it must say so at its top, and avoid allocation and
/// locks that another thread could hold. Returns whether glibc accepted it.
pub fn register_exit_handler(handler: extern "C" fn()) -> bool {
    // SAFETY: `handler` is a plain `extern "C" fn()`, which is what atexit takes.
    unsafe { libc::atexit(handler) == 0 }
}

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
