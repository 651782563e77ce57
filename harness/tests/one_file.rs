//! vkexit is one file: copied alone anywhere, it runs the built-in matrix on lavapipe under the
//! real validation layer. The helpers it carries are unpacked on first use into a private cache
//! directory keyed by their content, checked before use, replaced when changed or planted, and
//! never used from a directory that someone else could write. Real processes, in shared
//! temporary directories under /tmp, as CI runs them (as root).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vkexit_testkit::skip;
use vkexit_testkit::vkexit::vkexit_program;

/// A directory of the test's own under /tmp (shared, sticky), removed at the end.
fn shared_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("vkexit-onefile-")
        .tempdir_in("/tmp")
        .expect("a directory under /tmp")
}

/// vkexit, the copy `exe`, working in `cwd`, with `cache` as its XDG_CACHE_HOME and nothing
/// from the build in its environment.
fn vkexit(exe: &Path, cwd: &Path, cache: &Path) -> Command {
    let xdg = cwd.join("xdg-runtime");
    fs::create_dir_all(&xdg).unwrap();
    fs::set_permissions(&xdg, fs::Permissions::from_mode(0o700)).unwrap();
    let mut cmd = Command::new(exe);
    cmd.current_dir(cwd)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("VKEXIT_HELPERS_DIR")
        .env_remove("VKEXIT_SCENARIO_DIR");
    cmd
}

fn shown(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The one `<key>` directory under `cache/vkexit/helpers`.
fn key_dir(cache: &Path) -> PathBuf {
    let root = cache.join("vkexit/helpers");
    let dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// One built-in cell, one run: unpacks the scenario, refrt and the preload.
fn run_one(exe: &Path, cwd: &Path, cache: &Path) -> Output {
    vkexit(exe, cwd, cache)
        .args(["run", "--driver", "lavapipe", "--runs", "1"])
        .args([
            "--case",
            "clean-exit",
            "--runtime",
            "refrt:release-children",
        ])
        .output()
        .expect("vkexit starts")
}

#[test]
fn copied_alone_it_is_ready_and_runs_the_built_in_matrix_green_from_any_directory() {
    let tmp = shared_tmp();
    let bin = tmp.path().join("bin");
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir_all(&bin).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    let exe = bin.join("vkexit");
    fs::copy(vkexit_program(), &exe).unwrap();
    let cache = tmp.path().join("cache");

    let doctor = vkexit(&exe, &elsewhere, &cache)
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("status      ready"), "{}", shown(&doctor));
    assert!(
        text.contains("helpers     9 carried")
            && text.contains(&key_dir(&cache).display().to_string()),
        "{}",
        shown(&doctor)
    );

    let run = vkexit(&exe, &elsewhere, &cache)
        .args([
            "run", "--driver", "lavapipe", "--runs", "1", "--json", "r.json",
        ])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", shown(&run));
    let results: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(elsewhere.join("r.json")).unwrap()).unwrap();
    assert_eq!(
        results["cells"].as_array().unwrap().len(),
        20,
        "{results:#}"
    );
    assert_eq!(
        fs::read_dir(&bin).unwrap().count(),
        1,
        "nothing is written beside vkexit"
    );
}

#[test]
fn the_helpers_directory_is_private_and_keyed_by_their_content() {
    let tmp = shared_tmp();
    let cache = tmp.path().join("cache");
    let out = run_one(&vkexit_program(), tmp.path(), &cache);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let dir = key_dir(&cache);
    let meta = fs::symlink_metadata(&dir).unwrap();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_eq!((meta.uid(), meta.mode() & 0o777), (me, 0o700));
    for name in ["clean-exit", "libvkexit_refrt.so", "libvkexit_preload.so"] {
        let meta = fs::symlink_metadata(dir.join(name)).unwrap();
        assert!(meta.is_file(), "{name}");
        assert_eq!(meta.mode() & 0o222, 0, "{name} is read-only");
    }
}

#[test]
fn a_changed_or_planted_helper_is_replaced_before_it_is_used() {
    let tmp = shared_tmp();
    let cache = tmp.path().join("cache");
    let exe = vkexit_program();
    let out = run_one(&exe, tmp.path(), &cache);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let dir = key_dir(&cache);
    let preload = dir.join("libvkexit_preload.so");
    let refrt = dir.join("libvkexit_refrt.so");
    let scenario = dir.join("clean-exit");
    let originals: Vec<Vec<u8>> = [&preload, &refrt, &scenario]
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();

    // Changed in place, swapped for a link to another library, replaced by a planted program.
    fs::set_permissions(&preload, fs::Permissions::from_mode(0o644)).unwrap();
    let mut changed = originals[0].clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 0xff;
    fs::write(&preload, &changed).unwrap();
    fs::remove_file(&refrt).unwrap();
    std::os::unix::fs::symlink("/lib/x86_64-linux-gnu/libc.so.6", &refrt).unwrap();
    fs::remove_file(&scenario).unwrap();
    fs::write(&scenario, "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(&scenario, fs::Permissions::from_mode(0o755)).unwrap();

    let out = run_one(&exe, tmp.path(), &cache);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    for (path, original) in [&preload, &refrt, &scenario].iter().zip(&originals) {
        let meta = fs::symlink_metadata(path).unwrap();
        assert!(meta.is_file(), "{} is a file again", path.display());
        assert!(
            fs::read(path).unwrap() == *original,
            "{} holds what vkexit carries again",
            path.display()
        );
    }
}

#[test]
fn a_cache_directory_others_could_write_is_refused() {
    let tmp = shared_tmp();
    let exe = vkexit_program();

    // The key directory group- and world-writable.
    let cache = tmp.path().join("open");
    assert_eq!(run_one(&exe, tmp.path(), &cache).status.code(), Some(0));
    let dir = key_dir(&cache);
    let preload = dir.join("libvkexit_preload.so");
    fs::remove_file(&preload).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_one(&exe, tmp.path(), &cache);
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not private"),
        "{}",
        shown(&out)
    );
    assert!(
        !preload.exists(),
        "nothing is written into a refused directory"
    );

    // A directory above it that anyone may change (not sticky, as /tmp is).
    let shared = tmp.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_one(&exe, tmp.path(), &shared.join("cache"));
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("which others could change")
            && stderr.contains(&shared.display().to_string()),
        "{}",
        shown(&out)
    );
}

#[test]
fn a_cache_directory_of_another_user_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip!("giving a directory to another user needs root");
    }
    let tmp = shared_tmp();
    let exe = vkexit_program();
    let cache = tmp.path().join("cache");
    assert_eq!(run_one(&exe, tmp.path(), &cache).status.code(), Some(0));
    let dir = key_dir(&cache);
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let out = run_one(&exe, tmp.path(), &cache);
    assert_eq!(out.status.code(), Some(2), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("owner uid 65534"),
        "{}",
        shown(&out)
    );
}

#[test]
fn a_read_only_home_says_what_to_do_and_a_run_unpacks_beside_its_artifacts() {
    let tmp = shared_tmp();
    let exe = vkexit_program();
    let home = Path::new("/proc/vkexit-home");
    let doctor = vkexit(&exe, tmp.path(), Path::new(""))
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", home)
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("helpers     vkexit's helpers: cannot unpack them")
            && text.contains("set XDG_CACHE_HOME to a writable directory")
            && text.contains("status      NOT ready"),
        "{}",
        shown(&doctor)
    );

    let out = vkexit(&exe, tmp.path(), Path::new(""))
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", home)
        .args(["run", "--driver", "lavapipe", "--runs", "1"])
        .args([
            "--case",
            "clean-exit",
            "--runtime",
            "refrt:release-children",
        ])
        .args(["--artifacts", "out/runs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    let beside = tmp.path().join("out/.vkexit-helpers");
    let keys: Vec<_> = fs::read_dir(&beside).unwrap().collect();
    assert_eq!(keys.len(), 1);
}

#[test]
fn first_uses_at_once_each_get_whole_helpers() {
    let tmp = shared_tmp();
    let cache = tmp.path().join("cache");
    let exe = vkexit_program();
    let children: Vec<_> = (0..4)
        .map(|i| {
            let cwd = tmp.path().join(format!("w{i}"));
            fs::create_dir_all(&cwd).unwrap();
            vkexit(&exe, &cwd, &cache)
                .arg("doctor")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("helpers     9 carried"), "{}", shown(&out));
    }
    let leftovers: Vec<_> = fs::read_dir(key_dir(&cache))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
