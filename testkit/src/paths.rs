//! Where the workspace and its build outputs are.

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the test kit is a crate of the workspace")
        .to_path_buf()
}

/// `target/<profile>` of the running test: where cargo puts the workspace's programs and
/// libraries (the test executable itself is in `deps/` below it).
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe.parent().expect("target/<profile>/deps");
    deps.parent().unwrap_or(deps).to_path_buf()
}

/// A program or library the workspace builds: from the running test's profile directory, else
/// from `target/release`. Fails naming the build command when neither has it.
pub fn built(name: &str) -> PathBuf {
    let candidates = [
        build_dir().join(name),
        workspace().join("target/release").join(name),
    ];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return found.clone();
    }
    panic!(
        "{name} is not built (looked in {} and {}): run `cargo build --release --workspace` \
         (or ci/setup.sh)",
        candidates[0].display(),
        candidates[1].display()
    )
}

/// The library `cargo test -p PACKAGE` built for this very test run: in `deps/` beside the test
/// executable (cargo does not copy a test's cdylib up), else in the build directory. Tests of a
/// layer or of the preload library load this one, so that they exercise the code under test
/// rather than an older build.
pub fn under_test(file: &str, package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let candidates = [deps.join(file), build_dir().join(file)];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return found.clone();
    }
    panic!(
        "{} is missing: run `cargo test -p {package}`, which builds it",
        candidates[0].display()
    )
}
