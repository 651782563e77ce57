//! `VK_LAYER_VKEXIT_trace`: a pass-through Vulkan layer that records, as JSON lines in the file
//! named by `VKEXIT_TRACE_FILE`, every create and destroy of the objects a compute runtime uses,
//! each call on a handle already destroyed, and from its own exit handler the objects still
//! alive; on request (`VKEXIT_SLOW_TEARDOWN`) it reports each destroy call to vkexit's preloaded
//! library, which holds it during exit as a slower device would (`teardown.rs`). See README.md for the record schema and why the exit handler sees what the driver's
//! would.

// The library is named as Vulkan layers are (`libVkLayer_*.so`).
#![allow(non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn)]

mod dispatch;
mod identity;
mod intercepts;
mod lifecycle;
pub mod lifetimes;
mod messengers;
pub mod object;
mod objects;
pub mod record;
mod teardown;
mod tracer;

use ash::vk;
use vkexit_layer_support::{on_library_load, register_exit_handler, NegotiateLayerInterface};

/// The loader's first call into the layer.
///
/// # Safety
/// `p_version_struct` is null or the loader's writable negotiation struct.
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p_version_struct: *mut NegotiateLayerInterface,
) -> vk::Result {
    // SAFETY: passed through from the loader, as the function requires.
    unsafe {
        vkexit_layer_support::negotiate(
            p_version_struct,
            lifecycle::get_instance_proc_addr,
            lifecycle::get_device_proc_addr,
        )
    }
}

/// At `dlopen` by the loader (inside `vkCreateInstance`, just after the driver was loaded):
/// the moment the NVIDIA driver registers its own exit handlers, so the layer's runs just
/// before theirs and sees what they would. The library is linked `-z nodelete` (build.rs):
/// `vkDestroyInstance` unloads layers, and glibc would then run the handler at `dlclose`
/// instead of at exit, and unmap the code a later call on a destroyed device still enters.
fn on_load() {
    identity::watch_forks();
    if register_exit_handler(tracer::report_alive_at_exit) {
        tracer::exit_handler_registered();
    }
    tracer::tracer();
    teardown::announce();
}

on_library_load!(on_load);

/// Run by `_dl_fini` at clean exit, after every exit handler (the library is never unloaded
/// before): the trace file ends with its last record, not with the mapping's NUL padding.
#[used]
#[link_section = ".fini_array"]
static CLOSE_TRACE_AT_EXIT: extern "C" fn() = {
    extern "C" fn close_trace() {
        tracer::close_tail();
    }
    close_trace
};
