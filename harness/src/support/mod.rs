//! Small helpers any stage may use: errors, atomic writes, globs, TOML files with line
//! numbers, statistics, the terminal's width.

pub mod errors;
pub mod glob;
pub mod lock;
pub mod output;
pub mod stats;
pub(crate) mod terminal;
pub mod toml_file;
pub mod util;
