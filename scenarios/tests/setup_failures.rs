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
fn later_runtime_kinds_are_refused_at_load() {
    let output = clean_exit(&["--runtime", "ggml:/opt/libggml-vulkan.so"], "/unused");
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("runtime kind `ggml` is not supported by this build yet"),
        "{stderr}"
    );
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
