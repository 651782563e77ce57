//! A `GGML_BACKEND_DL` module that does not load is reported with ggml's own words (its log,
//! captured while the backends load), never with a pointer to an empty stderr. Real processes:
//! the clean-exit scenario, real ggml (0.20, from the runtime cache) and modules built here with
//! the C compiler; and Debian's own module where the cache has it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vkexit_testkit::{or_skip, skip};

/// The runtime cache's directory `name`, or why the test cannot run.
fn cached(name: &str) -> Result<PathBuf, String> {
    let dir = vkexit_fixtures::runtime_cache()
        .ok_or("no runtime cache: none of VKEXIT_RUNTIME_CACHE, XDG_CACHE_HOME and HOME is set")?
        .join(name);
    if dir.join("VERSION").exists() {
        return Ok(dir);
    }
    Err(format!(
        "{name} is not in the runtime cache ({}); ci/setup-runtimes.sh downloads it",
        dir.display()
    ))
}

/// A directory beside which a module built here finds real ggml: every file of the wheel's
/// copy, linked in.
fn beside_ggml(wheel: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(wheel).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// Builds `dir/file`, a shared library linking `needs` (found in `link_dirs`) and defining
/// nothing of a ggml backend.
fn module(dir: &Path, file: &str, needs: &[&str], link_dirs: &[&Path]) -> PathBuf {
    let source = dir.join(format!("{file}.c"));
    std::fs::write(&source, "int not_a_backend(void) { return 0; }\n").unwrap();
    let path = dir.join(file);
    let mut cc = Command::new("cc");
    cc.args(["-shared", "-fPIC", "-o"])
        .arg(&path)
        .arg(&source)
        .arg(format!("-Wl,-soname,{file}"))
        .arg("-Wl,--no-as-needed");
    for link_dir in link_dirs {
        cc.arg("-L").arg(link_dir);
    }
    for need in needs {
        cc.arg(format!("-l:{need}"));
    }
    let out = cc
        .output()
        .expect("this test builds modules with the C compiler `cc` (apt-get install gcc)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn clean_exit(runtime: &Path) -> (Output, String) {
    let xdg = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_clean-exit"))
        .arg("--runtime")
        .arg(format!("ggml:{}", runtime.display()))
        .env("XDG_RUNTIME_DIR", xdg.path())
        .output()
        .expect("clean-exit runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output, text)
}

#[test]
fn a_module_without_ggml_backend_init_is_refused_in_ggmls_words() {
    let wheel = or_skip!(cached("ggml"));
    let dir = beside_ggml(&wheel);
    let fake = module(
        dir.path(),
        "libggml-fake.so",
        &["libggml-base.so.0"],
        &[dir.path()],
    );
    let (output, text) = clean_exit(&fake);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("ggml's module layout"), "{text}");
    let error = text
        .lines()
        .find(|l| l.starts_with("vkexit: scenario setup failed"))
        .unwrap_or_else(|| panic!("no setup failure in\n{text}"));
    assert!(
        error.contains("ggml_backend_load(")
            && error.contains("ggml said:")
            && error.contains("failed to find ggml_backend_init")
            && !error.contains("stderr says why"),
        "{error}"
    );
}

#[test]
fn a_module_that_does_not_load_is_refused_with_what_the_dynamic_linker_said() {
    let wheel = or_skip!(cached("ggml"));
    let dir = beside_ggml(&wheel);
    // A library the module needs, then taken away.
    let gone = tempfile::tempdir().unwrap();
    module(gone.path(), "libgone.so.1", &[], &[]);
    let fake = module(
        dir.path(),
        "libggml-fake.so",
        &["libggml-base.so.0", "libgone.so.1"],
        &[dir.path(), gone.path()],
    );
    drop(gone);
    let (output, text) = clean_exit(&fake);
    assert_eq!(output.status.code(), Some(3), "{text}");
    let error = text
        .lines()
        .find(|l| l.starts_with("vkexit: scenario setup failed"))
        .unwrap_or_else(|| panic!("no setup failure in\n{text}"));
    assert!(
        error.contains("ggml said:") && error.contains("libgone.so.1"),
        "{error}"
    );
}

#[test]
fn debians_module_on_an_older_glibc_names_the_glibc_version_it_needs() {
    let debian = or_skip!(cached("ggml-debian"));
    // SAFETY: gnu_get_libc_version returns a static string.
    let glibc = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) }
        .to_string_lossy()
        .into_owned();
    let minor: u32 = glibc
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap();
    if minor >= 43 {
        skip!("glibc {glibc} runs Debian sid's ggml: no older glibc here to refuse it");
    }
    let module = debian.join("usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so");
    let (output, text) = clean_exit(&module);
    assert_eq!(output.status.code(), Some(3), "{text}");
    let error = text
        .lines()
        .find(|l| l.starts_with("vkexit: scenario setup failed"))
        .unwrap_or_else(|| panic!("no setup failure in\n{text}"));
    assert!(
        error.contains("version `GLIBC_2.") && error.contains("not found"),
        "{error}"
    );
}
