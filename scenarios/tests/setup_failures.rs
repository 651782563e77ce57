//! Scenario setup failures exit 3 and usage errors exit 2, never anything an exit-time failure
//! could produce. No Vulkan and no runtime library needed.

use std::process::{Command, Output};

fn clean_exit(args: &[&str], lib: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clean-exit"))
        .args(args)
        .env("VKEXIT_REFRT_LIB", lib)
        .output()
        .expect("clean-exit runs")
}

#[test]
fn missing_library_is_named_with_the_build_command() {
    let output = clean_exit(
        &["--runtime", "refrt:guarded"],
        "/nonexistent/libvkexit_refrt.so",
    );
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("/nonexistent/libvkexit_refrt.so"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cargo build --release --workspace"),
        "{stderr}"
    );
}

#[test]
fn a_library_without_the_abi_names_the_missing_symbol() {
    let output = clean_exit(&["--runtime", "refrt:never"], "libc.so.6");
    // A bare name is made absolute against the cwd, where no libc.so.6 lives.
    assert_eq!(output.status.code(), Some(3));
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    if std::path::Path::new(libc).exists() {
        let output = clean_exit(&["--runtime", "refrt:never"], libc);
        assert_eq!(output.status.code(), Some(3));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains("lacks symbol `refrt_abi_version`"),
            "{stdout}"
        );
    }
}

#[test]
fn a_real_runtime_that_is_not_there_is_named_with_the_setup_script() {
    for (spec, cache) in [
        ("ggml:/nonexistent/ggml", "/unused"),
        ("halide", "/nonexistent/cache"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_clean-exit"))
            .args(["--runtime", spec])
            .env("VKEXIT_RUNTIME_CACHE", cache)
            .output()
            .expect("clean-exit runs");
        assert_eq!(output.status.code(), Some(3), "{spec}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("/nonexistent/"), "{stderr}");
        assert!(stderr.contains("ci/setup-runtimes.sh"), "{stderr}");
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["--runtime", "refrt:sometimes"][..],
        &[],
        &["--runtime", "refrt:guarded", "-x"],
    ] {
        let output = clean_exit(args, "/unused");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("usage: clean-exit"));
    }
}
