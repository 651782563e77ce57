//! A test its own runner skips is `skipped`, with the runner's reason, in the results file,
//! JUnit and the terminal, and the gate stays green: pytest's `skip` mark, GoogleTest's
//! `GTEST_SKIP()` (after its fixture made a Vulkan instance), CTest's `SKIP_RETURN_CODE` and
//! `SKIP_REGULAR_EXPRESSION`, libtest's `#[ignore]`. Each suite is built here and run on
//! lavapipe under the real validation layer, one process per test, next to a test of the same
//! suite that runs and passes.

use std::process::Command;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};
use vkexit_testkit::results::read;
use vkexit_testkit::vkexit::Sandbox;

/// `vkexit run ARGS --driver lavapipe --runs 2` with a results file and JUnit: the exit
/// code, the results, the JUnit XML and the terminal's stdout.
fn gate(sb: &Sandbox, args: &[&str]) -> (i32, Results, String, String) {
    let junit = sb.path().join("junit.xml");
    let out = sb
        .vkexit()
        .args(["run", "--driver", "lavapipe", "--runs", "2", "--json"])
        .arg(sb.results())
        .arg("--junit")
        .arg(&junit)
        .args(args)
        .output()
        .expect("vkexit starts");
    let code = out.status.code().expect("vkexit exits");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(sb.results().is_file(), "exit {code}\n{stdout}\n{stderr}");
    let xml = std::fs::read_to_string(&junit).expect("a JUnit file");
    (code, read(&sb.results()), xml, stdout)
}

fn cell<'a>(r: &'a Results, case: &str) -> &'a CellResult {
    r.cells
        .iter()
        .find(|c| c.case == case)
        .unwrap_or_else(|| panic!("no cell {case} in {r:#?}"))
}

/// `case` skipped in each of its runs with a reason containing `why`, in the results file and
/// in JUnit; the terminal shows it skipped.
fn assert_skipped(r: &Results, xml: &str, stdout: &str, case: &str, why: &str) {
    let c = cell(r, case);
    assert_eq!(c.verdict, CellVerdict::Skipped, "{c:#?}");
    let reason = c.reason.as_deref().unwrap_or_default();
    assert!(reason.contains(why), "{case}: {reason}");
    let testcase = xml
        .split("<testcase ")
        .find(|t| t.starts_with(&format!("name=\"{} ×", xml_escaped(case))))
        .unwrap_or_else(|| panic!("no testcase {case} in\n{xml}"));
    let testcase = testcase.split("</testcase>").next().unwrap_or_default();
    assert!(testcase.contains("<skipped"), "{case}: {testcase}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(case) && l.contains("skipped")),
        "{case}:\n{stdout}"
    );
}

fn xml_escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn tool(program: &str, args: &[&str], what: &str) {
    let ok = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "{what} (ci/setup-tests.sh installs it)");
}

#[test]
fn pytest_skips_are_skipped_with_their_reason() {
    tool(
        "/usr/bin/python3",
        &["-m", "pytest", "--version"],
        "pytest for /usr/bin/python3",
    );
    let sb = Sandbox::new();
    let tests = sb.path().join("tests");
    std::fs::create_dir_all(&tests).unwrap();
    let text = "import pytest\n\n\
        @pytest.mark.skip(reason=\"needs a discrete GPU\")\n\
        def test_on_a_discrete_gpu():\n    assert False\n\n\
        def test_skips_itself():\n    pytest.skip(\"no device here\")\n\n\
        def test_runs():\n    assert True\n";
    std::fs::write(tests.join("test_gpu.py"), text).unwrap();
    let (code, r, xml, stdout) = gate(&sb, &["--pytest", "tests", "--python", "/usr/bin/python3"]);
    assert_eq!(code, 0, "{stdout}\n{r:#?}");
    let id = "tests/test_gpu.py::";
    assert_skipped(
        &r,
        &xml,
        &stdout,
        &format!("{id}test_on_a_discrete_gpu"),
        "needs a discrete GPU",
    );
    assert_skipped(
        &r,
        &xml,
        &stdout,
        &format!("{id}test_skips_itself"),
        "no device here",
    );
    for case in ["test_on_a_discrete_gpu", "test_skips_itself"] {
        let c = cell(&r, &format!("{id}{case}"));
        assert_eq!(c.counts.get(RunVerdict::Skipped), 2, "{c:#?}");
        assert_eq!(
            c.counts.passed(),
            0,
            "a skipped test is never a pass: {c:#?}"
        );
    }
    assert_eq!(
        cell(&r, &format!("{id}test_runs")).verdict,
        CellVerdict::NoVulkan
    );
}

/// A fixture that makes a Vulkan instance in its set-up and destroys it in its tear-down.
const GTEST: &str = r#"#include <gtest/gtest.h>
#include <vulkan/vulkan.h>
class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ASSERT_EQ(vkCreateInstance(&info, nullptr, &instance), VK_SUCCESS);
  }
  void TearDown() override { vkDestroyInstance(instance, nullptr); }
  VkInstance instance = VK_NULL_HANDLE;
};
TEST_F(Gpu, NeedsTwoDevices) { GTEST_SKIP() << "one device here, two needed"; }
TEST_F(Gpu, MakesAnInstance) { EXPECT_NE(instance, VK_NULL_HANDLE); }
"#;

#[test]
fn googletest_skips_are_skipped_even_after_the_fixture_used_vulkan() {
    let sb = Sandbox::new();
    std::fs::write(sb.path().join("gpu_test.cpp"), GTEST).unwrap();
    let out = Command::new("g++")
        .current_dir(sb.path())
        .args([
            "gpu_test.cpp",
            "-o",
            "gpu-test",
            "-lgtest",
            "-lgtest_main",
            "-pthread",
            "-lvulkan",
        ])
        .output()
        .expect("g++ starts (ci/setup-tests.sh installs it, with libgtest-dev)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let program = sb.path().join("gpu-test");
    let (code, r, xml, stdout) = gate(&sb, &["--gtest", program.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}\n{r:#?}");
    assert_skipped(
        &r,
        &xml,
        &stdout,
        "Gpu.NeedsTwoDevices",
        "one device here, two needed",
    );
    assert_eq!(cell(&r, "Gpu.MakesAnInstance").verdict, CellVerdict::Pass);
}

#[test]
fn ctest_skip_properties_make_skips() {
    tool("cmake", &["--version"], "cmake");
    let sb = Sandbox::new();
    let src = sb.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let lists = r#"cmake_minimum_required(VERSION 3.16)
project(skips NONE)
enable_testing()
add_test(NAME no-gpu-code COMMAND sh -c "echo 'this runner has no GPU' >&2; exit 77")
set_tests_properties(no-gpu-code PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME no-gpu-output COMMAND sh -c "echo 'SKIP: no GPU here'")
set_tests_properties(no-gpu-output PROPERTIES SKIP_REGULAR_EXPRESSION "^SKIP: ")
add_test(NAME runs COMMAND sh -c "exit 0")
add_test(NAME fails COMMAND sh -c "exit 77")
"#;
    std::fs::write(src.join("CMakeLists.txt"), lists).unwrap();
    let build = sb.path().join("build");
    let out = Command::new("cmake")
        .arg("-S")
        .arg(&src)
        .arg("-B")
        .arg(&build)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (code, r, xml, stdout) = gate(&sb, &["--ctest", build.to_str().unwrap()]);
    assert_eq!(code, 1, "only `fails` fails:\n{stdout}\n{r:#?}");
    assert_skipped(
        &r,
        &xml,
        &stdout,
        "no-gpu-code",
        "exit status 77 is its SKIP_RETURN_CODE",
    );
    assert_skipped(
        &r,
        &xml,
        &stdout,
        "no-gpu-output",
        "SKIP_REGULAR_EXPRESSION `^SKIP: `",
    );
    assert_eq!(cell(&r, "runs").verdict, CellVerdict::NoVulkan);
    // Without the property, the same exit status is a failure.
    let fails = cell(&r, "fails");
    assert_eq!(fails.verdict, CellVerdict::Fail, "{fails:#?}");
    assert_eq!(fails.counts.get(RunVerdict::Exit), 2);
    for c in &r.cells {
        assert!(
            c.findings
                .iter()
                .all(|f| !f.contains("not honoured: SKIP_")),
            "{c:#?}"
        );
    }
}

#[test]
fn ignored_libtest_tests_are_skipped() {
    let sb = Sandbox::new();
    let source =
        "#[test]\nfn runs() {}\n\n#[test]\n#[ignore = \"needs a GPU\"]\nfn on_a_gpu() {}\n";
    std::fs::write(sb.path().join("gpu.rs"), source).unwrap();
    let program = sb.path().join("gpu-tests");
    let out = Command::new("rustc")
        .current_dir(sb.path())
        .args(["--edition", "2021", "--test", "gpu.rs", "-o"])
        .arg(&program)
        .output()
        .expect("rustc starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r, xml, stdout) = gate(&sb, &["--libtest", program.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}\n{r:#?}");
    assert_skipped(&r, &xml, &stdout, "on_a_gpu", "ignore");
    assert_eq!(cell(&r, "runs").verdict, CellVerdict::NoVulkan);
}

#[test]
fn a_skipped_test_is_told_apart_from_one_that_runs_in_a_merge() {
    tool(
        "/usr/bin/python3",
        &["-m", "pytest", "--version"],
        "pytest for /usr/bin/python3",
    );
    let sb = Sandbox::new();
    let tests = sb.path().join("t");
    std::fs::create_dir_all(&tests).unwrap();
    let text =
        "import pytest\n\n@pytest.mark.skip(reason=\"later\")\ndef test_later():\n    pass\n";
    std::fs::write(tests.join("test_later.py"), text).unwrap();
    let (code, _, _, _) = gate(&sb, &["--pytest", "t", "--python", "/usr/bin/python3"]);
    assert_eq!(code, 0);
    let merged = sb.path().join("merged.json");
    let out = sb
        .vkexit()
        .args(["merge", "r.json", "--json"])
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = read(&merged);
    let c = &m.cells[0];
    assert_eq!(c.verdict, CellVerdict::Skipped, "{c:#?}");
    assert_eq!(c.counts.get(RunVerdict::Skipped), 2, "{c:#?}");
}
