//! Why a run failed, said where the failure is shown: the validation layer's
//! own message (its call and objects) in the terminal table, JUnit, Markdown
//! and `explain`; the exit code and stderr's last lines for a program that
//! exited nonzero; the evidence path on a line of its own under every failing cell;
//! and the exit timeline drawn as an SVG swimlane (`explain --svg`). Real runs
//! on lavapipe under the real validation layer.

use std::path::Path;
use vkexit_testkit::results::{the_cell, Results};
use vkexit_testkit::vkexit::*;

/// `vkexit run ARGS` in the sandbox: exit code, stdout, and the results.
fn run(sb: &Sandbox, args: &[&str]) -> (i32, String, Results) {
    let out = sb
        .vkexit()
        .env("COLUMNS", "1000")
        .args(["run", "--driver", "lavapipe", "--json"])
        .arg(sb.results())
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap(), stdout, sb.gate_results())
}

/// The table line of the cell whose case is `case`.
fn table_line<'a>(stdout: &'a str, case: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{case} ")))
        .unwrap_or_else(|| panic!("no line for {case}:\n{stdout}"))
}

fn explain(sb: &Sandbox, dir: &str, svg: Option<&Path>) -> String {
    let mut cmd = sb.vkexit();
    cmd.arg("explain").arg(dir);
    if let Some(svg) = svg {
        cmd.arg("--svg").arg(svg);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_leaked_buffer_is_reported_in_the_layers_words_everywhere() {
    let sb = Sandbox::new();
    let (junit, md) = (sb.path().join("j.xml"), sb.path().join("s.md"));
    let mock = mock();
    let (code, stdout, r) = run(
        &sb,
        &[
            "--runs",
            "1",
            "--junit",
            junit.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
            "--",
            mock.to_str().unwrap(),
            "--vuid",
        ],
    );
    assert_eq!(code, 1);
    let cell = the_cell(&r);
    let dir = cell.artifacts[0].clone();
    let said = regex::Regex::new(
        r"VUID-vkDestroyDevice-device-00378 in vkDestroyDevice: For VkDevice 0x[0-9a-f]+, VkBuffer 0x[0-9a-f]+ has not been destroyed\.",
    )
    .unwrap();

    // The terminal table: one line with the message; the evidence path on a line of its own,
    // under the failing cell's name.
    let line = table_line(&stdout, "mock");
    assert!(said.is_match(line), "{line}");
    assert!(!line.contains(&dir), "{line}");
    assert!(
        stdout.contains("\nfail mock\n") && stdout.contains(&format!("\n    evidence: {dir}\n")),
        "{stdout}"
    );

    // JUnit: the failure's message and its body, with the log's path.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .expect("a failure");
    assert!(
        said.is_match(failure.attribute("message").unwrap()),
        "{xml}"
    );
    let body = failure.text().unwrap();
    assert!(said.is_match(body), "{body}");
    assert!(
        body.contains(&format!("validation log: {dir}/validation.log")),
        "{body}"
    );

    // Markdown: the message in the evidence column, a link to the log.
    let summary = std::fs::read_to_string(&md).unwrap();
    let row = summary
        .lines()
        .find(|l| l.starts_with("| **fail**"))
        .unwrap();
    assert!(row.contains("has not been destroyed"), "{row}");
    assert!(row.contains("[validation.log](<"), "{row}");

    // explain: the message and its objects before the timeline.
    let text = explain(&sb, &dir, None);
    assert!(said.is_match(&text), "{text}");
    assert!(text.contains("  objects: VkDevice 0x"), "{text}");
    assert!(
        text.contains(&format!("validation log: {dir}/validation.log")),
        "{text}"
    );
    assert!(
        text.find("has not been destroyed") < text.find("main returned 0"),
        "{text}"
    );
}

#[test]
fn a_program_that_exits_nonzero_shows_its_code_and_the_end_of_stderr() {
    let sb = Sandbox::new();
    let (code, stdout, r) = run(&sb, &["--runs", "1", "--", "bash", "missing.sh"]);
    assert_eq!(code, 1);
    let dir = the_cell(&r).artifacts[0].clone();
    let line = table_line(&stdout, "missing.sh");
    assert!(
        line.contains(
            "exit code 127 (command not found), stderr: bash: missing.sh: No such file or directory"
        ),
        "{line}"
    );
    assert!(
        stdout.contains(&format!("\n    evidence: {dir}\n")),
        "{stdout}"
    );
    let text = explain(&sb, &dir, None);
    assert!(
        text.contains("exit code 127 (command not found)\n"),
        "{text}"
    );
    assert!(
        text.contains("stderr: bash: missing.sh: No such file or directory\n"),
        "{text}"
    );
}

/// The Jetson ordering drawn: the driver's exit handler (the tegra-exit layer's) runs, its
/// worker thread crashes in the unmapped region on a lane of its own, and the runtime's
/// destructor, registered at load, never ran.
#[test]
fn explain_svg_draws_the_jetson_ordering_one_lane_per_thread() {
    let sb = Sandbox::new();
    let (code, _, r) = run(
        &sb,
        &[
            "--runs",
            "1",
            "--case",
            "clean-exit",
            "--runtime",
            "refrt:static-destructor",
            "--emulate",
            "tegra",
        ],
    );
    assert_eq!(code, 0, "known to fail: {r:#?}");
    let dir = the_cell(&r).artifacts[0].clone();
    let svg_path = sb.path().join("exit.svg");
    explain(&sb, &dir, Some(&svg_path));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let width: u32 = root.attribute("width").unwrap().parse().unwrap();
    assert!(width >= 1000, "{width}");

    let lanes: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("lane"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        lanes.iter().any(|l| l.starts_with("clean-exit · pid ")),
        "{lanes:?}"
    );
    assert!(
        lanes.iter().any(|l| l.starts_with("vkexit-tegra-0 · pid ")),
        "{lanes:?}"
    );

    // Every mark's sentence, in the order drawn.
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    let at = |what: &str| {
        titles
            .iter()
            .position(|t| t.contains(what))
            .unwrap_or_else(|| panic!("no mark for {what}: {titles:#?}"))
    };
    let driver_handler = at("(atexit, registered by libVkLayer_vkexit_tegra_exit.so) runs");
    let unmapped = at("driver region");
    let crash = at("CRASH SIGSEGV");
    let never = at("never ran, cut off by the crash: exit handler #1 (atexit, registered by libvkexit_refrt.so)");
    assert!(
        at("main returned 0") < driver_handler && driver_handler < crash && crash < never,
        "{titles:#?}"
    );
    assert!(unmapped < crash);
    // Thousands of static destructors are a few bars, not thousands of marks.
    assert!(titles.len() < 150, "{} marks", titles.len());
    let many = regex::Regex::new(r"registered: \d{3,} C\+\+ static destructors of lib").unwrap();
    assert!(titles.iter().any(|t| many.is_match(t)), "{titles:#?}");
}

#[test]
fn explain_svg_to_a_path_that_cannot_be_written_names_it() {
    let sb = Sandbox::new();
    let (_, _, r) = run(&sb, &["--runs", "1", "--", "bash", "missing.sh"]);
    let dir = the_cell(&r).artifacts[0].clone();
    let out = sb
        .vkexit()
        .args(["explain", &dir, "--svg", "/proc/vkexit-no/x.svg"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/proc/vkexit-no/x.svg"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A hang has no time of its own: its threads are drawn at the end, still running when the
/// timeout came, after `main` returned for a hang in an exit handler.
#[test]
fn explain_svg_marks_a_hang_at_exit_on_its_threads_lane() {
    let sb = Sandbox::new();
    let (code, r) = sb.gate_mock(1, &["--timeout", "2"], &["--hang-at-exit"]);
    assert_eq!(code, 1);
    let dir = the_cell(&r).artifacts[0].clone();
    let svg_path = sb.path().join("hang.svg");
    explain(&sb, &dir, Some(&svg_path));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    let returned = titles.iter().position(|t| t.starts_with("main returned"));
    let hung = titles
        .iter()
        .position(|t| t.starts_with("still running at the timeout: thread mock"));
    assert!(returned.is_some() && hung > returned, "{titles:#?}");
    assert!(
        titles[hung.unwrap()].ends_with(", during exit"),
        "{titles:#?}"
    );
}

#[test]
fn explain_shows_stdout_when_stderr_is_silent_with_a_column_for_each_process() {
    let sb = Sandbox::new();
    // As a GoogleTest program fails: its message on stdout, nothing on stderr; and a child
    // process started on the way.
    let script = "/bin/true; echo '[ RUN      ] Suite.Fails'; echo 'x.cc:9: Failure'; \
                  echo '[  FAILED  ] Suite.Fails (0 ms)'; exit 1";
    let (code, stdout, r) = run(
        &sb,
        &[
            "--runs",
            "1",
            "--name",
            "gtest-like",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(code, 1, "{stdout}");
    let dir = the_cell(&r).artifacts[0].clone();
    assert!(
        table_line(&stdout, "gtest-like")
            .contains("exit code 1, stderr empty, stdout: [  FAILED  ] Suite.Fails (0 ms)"),
        "{stdout}"
    );
    let text = explain(&sb, &dir, None);
    for said in [
        "exit code 1\nstderr: (empty)\n",
        "stdout: x.cc:9: Failure\n",
        "stdout: [  FAILED  ] Suite.Fails (0 ms)\n",
    ] {
        assert!(text.contains(said), "{said:?} in\n{text}");
    }
    // sh and /bin/true both wrote to the exit timeline: each line names its process.
    assert!(text.contains(" process  from   what\n"), "{text}");
}

#[test]
fn a_worker_threads_abort_in_the_c_library_is_the_headline_with_the_librarys_message() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        vkexit_testkit::skip!("no /usr/bin/python3 to corrupt the heap from a worker thread");
    }
    let sb = Sandbox::new();
    // A worker thread hands free() a pointer malloc never gave: glibc says so on stderr and
    // aborts the process.
    let script = "import ctypes, threading\n\
                  libc = ctypes.CDLL('libc.so.6')\n\
                  libc.malloc.restype = ctypes.c_void_p\n\
                  def corrupt():\n    p = libc.malloc(64)\n    libc.free(ctypes.c_void_p(p + 16))\n\
                  t = threading.Thread(target=corrupt)\nt.start()\nt.join()\n";
    let (code, stdout, r) = run(
        &sb,
        &[
            "--runs",
            "1",
            "--name",
            "bad-free",
            "--",
            "/usr/bin/python3",
            "-c",
            script,
        ],
    );
    assert_eq!(code, 1, "{stdout}");
    let cell = the_cell(&r);
    assert_eq!(cell.signals, ["SIGABRT"], "{cell:#?}");
    let dir = cell.artifacts[0].clone();
    let text = explain(&sb, &dir, None);
    let crash = text
        .lines()
        .find(|l| l.starts_with("crash: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        crash.starts_with("crash: SIGABRT") && crash.contains(" in libc.so.6"),
        "{crash}"
    );
    assert!(
        text.contains("the C library said: free(): invalid pointer\n"),
        "{text}"
    );
    // The backtrace of the aborting thread, or why there is none.
    assert!(
        text.contains("\nbacktrace of the crashing thread:\n") || text.contains("no backtrace: "),
        "{text}"
    );
}
