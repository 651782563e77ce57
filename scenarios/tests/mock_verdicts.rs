//! The mock provokes what it promises. Vulkan-free options run everywhere; the VUID check runs
//! where the validation layer and lavapipe are installed.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn mock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mock"))
        .args(args)
        .output()
        .expect("mock runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn exit_code_becomes_the_status() {
    let output = mock(&["--no-vulkan", "--exit-code", "7"]);
    assert_eq!(output.status.code(), Some(7));
    assert!(stdout(&output).contains("vkexit-step: exit with code 7\n"));
}

#[test]
fn signals_kill_with_their_default_action() {
    for (name, number) in [
        ("SIGSEGV", libc::SIGSEGV),
        ("abrt", libc::SIGABRT),
        ("9", libc::SIGKILL),
    ] {
        let output = mock(&["--no-vulkan", "--signal", name]);
        assert_eq!(output.status.signal(), Some(number), "{name}");
    }
}

#[test]
fn crash_at_exit_faults_after_main_returned() {
    let output = mock(&["--no-vulkan", "--crash-at-exit"]);
    assert_eq!(output.status.signal(), Some(libc::SIGSEGV));
    let log = stdout(&output);
    let returned = log.find("main returns").expect("main returned");
    assert!(
        log[returned..].contains("exit handler crash-at-exit starts"),
        "{log}"
    );
}

#[test]
fn crash_probability_bounds_are_certain() {
    assert_eq!(
        mock(&["--no-vulkan", "--crash-probability", "1"])
            .status
            .signal(),
        Some(libc::SIGSEGV)
    );
    assert_eq!(
        mock(&["--no-vulkan", "--crash-probability", "0"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn flood_writes_the_bytes_to_both_streams() {
    let bytes = 3 << 20;
    let output = mock(&["--no-vulkan", "--flood", "3M"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stderr.len(), bytes);
    let steps: usize = stdout(&output)
        .lines()
        .filter(|line| line.starts_with("vkexit-step: "))
        .map(|line| line.len() + 1)
        .sum();
    assert_eq!(output.stdout.len(), bytes + steps);
}

#[test]
fn hang_at_exit_never_ends() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock"))
        .args(["--no-vulkan", "--hang-at-exit"])
        .stdout(Stdio::null())
        .spawn()
        .expect("mock runs");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "mock ended instead of hanging"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn grandchild_keeps_the_pipes_after_mock_exited() {
    let start = Instant::now();
    let output = mock(&["--no-vulkan", "--grandchild-holds-pipes", "2"]);
    // `output()` reads to EOF, which only comes when the grandchild closes its copies.
    assert_eq!(output.status.code(), Some(0));
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "pipes closed after {:?}",
        start.elapsed()
    );
    assert!(stdout(&output).contains("grandchild holds stdout and stderr for 2 s"));
}

#[test]
fn bad_options_exit_2_with_usage() {
    let output = mock(&["--segfault"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown option `--segfault`") && stderr.contains("usage: mock"));
}

#[test]
fn quiet_writes_nothing_to_either_stream() {
    let output = mock(&[
        "--quiet",
        "--no-vulkan",
        "--flood",
        "4K",
        "--exit-code",
        "5",
    ]);
    assert_eq!(output.status.code(), Some(5));
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
    assert!(output.stderr.is_empty());
}

#[test]
fn an_invalid_device_at_exit_is_aborted_by_the_loader() {
    // The loader's trampoline checks the handle; it says why only with VK_LOADER_DEBUG.
    let output = Command::new(env!("CARGO_BIN_EXE_mock"))
        .args(["--no-vulkan", "--invalid-device-at-exit"])
        .env("VK_LOADER_DEBUG", "error")
        .output()
        .expect("mock runs");
    assert_eq!(output.status.signal(), Some(libc::SIGABRT));
    let log = stdout(&output);
    let returned = log.find("main returns").expect("main returned");
    assert!(
        log[returned..].contains("exit handler invalid-device-at-exit starts"),
        "{log}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .contains("vkDeviceWaitIdle: Invalid device [VUID-vkDeviceWaitIdle-device-parameter]"),
        "{stderr}"
    );
}
