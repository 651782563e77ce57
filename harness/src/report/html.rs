//! The HTML report: one self-contained `index.html` (inline style, no
//! script, nothing fetched) with the matrix of each driver, emulation and
//! layers coloured by verdict, each cell linked to its evidence (programs of
//! their own, such as a suite's tests, as a list, failures first, each with why); for each cell
//! with failing runs, its first kept run's files and story (exit timeline,
//! lifetimes, crash); and a table of every cell with its counts, pass rate,
//! VUIDs, signals and findings.

use super::first_run::FirstRun;
use super::markup::{attr, text, url_path};
use super::{groups, observation, pass_rate_line, red_first, short_vuid, summary_line};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use vkexit_evidence::files;
use vkexit_evidence::results::{CellResult, Counts, Results};
use vkexit_evidence::verdict::CellVerdict;

pub const INDEX: &str = "index.html";

const VERDICTS: [CellVerdict; 8] = [
    CellVerdict::Fail,
    CellVerdict::Flaky,
    CellVerdict::UnexpectedPass,
    CellVerdict::Error,
    CellVerdict::ExpectedFail,
    CellVerdict::Skipped,
    CellVerdict::NoVulkan,
    CellVerdict::Pass,
];

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
.swimlane-box { overflow-x: auto; max-width: 100%; border: 1px solid #e0e0e0; margin: 0.5em 0; }
.swimlane-box svg { display: block; }
.legend span { display: inline-block; padding: 0.1em 0.5em; margin: 0 0.3em 0.3em 0; border: 1px solid #9e9e9e; }
ul.said { padding-left: 1.2em; } ul.said code { overflow-wrap: anywhere; }
h1 .green { color: #1b5e20; } h1 .red { color: #b71c1c; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #9e9e9e; padding: 0.3em 0.5em; vertical-align: top; text-align: left; }
th { background: #f5f5f5; }
td a { color: inherit; text-decoration: none; }
td a:hover { text-decoration: underline; }
.matrix td { min-width: 9em; }
.matrix td a { display: block; }
.matrix .verdict { font-weight: bold; display: block; }
.cells td, .tests td { font-size: 0.9em; }
.tests td a { text-decoration: underline; }
.cells td.rate { white-space: nowrap; }
.cells td.cell { min-width: 18em; }
.cells ul { margin: 0; padding-left: 1.2em; }
.cells td a { text-decoration: underline; }
code { font-family: ui-monospace, monospace; font-size: 1em; }
.v-pass { background: #c8e6c9; }
.v-expected-fail { background: #cfd8dc; }
.v-fail { background: #ef9a9a; }
.v-flaky { background: #ffcc80; }
.v-unexpected-pass { background: #ce93d8; }
.v-error { background: #b71c1c; color: #fff; }
.v-skipped { background: #eeeeee; color: #616161; }
.v-no-vulkan { background: #eeeeee; color: #616161; }
.empty { color: #9e9e9e; }
.evidence h3 span { padding: 0 0.3em; }
pre.story { background: #fafafa; border: 1px solid #e0e0e0; padding: 0.5em; overflow-x: auto; max-width: 100%; font-size: 0.85em; overflow-wrap: normal; }
";

/// The page; `base` is the report's directory, for relative links.
pub fn render(results: &Results, base: Option<&Path>) -> String {
    let green = results.is_green();
    let gate = if green { "green" } else { "red" };
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(out, "<title>vkexit: gate {gate}</title>");
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");
    let _ = writeln!(
        out,
        "<h1>vkexit: gate <span class=\"{gate}\">{gate}</span></h1>"
    );
    let _ = writeln!(out, "<p>{}</p>", text(&summary_line(&results.cells)));
    // Added, not counted one by one: a results file may claim any count.
    let mut all = Counts::default();
    for c in &results.cells {
        all.add_counts(&c.counts);
    }
    let [lo, hi] = crate::judge::cell::pass_rate_95(all);
    let _ = writeln!(
        out,
        "<p>All runs: {} of {} passed ({:.1} %, 95 % interval {:.1} %–{:.1} %). vkexit {}.</p>",
        all.passed(),
        all.total(),
        crate::judge::cell::pass_rate(all) * 100.0,
        lo * 100.0,
        hi * 100.0,
        text(&results.vkexit_version)
    );
    if results.interrupted {
        out.push_str("<p><strong>Interrupted</strong>: these are the runs that finished before vkexit was stopped.</p>\n");
    }

    // Whether a cell turns the gate red is the cell's, not its verdict's: a
    // `flaky` or `fail` cell a baseline knows to be flaky keeps it green.
    out.push_str(
        "<table class=\"counts\">\n<tr><th>verdict</th><th>cells</th><th>turn the gate red</th></tr>\n",
    );
    for v in VERDICTS {
        let of_verdict = || results.cells.iter().filter(|c| c.verdict == v);
        if of_verdict().next().is_none() {
            continue;
        }
        let _ = writeln!(
            out,
            "<tr><td class=\"v-{v}\">{v}</td><td>{}</td><td>{}</td></tr>",
            of_verdict().count(),
            of_verdict().filter(|c| !c.is_green()).count()
        );
    }
    out.push_str("</table>\n");
    legend(&mut out);

    let index_of = |c: &CellResult| {
        results
            .cells
            .iter()
            .position(|o| std::ptr::eq(o, c))
            .unwrap_or(0)
    };
    for group in groups(&results.cells) {
        let _ = writeln!(out, "<h2>{}</h2>", text(&group.title()));
        let (cases, runtimes) = group.axes();
        if runtimes == ["external"] {
            tests_list(&mut out, &group.cells, &index_of, base);
            continue;
        }
        out.push_str(
            "<div class=\"scroll\"><table class=\"matrix\">\n<tr><th>ordering ↓ / runtime →</th>",
        );
        for r in &runtimes {
            let _ = write!(out, "<th>{}</th>", text(r));
        }
        out.push_str("</tr>\n");
        for case in &cases {
            let _ = write!(out, "<tr><th>{}</th>", text(case));
            for runtime in &runtimes {
                match group.cell(case, runtime) {
                    None => out.push_str("<td class=\"empty\">—</td>"),
                    Some(c) => matrix_cell(&mut out, c, index_of(c), base),
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table></div>\n");
    }

    evidence_sections(&mut out, results, base);

    out.push_str("<h2>Cells</h2>\n<div class=\"scroll\"><table class=\"cells\">\n<tr><th>verdict</th><th>cell</th><th>runs</th><th>pass rate</th><th>signals</th><th>VUIDs</th><th>findings</th><th>reason</th><th>evidence</th></tr>\n");
    for c in red_first(&results.cells) {
        detail_row(&mut out, c, index_of(c), base);
    }
    out.push_str("</table></div>\n</body>\n</html>\n");
    out
}

/// Programs of their own (a suite's tests, `-- CMD`) have no runtime to lay out against: one
/// row each, the cells that turn the gate red first, then the other failures, with why.
fn tests_list(
    out: &mut String,
    cells: &[&CellResult],
    index_of: &dyn Fn(&CellResult) -> usize,
    base: Option<&Path>,
) {
    let mut sorted = cells.to_vec();
    sorted.sort_by_key(|c| (c.is_green(), c.verdict.is_success()));
    out.push_str("<div class=\"scroll\"><table class=\"tests\">\n<tr><th>verdict</th><th>test</th><th>runs</th><th>why</th></tr>\n");
    for c in sorted {
        let href = match cell_dir(c) {
            Some(dir) => link(&dir, base, true),
            None => format!("#cell-{}", index_of(c)),
        };
        let why = match c.verdict {
            CellVerdict::Pass => String::new(),
            _ => c.reason.clone().unwrap_or_default(),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"v-{}\">{}</td><td><a href=\"{}\"><code>{}</code></a></td><td>{}</td><td>{}</td></tr>",
            c.verdict,
            verdict_label(c),
            attr(&href),
            text(&c.case),
            text(&observation(c)),
            text(&why)
        );
    }
    out.push_str("</table></div>\n");
}

fn matrix_cell(out: &mut String, c: &CellResult, index: usize, base: Option<&Path>) {
    let href = match cell_dir(c) {
        Some(dir) => link(&dir, base, true),
        None => format!("#cell-{index}"),
    };
    let _ = write!(
        out,
        "<td class=\"v-{}\" title=\"{}\"><a href=\"{}\"><span class=\"verdict\">{}</span>{}</a></td>",
        c.verdict,
        attr(c.reason.as_deref().unwrap_or("")),
        attr(&href),
        verdict_label(c),
        text(&runs_seen(c))
    );
}

/// The cell's runs as the matrix shows them under the verdict: "20/20" under `pass`, not
/// "pass 20/20" again.
fn runs_seen(c: &CellResult) -> String {
    let seen = observation(c);
    let verdict = c.verdict.name();
    match seen.strip_prefix(verdict) {
        Some("") => String::new(),
        Some(rest) if rest.starts_with(' ') => rest.trim_start().to_string(),
        _ => seen,
    }
}

/// What each colour means.
fn legend(out: &mut String) {
    const MEANING: [(CellVerdict, &str); 8] = [
        (CellVerdict::Pass, "every run passed"),
        (
            CellVerdict::ExpectedFail,
            "failed as a baseline expects: gate green",
        ),
        (CellVerdict::Fail, "runs failed unexpectedly"),
        (CellVerdict::Flaky, "some runs failed, some passed"),
        (
            CellVerdict::UnexpectedPass,
            "passed where a failure was expected",
        ),
        (CellVerdict::Error, "vkexit could not judge the runs"),
        (CellVerdict::Skipped, "not run here"),
        (
            CellVerdict::NoVulkan,
            "exited 0 without using Vulkan: gate green",
        ),
    ];
    out.push_str("<p class=\"legend\">");
    for (v, meaning) in MEANING {
        let _ = write!(out, "<span class=\"v-{v}\">{v}: {meaning}</span>");
    }
    out.push_str("</p>\n");
}

fn detail_row(out: &mut String, c: &CellResult, index: usize, base: Option<&Path>) {
    let _ = write!(
        out,
        "<tr id=\"cell-{index}\"><td class=\"v-{}\">{}</td>",
        c.verdict,
        verdict_label(c)
    );
    let layers = if c.layers.is_empty() {
        "no layers".to_string()
    } else {
        c.layers.join("+")
    };
    let _ = write!(
        out,
        "<td class=\"cell\"><code>{}</code> × <code>{}</code><br>{} · {} · emulation {}{}</td>",
        text(&c.case),
        text(&c.runtime),
        text(&c.driver),
        text(&layers),
        text(&c.emulation),
        c.device
            .as_deref()
            .map(|d| format!("<br>{}", text(d)))
            .unwrap_or_default()
    );
    let _ = write!(out, "<td>{}</td>", text(&observation(c)));
    let _ = write!(out, "<td class=\"rate\">{}</td>", text(&pass_rate_line(c)));
    let _ = write!(out, "<td>{}</td>", text(&c.signals.join(", ")));
    out.push_str("<td>");
    list(
        out,
        c.vuids.iter().map(|id| {
            let n = c.vuid_counts.get(id).copied().unwrap_or(0);
            format!("<code>{}</code> ×{n} ({})", text(id), text(short_vuid(id)))
        }),
    );
    out.push_str("</td><td>");
    list(out, c.findings.iter().map(|f| text(f)));
    let _ = write!(
        out,
        "</td><td>{}</td><td>",
        text(c.reason.as_deref().unwrap_or(""))
    );
    list(
        out,
        c.artifacts.iter().map(|a| {
            let name = Path::new(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| a.clone());
            format!(
                "<a href=\"{}\" title=\"{}\">{}</a>",
                attr(&link(Path::new(a), base, true)),
                attr(a),
                text(&name)
            )
        }),
    );
    out.push_str("</td></tr>\n");
}

/// The verdict as a reader needs it next to the colour: whether the cell
/// keeps the gate green is said where the verdict alone does not say it.
fn verdict_label(c: &CellResult) -> String {
    match c.verdict {
        CellVerdict::Fail | CellVerdict::Flaky if c.is_green() => {
            format!("{} (known flaky: gate green)", c.verdict)
        }
        CellVerdict::Flaky => format!("{} (gate red)", c.verdict),
        _ => c.verdict.to_string(),
    }
}

/// Lines of one run's story shown on the page; the rest is in `vkexit explain`.
const STORY_LINES: usize = 80;

/// The files of a run directory worth a link, in the order a reader wants them.
const RUN_FILES: [&str; 8] = [
    files::RESULT,
    files::COMMAND,
    files::STDERR,
    files::STDOUT,
    files::VALIDATION_LOG,
    files::TIMELINE.name,
    files::CRASH.name,
    files::HANG,
];

/// For each cell with failing runs, red cells first: what failed, links to the first kept run's
/// files, and the story of that run (exit timeline, lifetimes, crash) as `vkexit explain` tells it.
fn evidence_sections(out: &mut String, results: &Results, base: Option<&Path>) {
    let failing: Vec<&CellResult> = red_first(&results.cells)
        .into_iter()
        .filter(|c| c.counts.total() > c.counts.passed() && !c.artifacts.is_empty())
        .collect();
    if failing.is_empty() {
        return;
    }
    out.push_str("<h2>Evidence of the failing cells</h2>\n");
    for (n, c) in failing.into_iter().enumerate() {
        let run = Path::new(&c.artifacts[0]);
        let _ = writeln!(
            out,
            "<section class=\"evidence\"><h3 id=\"evidence-{n}\"><span class=\"v-{v}\">{v}</span> <code>{}</code> × <code>{}</code> · {} · emulation {}</h3>",
            text(&c.case),
            text(&c.runtime),
            text(&c.driver),
            text(&c.emulation),
            v = c.verdict
        );
        let _ = writeln!(out, "<p>{}</p>", text(&observation(c)));
        if let Some(reason) = &c.reason {
            let _ = writeln!(out, "<p>{}</p>", text(reason));
        }
        if !run.is_dir() {
            let _ = writeln!(
                out,
                "<p class=\"empty\">{} is not on this machine: the run was kept where it ran.</p></section>",
                text(&run.to_string_lossy())
            );
            continue;
        }
        let files = RUN_FILES.iter().filter(|f| run.join(f).is_file()).map(|f| {
            format!(
                "<a href=\"{}\">{f}</a>",
                attr(&link(&run.join(f), base, false))
            )
        });
        said(out, run);
        let _ = write!(
            out,
            "<p>Run <a href=\"{}\">{}</a>: ",
            attr(&link(run, base, true)),
            text(&run.to_string_lossy())
        );
        out.push_str(&files.collect::<Vec<_>>().join(" · "));
        out.push_str("</p>\n");
        out.push_str("<div class=\"swimlane-box\">");
        out.push_str(&super::swimlane::of_run(run));
        out.push_str("</div>\n");
        let story = crate::explain::Story::read(run).render();
        let lines: Vec<&str> = story.lines().collect();
        out.push_str("<pre class=\"story\">");
        for line in lines.iter().take(STORY_LINES) {
            let _ = writeln!(out, "{}", text(line));
        }
        if lines.len() > STORY_LINES {
            let _ = writeln!(
                out,
                "… {} more lines: vkexit explain {}",
                lines.len() - STORY_LINES,
                text(&run.to_string_lossy())
            );
        }
        out.push_str("</pre></section>\n");
    }
}

/// What the run's validation layer said, first message of each id with its objects, and how
/// it exited when not with 0, with stderr's last lines.
fn said(out: &mut String, run: &Path) {
    let first = FirstRun::read(run);
    if first.messages.is_empty() && first.exit_code.is_none() {
        return;
    }
    out.push_str("<ul class=\"said\">");
    for m in &first.messages {
        let _ = write!(
            out,
            "<li>The validation layer: <code>{}</code>{}: {}",
            text(&m.id),
            m.call
                .as_deref()
                .map(|c| format!(" in <code>{}</code>", text(c)))
                .unwrap_or_default(),
            text(&m.text)
        );
        if !m.objects.is_empty() {
            let _ = write!(out, " (objects: {})", text(&m.objects.join(", ")));
        }
        out.push_str("</li>");
    }
    if let Some(exit) = first.exit_line() {
        let _ = write!(out, "<li>{}", text(&exit));
        let (said, tail) = match (first.stderr_tail.is_empty(), first.stdout_tail.is_empty()) {
            (true, true) => (", stderr and stdout empty", &first.stderr_tail),
            (true, false) => (", stderr empty, stdout ends:", &first.stdout_tail),
            (false, _) => (", stderr ends:", &first.stderr_tail),
        };
        out.push_str(said);
        if !tail.is_empty() {
            out.push_str("<pre class=\"story\">");
            for l in tail {
                let _ = writeln!(out, "{}", text(l));
            }
            out.push_str("</pre>");
        }
        out.push_str("</li>");
    }
    out.push_str("</ul>\n");
}

fn list(out: &mut String, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        return;
    }
    out.push_str("<ul>");
    for item in items {
        let _ = write!(out, "<li>{item}</li>");
    }
    out.push_str("</ul>");
}

/// The directory that holds a cell's kept runs (`<artifacts>/<cell>/`):
/// the parent shared by all its run directories, or the first run's own.
pub fn cell_dir(c: &CellResult) -> Option<PathBuf> {
    let first = Path::new(c.artifacts.first()?);
    let parent = first.parent().filter(|p| !p.as_os_str().is_empty());
    match parent {
        Some(p) if c.artifacts.iter().all(|a| Path::new(a).parent() == Some(p)) => {
            Some(p.to_path_buf())
        }
        _ => Some(first.to_path_buf()),
    }
}

/// A link from the report's directory to `target`: relative when both are
/// known absolute paths, else the absolute path; percent-encoded.
pub(crate) fn link(target: &Path, base: Option<&Path>, dir: bool) -> String {
    let absolute = std::path::absolute(target).unwrap_or_else(|_| target.to_path_buf());
    let resolved = absolute.canonicalize().unwrap_or(absolute);
    let path = match base.and_then(|b| relative(b, &resolved)) {
        Some(rel) => rel,
        None => resolved,
    };
    let mut href = url_path(&path.to_string_lossy());
    if href.is_empty() {
        href.push('.');
    }
    if dir && !href.ends_with('/') {
        href.push('/');
    }
    href
}

/// `to` relative to the directory `from`, both absolute and normalised.
fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    if !from.is_absolute() || !to.is_absolute() {
        return None;
    }
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    if from
        .iter()
        .chain(&to)
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return None;
    }
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to[common..] {
        rel.push(c.as_os_str());
    }
    Some(rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{cell, counts, results};

    #[test]
    fn a_suite_is_a_list_of_its_tests_failures_first_with_why() {
        let pass = cell(
            "Suite.Passes",
            "external",
            CellVerdict::Pass,
            counts(2, 0, 0),
        );
        let mut fail = cell(
            "Suite.Leaks",
            "external",
            CellVerdict::Fail,
            counts(0, 0, 2),
        );
        fail.reason = Some("0 of 2 runs passed".into());
        fail.vuids = vec!["VUID-vkDestroyDevice-device-00378".into()];
        fail.vuid_counts = [("VUID-vkDestroyDevice-device-00378".to_string(), 3)].into();
        let page = render(&results(vec![pass, fail]), None);
        assert!(!page.contains("ordering ↓ / runtime →"), "{page}");
        let list = &page[page
            .find("<table class=\"tests\">")
            .expect("a list of tests")..];
        let leaks = list.find("Suite.Leaks").unwrap();
        let passes = list.find("Suite.Passes").unwrap();
        assert!(leaks < passes, "{list}");
        assert!(list.contains("<td>0 of 2 runs passed</td>"), "{list}");
        // What a count counts: the messages of one id, here in the two runs together.
        assert!(list.contains("00378 ×3 in 2 runs"), "{list}");
    }

    #[test]
    fn relative_links() {
        let r = |a: &str, b: &str| {
            relative(Path::new(a), Path::new(b)).map(|p| p.display().to_string())
        };
        assert_eq!(
            r("/w/report", "/w/art/c/run-0").as_deref(),
            Some("../art/c/run-0")
        );
        assert_eq!(r("/w", "/w/art").as_deref(), Some("art"));
        assert_eq!(r("/w/a", "/w/a").as_deref(), Some(""));
        assert_eq!(r("w", "/w"), None);
    }

    #[test]
    fn the_cell_directory_is_the_parent_of_its_runs() {
        let mut c = cell("x", "refrt:never", CellVerdict::Fail, counts(0, 2, 0));
        c.artifacts = vec!["/a/x.cell/run-0".into(), "/a/x.cell/run-1".into()];
        assert_eq!(cell_dir(&c), Some(PathBuf::from("/a/x.cell")));
        c.artifacts.push("/b/other/run-0".into());
        assert_eq!(cell_dir(&c), Some(PathBuf::from("/a/x.cell/run-0")));
        c.artifacts.clear();
        assert_eq!(cell_dir(&c), None);
    }

    #[test]
    fn hostile_names_are_escaped_everywhere() {
        let hostile = "<img src=x onerror=alert(1)>&\"'\u{1}";
        let mut c = cell(hostile, hostile, CellVerdict::Fail, counts(0, 1, 0));
        c.findings = vec![hostile.into()];
        c.reason = Some(hostile.into());
        c.vuids = vec![hostile.into()];
        c.artifacts = vec![format!("/tmp/{hostile}/run-0")];
        let html = render(&results(vec![c]), Some(Path::new("/tmp/report")));
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains('\u{1}'));
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;&amp;\"'\\x01"),
            "{html}"
        );
        // The link goes through percent-encoding, then attribute escaping.
        assert!(
            html.contains("href=\"../%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%26%22%27%01/\""),
            "{html}"
        );
        // Self-contained: nothing is fetched.
        assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("http"));
    }

    #[test]
    fn every_cell_is_coloured_by_its_verdict() {
        let html = render(
            &results(vec![
                cell("a", "refrt:never", CellVerdict::Pass, counts(5, 0, 0)),
                cell("b", "refrt:never", CellVerdict::Flaky, counts(3, 2, 0)),
            ]),
            None,
        );
        assert!(
            html.contains("<td class=\"v-pass\" title=\"pass because\"><a href=\"#cell-0\">"),
            "{html}"
        );
        assert!(html.contains("<td class=\"v-flaky\""), "{html}");
        assert!(
            html.contains("60 % (95 % interval 23.1 %–88.2 %)"),
            "{html}"
        );
        assert!(html.contains("<h1>vkexit: gate <span class=\"red\">red</span></h1>"));
        // The verdict once, then the runs: not "pass" and "pass 5/5".
        assert!(
            html.contains("<span class=\"verdict\">pass</span>5/5</a></td>"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"verdict\">flaky (gate red)</span>pass 3/5, crash 2/5</a>"),
            "{html}"
        );
        // Only the verdicts some cell has are counted; every colour is explained.
        assert!(html.contains("<tr><td class=\"v-pass\">pass</td><td>1</td><td>0</td></tr>"));
        assert!(!html.contains("<tr><td class=\"v-error\">"), "{html}");
        assert!(
            html.contains("<span class=\"v-error\">error: vkexit could not judge the runs</span>")
        );
    }
}
