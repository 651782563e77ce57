//! The exit codes of `vkexit`, a contract with the CI scripts that run it.

/// Every cell met its expectation (`pass`, `expected-fail`, `skipped`).
pub const GREEN: u8 = 0;
/// A cell did not: the gate is red.
pub const RED: u8 = 1;
/// A usage or setup error (a bad flag or file, a missing validation layer): nothing was judged.
pub const USAGE: u8 = 2;
/// vkexit was interrupted (Ctrl-C, SIGTERM) before every run finished: 128 + SIGINT, as a
/// shell reports it.
pub const INTERRUPTED: u8 = 130;
