//! The kit's launch on the real stack: the mock on lavapipe under the validation layer.

use vkexit_testkit::Launch;

#[test]
fn the_mocks_vuid_reaches_the_validation_log() {
    let ran = Launch::built("mock").arg("--vuid").validation().run();
    let vuids = ran.vuids();
    assert!(
        vuids
            .keys()
            .any(|id| id.starts_with("VUID-vkDestroyDevice-device-")),
        "{vuids:?}\n{}",
        ran.output()
    );
    assert!(ran.path().join("xdg-runtime").is_dir());
}

#[test]
fn a_clean_run_under_validation_logs_no_vuid() {
    let ran = Launch::built("mock").validation().run();
    assert_eq!(ran.code(), Some(0), "{}", ran.output());
    assert!(ran.vuids().is_empty(), "{}", ran.output());
}

#[test]
#[should_panic(expected = "the validation layer did not load")]
fn validation_asked_for_but_never_loaded_fails_the_test() {
    // The program creates no instance, so the layer never loads and writes no log.
    let ran = Launch::built("mock").arg("--no-vulkan").validation().run();
    assert_eq!(ran.code(), Some(0), "{}", ran.output());
    ran.vuids();
}

#[test]
fn a_hanging_program_is_killed_once_it_says_so() {
    let ran = Launch::built("mock")
        .args(["--hang", "--no-vulkan"])
        .kill_when("hang in main")
        .run();
    assert_eq!(ran.signal(), Some(libc::SIGKILL), "{}", ran.output());
    assert!(ran.stdout.contains("hang in main"), "{}", ran.output());
}
