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
         (or ci/setup-tests.sh)",
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

/// Where to run vkexit on a matrix of the workspace (`ci/matrix/*.toml`), whose programs are
/// named from the workspace's root (`target/release/mock`, `scenarios/…`): the workspace itself
/// when its `target/release` is the build directory; otherwise (a `CARGO_TARGET_DIR` elsewhere)
/// a directory that shows the workspace's files and the build directory as `target/release`,
/// so that the matrix runs the programs under test, not stale ones or none.
pub fn matrix_root() -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let ws = workspace();
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same(&ws.join("target/release"), &build_dir()) {
            return ws;
        }
        let root = std::env::temp_dir().join(format!("vkexit-workspace-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("target")).expect("a directory in the temp dir");
        for entry in std::fs::read_dir(&ws)
            .expect("the workspace is readable")
            .flatten()
        {
            if entry.file_name() != "target" {
                std::os::unix::fs::symlink(entry.path(), root.join(entry.file_name()))
                    .expect("a link in the temp dir");
            }
        }
        std::os::unix::fs::symlink(build_dir(), root.join("target/release"))
            .expect("a link in the temp dir");
        root
    })
    .clone()
}
