//! Small helpers any stage may use: errors, atomic writes, globs, TOML files with line
//! numbers, statistics.

pub mod elf;
pub mod errors;
pub mod glob;
pub mod lock;
pub mod output;
pub mod stats;
pub mod toml_file;
pub mod util;
