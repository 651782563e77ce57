//! A slower device's teardown, as `vkexit run --slow-teardown` asks for it: what the harness,
//! vkexit's trace layer and the preloaded library share.
//!
//! The harness sets [`VAR`] to `1` and puts `VK_LAYER_VKEXIT_trace` into the run's chain. The
//! layer sees every `vkDestroy*`/`vkFree*` call that goes through the loader; it tells the
//! preloaded library that it is there ([`WATCHED_SYMBOL`], once, when it loads) and, after each
//! such call returns, which call it was ([`RETURNED_SYMBOL`]). The library, which knows when
//! exit is under way and which other threads are asleep, holds the calling thread after each
//! call made during exit and writes the `teardown-hold` and `teardown-watched` timeline
//! records.

use std::ffi::CStr;

/// Set to `1` for a run whose teardown at exit is slowed.
pub const VAR: &str = "VKEXIT_SLOW_TEARDOWN";

/// `extern "C" fn()`, exported by the preloaded library: the layer is in the process.
pub const WATCHED_SYMBOL: &CStr = c"vkexit_preload_teardown_watched";

/// `extern "C" fn(call: *const c_char)`, exported by the preloaded library: the destroy or free
/// call `call` (a NUL-terminated name, `vkDestroyDevice`) returned.
pub const RETURNED_SYMBOL: &CStr = c"vkexit_preload_destroy_returned";

/// Whether `value`, the variable's, asks for it.
pub fn asked(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim() == "1")
}
