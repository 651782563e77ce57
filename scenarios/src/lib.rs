//! The scenario programs of vkexit (one binary per exit ordering, in `src/bin/`) and the mock
//! that provokes each harness verdict on demand.

pub mod mock;

/// Size of every buffer the scenarios allocate: big enough to be a real allocation on any
/// driver, small enough to keep runs fast.
pub const BUFFER_SIZE: usize = 1 << 20;
