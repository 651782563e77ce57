//! The Rust source files under a folder, for the tests that read vkexit's own code
//! (layering.rs, typed_errors.rs).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth, appended to `out`.
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
