//! Facts about this machine: the helpers vkexit carries, unpacked and checked, the Vulkan
//! drivers and their devices, the loader, the
//! validation layer (its settings, its log and its check names), the layer chain a run
//! gets, the provenance a result records, and the sanitizer runtime a run preloads first.

pub mod drivers;
pub mod helpers;
pub mod layers;
pub mod loader;
pub mod messages;
pub mod probe;
pub mod provenance;
pub mod sanitizer;
pub mod source_lines;
pub mod validation;
pub mod vk;
pub mod vuid;
