//! Matrix files and baseline files on lavapipe, with real scenario runs
//! under the real validation layer: a matrix selecting cells, a baseline
//! judging them, and `vkexit baseline update` writing one from results.

use predicates::prelude::*;
use predicates::str::contains;
use std::path::Path;
use vkexit_testkit::results::{cell_of as cell, the_cell, Args, CellVerdict, Results, RunVerdict};
use vkexit_testkit::vkexit::*;

const CHILDREN: &str = "VUID-vkDestroyDevice-device-00378";

fn write(sb: &Sandbox, name: &str, text: &str) {
    std::fs::write(sb.path().join(name), text).unwrap();
}

/// vkexit with `args` and `--json r.json` in the sandbox; the exit code, the results and
/// stdout.
fn vkexit(sb: &Sandbox, args: Args) -> (i32, Results, String) {
    let out = sb.vkexit().args(&args.json("r.json")).output().unwrap();
    let code = out.status.code().expect("vkexit exits normally");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        sb.results().exists(),
        "no results; exit {code}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, vkexit_testkit::results::read(&sb.results()), stdout)
}

#[test]
fn a_matrix_file_selects_its_cells_and_their_runs() {
    let sb = Sandbox::new();
    write(
        &sb,
        "m.toml",
        r#"
cases = ["buffer-kept-at-exit"]
runtimes = ["refrt:guarded", "refrt:release-children"]
drivers = ["lavapipe"]
runs = 2
"#,
    );
    let config = || Args::command("run").opt("--config", "m.toml");
    let (code, r, _) = vkexit(&sb, config());
    assert_eq!(code, 0, "{r:#?}");
    assert_eq!(r.cells.len(), 2, "{r:#?}");
    let kept = cell(&r, "buffer-kept-at-exit", "refrt:guarded");
    assert_eq!(kept.runs, 2);
    assert_eq!(kept.verdict, CellVerdict::ExpectedFail);
    assert_eq!(kept.expectation.as_deref(), Some("built-in"));
    assert_eq!(kept.vuids, [CHILDREN]);
    let fixed = cell(&r, "buffer-kept-at-exit", "refrt:release-children");
    assert_eq!(fixed.verdict, CellVerdict::Pass);
    assert_eq!(fixed.layers, ["validation"]);

    // Flags replace the file's lists and numbers.
    let flags = config()
        .runtime("refrt:release-children")
        .runs(1)
        .opt("--emulate", "tegra");
    let (code, r, _) = vkexit(&sb, flags);
    assert_eq!(code, 0, "{r:#?}");
    let c = the_cell(&r);
    assert_eq!((c.runs, c.emulation.as_str()), (1, "tegra"));
}

#[test]
fn layer_sets_and_environments_of_a_matrix_reach_the_runs() {
    let sb = Sandbox::new();
    // Without validation, a program that exits 0 passes: the shell checks
    // what its environment holds.
    write(
        &sb,
        "env.toml",
        r#"
runs = 1
drivers = ["lavapipe"]

[env]
FROM_MATRIX = "m"

[[external]]
name = "sees-both"
argv = ["/bin/sh", "-c", "test \"$FROM_MATRIX$FROM_CASE\" = mc"]
env = { FROM_CASE = "c" }

[[external]]
name = "sees-matrix-only"
argv = ["/bin/sh", "-c", "test \"$FROM_MATRIX\" = m && test -z \"$FROM_CASE\""]

[[external]]
name = "fails"
argv = ["/bin/sh", "-c", "exit 3"]

[[layers]]
validation = false

[[layers]]
validation = false
trace = false
emulation = "tegra"
"#,
    );
    let (code, r, _) = vkexit(&sb, Args::command("run").opt("--config", "env.toml"));
    assert_eq!(code, 1, "{r:#?}");
    assert_eq!(r.cells.len(), 6, "two layer sets × three cases: {r:#?}");
    for c in &r.cells {
        assert!(c.layers.is_empty(), "{c:#?}");
        // A shell never asks the Vulkan loader for a driver: with or without the emulated
        // driver exit, a clean run of it is `no-vulkan` (green, and said so), never `pass`.
        let want = match c.case.as_str() {
            "fails" => CellVerdict::Fail,
            _ => CellVerdict::NoVulkan,
        };
        assert_eq!(c.verdict, want, "{c:#?}");
    }
    // The replay of a kept run holds the matrix's variables.
    let failing = r
        .cells
        .iter()
        .find(|c| c.case == "fails" && c.emulation == "none")
        .unwrap();
    let run_dir = &failing.artifacts[0];
    let command = std::fs::read_to_string(Path::new(&run_dir).join("command.txt")).unwrap();
    assert!(command.contains("\nFROM_MATRIX=m\n"), "{command}");
}

#[test]
fn errors_in_a_matrix_file_name_the_line_and_column() {
    let sb = Sandbox::new();
    write(
        &sb,
        "bad.toml",
        "runs = 2\ncases = [\"clean-exit\"]\nrnus = 3\n",
    );
    sb.vkexit()
        .args(["run", "--config", "bad.toml"])
        .assert()
        .code(2)
        .stderr(
            contains("bad.toml:3:1: unknown field `rnus`, expected one of")
                .and(contains("panicked").not()),
        );
    write(&sb, "bad.toml", "[[layers]]\nemulation = \"jetson\"\n");
    sb.vkexit()
        .args(["run", "--config", "bad.toml"])
        .assert()
        .code(2)
        .stderr(contains("bad.toml:2:13: unknown variant `jetson`"));
    sb.vkexit()
        .args(["run", "--config", "missing.toml"])
        .assert()
        .code(2)
        .stderr(contains("missing.toml"));
}

#[test]
fn a_baseline_turns_a_known_failure_into_expected_fail_and_a_wrong_one_into_fail() {
    let sb = Sandbox::new();
    let mock = mock();
    let args = |baseline: &str| {
        let a = Args::run()
            .runs(2)
            .case("buffer-kept-at-exit")
            .runtime("refrt:guarded");
        match baseline {
            "" => a,
            b => a.baseline(b),
        }
        .program(&mock, &["--vuid"])
    };

    // No baseline: the mock's VUID is a failure; the built-in cell is known.
    let (code, r, _) = vkexit(&sb, args(""));
    assert_eq!(code, 1, "{r:#?}");
    assert_eq!(cell(&r, "mock", "external").verdict, CellVerdict::Fail);
    assert_eq!(cell(&r, "mock", "external").expectation, None);

    write(
        &sb,
        "b.toml",
        r#"# The mock's --vuid is a known failure.
[[expect]]
case = "mock"
runtime = "external"
expect = "fail"
run_verdicts = ["vuid"]
vuids = ["VUID-vkDestroyDevice-device-*"]
reason = "mock --vuid destroys the device with a buffer alive"

# Wrong on purpose: this cell logs a VUID, it does not crash.
[[expect]]
case = "buffer-kept-at-exit"
runtime = "refrt:guarded"
expect = "fail"
run_verdicts = ["crash"]
signals = ["SIGSEGV"]
reason = "wrong"
"#,
    );
    let (code, r, stdout) = vkexit(&sb, args("b.toml"));
    assert_eq!(code, 1, "{r:#?}");
    let known = cell(&r, "mock", "external");
    assert_eq!(known.verdict, CellVerdict::ExpectedFail, "{known:#?}");
    assert_eq!(known.expectation.as_deref(), Some("b.toml:2"));
    assert_eq!(
        known.reason.as_deref(),
        Some("mock --vuid destroys the device with a buffer alive")
    );
    let wrong = cell(&r, "buffer-kept-at-exit", "refrt:guarded");
    assert_eq!(wrong.verdict, CellVerdict::Fail, "{wrong:#?}");
    assert_eq!(wrong.expectation.as_deref(), Some("b.toml:11"));
    let why = wrong.reason.as_deref().unwrap();
    assert!(
        why.contains("failed, but not as known (wrong)") && why.contains("2 vuid runs"),
        "{why}"
    );
    assert!(
        stdout.contains("2 cells judged by the baseline files"),
        "{stdout}"
    );
}

#[test]
fn allow_lists_and_flaky_entries_keep_the_gate_green() {
    let sb = Sandbox::new();
    let mock = mock();
    let run = |baseline: &str, mock_args: &[&str]| {
        let args = Args::run().runs(4).baseline(baseline);
        vkexit(&sb, args.program(&mock, mock_args))
    };
    // An allow-list for this layer version takes the VUID out: the runs pass.
    write(
        &sb,
        "allow.toml",
        &format!(
            "[[allow]]\nallow_vuids = [\"{CHILDREN}\"]\ndriver = \"lavapipe\"\nlayer_version = \"1.*\"\nreason = \"pretend false positive\"\n"
        ),
    );
    let (code, r, _) = run("allow.toml", &["--vuid"]);
    let c = the_cell(&r);
    assert_eq!(code, 0, "{c:#?}");
    assert_eq!(c.verdict, CellVerdict::Pass);
    assert_eq!(c.counts.get(RunVerdict::Pass), 4);
    assert_eq!(c.allowed_vuids, [CHILDREN]);
    assert!(c.vuids.is_empty());

    // For another layer version it does not apply.
    write(
        &sb,
        "other.toml",
        &format!(
            "[[allow]]\nallow_vuids = [\"{CHILDREN}\"]\nlayer_version = \"0.9.*\"\nreason = \"another layer\"\n"
        ),
    );
    let (code, r, _) = run("other.toml", &["--vuid"]);
    assert_eq!(code, 1);
    assert_eq!(the_cell(&r).verdict, CellVerdict::Fail);

    // A flaky entry: whatever the crash coin does, the gate stays green.
    write(
        &sb,
        "flaky.toml",
        "[[expect]]\ncase = \"mock\"\nflaky = true\nreason = \"crashes at exit half of the time\"\n",
    );
    let (code, r, _) = run("flaky.toml", &["--crash-probability", "0.5"]);
    let c = the_cell(&r);
    assert_eq!(code, 0, "{c:#?}");
    assert!(c.flaky_expected);
    let allowed = [CellVerdict::Pass, CellVerdict::Flaky, CellVerdict::Fail];
    assert!(allowed.contains(&c.verdict), "{c:#?}");
}

#[test]
fn errors_in_a_baseline_file_name_the_line_and_column() {
    let sb = Sandbox::new();
    write(
        &sb,
        "b.toml",
        "[[expect]]\ncase = \"mock\"\nexpect = \"fail\"\nsignals = [\"SEGV\"]\nreason = \"r\"\n",
    );
    sb.vkexit()
        .args(["run", "--baseline", "b.toml", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(
            contains("b.toml:4:12: `SEGV` is not a signal name").and(contains("panicked").not()),
        );
    write(
        &sb,
        "b.toml",
        "[[expect]]\ncase = \"mock\"\nexpect = \"pass\"\n",
    );
    sb.vkexit()
        .args(["run", "--baseline", "b.toml", "--"])
        .arg(mock())
        .assert()
        .code(2)
        .stderr(contains("b.toml:1:1: missing field `reason`"));
}

#[test]
fn baseline_update_from_a_real_run_then_a_run_with_it_is_green() {
    let sb = Sandbox::new();
    let mock = mock();
    let args = || {
        Args::run()
            .runs(2)
            .case("handler-before-load")
            .case("clean-exit")
            .runtime("refrt:guarded")
            .runtime("refrt:release-children")
    };
    let (code, r, _) = vkexit(&sb, args().program(&mock, &["--vuid"]));
    assert_eq!(code, 1, "the mock fails without a baseline: {r:#?}");
    std::fs::rename(sb.results(), sb.path().join("first.json")).unwrap();

    let update = |prune: bool| {
        let mut cmd = sb.vkexit();
        cmd.args([
            "baseline",
            "update",
            "--results",
            "first.json",
            "--baseline",
            "ci.toml",
        ]);
        if prune {
            cmd.arg("--prune");
        }
        cmd.assert().code(0)
    };
    update(false).stdout(contains(
        "0 entries kept, 2 added, 0 removed; 1 needs a reason",
    ));
    let text = std::fs::read_to_string(sb.path().join("ci.toml")).unwrap();
    assert!(text.starts_with("# vkexit baseline"), "{text}");
    // The built-in failure, with the built-in reason; the mock, to explain.
    assert!(
        text.contains("teardown destroys the device with the retained children alive"),
        "{text}"
    );
    assert!(
        text.contains("case = \"mock\"") && text.contains("reason = \"TODO: explain\""),
        "{text}"
    );

    let with = args().baseline("ci.toml").program(&mock, &["--vuid"]);
    let (code, r, _) = vkexit(&sb, with);
    assert_eq!(code, 0, "{r:#?}");
    let mock_cell = cell(&r, "mock", "external");
    assert_eq!(mock_cell.verdict, CellVerdict::ExpectedFail);
    assert!(mock_cell
        .expectation
        .as_deref()
        .is_some_and(|e| e.starts_with("ci.toml:")));
    assert_eq!(
        cell(&r, "handler-before-load", "refrt:guarded").verdict,
        CellVerdict::ExpectedFail
    );

    // A second update keeps everything, byte for byte, reasons included.
    let edited = text.replace(
        "reason = \"TODO: explain\"",
        "reason = \"mock --vuid leaves a buffer alive\"",
    );
    std::fs::write(sb.path().join("ci.toml"), &edited).unwrap();
    update(true).stdout(contains(
        "2 entries kept, 0 added, 0 removed; 0 need a reason",
    ));
    assert_eq!(
        std::fs::read_to_string(sb.path().join("ci.toml")).unwrap(),
        edited
    );

    // A bad results file is named with its position.
    write(
        &sb,
        "bad.json",
        "{\n  \"schema\": \"vkexit.results/1\",\n  x\n}",
    );
    sb.vkexit()
        .args([
            "baseline",
            "update",
            "--results",
            "bad.json",
            "--baseline",
            "ci.toml",
        ])
        .assert()
        .code(2)
        .stderr(contains("bad.json").and(contains("line 3 column 3")));
}

#[test]
fn a_baseline_written_for_the_new_name_of_a_check_judges_a_run_that_logs_the_old_one() {
    let sb = Sandbox::new();
    // Layer 1.3.239 logs 00378; layers since 1.3.268 log the same check as 05137.
    write(
        &sb,
        "new.toml",
        r#"[[expect]]
case = "buffer-kept-at-exit"
runtime = "refrt:guarded"
expect = "fail"
run_verdicts = ["vuid"]
vuids = ["VUID-vkDestroyDevice-device-05137"]
reason = "written under layer 1.4"
"#,
    );
    let args = Args::run()
        .runs(2)
        .case("buffer-kept-at-exit")
        .runtime("refrt:guarded")
        .baseline("new.toml");
    let (code, r, _) = vkexit(&sb, args);
    let c = the_cell(&r);
    assert_eq!(code, 0, "{c:#?}");
    assert_eq!(c.verdict, CellVerdict::ExpectedFail);
    assert_eq!(c.expectation.as_deref(), Some("new.toml:1"));
    assert_eq!(c.vuids, [CHILDREN]);
    assert_eq!(c.vuid_names[CHILDREN], "VUID-vkDestroyDevice-device-05137");
}
