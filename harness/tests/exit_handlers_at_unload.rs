//! The layers' exit handlers at `dlclose`: the loader unloads every layer at
//! `vkDestroyInstance`, and an exit handler registered by a layer must run then (or the
//! library must stay mapped), never be left for `exit()` to call into an unmapped library.
//!
//! gcc links `crtbeginS.o` into each shared library, whose destructor runs the library's
//! handlers at `dlclose`; zig's linker, which builds the portable bundles (`ci/bundles.sh`),
//! links none, and there every `--emulate tegra` run that destroyed its instance crashed at
//! exit with its pc in no mapping. Each library is loaded, unloaded and the process left to
//! exit, in a child process: as the host's cargo built it, and as the portable bundle for this
//! machine's architecture packs it when `ci/bundles.sh` has made one.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use vkexit_testkit::paths::{built, workspace};
use vkexit_testkit::skip;

const CHILD_LIBRARY: &str = "VKEXIT_UNLOAD_TEST_LIBRARY";
const TEGRA: &str = "libVkLayer_vkexit_tegra_exit.so";
const TRACE: &str = "libVkLayer_vkexit_trace.so";
const UNLOADED: &str = "unloaded, exiting";

/// In the child: load the library, unload it, say so, and return, so that the process exits
/// through `exit()` and its remaining handlers.
fn load_and_unload(library: &Path) {
    let name = CString::new(library.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; the handle is closed once and not used after.
    unsafe {
        let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!handle.is_null(), "dlopen {}", library.display());
        assert_eq!(libc::dlclose(handle), 0);
    }
    println!("{UNLOADED}");
}

struct Unloaded {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    tegra_log: String,
}

/// Runs [`load_and_unload`] of `library` in a child process (this test, again).
fn unload_in_child(test: &str, library: &Path) -> Unloaded {
    let dir = tempfile::tempdir().unwrap();
    let tegra_log = dir.path().join("tegra.jsonl");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_LIBRARY, library)
        .env("VKEXIT_TEGRA_LOG", &tegra_log)
        .output()
        .unwrap();
    Unloaded {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        tegra_log: std::fs::read_to_string(&tegra_log).unwrap_or_default(),
    }
}

/// The child's part, when this test runs as the child; `true` when it did.
fn child() -> bool {
    let Some(library) = std::env::var_os(CHILD_LIBRARY) else {
        return false;
    };
    load_and_unload(Path::new(&library));
    true
}

fn assert_unloads_cleanly(test: &str, library: &Path) {
    let u = unload_in_child(test, library);
    let what = format!(
        "{}: {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}",
        library.display(),
        u.status.code(),
        u.status.signal(),
        u.stdout,
        u.stderr
    );
    assert!(u.stdout.contains(UNLOADED), "{what}");
    assert!(u.status.success(), "exit after the unload: {what}");
    if library.file_name().is_some_and(|n| n == TEGRA) {
        // The emulated driver's handler ran at the unload, as the layer documents, and once.
        let starts = u.tegra_log.matches("\"exit-handler-start\"").count();
        assert_eq!(starts, 1, "{what}\ntegra log:\n{}", u.tegra_log);
    }
}

/// The portable bundle for this machine's architecture, unpacked, and the helpers its vkexit
/// carries unpacked by it (`vkexit doctor` says where): the directory that holds its libraries.
/// `Err` says why there is none.
fn bundle_libraries(into: &Path) -> Result<PathBuf, String> {
    let dir = std::env::var_os("VKEXIT_BUNDLE_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/bundles"));
    let arch = std::env::consts::ARCH;
    let tarball = std::fs::read_dir(&dir)
        .map_err(|e| {
            format!(
                "no portable bundles in {} ({e}): ci/bundles.sh makes them",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(&format!("-{arch}.tar.gz")))
        .ok_or_else(|| {
            format!(
                "no {arch} bundle in {}: ci/bundles.sh {arch} makes it",
                dir.display()
            )
        })?;
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success(), "tar xzf {}", tarball.display());
    let vkexit = std::fs::read_dir(into)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("bin/vkexit"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{} holds no bin/vkexit", tarball.display()));
    let out = Command::new(&vkexit)
        .arg("doctor")
        .env("XDG_CACHE_HOME", into.join("cache"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let dir = said
        .lines()
        .find_map(|l| l.strip_prefix("helpers ")?.split(", checked in ").nth(1))
        .unwrap_or_else(|| {
            panic!(
                "{} does not say where its helpers are: {out:?}",
                vkexit.display()
            )
        });
    let dir = PathBuf::from(dir.trim());
    assert!(
        dir.join(TEGRA).is_file(),
        "{} holds no {TEGRA}",
        dir.display()
    );
    Ok(dir)
}

#[test]
fn the_layers_built_here_run_their_exit_handlers_at_unload() {
    if child() {
        return;
    }
    for library in [TEGRA, TRACE] {
        assert_unloads_cleanly(
            "the_layers_built_here_run_their_exit_handlers_at_unload",
            &built(library),
        );
    }
}

/// The bundle's layers are linked by zig: without their own call of `__cxa_finalize` at unload
/// (layers/support), the tegra-exit layer's handler outlived its library and the child died by
/// SIGSEGV in `exit()`.
#[test]
fn the_portable_bundles_layers_run_their_exit_handlers_at_unload() {
    if child() {
        return;
    }
    let unpacked = tempfile::tempdir().unwrap();
    let libraries = match bundle_libraries(unpacked.path()) {
        Ok(dir) => dir,
        Err(why) => skip!("{why}"),
    };
    for library in [TEGRA, TRACE] {
        assert_unloads_cleanly(
            "the_portable_bundles_layers_run_their_exit_handlers_at_unload",
            &libraries.join(library),
        );
    }
}
