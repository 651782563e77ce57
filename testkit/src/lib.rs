//! What the workspace's tests share, so that each test says only what it checks.
//!
//! - [`cc`]: programs and libraries built for a test with the C compiler.
//! - [`paths`]: the workspace, the build directory, the programs and libraries it holds, and
//!   the library `cargo test` built for the test that is running.
//! - [`vulkan`]: lavapipe and the Khronos validation layer as installed, the settings file
//!   layer 1.3.239 reads, layer manifests for built layers, message ids of a validation log.
//! - [`launch`]: one run of a program in its own directory, on lavapipe, under the layers a
//!   test enables, with its output and files read back.
//! - [`vkexit`]: `vkexit` itself, run in a sandbox directory, and its results file.
//! - [`results`]: the results file and the exploration file read as vkexit's own types, a kept
//!   run's `result.json` read typed, and vkexit's argument lists built by [`results::Args`].
//! - [`real_runtimes`]: the real-runtimes matrix and single cells of real runtimes.
//! - [`preload`]: runs with the preloaded diagnostics library and its crash and timeline files.
//! - [`installed`]: a vkexit installed as users install it, run from an unrelated directory.
//! - [`debian11`]: Debian 11's validation layer 1.2.162 and Mesa 20.3.5's lavapipe, unpacked.
//! - [`skip!`] and [`or_skip!`]: a test that cannot run here says so; where skips must fail
//!   (`VKEXIT_TEST_SKIP=fail`), only the tests of `testkit/skip-allowed.txt` still skip.
//!
//! Whatever a test needs and the machine or the build lacks fails the test naming what to
//! install or build, unless the test skips visibly through [`skip!`].

pub mod cc;
pub mod debian11;
pub mod installed;
pub mod launch;
pub mod paths;
pub mod preload;
pub mod real_runtimes;
pub mod results;
pub mod skip;
pub mod vkexit;
pub mod vulkan;

pub use launch::{Launch, Ran};
pub use paths::{build_dir, built, under_test, workspace};
