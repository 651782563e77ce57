//! Facts about this machine: the Vulkan drivers and their devices, the loader, the
//! validation layer (its settings, its log and its check names), the layer chain a run
//! gets, and the provenance a result records.

pub mod drivers;
pub mod layers;
pub mod loader;
pub mod messages;
pub mod probe;
pub mod provenance;
pub mod validation;
pub mod vuid;
