//! The mock scenario: like deqp-runner's mock-deqp, it fakes each outcome the harness classifies
//! (signal, exit code, VUID, hang, output flood, a grandchild holding the pipes, a crash at exit, a crash in a child or grandchild)
//! so the runner's own tests need no misbehaving runtime.

pub mod actions;
pub mod options;
pub mod signals;
pub mod vulkan;

pub use options::{CrashingChild, MockOptions, VulkanPlan};
pub use signals::Signal;
