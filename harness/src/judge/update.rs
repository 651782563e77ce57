//! `vkexit baseline update`: a baseline file brought up to date with what a
//! results file shows, so that accepting a new known failure, or a fix, is
//! one command and a reviewed diff.
//!
//! For each cell that was judged (it ran, and no run was an `error`):
//! - an entry about this one cell that still fits what it did is kept as it
//!   is, reason and all; one that no longer fits is dropped;
//! - then, if the entries about many cells (`*` patterns) or else the
//!   built-in baseline do not fit what it did, an entry about this cell is
//!   added, saying what it did, with reason "TODO: explain";
//! - a cell that fails as the built-in baseline says gets an entry too, with
//!   the built-in reason, so the file says everything known about the job.
//!
//! Entries that match no cell of the results are removed only with
//! `--prune`. The entries go in this order: the `[[allow]]` entries as they
//! were, the entries about one cell sorted (driver, emulation, layers, case,
//! runtime), then the pattern entries in their old order. A new file gets a
//! header; an existing one is edited in place ([`render_over`]), keeping its
//! comments and the layout of the entries that stay. Entries about
//! one cell come first so that each decides its cell whatever a pattern
//! entry says, which is what this update checked.

use crate::judge::{
    self, layers_text, BaselineFile, Entry, Expectation, Expected, Pattern, RunsSeen, Subject,
    BUILTIN_SOURCE,
};
use crate::plan::{case_rank, runtime_rank};
use vkexit_evidence::results::{CellResult, Results};
use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

pub const TODO_REASON: &str = "TODO: explain";

/// What an update did, entry by entry, for the user to read.
#[derive(Debug, Default)]
pub struct Changes {
    pub kept: usize,
    /// "case × runtime × driver [layers, emulation]: what it did (reason)".
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// The updated entries, and what changed.
pub fn update(old: &BaselineFile, results: &Results, prune: bool) -> (BaselineFile, Changes) {
    let mut changes = Changes::default();
    let (exact, patterns): (Vec<Entry>, Vec<Entry>) = old
        .entries
        .iter()
        .cloned()
        .partition(|e| e.pattern.is_exact());
    let mut exact: Vec<(Entry, bool)> = exact.into_iter().map(|e| (e, false)).collect();
    let mut patterns: Vec<(Entry, bool)> = patterns.into_iter().map(|e| (e, false)).collect();
    for cell in &results.cells {
        let subject = Subject::of_result(cell);
        for (e, matched) in patterns.iter_mut() {
            *matched |= e.pattern.matches(&subject);
        }
        let mine = exact.iter().position(|(e, _)| e.pattern.matches(&subject));
        if let Some(i) = mine {
            exact[i].1 = true;
        }
        if !judged(cell) {
            continue;
        }
        let seen = observed(cell, &subject, old);
        if let Some(i) = mine {
            if fits(Some(&exact[i].0.expectation()), &seen) {
                continue;
            }
            let (gone, _) = exact.remove(i);
            changes.removed.push(describe(&gone, "no longer fits"));
        }
        let builtin = builtin(cell);
        let fallback = patterns
            .iter()
            .find(|(e, _)| e.pattern.matches(&subject))
            .map(|(e, _)| e.expectation())
            .or_else(|| builtin.clone());
        let fitting = fits(fallback.as_ref(), &seen);
        let failed = cell.counts.passed() < cell.counts.total();
        let from_builtin = fallback
            .as_ref()
            .is_some_and(|e| e.source == BUILTIN_SOURCE);
        if fitting && !(failed && from_builtin) {
            continue;
        }
        let reason = match &builtin {
            Some(b) if fits(Some(b), &seen) => b.reason.clone(),
            _ => TODO_REASON.to_string(),
        };
        let entry = observed_entry(cell, &seen, reason);
        changes.added.push(describe(&entry, ""));
        exact.push((entry, true));
    }
    let keep = |(e, matched): (Entry, bool), changes: &mut Changes| {
        if prune && !matched {
            changes.removed.push(describe(&e, "matches no cell"));
            None
        } else {
            Some(e)
        }
    };
    let mut exact: Vec<Entry> = exact
        .into_iter()
        .filter_map(|x| keep(x, &mut changes))
        .collect();
    exact.sort_by_key(sort_key);
    let patterns: Vec<Entry> = patterns
        .into_iter()
        .filter_map(|x| keep(x, &mut changes))
        .collect();
    // Every entry of the file that was not removed is kept: those that fit their cell, the
    // patterns, and those about cells these results do not hold.
    changes.kept = old.entries.len().saturating_sub(changes.removed.len());
    let file = BaselineFile {
        path: old.path.clone(),
        entries: exact.into_iter().chain(patterns).collect(),
        allows: old.allows.clone(),
    };
    (file, changes)
}

/// A cell that ran, with no run that could not be judged.
fn judged(cell: &CellResult) -> bool {
    cell.counts.total() > 0 && cell.counts.error == 0 && cell.verdict != CellVerdict::Skipped
}

/// Whether the cell, judged against this expectation, keeps the gate green.
fn fits(expectation: Option<&Expectation>, seen: &RunsSeen) -> bool {
    let (verdict, _) = judge::evaluate(expectation, seen);
    judge::green(verdict, expectation)
}

fn builtin(cell: &CellResult) -> Option<Expectation> {
    judge::builtin::expectation(&Subject::of_result(cell))
}

/// What the cell did once the file's `[[allow]]` entries that apply to it took their ids out, as
/// a run with the file would have judged it.
fn observed(cell: &CellResult, subject: &Subject, file: &BaselineFile) -> RunsSeen {
    let applying = file.allowed(subject, judge::layer_version_of(cell));
    judge::allow_in_cell(cell, &applying).0
}

/// An entry about one cell saying what it did.
fn observed_entry(cell: &CellResult, seen: &RunsSeen, reason: String) -> Entry {
    let c = &seen.counts;
    let expect = if c.passed() == c.total() {
        Expected::Pass
    } else if c.passed() > 0 {
        Expected::Flaky
    } else {
        let verdicts = RunVerdict::ALL
            .into_iter()
            .filter(|&v| v.is_failure() && c.get(v) > 0)
            .collect();
        Expected::Fail {
            run_verdicts: Some(verdicts),
            vuids: seen.vuids.clone(),
            signals: seen.signals.clone(),
        }
    };
    Entry {
        pattern: Pattern {
            case: Some(cell.case.clone()),
            runtime: Some(cell.runtime.clone()),
            driver: Some(cell.driver.clone()),
            layers: Some(layers_text(&cell.layers)),
            emulation: Some(cell.emulation.clone()),
            layer_versions: None,
        },
        expect,
        reason,
        source: String::new(),
    }
}

type SortKey = (String, String, String, usize, String, usize, String);

fn sort_key(e: &Entry) -> SortKey {
    let p = &e.pattern;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    (
        text(&p.driver),
        text(&p.emulation),
        text(&p.layers),
        case_rank(&text(&p.case)),
        text(&p.case),
        runtime_rank(&text(&p.runtime)),
        text(&p.runtime),
    )
}

fn describe(e: &Entry, why: &str) -> String {
    let p = &e.pattern;
    let any = |v: &Option<String>| v.clone().unwrap_or_else(|| "*".into());
    let what = match &e.expect {
        Expected::Pass => "pass".to_string(),
        Expected::Flaky => "flaky".to_string(),
        Expected::Fail {
            run_verdicts,
            vuids,
            signals,
        } => {
            let mut parts: Vec<String> = run_verdicts
                .iter()
                .flatten()
                .map(|v| v.name().to_string())
                .collect();
            parts.extend(signals.iter().cloned());
            parts.extend(vuids.iter().cloned());
            format!("fail ({})", parts.join(", "))
        }
    };
    let at = match e.source.is_empty() {
        true => String::new(),
        false => format!("{}: ", e.source),
    };
    let why = match why.is_empty() {
        true => String::new(),
        false => format!("; {why}"),
    };
    format!(
        "{at}{} × {} × {} [{}, {}]: {what}: {}{why}",
        any(&p.case),
        any(&p.runtime),
        any(&p.driver),
        any(&p.layers),
        any(&p.emulation),
        e.reason
    )
}

const HEADER: &str = "\
# vkexit baseline: what the cells of a job are known to do.
# Used by `vkexit run --baseline FILE`; written by `vkexit baseline update`.
# [[expect]] entries are tried in order, and the first that matches a cell judges it;
# a cell that none matches is judged by vkexit's built-in baseline.
# [[allow]] entries remove message ids from every run they apply to, before judging.
# An update keeps each entry that still fits, with its reason, and the file's comments,
# blank lines and layout; a dropped entry goes with the comment just above it.
# A reason of \"TODO: explain\" still needs writing.
";

/// The file's text: stable for the same entries, so updates diff cleanly.
pub fn render(file: &BaselineFile) -> String {
    let mut out = String::from(HEADER);
    for a in &file.allows {
        out.push_str("\n[[allow]]\n");
        line(&mut out, "allow_vuids", &list(&a.vuids));
        opt(&mut out, "driver", &a.driver);
        opt(&mut out, "layer_version", &a.layer_version);
        opt(
            &mut out,
            "layer_versions",
            &a.layer_versions.as_ref().map(|r| r.to_string()),
        );
        line(&mut out, "reason", &quote(&a.reason));
    }
    for e in &file.entries {
        out.push_str("\n[[expect]]\n");
        let p = &e.pattern;
        opt(&mut out, "case", &p.case);
        opt(&mut out, "runtime", &p.runtime);
        opt(&mut out, "driver", &p.driver);
        opt(&mut out, "layers", &p.layers);
        opt(&mut out, "emulation", &p.emulation);
        opt(
            &mut out,
            "layer_versions",
            &p.layer_versions.as_ref().map(|r| r.to_string()),
        );
        match &e.expect {
            Expected::Pass => line(&mut out, "expect", "\"pass\""),
            Expected::Flaky => line(&mut out, "flaky", "true"),
            Expected::Fail {
                run_verdicts,
                vuids,
                signals,
            } => {
                line(&mut out, "expect", "\"fail\"");
                if let Some(v) = run_verdicts {
                    let names: Vec<String> = v.iter().map(|v| v.name().to_string()).collect();
                    line(&mut out, "run_verdicts", &list(&names));
                }
                if !vuids.is_empty() {
                    line(&mut out, "vuids", &list(vuids));
                }
                if !signals.is_empty() {
                    line(&mut out, "signals", &list(signals));
                }
            }
        }
        line(&mut out, "reason", &quote(&e.reason));
    }
    out
}

/// The updated file written over its old text, so that what people wrote
/// stays: comments, blank lines and the layout of every entry that is kept,
/// and the `[[allow]]` entries untouched. Dropped entries go with the
/// comment just above them; added entries are written as [`render`] writes
/// them; the order of the `[[expect]]` entries is the update's. Text that
/// cannot be matched to `old` entry by entry is written anew.
pub fn render_over(old_text: &str, old: &BaselineFile, new: &BaselineFile) -> String {
    use toml_edit::{ArrayOfTables, DocumentMut, Item, Table};
    let Ok(mut doc) = old_text.parse::<DocumentMut>() else {
        return render(new);
    };
    let old_tables: Vec<Table> = match doc.get("expect") {
        None => Vec::new(),
        Some(item) => match item.as_array_of_tables() {
            Some(a) => a.iter().cloned().collect(),
            None => return render(new),
        },
    };
    let allows = doc
        .get("allow")
        .and_then(Item::as_array_of_tables)
        .map(|a| a.len())
        .unwrap_or(0);
    if old_tables.len() != old.entries.len() || allows != old.allows.len() {
        return render(new);
    }
    // The file's own header is the comment above its first table, up to its
    // last blank line (the rest is that entry's own); it goes on whichever
    // table comes first after the update.
    let first = doc
        .iter()
        .filter_map(|(_, item)| item.as_array_of_tables())
        .flat_map(|a| a.iter().filter_map(Table::position))
        .min();
    let mut old_tables = old_tables;
    let mut header = String::new();
    if let Some(first) = first {
        let mut candidates: Vec<&mut Table> = old_tables.iter_mut().collect();
        let allow_first = candidates.iter().all(|t| t.position() != Some(first));
        let mut allows_now = allow_tables(&mut doc);
        if allow_first {
            candidates = std::mem::take(&mut allows_now);
        }
        if let Some(t) = candidates.into_iter().find(|t| t.position() == Some(first)) {
            header = take_header(t);
        }
    }
    let after_allows = doc
        .get("allow")
        .and_then(Item::as_array_of_tables)
        .and_then(|a| a.iter().filter_map(Table::position).max())
        .map_or(0, |p| p + 1);
    let mut expects = ArrayOfTables::new();
    for (i, e) in new.entries.iter().enumerate() {
        let kept = old
            .entries
            .iter()
            .position(|o| !e.source.is_empty() && o.source == e.source);
        let mut table = match kept {
            Some(j) => old_tables[j].clone(),
            None => fresh_table(e),
        };
        table.set_position(after_allows + i);
        expects.push(table);
    }
    doc.remove("expect");
    if !expects.is_empty() {
        doc.insert("expect", Item::ArrayOfTables(expects));
    }
    let first_of = |key: &str| {
        doc.get(key)
            .and_then(Item::as_array_of_tables)
            .and_then(|a| a.iter().filter_map(Table::position).min())
    };
    let key = match (first_of("allow"), first_of("expect")) {
        (Some(a), Some(e)) if e < a => "expect",
        (Some(_), _) => "allow",
        _ => "expect",
    };
    let first = doc
        .get_mut(key)
        .and_then(Item::as_array_of_tables_mut)
        .and_then(|a| a.iter_mut().min_by_key(|t| t.position()));
    if let Some(t) = first {
        let own = prefix_of(t);
        t.decor_mut()
            .set_prefix(format!("{header}{}", own.trim_start_matches('\n')));
    }
    doc.to_string()
}

fn allow_tables(doc: &mut toml_edit::DocumentMut) -> Vec<&mut toml_edit::Table> {
    doc.get_mut("allow")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .map(|a| a.iter_mut().collect())
        .unwrap_or_default()
}

fn prefix_of(t: &toml_edit::Table) -> String {
    t.decor()
        .prefix()
        .and_then(|p| p.as_str())
        .unwrap_or("")
        .to_string()
}

/// Takes the file's header off the comment above its first table: everything up to the
/// comment's last blank line; a comment with no blank line in it, at the top of the file,
/// is the file's (it stays at the top when an added entry comes first).
fn take_header(t: &mut toml_edit::Table) -> String {
    let prefix = prefix_of(t);
    let whole = prefix.trim_start().starts_with('#') && !prefix.trim_end().contains("\n\n");
    let split = match prefix.rfind("\n\n") {
        Some(i) => i + 2,
        None if whole => prefix.len(),
        None => 0,
    };
    t.decor_mut().set_prefix(prefix[split..].to_string());
    prefix[..split].to_string()
}

/// One entry as [`render`] writes it, as a table to add to a document.
fn fresh_table(e: &Entry) -> toml_edit::Table {
    let file = BaselineFile {
        entries: vec![e.clone()],
        ..BaselineFile::default()
    };
    let text = render(&file);
    let text = text.strip_prefix(HEADER).unwrap_or(&text);
    let doc: toml_edit::DocumentMut = text.parse().expect("render writes TOML");
    let mut table = doc["expect"]
        .as_array_of_tables()
        .and_then(|a| a.get(0))
        .cloned()
        .expect("one [[expect]] entry");
    table.decor_mut().set_prefix("\n");
    table
}

fn line(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push_str(" = ");
    out.push_str(value);
    out.push('\n');
}

fn opt(out: &mut String, key: &str, value: &Option<String>) {
    if let Some(v) = value {
        line(out, key, &quote(v));
    }
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::toml_file::TomlFile;
    use crate::test_fixtures::{cell, counts, results};

    const CHILDREN: &str = "VUID-vkDestroyDevice-device-00378";

    fn parse(text: &str) -> BaselineFile {
        let file = TomlFile {
            path: "b.toml".into(),
            text: text.into(),
        };
        BaselineFile::parse(&file).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// A cell as `vkexit run` would leave it: lavapipe, validation, no emulation.
    fn vuid_cell(case: &str, runtime: &str) -> CellResult {
        let mut c = cell(case, runtime, CellVerdict::ExpectedFail, counts(0, 0, 3));
        c.vuids = vec![CHILDREN.into()];
        c
    }

    fn crash_cell(case: &str, runtime: &str) -> CellResult {
        let mut c = cell(case, runtime, CellVerdict::Fail, counts(0, 3, 0));
        c.signals = vec!["SIGSEGV".into()];
        c
    }

    fn pass_cell(case: &str, runtime: &str) -> CellResult {
        cell(case, runtime, CellVerdict::Pass, counts(3, 0, 0))
    }

    #[test]
    fn built_in_failures_get_entries_with_the_built_in_reasons() {
        let r = results(vec![
            pass_cell("clean-exit", "refrt:never"),
            vuid_cell("buffer-kept-at-exit", "refrt:guarded"),
            crash_cell("my-test", "external"),
        ]);
        let (file, changes) = update(&BaselineFile::default(), &r, false);
        assert_eq!(changes.added.len(), 2, "{changes:?}");
        assert_eq!(
            file.entries[0].reason,
            "vkDestroyDevice while the kept buffer and its memory are alive"
        );
        assert_eq!(
            file.entries[0].expect,
            Expected::Fail {
                run_verdicts: Some(vec![RunVerdict::Vuid]),
                vuids: vec![CHILDREN.into()],
                signals: vec![],
            }
        );
        assert_eq!(file.entries[1].reason, TODO_REASON);
        assert_eq!(file.entries[1].pattern.case.as_deref(), Some("my-test"));
        // What it wrote reads back the same, and judges every cell green.
        let text = render(&file);
        assert!(text.starts_with("# vkexit baseline"), "{text}");
        let again = parse(&text);
        assert_eq!(
            again
                .entries
                .iter()
                .map(|e| (&e.pattern, &e.expect, &e.reason))
                .collect::<Vec<_>>(),
            file.entries
                .iter()
                .map(|e| (&e.pattern, &e.expect, &e.reason))
                .collect::<Vec<_>>()
        );
        let (_, second) = update(&again, &r, false);
        assert!(
            second.added.is_empty() && second.removed.is_empty(),
            "{second:?}"
        );
        assert_eq!(second.kept, 2);
    }

    #[test]
    fn an_update_keeps_reasons_and_fields_of_entries_that_still_fit() {
        let old = parse(
            r#"
[[allow]]
allow_vuids = ["UNASSIGNED-fp"]
layer_version = "1.3.239"
reason = "old layer"

[[expect]]
case = "buffer-kept-at-exit"
runtime = "refrt:guarded"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "fail"
run_verdicts = ["vuid", "crash"]
reason = "my own words"

[[expect]]
case = "my-test"
runtime = "external"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "fail"
signals = ["SIGSEGV"]
reason = "fixed since"

[[expect]]
case = "gone-case"
runtime = "external"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "pass"
reason = "not in these results"

[[expect]]
case = "*"
runtime = "refrt:static-*"
flaky = true
reason = "a pattern"
"#,
        );
        let r = results(vec![
            vuid_cell("buffer-kept-at-exit", "refrt:guarded"),
            // Fixed: it passes now, and nothing else expects it to fail.
            pass_cell("my-test", "external"),
            // Fails differently than the built-in baseline says.
            crash_cell("buffer-kept-at-exit", "refrt:atexit-after-init"),
        ]);
        let (file, changes) = update(&old, &r, false);
        let text = render(&file);
        let again = parse(&text);
        let runtime = |rt: &str| {
            again
                .entries
                .iter()
                .find(|e| e.pattern.runtime.as_deref() == Some(rt))
                .unwrap()
        };
        let kept = runtime("refrt:guarded");
        assert_eq!(kept.reason, "my own words");
        assert!(
            matches!(&kept.expect, Expected::Fail { run_verdicts: Some(v), .. } if v.len() == 2)
        );
        assert!(!text.contains("fixed since"), "{text}");
        // Kept: the guarded entry, the one about a cell not in these results, the pattern.
        assert_eq!(changes.kept, 3);
        assert_eq!(changes.removed.len(), 1, "{changes:?}");
        assert!(
            changes.removed[0].starts_with("b.toml:17: my-test × external"),
            "{changes:?}"
        );
        assert_eq!(changes.added.len(), 1);
        assert_eq!(runtime("refrt:atexit-after-init").reason, TODO_REASON);
        // Entries that match no cell stay without --prune; the allow-list stays.
        assert!(text.contains("not in these results") && text.contains("a pattern"));
        assert_eq!(again.allows.len(), 1);
        assert_eq!(again.allows[0].reason, "old layer");
        // The pattern entry comes after every entry about one cell.
        assert_eq!(again.entries.last().unwrap().reason, "a pattern");

        let (file, changes) = update(&old, &r, true);
        let text = render(&file);
        assert!(
            !text.contains("not in these results") && !text.contains("a pattern"),
            "{text}"
        );
        assert_eq!(changes.removed.len(), 3, "{changes:?}");
    }

    #[test]
    fn a_pass_where_the_built_in_baseline_expects_a_failure_gets_a_pass_entry() {
        let r = results(vec![pass_cell("buffer-kept-at-exit", "refrt:guarded")]);
        let (file, _) = update(&BaselineFile::default(), &r, false);
        assert_eq!(file.entries.len(), 1);
        assert_eq!(file.entries[0].expect, Expected::Pass);
        assert_eq!(file.entries[0].reason, TODO_REASON);
    }

    #[test]
    fn the_files_allow_lists_apply_before_an_entry_is_written() {
        let allow = parse(
            r#"
[[allow]]
allow_vuids = ["UNASSIGNED-old-layer-*"]
reason = "an old layer's false positive"
"#,
        );
        // Only allowed ids: its vuid runs pass, and a passing external cell needs no entry.
        let mut only_allowed = crash_cell("quiet", "external");
        only_allowed.counts = counts(0, 0, 3);
        only_allowed.signals.clear();
        only_allowed.vuids = vec!["UNASSIGNED-old-layer-1".into()];
        // An allowed id beside a real crash: the entry names the crash, not the allowed id.
        let mut crashing = crash_cell("loud", "external");
        crashing.vuids = vec!["UNASSIGNED-old-layer-1".into()];
        // One id not allowed: the runs keep their verdicts and the entry keeps that id.
        let mut mixed = vuid_cell("mixed", "external");
        mixed.vuids.push("UNASSIGNED-old-layer-2".into());
        let (file, changes) = update(&allow, &results(vec![only_allowed, crashing, mixed]), false);
        assert_eq!(changes.added.len(), 2, "{changes:?}");
        let entry = |case: &str| {
            file.entries
                .iter()
                .find(|e| e.pattern.case.as_deref() == Some(case))
                .map(|e| e.expect.clone())
        };
        assert_eq!(entry("quiet"), None);
        assert_eq!(
            entry("loud"),
            Some(Expected::Fail {
                run_verdicts: Some(vec![RunVerdict::Crash]),
                vuids: vec![],
                signals: vec!["SIGSEGV".into()],
            })
        );
        assert_eq!(
            entry("mixed"),
            Some(Expected::Fail {
                run_verdicts: Some(vec![RunVerdict::Vuid]),
                vuids: vec![CHILDREN.into()],
                signals: vec![],
            })
        );
        assert_eq!(file.allows.len(), 1);
    }

    #[test]
    fn flaky_cells_get_flaky_entries_and_errors_say_nothing() {
        let mut flaky = crash_cell("my-test", "external");
        flaky.counts = counts(2, 1, 0);
        flaky.verdict = CellVerdict::Flaky;
        let mut broken = crash_cell("other", "external");
        broken.counts.error = 1;
        broken.verdict = CellVerdict::Error;
        let (file, _) = update(
            &BaselineFile::default(),
            &results(vec![flaky, broken]),
            false,
        );
        assert_eq!(file.entries.len(), 1);
        assert_eq!(file.entries[0].expect, Expected::Flaky);
        assert!(render(&file).contains("flaky = true\nreason = \"TODO: explain\"\n"));
    }

    #[test]
    fn the_output_is_sorted_and_stable() {
        let cells = vec![
            crash_cell("handler-before-load", "refrt:never"),
            vuid_cell("buffer-kept-at-exit", "refrt:guarded"),
            vuid_cell("buffer-kept-at-exit", "refrt:static-destructor"),
        ];
        let mut reversed = cells.clone();
        reversed.reverse();
        let (a, _) = update(&BaselineFile::default(), &results(cells), false);
        let (b, _) = update(&BaselineFile::default(), &results(reversed), false);
        assert_eq!(render(&a), render(&b));
        let order: Vec<_> = a
            .entries
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e.pattern.case.as_deref().unwrap(),
                    e.pattern.runtime.as_deref().unwrap()
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                "buffer-kept-at-exit refrt:static-destructor",
                "buffer-kept-at-exit refrt:guarded",
                "handler-before-load refrt:never"
            ]
        );
        // Reasons with quotes and newlines survive.
        let mut f = a.clone();
        f.entries[0].reason = "say \"why\"\nsecond line".into();
        let again = parse(&render(&f));
        assert_eq!(again.entries[0].reason, "say \"why\"\nsecond line");
    }

    #[test]
    fn version_keyed_entries_and_allow_lists_are_kept_as_written() {
        let old = parse(
            r#"
[[allow]]
allow_vuids = ["UNASSIGNED-x"]
layer_versions = "..1.3.268"
reason = "old layers"

[[expect]]
case = "clean-exit"
runtime = "refrt:static-destructor"
layer_versions = "1.4.309.."
expect = "fail"
run_verdicts = ["crash"]
signals = ["SIGSEGV"]
reason = "newer layers fault at exit"
"#,
        );
        let (new, changes) = update(&old, &results(vec![]), false);
        assert_eq!(
            (changes.kept, changes.added.len(), changes.removed.len()),
            (1, 0, 0)
        );
        let again = parse(&render(&new));
        assert_eq!(again.entries.len(), 1);
        assert_eq!(again.entries[0].pattern, old.entries[0].pattern);
        assert_eq!(again.allows[0].layer_versions, old.allows[0].layer_versions);
        assert!(render(&new).contains("layer_versions = \"1.4.309..\"\n"));
    }

    #[test]
    fn an_update_over_the_old_text_keeps_its_comments_and_layout() {
        let text = r#"# Our lavapipe baseline.
# Reviewed by the driver team.

[[allow]]
allow_vuids = ["UNASSIGNED-fp"]   # a 1.3.239 false positive
reason = "old layer"

# The guarded policy still leaks its buffer: upstream bug 123.
[[expect]]
case    = "buffer-kept-at-exit"
runtime = "refrt:guarded"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "fail"
run_verdicts = ["vuid"]
reason = "my own words"   # keep this

# Fixed long ago.
[[expect]]
case = "my-test"
runtime = "external"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "fail"
signals = ["SIGSEGV"]
reason = "fixed since"
"#;
        let old = parse(text);
        let r = results(vec![
            vuid_cell("buffer-kept-at-exit", "refrt:guarded"),
            pass_cell("my-test", "external"),
            crash_cell("buffer-kept-at-exit", "refrt:atexit-after-init"),
        ]);
        let (file, changes) = update(&old, &r, false);
        assert_eq!((changes.kept, changes.removed.len()), (1, 1), "{changes:?}");
        let out = render_over(text, &old, &file);
        // The header, the allow entry and the kept entry, byte for byte.
        assert!(
            out.starts_with(
                "# Our lavapipe baseline.\n# Reviewed by the driver team.\n\n[[allow]]\n\
                 allow_vuids = [\"UNASSIGNED-fp\"]   # a 1.3.239 false positive\n"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "# The guarded policy still leaks its buffer: upstream bug 123.\n[[expect]]\n\
                 case    = \"buffer-kept-at-exit\"\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("reason = \"my own words\"   # keep this\n"),
            "{out}"
        );
        // The dropped entry goes with its comment; the added ones are there.
        assert!(
            !out.contains("Fixed long ago") && !out.contains("fixed since"),
            "{out}"
        );
        let again = parse(&out);
        assert_eq!(
            again
                .entries
                .iter()
                .map(|e| (&e.pattern, &e.expect, &e.reason))
                .collect::<Vec<_>>(),
            file.entries
                .iter()
                .map(|e| (&e.pattern, &e.expect, &e.reason))
                .collect::<Vec<_>>()
        );
        assert_eq!(again.allows.len(), 1);
        // Nothing left to change: a second update writes the same text.
        let (second, changes) = update(&again, &r, false);
        assert!(
            changes.added.is_empty() && changes.removed.is_empty(),
            "{changes:?}"
        );
        assert_eq!(render_over(&out, &again, &second), out);
    }

    #[test]
    fn kept_counts_every_entry_left_in_the_file() {
        // A pattern entry and an entry about a cell these results do not hold are kept
        // too, and counted so.
        let text = r#"[[expect]]
case = "buffer-kept-at-exit"
runtime = "refrt:*"
expect = "fail"
reason = "a pattern"

[[expect]]
case = "gone"
runtime = "external"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "pass"
reason = "not in these results"
"#;
        let old = parse(text);
        let r = results(vec![vuid_cell("buffer-kept-at-exit", "refrt:guarded")]);
        let (file, changes) = update(&old, &r, false);
        assert_eq!(file.entries.len(), 2);
        assert_eq!((changes.kept, changes.added.len()), (2, 0), "{changes:?}");
        let (_, pruned) = update(&old, &r, true);
        assert_eq!((pruned.kept, pruned.removed.len()), (1, 1), "{pruned:?}");
    }

    #[test]
    fn a_new_files_header_says_comments_are_kept() {
        let text = render(&BaselineFile::default());
        assert!(!text.contains("not kept"), "{text}");
        assert!(text.contains("the file's comments"), "{text}");
    }

    #[test]
    fn an_added_entry_goes_below_the_files_top_comment() {
        let text = r#"# Our CI's baseline: reviewed by the driver team.
[[expect]]
case = "my-test"
runtime = "external"
driver = "lavapipe"
layers = "validation"
emulation = "none"
expect = "pass"
reason = "it is clean"
"#;
        let old = parse(text);
        // Sorted before `my-test`: a built-in case.
        let r = results(vec![
            pass_cell("my-test", "external"),
            crash_cell("aaa-first", "external"),
        ]);
        let (file, changes) = update(&old, &r, false);
        assert_eq!(changes.added.len(), 1, "{changes:?}");
        let out = render_over(text, &old, &file);
        assert!(
            out.starts_with("# Our CI's baseline: reviewed by the driver team.\n"),
            "{out}"
        );
        assert_eq!(
            out.matches("reviewed by the driver team").count(),
            1,
            "{out}"
        );
        assert_eq!(parse(&out).entries.len(), 2);
    }
}
