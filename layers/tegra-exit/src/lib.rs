//! `VK_LAYER_VKEXIT_tegra_exit`: a Vulkan layer that behaves at process exit like the NVIDIA
//! Tegra driver on the Jetson Orin, so that the exit crash it causes reproduces on any Linux
//! driver.
//!
//! On the Orin, the NVIDIA libraries register their exit handlers when `vkCreateInstance` loads
//! them. A driver worker thread per `VkDevice` runs code in `libnvidia-eglcore` until
//! `vkDestroyDevice` stops it. At exit, libEGL_nvidia's handler unmaps `libnvidia-eglcore`: a
//! device still alive then means its worker faults (SIGSEGV, pc in the unmapped range).
//!
//! This layer does the same:
//! - its library constructor registers [`exit_handler::run`] with `atexit` (the loader loads the
//!   layer at `vkCreateInstance`, so the handler runs before every handler registered earlier,
//!   such as a runtime's static destructors, and after those registered later);
//! - at `vkCreateInstance` it maps a separate executable region ([`region`]), the stand-in for
//!   `libnvidia-eglcore`;
//! - at `vkCreateDevice` it starts a worker thread `vkexit-tegra-N` ([`worker`]) that loops in
//!   the region; `vkDestroyDevice` stops and joins it before destroying the device below;
//! - the exit handler unmaps the region, and in the default `deterministic` mode waits for a
//!   live worker to fault.
//!
//! Environment: `VKEXIT_TEGRA_MODE` (`deterministic`, `racy`, `off`), `VKEXIT_TEGRA_LOG` (the
//! evidence file), `VKEXIT_TEGRA_WORKER_SLEEP_US` (the workers' sleep). See README.md.

// The library is named as Vulkan layers are: VkLayer_….
#![allow(non_snake_case)]

mod entry;
pub mod exit_handler;
pub mod layer;
pub mod mode;
pub mod region;
pub mod worker;

use ash::vk;
use layer::Layer;
use mode::Mode;
use std::sync::atomic::{AtomicBool, Ordering};
use vkexit_layer_support::{on_library_load, register_exit_handler, NegotiateLayerInterface};

/// Whether the exit handler is registered and has not run yet.
static HANDLER_PENDING: AtomicBool = AtomicBool::new(false);

/// The library constructor: reads the settings and registers the exit handler, as the NVIDIA
/// libraries do when the loader loads them.
fn on_load() {
    if Layer::get().mode != Mode::Off {
        register_handler();
    }
}

on_library_load!(on_load);

fn register_handler() {
    HANDLER_PENDING.store(register_exit_handler(exit_handler_entry), Ordering::Release);
}

/// Runs as an exit handler: see [`exit_handler::run`].
extern "C" fn exit_handler_entry() {
    HANDLER_PENDING.store(false, Ordering::Release);
    exit_handler::run();
}

/// A region mapped after the handler already ran (the library outlived a `dlclose` and a new
/// instance came) needs a handler again.
pub(crate) fn register_exit_handler_again_if_it_ran() {
    if !HANDLER_PENDING.load(Ordering::Acquire) {
        register_handler();
    }
}

/// The loader's first call into the layer: interface version 2 and the layer's entry points.
///
/// # Safety
/// `p_version_struct` is the loader's negotiation struct.
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p_version_struct: *mut NegotiateLayerInterface,
) -> vk::Result {
    // SAFETY: the loader passes a valid, writable negotiation struct.
    unsafe {
        vkexit_layer_support::negotiate(
            p_version_struct,
            entry::get_instance_proc_addr,
            entry::get_device_proc_addr,
        )
    }
}
