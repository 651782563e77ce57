//! The report files of a real run on lavapipe: JUnit XML that parses and
//! counts the failing cells, an HTML report whose failing cells link to
//! their evidence, a Markdown summary, and hostile case names in all three.

use predicates::prelude::*;
use predicates::str::contains;
use std::path::Path;
use vkexit_testkit::results::{the_cell, CellVerdict};
use vkexit_testkit::vkexit::*;

/// Without validation there is no built-in baseline: the three policies
/// whose cleanup handler faults after teardown are `fail`, two pass.
const HANDLER_BEFORE_LOAD: [&str; 5] = [
    "--runs",
    "1",
    "--no-validation",
    "--case",
    "handler-before-load",
];

#[test]
fn junit_has_one_failure_per_failing_cell_with_its_evidence() {
    let sb = Sandbox::new();
    let junit = sb.path().join("junit.xml");
    let mut args = HANDLER_BEFORE_LOAD.to_vec();
    args.extend(["--junit", junit.to_str().unwrap()]);
    let (code, r) = sb.gate_run(&args);
    assert_eq!(code, 1);
    let failing: Vec<_> = r
        .cells
        .iter()
        .filter(|c| c.verdict == CellVerdict::Fail)
        .collect();
    assert_eq!(failing.len(), 3, "{r:#?}");

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("5"));
    assert_eq!(root.attribute("failures"), Some("3"));
    assert_eq!(root.attribute("errors"), Some("0"));
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 1);
    assert_eq!(suites[0].attribute("name"), Some("vkexit.lavapipe.none"));
    assert_eq!(suites[0].attribute("failures"), Some("3"));

    for cell in failing {
        let name = format!("handler-before-load × {}", cell.runtime);
        let case = doc
            .descendants()
            .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(&name))
            .unwrap_or_else(|| panic!("no testcase {name}"));
        assert_eq!(case.attribute("classname"), Some("vkexit.lavapipe.none"));
        let failure = case
            .children()
            .find(|n| n.has_tag_name("failure"))
            .expect("a failure");
        let message = failure.attribute("message").unwrap();
        let first = &cell.artifacts[0];
        assert!(message.contains("signals: SIGSEGV"), "{message}");
        assert!(
            message.contains(&format!("artifacts: {first}")),
            "{message}"
        );
        assert!(Path::new(first).is_dir());
    }
}

#[test]
fn html_links_each_failing_cell_to_its_evidence() {
    let sb = Sandbox::new();
    let html = sb.path().join("report");
    let mut args = HANDLER_BEFORE_LOAD.to_vec();
    args.extend(["--html", html.to_str().unwrap()]);
    let (code, r) = sb.gate_run(&args);
    assert_eq!(code, 1);
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        !page.contains("<script") && !page.contains("<link"),
        "self-contained"
    );

    let cell_link = regex::Regex::new(r#"<td class="v-fail"[^>]*><a href="([^"]+)">"#).unwrap();
    let links: Vec<&str> = cell_link
        .captures_iter(&page)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert_eq!(links.len(), 3, "{page}");
    for href in links {
        assert!(href.starts_with("../vkexit-artifacts/"), "relative: {href}");
        let dir = html.join(href);
        assert!(dir.is_dir(), "{href} is not a directory");
        assert!(dir.join("run-0/result.json").is_file(), "{href}");
    }
    // The green cells keep no evidence: they link to their row instead.
    let row_link = regex::Regex::new(r##"<td class="v-pass"[^>]*><a href="#cell-\d+">"##).unwrap();
    assert_eq!(row_link.find_iter(&page).count(), 2, "{page}");
    // Counts and the pass rate with its interval.
    assert!(page.contains("5 cells, 5 runs: 2 pass, 3 fail"), "{page}");
    assert!(page.contains("0 % (95 % interval 0 %–79.3 %)"), "{page}");
    assert_eq!(r.cells.len(), 5);
}

#[test]
fn markdown_lists_the_red_cells_then_the_matrix() {
    let sb = Sandbox::new();
    let md = sb.path().join("summary.md");
    let mut args = HANDLER_BEFORE_LOAD.to_vec();
    args.extend(["--markdown", md.to_str().unwrap()]);
    let (code, _) = sb.gate_run(&args);
    assert_eq!(code, 1);
    let text = std::fs::read_to_string(md).unwrap();
    assert!(
        text.starts_with("## vkexit: gate red\n\n5 cells, 5 runs: 2 pass, 3 fail"),
        "{text}"
    );
    let red = text
        .find("### Cells that are not green (3)")
        .expect("red table");
    let matrix = text
        .find("### lavapipe, emulation none, layers none")
        .expect("matrix");
    assert!(red < matrix);
    assert!(
        text.contains("| `handler-before-load` | **fail**: SIGSEGV 1/1 | **fail**: SIGSEGV 1/1 | **fail**: SIGSEGV 1/1 | pass 1/1 | pass 1/1 |"),
        "{text}"
    );
}

#[test]
fn hostile_case_names_are_escaped_in_every_report() {
    let sb = Sandbox::new();
    let name = "a<b>&c\"d'e\u{1}f | *g*";
    let program = sb.path().join(name);
    std::fs::copy(mock(), &program).unwrap();
    let (junit, md, html) = (
        sb.path().join("j.xml"),
        sb.path().join("s.md"),
        sb.path().join("h"),
    );
    let (code, r) = sb.gate_run(&[
        "--runs",
        "1",
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--",
        program.to_str().unwrap(),
        "--exit-code",
        "3",
    ]);
    assert_eq!(code, 1);
    assert_eq!(the_cell(&r).case, name);

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .unwrap();
    // The control character cannot be in XML 1.0: it is shown as \x01.
    assert_eq!(
        case.attribute("name"),
        Some("a<b>&c\"d'e\\x01f | *g* × external")
    );
    assert_eq!(root_failures(&doc), "1");

    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(page.contains("a&lt;b&gt;&amp;c\"d'e\\x01f | *g*"), "{page}");
    assert!(!page.contains("a<b>") && !page.contains('\u{1}'));

    let summary = std::fs::read_to_string(md).unwrap();
    let row = summary
        .lines()
        .find(|l| l.starts_with("| **fail**"))
        .unwrap();
    let borders = row.matches('|').count() - row.matches("\\|").count();
    assert_eq!(borders, 10, "{row}");
}

fn root_failures<'a>(doc: &'a roxmltree::Document) -> &'a str {
    doc.root_element().attribute("failures").unwrap()
}

#[test]
fn unwritable_report_paths_fail_before_any_run() {
    for (flag, path) in [
        ("--junit", "/proc/vkexit-junit.xml"),
        ("--markdown", "/proc/vkexit-summary.md"),
        ("--html", "/proc/vkexit-html"),
    ] {
        let sb = Sandbox::new();
        sb.vkexit()
            .args(["run", flag, path, "--"])
            .arg(mock())
            .assert()
            .code(2)
            .stderr(contains(path).and(contains("panicked").not()));
        assert!(
            !sb.path().join("vkexit-artifacts").exists(),
            "{flag}: runs started"
        );
    }
    let sb = Sandbox::new();
    std::fs::write(
        sb.path().join("r.json"),
        r#"{"schema": "vkexit.results/1", "vkexit_version": "0.1.0", "cells": []}"#,
    )
    .unwrap();
    sb.vkexit()
        .args([
            "merge",
            "r.json",
            "--json",
            "m.json",
            "--html",
            "/proc/vkexit-html",
        ])
        .assert()
        .code(2)
        .stderr(contains("/proc/vkexit-html"));
}

const CHROMIUM: &str = "/usr/bin/chromium";

/// Debian's Chromium, headless: `--dump-dom` prints the document as the browser built it.
/// `None` when it is not installed (ci/setup-tests.sh installs it).
fn chromium(args: &[&str]) -> Option<std::process::Output> {
    if !Path::new(CHROMIUM).exists() {
        return None;
    }
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Some(out)
}

macro_rules! chromium_or_skip {
    ($($arg:expr),* $(,)?) => {
        match chromium(&[$($arg),*]) {
            Some(out) => out,
            None => vkexit_testkit::skip!(
                "Debian's chromium is not installed ({CHROMIUM}): run ci/setup-tests.sh (apt-get install chromium)"
            ),
        }
    };
}

#[test]
fn the_html_report_renders_in_chromium_with_the_expected_matrix_and_evidence() {
    let sb = Sandbox::new();
    let html = sb.path().join("report");
    let (code, _) = sb.gate_run(&[
        "--runs",
        "1",
        "--case",
        "handler-before-load",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "the built-in baseline knows every cell");
    let url = format!("file://{}", html.join("index.html").display());

    let out = chromium_or_skip!("--dump-dom", &url);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium: {out:?}"
    );
    // The browser's own tree: it adds the <tbody> the page leaves implicit.
    let matrix =
        regex::Regex::new(r#"(?s)<table class="matrix">\s*<tbody>(.*?)</tbody>\s*</table>"#)
            .unwrap()
            .captures(&dom)
            .unwrap_or_else(|| panic!("no matrix table in the rendered page:\n{dom}"))[1]
            .to_string();
    let row = regex::Regex::new(r"(?s)<tr><th>([^<]*)</th>(.*?)</tr>").unwrap();
    let td = regex::Regex::new(r#"<td class="v-([a-z-]+)""#).unwrap();
    let rows: Vec<(String, Vec<String>)> = row
        .captures_iter(&matrix)
        .map(|r| {
            let classes = td.captures_iter(&r[2]).map(|c| c[1].to_string()).collect();
            (r[1].to_string(), classes)
        })
        .filter(|(_, classes): &(String, Vec<String>)| !classes.is_empty())
        .collect();
    assert_eq!(
        rows,
        [(
            "handler-before-load".to_string(),
            ["expected-fail", "expected-fail", "expected-fail", "expected-fail", "pass"]
                .map(String::from)
                .to_vec()
        )],
        "never, static-destructor, atexit-after-init and guarded fail as known; release-children passes"
    );
    // Each failing cell's evidence: its run's files and the story of its exit.
    assert_eq!(
        dom.matches(r#"<section class="evidence">"#).count(),
        4,
        "{dom}"
    );
    assert!(dom.contains("SIGSEGV"), "{dom}");
    assert!(dom.contains(">validation.log</a>"), "{dom}");
    assert!(
        dom.contains("main returned"),
        "the exit timeline is shown:\n{dom}"
    );

    let shot = sb.path().join("shot.png");
    let out = chromium_or_skip!(
        "--window-size=1280,1600",
        &format!("--screenshot={}", shot.display()),
        &url,
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {out:?}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

/// A program that crashes on every second run: the mock, under lavapipe and
/// the validation layer, with `--crash-at-exit` on odd runs. A counter file
/// decides, not a random draw, so the cell is flaky every time (`-j 1`).
fn crashes_every_second_run(sb: &Sandbox) -> std::path::PathBuf {
    let script = sb.path().join("every-second-run");
    let counter = sb.path().join("runs-so-far");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             n=$(cat '{counter}' 2>/dev/null || echo 0)\n\
             echo $((n + 1)) > '{counter}'\n\
             if [ $((n % 2)) -eq 1 ]; then exec '{mock}' --crash-at-exit; fi\n\
             exec '{mock}'\n",
            counter = counter.display(),
            mock = mock().display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    script
}

/// The three reports of one set of results, as `vkexit merge` writes them.
struct Reports {
    code: i32,
    junit: String,
    markdown: String,
    html: String,
}

fn reports_of(sb: &Sandbox, results: &Path, baseline: Option<&Path>, tag: &str) -> Reports {
    let (junit, md, html) = (
        sb.path().join(format!("{tag}.xml")),
        sb.path().join(format!("{tag}.md")),
        sb.path().join(format!("{tag}-html")),
    );
    let mut cmd = sb.vkexit();
    cmd.arg("merge")
        .arg(results)
        .arg("--json")
        .arg(sb.path().join(format!("{tag}.json")))
        .arg("--junit")
        .arg(&junit)
        .arg("--markdown")
        .arg(&md)
        .arg("--html")
        .arg(&html);
    if let Some(b) = baseline {
        cmd.arg("--baseline").arg(b);
    }
    let out = cmd.output().unwrap();
    Reports {
        code: out.status.code().expect("vkexit exits normally"),
        junit: std::fs::read_to_string(junit).unwrap(),
        markdown: std::fs::read_to_string(md).unwrap(),
        html: std::fs::read_to_string(html.join("index.html")).unwrap(),
    }
}

/// The test case of the only cell, and the root's failures count.
fn only_testcase(xml: &str) -> (Vec<(String, Option<String>)>, String) {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .expect("a testcase");
    let kids = case
        .children()
        .filter(|n| n.is_element())
        .map(|n| {
            (
                n.tag_name().name().to_string(),
                n.attribute("message").map(str::to_string),
            )
        })
        .collect();
    (kids, root_failures(&doc).to_string())
}

#[test]
fn a_flaky_cell_is_red_in_every_report_unless_a_baseline_knows_it() {
    let sb = Sandbox::new();
    let program = crashes_every_second_run(&sb);
    let junit = sb.path().join("run.xml");
    let (code, r) = sb.gate_run(&[
        "--runs",
        "4",
        "-j",
        "1",
        "--junit",
        junit.to_str().unwrap(),
        "--",
        program.to_str().unwrap(),
    ]);
    let cell = the_cell(&r);
    assert_eq!(cell.verdict, CellVerdict::Flaky, "{r:#?}");
    assert_eq!((cell.counts.pass, cell.counts.crash), (2, 2), "{r:#?}");
    assert_eq!(cell.signals, ["SIGSEGV"]);
    assert_eq!(code, 1, "an unexpected flaky cell turns the gate red");

    // Unexpected: a failure in JUnit (as `run` and `merge` write it), red in
    // Markdown and HTML.
    let red = reports_of(&sb, &sb.results(), None, "red");
    assert_eq!(red.code, 1);
    for xml in [std::fs::read_to_string(&junit).unwrap(), red.junit] {
        let (kids, failures) = only_testcase(&xml);
        assert_eq!(failures, "1", "{xml}");
        assert_eq!(kids.len(), 1, "{xml}");
        assert_eq!(kids[0].0, "failure", "{xml}");
        let message = kids[0].1.as_deref().unwrap();
        assert!(
            message.contains("runs: 4 (pass 2/4, SIGSEGV 2/4)"),
            "{message}"
        );
        assert!(message.contains("signals: SIGSEGV"), "{message}");
        assert!(message.contains("artifacts: /"), "{message}");
    }
    assert!(
        red.markdown.starts_with("## vkexit: gate red"),
        "{}",
        red.markdown
    );
    assert!(
        red.markdown.contains("### Cells that are not green (1)")
            && red.markdown.contains("| **flaky** | `every-second-run` |"),
        "{}",
        red.markdown
    );
    assert!(
        red.html.contains("<span class=\"red\">red</span>"),
        "{}",
        red.html
    );
    assert!(
        red.html
            .contains("<tr><td class=\"v-flaky\">flaky</td><td>1</td><td>1</td></tr>"),
        "{}",
        red.html
    );
    assert!(red.html.contains("flaky (gate red)"), "{}", red.html);

    // Known to be flaky: the gate is green, and so is every report.
    let baseline = sb.path().join("known.toml");
    std::fs::write(
        &baseline,
        "[[expect]]\ncase = \"every-second-run\"\nruntime = \"external\"\nflaky = true\n\
         reason = \"crashes on every second run\"\n",
    )
    .unwrap();
    let green = reports_of(&sb, &sb.results(), Some(&baseline), "green");
    assert_eq!(green.code, 0);
    let (kids, failures) = only_testcase(&green.junit);
    assert_eq!(failures, "0", "{}", green.junit);
    let names: Vec<&str> = kids.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["flakyFailure", "system-out"], "{}", green.junit);
    assert_eq!(
        kids[0].1.as_deref().unwrap().split("; ").next(),
        Some("2 of 4 runs crash (SIGSEGV)")
    );
    assert!(
        green.markdown.starts_with("## vkexit: gate green"),
        "{}",
        green.markdown
    );
    assert!(
        !green.markdown.contains("Cells that are not green"),
        "{}",
        green.markdown
    );
    assert!(
        green
            .markdown
            .contains("flaky (known flaky): pass 2/4, SIGSEGV 2/4"),
        "{}",
        green.markdown
    );
    assert!(
        green.html.contains("<span class=\"green\">green</span>"),
        "{}",
        green.html
    );
    assert!(
        green
            .html
            .contains("<tr><td class=\"v-flaky\">flaky</td><td>1</td><td>0</td></tr>"),
        "{}",
        green.html
    );
    assert!(
        green.html.contains("flaky (known flaky: gate green)"),
        "{}",
        green.html
    );
}

/// What the browser measured once it laid the page out, written into the DOM by a copy of
/// the report with a script added (the report itself has none): how far the page scrolls
/// sideways, and per swimlane picture its size and that of the box it scrolls in.
const PROBE: &str = "<script>
const d = document.documentElement;
document.body.dataset.pageOverflow = d.scrollWidth - d.clientWidth;
document.body.dataset.swimlanes = [...document.querySelectorAll('.swimlane-box > svg')].map(s => {
  const r = s.getBoundingClientRect();
  return [Math.round(r.width), Math.round(r.height), s.parentElement.clientWidth, s.parentElement.scrollWidth].join('x');
}).join(' ');
</script>";

#[test]
fn the_report_of_real_failures_shows_swimlanes_and_the_layers_message_in_chromium() {
    let sb = Sandbox::new();
    // The Jetson ordering, emulated: the driver's exit handler unmaps under a live worker.
    let (code, _) = sb.gate_run(&[
        "--runs",
        "1",
        "--case",
        "clean-exit",
        "--runtime",
        "refrt:static-destructor",
        "--emulate",
        "tegra",
    ]);
    assert_eq!(code, 0, "known to fail");
    std::fs::rename(sb.results(), sb.path().join("tegra.json")).unwrap();
    // A user program that leaves a buffer alive at vkDestroyDevice.
    let (code, _) = sb.gate_mock(1, &[], &["--vuid"]);
    assert_eq!(code, 1);
    let html = sb.path().join("report");
    let out = sb
        .vkexit()
        .args([
            "merge",
            "tegra.json",
            "r.json",
            "--json",
            "all.json",
            "--html",
        ])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(!page.contains("<script"), "the report itself has no script");
    let probe = html.join("probe.html");
    std::fs::write(&probe, page.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let url = format!("file://{}", probe.display());

    let out = chromium_or_skip!("--window-size=1280,1000", "--dump-dom", &url);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("</html>"), "chromium: {out:?}");
    let attr = |name: &str| {
        regex::Regex::new(r#"<body data-page-overflow="(-?\d+)" data-swimlanes="([^"]*)""#)
            .unwrap()
            .captures(&dom)
            .map(|c| c[if name == "overflow" { 1 } else { 2 }].to_string())
            .unwrap_or_else(|| panic!("the probe did not run:\n{dom}"))
    };
    assert_eq!(attr("overflow"), "0", "the page scrolls sideways");
    let swimlanes: Vec<Vec<u32>> = attr("swimlanes")
        .split(' ')
        .map(|s| s.split('x').map(|n| n.parse().unwrap()).collect())
        .collect();
    assert_eq!(swimlanes.len(), 2, "one per failing cell: {swimlanes:?}");
    for s in &swimlanes {
        let [w, h, box_w, box_scroll] = s[..] else {
            panic!("{s:?}")
        };
        assert!(w >= 1000 && h >= 300, "sized: {s:?}");
        assert!(
            box_w <= 1280 && box_scroll >= w,
            "scrolls in its own box: {s:?}"
        );
    }
    // The layer's message with its call and objects, beside the picture.
    assert!(
        regex::Regex::new(r"The validation layer: <code>VUID-vkDestroyDevice-device-00378</code> in <code>vkDestroyDevice</code>: For VkDevice 0x[0-9a-f]+, VkBuffer 0x[0-9a-f]+ has not been destroyed\.")
            .unwrap()
            .is_match(&dom),
        "{dom}"
    );
    assert!(dom.contains("CRASH SIGSEGV"), "{dom}");
    // The colours explained; verdicts no cell has are not listed.
    assert!(dom.contains(r#"<p class="legend">"#), "{dom}");
    let counts = regex::Regex::new(r#"(?s)<table class="counts">(.*?)</table>"#)
        .unwrap()
        .captures(&dom)
        .unwrap()[1]
        .to_string();
    let rows: Vec<&str> = regex::Regex::new(r#"<td class="v-([a-z-]+)">"#)
        .unwrap()
        .captures_iter(&counts)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert_eq!(rows, ["fail", "expected-fail"], "{counts}");

    let shot = sb.path().join("shot.png");
    let out = chromium_or_skip!(
        "--window-size=1280,1600",
        &format!("--screenshot={}", shot.display()),
        &format!("file://{}", html.join("index.html").display()),
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {out:?}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

/// A cell's first failing run is said on stderr as it happens, with why and where its evidence
/// is, before the cell's own line once all its runs are done; its later failures are not.
#[test]
fn the_first_failing_run_of_a_cell_is_said_as_it_happens() {
    let sb = Sandbox::new();
    let args = vkexit_testkit::results::Args::run()
        .runs(3)
        .opt("--jobs", "1")
        .program(&mock(), &["--crash-at-exit"]);
    let out = sb.vkexit().args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let said: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("[run "))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    let at = said[0];
    assert!(
        lines[at].starts_with("[run 1/3] crash  mock: killed by SIGSEGV"),
        "{stderr}"
    );
    let evidence = lines[at + 1]
        .strip_prefix("    evidence: ")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        Path::new(evidence).join("crash.jsonl").is_file(),
        "{stderr}"
    );
    let cell = lines
        .iter()
        .position(|l| l.starts_with("[1/1] crash  "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(at < cell, "{stderr}");
}
