//! What every vkexit pass-through Vulkan layer needs, and nothing layer-specific.
//!
//! A layer built on this crate is a `cdylib` that
//! - exports `vkNegotiateLoaderLayerInterfaceVersion`, answering with [`negotiate`];
//! - keeps one `static CHAIN: Chain = Chain::new();` and calls [`Chain::create_instance`],
//!   [`Chain::create_device`], [`Chain::remove_instance`] and [`Chain::remove_device`] from its
//!   `vkCreateInstance`/`vkCreateDevice`/`vkDestroyInstance`/`vkDestroyDevice`, which reach the
//!   next layer through the `VK_LAYER_LINK_INFO` chain and hold its ash function tables;
//! - lists the functions it intercepts in a `static` slice of [`Intercept`] (made with
//!   [`intercept!`]) and answers `vkGetInstanceProcAddr`/`vkGetDeviceProcAddr` with
//!   [`Chain::instance_proc_addr`]/[`Chain::device_proc_addr`]: intercepted names get the
//!   layer's function, every other name the next layer's, so calls the layer does not track
//!   cost nothing;
//! - keeps its own per-object state in [`HandleMap`]s keyed by handle value;
//! - writes evidence with [`EvidenceLog`] and [`Record`]: JSON lines, one `write()` each, no
//!   buffering, no allocation; or, where records are many, with [`MappedLog`], which copies
//!   each into a shared mapping of the file (no system call, still crash-safe). These are
//!   `vkexit-evidence`'s, re-exported; its modules name each file's events and fields;
//! - registers exit-time code with [`on_library_load!`] and [`register_exit_handler`].
//!
//! A minimal layer:
//!
//! ```ignore
//! use ash::vk;
//! use std::ffi::c_char;
//! use vkexit_layer_support::{intercept, Chain, Intercept};
//!
//! static CHAIN: Chain = Chain::new();
//! static INTERCEPTS: &[Intercept] = &[
//!     intercept!(instance "vkGetInstanceProcAddr", get_instance_proc_addr => vk::PFN_vkGetInstanceProcAddr),
//!     intercept!(device "vkGetDeviceProcAddr", get_device_proc_addr => vk::PFN_vkGetDeviceProcAddr),
//!     intercept!(instance "vkCreateInstance", create_instance => vk::PFN_vkCreateInstance),
//!     // … vkDestroyInstance, vkCreateDevice, vkDestroyDevice, and what the layer tracks
//! ];
//!
//! #[no_mangle]
//! pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
//!     p: *mut vkexit_layer_support::NegotiateLayerInterface,
//! ) -> vk::Result {
//!     // SAFETY: the loader passes a valid, writable negotiation struct.
//!     unsafe { vkexit_layer_support::negotiate(p, get_instance_proc_addr, get_device_proc_addr) }
//! }
//!
//! unsafe extern "system" fn get_instance_proc_addr(
//!     instance: vk::Instance,
//!     name: *const c_char,
//! ) -> vk::PFN_vkVoidFunction {
//!     // SAFETY: the caller passes a NUL-terminated name.
//!     unsafe { CHAIN.instance_proc_addr(INTERCEPTS, instance, name) }
//! }
//! ```
//!
//! Handles are only ever used as keys and passed down the chain; this crate never
//! dereferences one, because at exit it may point to freed memory.

mod chain;
mod exit;
mod handles;
mod intercept;
mod negotiate;

pub use ash_layer::NegotiateLayerInterface;
pub use chain::{take_device_link, take_instance_link, Chain, NextDevice, NextInstance};
pub use exit::register_exit_handler;
pub use handles::HandleMap;
pub use intercept::{Intercept, Scope, VoidFn};
pub use negotiate::{negotiate, LOADER_LAYER_INTERFACE_VERSION};
pub use vkexit_evidence::{
    monotonic_ns, thread_id, thread_name, EvidenceLog, MappedLog, Record, RECORD_CAPACITY,
};
