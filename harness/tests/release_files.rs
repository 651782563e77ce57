//! A release file as a CI job on a GPU runner gets it: `ci/release.sh` left the set in
//! `target/release-files`; one single file for this machine's architecture, downloaded alone
//! into an empty directory with `SHA256SUMS`, matches its sum, and with nothing of the build
//! in its environment, `vkexit doctor` is ready with every helper and a built-in case passes.
//! The set's other files are each in `SHA256SUMS`, and it has every file the release names.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use vkexit_testkit::installed::Installed;
use vkexit_testkit::paths::workspace;
use vkexit_testkit::skip;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn release_files() -> Option<PathBuf> {
    let dir = workspace().join("target/release-files");
    dir.join("SHA256SUMS").is_file().then_some(dir)
}

/// The names `SHA256SUMS` gives a sum, in its order.
fn summed(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("SHA256SUMS"))
        .unwrap()
        .lines()
        .map(|l| {
            let (sum, name) = l
                .split_once("  ")
                .unwrap_or_else(|| panic!("not a sum line: {l}"));
            assert_eq!(sum.len(), 64, "{l}");
            name.to_string()
        })
        .collect()
}

#[test]
fn every_release_file_has_its_sum() {
    let Some(dir) = release_files() else {
        skip!("no target/release-files/SHA256SUMS: make the set with ci/release.sh");
    };
    let mut files: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "SHA256SUMS")
        .collect();
    files.sort();
    let mut sums = summed(&dir);
    sums.sort();
    assert_eq!(files, sums, "every file in SHA256SUMS, and nothing else");
    let arch = std::env::consts::ARCH;
    for name in [
        format!("vkexit-{VERSION}-{arch}"),
        format!("vkexit-{VERSION}-{arch}.tar.gz"),
        format!("vkexit-{VERSION}-py3-none-manylinux_2_31_{arch}.whl"),
    ] {
        assert!(files.contains(&name), "no {name} in {files:?}");
    }
}

#[test]
fn a_single_file_downloaded_alone_matches_its_sum_and_runs() {
    let Some(dir) = release_files() else {
        skip!("no target/release-files/SHA256SUMS: make the set with ci/release.sh");
    };
    let name = format!("vkexit-{VERSION}-{}", std::env::consts::ARCH);
    let tmp = tempfile::tempdir().unwrap();
    let download = tmp.path().join("download");
    fs::create_dir_all(&download).unwrap();
    fs::copy(dir.join(&name), download.join(&name)).unwrap();
    fs::copy(dir.join("SHA256SUMS"), download.join("SHA256SUMS")).unwrap();
    // What a CI job runs: the sums of the files it has, the others left out.
    let out = Command::new("sha256sum")
        .args(["--check", "--ignore-missing", "--strict", "SHA256SUMS"])
        .current_dir(&download)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.trim() == format!("{name}: OK"),
        "{out:?}"
    );
    // Downloads lose the mode.
    let vkexit = download.join(&name);
    let mut mode = fs::metadata(&vkexit).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    fs::set_permissions(&vkexit, mode).unwrap();

    let installed = Installed::new(&vkexit, None, tmp.path());
    installed.assert_ready();
    installed.assert_built_in_case_passes("refrt:release-children", 2);
    installed.assert_seeds_fix_replays();
}
