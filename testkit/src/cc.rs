//! Programs and libraries built for a test with the C compiler `cc`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `cc ARGS` in `dir` after writing `sources` (file name, text) there; panics with the
/// compiler's words when it fails.
pub fn cc(dir: &Path, sources: &[(&str, &str)], args: &[&str]) {
    for (name, text) in sources {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let out = Command::new("cc")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("these tests build programs with the C compiler `cc` (apt-get install gcc)");
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dir/NAME`, built from the C text `text` (as `NAME.c`) with `cc NAME.c -o NAME ARGS`.
pub fn program(dir: &Path, name: &str, text: &str, args: &[&str]) -> PathBuf {
    let source = format!("{name}.c");
    let mut all = vec![source.as_str(), "-o", name];
    all.extend_from_slice(args);
    cc(dir, &[(&source, text)], &all);
    dir.join(name)
}
