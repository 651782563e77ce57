//! Small helpers any stage may use: errors, vkexit's own environment variables (env.rs, their
//! one reader), atomic writes, globs, TOML files with line numbers, statistics, the terminal's
//! width.

pub mod env;
pub mod errors;
pub mod glob;
pub mod lock;
pub mod output;
pub mod stats;
pub(crate) mod terminal;
pub mod toml_file;
pub mod util;
