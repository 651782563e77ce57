//! The wheel `ci/wheel.sh` builds: installed with pip into a virtual environment, it puts the one
//! vkexit executable on that environment's `PATH`, tagged for glibc 2.31, and from another
//! directory, with nothing of the build in its environment, `vkexit doctor` is ready, and the
//! seed's fix replays with the helpers it carries (linked by zig's lld, as the release's are).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use vkexit_testkit::installed::Installed;
use vkexit_testkit::paths::workspace;
use vkexit_testkit::skip;

/// The wheel for this machine's architecture in `target/wheels`, if ci/wheel.sh made one.
fn wheel() -> Option<PathBuf> {
    let dir = workspace().join("target/wheels");
    let arch = std::env::consts::ARCH;
    fs::read_dir(dir).ok()?.find_map(|e| {
        let path = e.ok()?.path();
        let name = path.file_name()?.to_str()?.to_string();
        (name.starts_with("vkexit-") && name.ends_with(&format!("_{arch}.whl"))).then_some(path)
    })
}

#[test]
fn the_wheel_installed_with_pip_puts_a_ready_vkexit_on_path() {
    let Some(wheel) = wheel() else {
        skip!("no vkexit wheel in target/wheels: build it with ci/wheel.sh");
    };
    let name = wheel.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.contains("manylinux_2_31"),
        "{name} is not tagged for glibc 2.31"
    );
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let out = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("python3 (apt-get install python3-venv)");
    assert!(out.status.success(), "{out:?}");
    let out = Command::new(venv.join("bin/pip"))
        .args(["install", "-q", "--no-index"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(out.status.success(), "pip install {name}: {out:?}");

    let installed = Installed::new(Path::new("vkexit"), Some(&venv.join("bin")), tmp.path());
    installed.assert_ready();
    installed.assert_seeds_fix_replays();
}
