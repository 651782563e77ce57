//! JUnit XML for a CI's test view (GitLab, Jenkins, GitHub test reporters).
//!
//! One `<testsuite>` per driver and emulation, one `<testcase>` per cell,
//! named `case × runtime`, classname `vkexit.<driver>.<emulation>`:
//!
//! A test case fails exactly when its cell turns the gate red, so the CI's
//! test view and vkexit's exit code agree:
//! - a red `fail`, `flaky` or `unexpected-pass` cell is a `<failure>`, an
//!   `error` cell an `<error>`, each with the reason, the counts of each kind
//!   of run, signals, VUIDs and first artifact in its message;
//! - a cell known to be flaky (`flaky = true` in a baseline) that failed some
//!   or all of its runs keeps the gate green: a passed test with one
//!   `<flakyFailure>` per kind of failing run, as cargo-nextest writes flaky
//!   tests;
//! - `skipped` is `<skipped>` with the reason;
//! - `expected-fail` is passed, its `<system-out>` naming the known failure
//!   and its evidence;
//! - an interrupted run, red although its cells may all be green, adds a
//!   suite `vkexit` with one `<error>` test case saying so.

use super::markup::{attr, text};
use super::{observation, pass_rate_line, short_vuid};
use std::fmt::Write as _;
use vkexit_evidence::files;
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

/// The JUnit document of a set of results.
pub fn render(results: &Results) -> String {
    let suites = suites(&results.cells);
    let mut all = Tally::of(results.cells.iter());
    if results.interrupted {
        all.tests += 1;
        all.errors += 1;
    }
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"vkexit\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
        all.tests,
        all.failures,
        all.errors,
        all.skipped,
        seconds(all.duration_ms)
    );
    for suite in &suites {
        let tally = Tally::of(suite.cells.iter().copied());
        let _ = writeln!(
            out,
            "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
            tally.tests,
            tally.failures,
            tally.errors,
            tally.skipped,
            seconds(tally.duration_ms),
            name = attr(&suite.name),
        );
        out.push_str("    <properties>\n");
        let first = suite.cells[0];
        let mut props = vec![
            ("driver", first.driver.clone()),
            ("emulation", first.emulation.clone()),
        ];
        props.extend(first.device.clone().map(|d| ("device", d)));
        props.extend(
            first
                .driver_manifest
                .clone()
                .map(|m| ("driver_manifest", m)),
        );
        props.push(("vkexit_version", results.vkexit_version.clone()));
        props.push(("gate", gate(results).to_string()));
        if results.interrupted {
            props.push(("interrupted", "true".to_string()));
        }
        for (name, value) in props {
            let _ = writeln!(
                out,
                "      <property name=\"{name}\" value=\"{}\"/>",
                attr(&value)
            );
        }
        out.push_str("    </properties>\n");
        for c in &suite.cells {
            testcase(&mut out, c, &suite.name, suite.needs_layers(c));
        }
        out.push_str("  </testsuite>\n");
    }
    if results.interrupted {
        out.push_str(
            "  <testsuite name=\"vkexit\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0.000\">\n",
        );
        out.push_str("    <testcase name=\"interrupted\" classname=\"vkexit\" time=\"0.000\">\n");
        element(
            &mut out,
            "error",
            "interrupted: vkexit was stopped before every run finished, so the gate is red",
            "interrupted",
            "The cells above are the runs that finished before vkexit was stopped.",
        );
        out.push_str("    </testcase>\n  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn gate(results: &Results) -> &'static str {
    match results.is_green() {
        true => "green",
        false => "red",
    }
}

struct Suite<'a> {
    name: String,
    cells: Vec<&'a CellResult>,
}

impl Suite<'_> {
    /// Whether a cell's name needs its layers to tell it from another cell
    /// of the same case and runtime (results merged from runs with
    /// different layers).
    fn needs_layers(&self, c: &CellResult) -> bool {
        self.cells
            .iter()
            .filter(|o| o.case == c.case && o.runtime == c.runtime)
            .count()
            > 1
    }
}

fn suites(cells: &[CellResult]) -> Vec<Suite<'_>> {
    let mut suites: Vec<Suite> = Vec::new();
    for c in cells {
        let name = classname(c);
        match suites.iter_mut().find(|s| s.name == name) {
            Some(s) => s.cells.push(c),
            None => suites.push(Suite {
                name,
                cells: vec![c],
            }),
        }
    }
    suites
}

fn classname(c: &CellResult) -> String {
    format!("vkexit.{}.{}", c.driver, c.emulation)
}

#[derive(Default)]
struct Tally {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    duration_ms: u64,
}

impl Tally {
    fn of<'a>(cells: impl Iterator<Item = &'a CellResult>) -> Tally {
        let mut t = Tally::default();
        for c in cells {
            t.tests += 1;
            t.duration_ms += c.duration_ms;
            match c.verdict {
                CellVerdict::Error => t.errors += 1,
                CellVerdict::Skipped | CellVerdict::NoVulkan => t.skipped += 1,
                _ if c.is_green() => {}
                CellVerdict::Fail | CellVerdict::Flaky | CellVerdict::UnexpectedPass => {
                    t.failures += 1
                }
                CellVerdict::Pass | CellVerdict::ExpectedFail => {
                    unreachable!("a {} cell is green", c.verdict)
                }
            }
        }
        t
    }
}

fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

fn testcase(out: &mut String, c: &CellResult, classname: &str, with_layers: bool) {
    let mut name = format!("{} × {}", c.case, c.runtime);
    if with_layers {
        let _ = write!(name, " [{}]", c.layers.join("+"));
    }
    let _ = write!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
        attr(&name),
        attr(classname),
        seconds(c.duration_ms)
    );
    match c.verdict {
        CellVerdict::Pass => {
            out.push_str("/>\n");
            return;
        }
        _ => out.push_str(">\n"),
    }
    match c.verdict {
        CellVerdict::Error => element(out, "error", &message(c), "error", &details(c)),
        CellVerdict::Skipped | CellVerdict::NoVulkan => {
            let reason = c.reason.as_deref().unwrap_or(c.verdict.name());
            let _ = writeln!(out, "      <skipped message=\"{}\"/>", attr(reason));
        }
        // Known to be flaky: failing runs keep the gate green, so the test
        // passes, with its failures.
        CellVerdict::Fail | CellVerdict::Flaky if c.is_green() => flaky_failures(out, c),
        CellVerdict::Fail | CellVerdict::Flaky | CellVerdict::UnexpectedPass => {
            element(out, "failure", &message(c), c.verdict.name(), &details(c));
        }
        CellVerdict::ExpectedFail => {
            let said = format!(
                "expected-fail: known to fail: {}\n\n{}",
                c.reason.as_deref().unwrap_or("(no reason recorded)"),
                details(c)
            );
            let _ = writeln!(out, "      <system-out>{}</system-out>", text(&said));
        }
        CellVerdict::Pass => unreachable!("a passing test case is closed above"),
    }
    out.push_str("    </testcase>\n");
}

/// One `<flakyFailure>` per kind of failing run, as cargo-nextest writes a
/// test that failed and then passed.
fn flaky_failures(out: &mut String, c: &CellResult) {
    for v in RunVerdict::ALL {
        let n = c.counts.get(v);
        if v == RunVerdict::Pass || n == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "      <flakyFailure message=\"{}\" type=\"{}\">",
            attr(&run_kind_message(c, v, n)),
            v.name()
        );
        let _ = writeln!(
            out,
            "        <system-out>{}</system-out>",
            text(&details(c))
        );
        out.push_str("      </flakyFailure>\n");
    }
    let said = format!(
        "{}: {} of {} runs passed, {}; known to be flaky, so it keeps the vkexit gate green\n\n{}",
        c.verdict,
        c.counts.passed(),
        c.runs,
        pass_rate_line(c),
        details(c)
    );
    let _ = writeln!(out, "      <system-out>{}</system-out>", text(&said));
}

fn element(out: &mut String, tag: &str, message: &str, kind: &str, body: &str) {
    let _ = writeln!(
        out,
        "      <{tag} message=\"{}\" type=\"{}\">{}</{tag}>",
        attr(message),
        attr(kind),
        text(body)
    );
}

/// One line: the reason, how the runs ended, then signals, VUIDs and the
/// first artifact.
fn message(c: &CellResult) -> String {
    let mut parts = vec![format!(
        "{}: {}",
        c.verdict,
        c.reason.as_deref().unwrap_or("(no reason recorded)")
    )];
    if c.runs > 0 {
        parts.push(format!("runs: {} ({})", c.runs, observation(c)));
    }
    if let Some(said) = super::first_run::FirstRun::of(c).and_then(|r| r.one_line()) {
        parts.push(said);
    }
    evidence(c, &mut parts);
    parts.join("; ")
}

fn evidence(c: &CellResult, parts: &mut Vec<String>) {
    if !c.signals.is_empty() {
        parts.push(format!("signals: {}", c.signals.join(", ")));
    }
    if !c.vuids.is_empty() {
        parts.push(format!("VUIDs: {}", c.vuids.join(", ")));
    }
    if let Some(first) = c.artifacts.first() {
        parts.push(format!("artifacts: {first}"));
    }
}

/// "2 of 5 runs crash (SIGSEGV); artifacts: …".
fn run_kind_message(c: &CellResult, v: RunVerdict, n: u64) -> String {
    let mut line = format!("{n} of {} runs {v}", c.runs);
    match v {
        RunVerdict::Crash if !c.signals.is_empty() => {
            let _ = write!(line, " ({})", c.signals.join(", "));
        }
        RunVerdict::Vuid if !c.vuids.is_empty() => {
            let _ = write!(line, " ({})", c.vuids.join(", "));
        }
        _ => {}
    }
    let mut parts = vec![line];
    if let Some(first) = c.artifacts.first() {
        parts.push(format!("artifacts: {first}"));
    }
    parts.join("; ")
}

/// Everything known of a cell, one fact a line, for the element body.
fn details(c: &CellResult) -> String {
    let mut lines = vec![
        format!(
            "cell: {} × {} × {} × {} × {}",
            c.case,
            c.runtime,
            c.driver,
            if c.layers.is_empty() {
                "no layers".to_string()
            } else {
                c.layers.join("+")
            },
            c.emulation
        ),
        format!("verdict: {}", c.verdict),
        format!("runs: {} ({})", c.runs, observation(c)),
        format!("pass rate: {}", pass_rate_line(c)),
    ];
    if let Some(reason) = &c.reason {
        lines.push(format!("reason: {reason}"));
    }
    if !c.signals.is_empty() {
        lines.push(format!("signals: {}", c.signals.join(", ")));
    }
    for id in &c.vuids {
        let n = c.vuid_counts.get(id).copied().unwrap_or(0);
        lines.push(format!("VUID: {id} ×{n} ({})", short_vuid(id)));
    }
    for f in &c.findings {
        lines.push(format!("finding: {f}"));
    }
    if let Some(device) = &c.device {
        lines.push(format!("device: {device}"));
    }
    if let Some(run) = super::first_run::FirstRun::of(c) {
        lines.extend(run.lines());
        let log = run.dir.join(files::VALIDATION_LOG);
        if log.is_file() {
            lines.push(format!("validation log: {}", log.display()));
        }
    }
    for a in &c.artifacts {
        lines.push(format!("artifacts: {a}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{cell, counts, results};
    use vkexit_evidence::results::Counts;

    fn parse(xml: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}\n{xml}"))
    }

    fn testcases<'a>(doc: &'a roxmltree::Document) -> Vec<roxmltree::Node<'a, 'a>> {
        doc.descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .collect()
    }

    #[test]
    fn hostile_names_and_evidence_stay_well_formed() {
        let hostile = "a<b>&c\"d'e\u{1}f\u{1b}]]>\n|x";
        let mut c = cell(hostile, "external", CellVerdict::Fail, counts(0, 2, 0));
        c.signals = vec!["SIGSEGV".into()];
        c.findings = vec![hostile.into()];
        c.artifacts = vec![format!("/tmp/{hostile}/run-0")];
        c.reason = Some(hostile.into());
        c.driver = "drv<&>".into();
        let xml = render(&results(vec![c]));
        let doc = parse(&xml);
        let cases = testcases(&doc);
        assert_eq!(cases.len(), 1);
        let name = cases[0].attribute("name").unwrap();
        assert_eq!(name, "a<b>&c\"d'e\\x01f\\x1b]]>\n|x × external");
        assert_eq!(cases[0].attribute("classname"), Some("vkexit.drv<&>.none"));
        let failure = cases[0].first_element_child().unwrap();
        assert_eq!(failure.tag_name().name(), "failure");
        let message = failure.attribute("message").unwrap();
        assert!(message.contains("signals: SIGSEGV"), "{message}");
        assert!(message.contains("artifacts: /tmp/a<b>"), "{message}");
        assert!(failure.text().unwrap().contains("finding: a<b>&c"));
    }

    #[test]
    fn a_known_flaky_cell_that_failed_is_a_passed_test_with_its_failures() {
        let mut c = cell("f", "refrt:never", CellVerdict::Fail, counts(0, 2, 0));
        c.flaky_expected = true;
        let mut r = results(vec![c]);
        assert!(r.is_green());
        let xml = render(&r);
        let doc = parse(&xml);
        assert_eq!(doc.root_element().attribute("failures"), Some("0"));
        let tc = &testcases(&doc)[0];
        let kids: Vec<&str> = tc
            .children()
            .filter(|n| n.is_element())
            .map(|n| n.tag_name().name())
            .collect();
        assert_eq!(kids, ["flakyFailure", "system-out"], "{xml}");
        assert!(xml.contains("known to be flaky, so it keeps the vkexit gate green"));
        r.cells[0].flaky_expected = false;
        assert!(!r.is_green());
    }

    #[test]
    fn each_verdict_maps_to_its_junit_form() {
        let mut flaky = cell("f", "refrt:never", CellVerdict::Flaky, counts(3, 1, 1));
        flaky.signals = vec!["SIGSEGV".into()];
        flaky.vuids = vec!["VUID-vkDestroyDevice-device-00378".into()];
        let skipped = cell("s", "refrt:never", CellVerdict::Skipped, Counts::default());
        let mut known = cell(
            "k",
            "refrt:never",
            CellVerdict::ExpectedFail,
            counts(0, 2, 0),
        );
        known.reason = Some("the registry is gone".into());
        let mut known_flaky = flaky.clone();
        known_flaky.case = "kf".into();
        known_flaky.flaky_expected = true;
        let cells = vec![
            cell("p", "refrt:never", CellVerdict::Pass, counts(2, 0, 0)),
            cell("x", "refrt:never", CellVerdict::Fail, counts(0, 2, 0)),
            cell(
                "u",
                "refrt:never",
                CellVerdict::UnexpectedPass,
                counts(2, 0, 0),
            ),
            cell("e", "refrt:never", CellVerdict::Error, Counts::default()),
            flaky,
            skipped,
            known,
            known_flaky,
        ];
        let xml = render(&results(cells));
        let doc = parse(&xml);
        let root = doc.root_element();
        assert_eq!(root.attribute("tests"), Some("8"));
        // fail, unexpected-pass and the flaky cell no baseline expects: each
        // turns the gate red.
        assert_eq!(root.attribute("failures"), Some("3"));
        assert_eq!(root.attribute("errors"), Some("1"));
        assert_eq!(root.attribute("skipped"), Some("1"));
        let suite = root.first_element_child().unwrap();
        assert_eq!(suite.attribute("name"), Some("vkexit.lavapipe.none"));
        assert_eq!(suite.attribute("failures"), Some("3"));
        let children = |case: &str| -> Vec<String> {
            let tc = testcases(&doc)
                .into_iter()
                .find(|n| n.attribute("name") == Some(&format!("{case} × refrt:never")))
                .unwrap();
            assert_eq!(tc.attribute("classname"), Some("vkexit.lavapipe.none"));
            assert_eq!(tc.attribute("time"), Some("1.234"));
            tc.children()
                .filter(|n| n.is_element())
                .map(|n| n.tag_name().name().to_string())
                .collect()
        };
        assert!(children("p").is_empty());
        assert_eq!(children("x"), ["failure"]);
        assert_eq!(children("u"), ["failure"]);
        assert_eq!(children("e"), ["error"]);
        assert_eq!(children("f"), ["failure"]);
        assert_eq!(
            children("kf"),
            ["flakyFailure", "flakyFailure", "system-out"]
        );
        assert_eq!(children("s"), ["skipped"]);
        assert_eq!(children("k"), ["system-out"]);

        let red_flaky = testcases(&doc)
            .into_iter()
            .find(|n| n.attribute("name") == Some("f × refrt:never"))
            .unwrap();
        let failure = red_flaky.first_element_child().unwrap();
        assert_eq!(failure.attribute("type"), Some("flaky"));
        let message = failure.attribute("message").unwrap();
        assert!(message.contains("runs: 5 (pass 3/5"), "{message}");
        assert!(message.contains("signals: SIGSEGV"), "{message}");
        let flaky = testcases(&doc)
            .into_iter()
            .find(|n| n.attribute("name") == Some("kf × refrt:never"))
            .unwrap();
        let kinds: Vec<_> = flaky
            .children()
            .filter(|n| n.has_tag_name("flakyFailure"))
            .map(|n| {
                (
                    n.attribute("type").unwrap(),
                    n.attribute("message").unwrap(),
                )
            })
            .collect();
        assert_eq!(kinds[0], ("crash", "1 of 5 runs crash (SIGSEGV)"));
        assert_eq!(
            kinds[1],
            (
                "vuid",
                "1 of 5 runs vuid (VUID-vkDestroyDevice-device-00378)"
            )
        );
        let out = flaky.last_element_child().unwrap().text().unwrap();
        assert!(out.contains("keeps the vkexit gate green"), "{out}");

        let known = testcases(&doc)
            .into_iter()
            .find(|n| n.attribute("name") == Some("k × refrt:never"))
            .unwrap();
        let out = known.first_element_child().unwrap().text().unwrap();
        assert!(
            out.starts_with("expected-fail: known to fail: the registry is gone"),
            "{out}"
        );
        let skipped = testcases(&doc)
            .into_iter()
            .find(|n| n.attribute("name") == Some("s × refrt:never"))
            .unwrap();
        assert_eq!(
            skipped.first_element_child().unwrap().attribute("message"),
            Some("skipped because")
        );
    }

    #[test]
    fn an_interrupted_run_is_an_error_even_when_its_cells_pass() {
        let mut r = results(vec![cell(
            "p",
            "refrt:never",
            CellVerdict::Pass,
            counts(2, 0, 0),
        )]);
        r.interrupted = true;
        let xml = render(&r);
        let doc = parse(&xml);
        assert_eq!(doc.root_element().attribute("errors"), Some("1"), "{xml}");
        assert_eq!(doc.root_element().attribute("tests"), Some("2"), "{xml}");
        let error = doc
            .descendants()
            .find(|n| n.has_tag_name("error"))
            .expect("an error element");
        assert_eq!(error.attribute("type"), Some("interrupted"));
    }

    #[test]
    fn one_suite_per_driver_and_emulation() {
        let mut a = cell("c", "refrt:never", CellVerdict::Pass, counts(1, 0, 0));
        let mut b = a.clone();
        b.emulation = "tegra".into();
        let mut c = a.clone();
        c.driver = "nvidia".into();
        let mut d = a.clone();
        d.layers = vec!["trace".into(), "validation".into()];
        a.device = None;
        let xml = render(&results(vec![a, b, c, d]));
        let doc = parse(&xml);
        let suites: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testsuite"))
            .map(|n| n.attribute("name").unwrap().to_string())
            .collect();
        assert_eq!(
            suites,
            [
                "vkexit.lavapipe.none",
                "vkexit.lavapipe.tegra",
                "vkexit.nvidia.none"
            ]
        );
        let names: Vec<_> = testcases(&doc)
            .iter()
            .map(|n| n.attribute("name").unwrap().to_string())
            .collect();
        // The same case × runtime twice in one suite: the layers tell them apart.
        assert_eq!(names[0], "c × refrt:never [validation]");
        assert_eq!(names[1], "c × refrt:never [trace+validation]");
    }
}
