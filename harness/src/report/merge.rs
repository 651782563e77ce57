//! Merging results files: the shards of one matrix, or the runs of several
//! machines with different drivers, joined into one set of results.
//!
//! A cell is known by its identity (case × runtime × driver × layers ×
//! emulation). A cell in one file only is kept as it is. A cell in several
//! files is one cell: its runs and counts are added, its artifacts listed
//! one after another, its VUIDs, signals and findings joined, and its
//! verdict judged again from the sums, against the built-in expectation of
//! a built-in case.

use crate::judge;
use crate::plan::shard::Shard;
use crate::plan::{case_rank, runtime_rank};
use crate::report;
use crate::support::errors::{Error, Result};
use crate::support::util::union_sorted;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use vkexit_evidence::explore::{Exploration, SCHEMA as EXPLORE_SCHEMA};
use vkexit_evidence::results::{CellId, CellResult, Results, SCHEMA};

/// The most findings a merged cell lists, as a run's cell does.
const MAX_FINDINGS: usize = 16;

/// Reads one results file, refusing anything that is not `vkexit.results/1`,
/// with the file and the line and column of what is wrong.
pub(crate) fn read(path: &Path) -> Result<Results> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io("cannot read the results file", path, e))?;
    let results = parse(&text)
        .map_err(|why| Error::bad_input(path, format!("not a {SCHEMA} results file: {why}")))?;
    for c in &results.cells {
        if let Some(why) = judge::contradiction(c) {
            return Err(Error::bad_input(
                path,
                format!(
                    "cell {} × {} × {} ({}, emulation {}): its verdict `{}` contradicts its counts: {why}; this file was not written by vkexit as it is, so it is not merged",
                    c.case,
                    c.runtime,
                    c.driver,
                    c.layers.join("+"),
                    c.emulation,
                    c.verdict.name()
                ),
            ));
        }
    }
    Ok(results)
}

/// Reads the files to merge. A file named twice would count its runs
/// twice, and an incomplete set of shards would gate part of a matrix as if
/// it were all of it: both are refused.
pub(crate) fn read_all(paths: &[PathBuf]) -> Result<Vec<Results>> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut inputs = Vec::new();
    for path in paths {
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if seen.contains(&real) {
            return Err(Error::GivenTwice { path: path.clone() });
        }
        seen.push(real);
        inputs.push((path.as_path(), read(path)?));
    }
    let shards: Vec<(&Path, Option<&str>)> = inputs
        .iter()
        .map(|(p, r)| (*p, r.shard.as_deref()))
        .collect();
    check_shards(&shards)?;
    Ok(inputs.into_iter().map(|(_, r)| r).collect())
}

/// Every shard K/N for K = 1..N, for each N among the inputs (each file with the shard it
/// holds, if any).
fn check_shards(inputs: &[(&Path, Option<&str>)]) -> Result<()> {
    let mut given: Vec<(Shard, &Path)> = Vec::new();
    for &(path, shard) in inputs {
        if let Some(text) = shard {
            let shard: Shard = text
                .parse()
                .map_err(|why| Error::bad_input(path, format!("bad \"shard\": {why}")))?;
            given.push((shard, path));
        }
    }
    let mut counts: Vec<u64> = given.iter().map(|(s, _)| s.count()).collect();
    counts.sort();
    counts.dedup();
    for n in counts {
        let missing: Vec<String> = (1..=n)
            .filter(|&k| !given.iter().any(|(s, _)| s.count() == n && s.index() == k))
            .map(|k| format!("{k}/{n}"))
            .collect();
        if !missing.is_empty() {
            let have: Vec<String> = given
                .iter()
                .filter(|(s, _)| s.count() == n)
                .map(|(s, p)| format!("{} ({s})", p.display()))
                .collect();
            return Err(Error::ShardMissing {
                missing: missing.join(", "),
                given: have.join(", "),
            });
        }
    }
    Ok(())
}

/// The schema a JSON file names, if it names one: which kind of file `merge` was given.
pub(crate) fn schema_of(path: &Path) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Header {
        schema: Option<serde_json::Value>,
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io("cannot read the file to merge", path, e))?;
    let header: Header = serde_json::from_str(&text)
        .map_err(|why| Error::bad_input(path, format!("not a JSON file: {why}")))?;
    Ok(header.schema.and_then(|s| s.as_str().map(str::to_string)))
}

/// Reads exploration files (`vkexit.explore/1`) and joins the shards of one exploration: every
/// shard given, one chaos seed, each cell in one file only (explorations join shards, not
/// repeats: a cell's perturbations and fix are decided by its own runs).
pub(crate) fn explorations(paths: &[PathBuf]) -> Result<Exploration> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut inputs: Vec<(&Path, Exploration)> = Vec::new();
    for path in paths {
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if seen.contains(&real) {
            return Err(Error::GivenTwice { path: path.clone() });
        }
        seen.push(real);
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io("cannot read the exploration file", path, e))?;
        let e: Exploration = serde_json::from_str(&text).map_err(|why| {
            Error::bad_input(
                path,
                format!("not a {EXPLORE_SCHEMA} exploration file: {why}"),
            )
        })?;
        if e.schema != EXPLORE_SCHEMA {
            return Err(Error::bad_input(
                path,
                format!(
                    "its schema is \"{}\", expected \"{EXPLORE_SCHEMA}\": results and exploration files are merged apart",
                    e.schema
                ),
            ));
        }
        inputs.push((path.as_path(), e));
    }
    let shards: Vec<(&Path, Option<&str>)> = inputs
        .iter()
        .map(|(p, e)| (*p, e.shard.as_deref()))
        .collect();
    check_shards(&shards)?;
    let (first_path, first) = &inputs[0];
    let mut merged = Exploration {
        shard: None,
        left_out: Vec::new(),
        interrupted: false,
        cells: Vec::new(),
        ..first.clone()
    };
    let mut from: HashMap<CellId, &Path> = HashMap::new();
    for (path, e) in &inputs {
        if e.chaos_seed != first.chaos_seed {
            return Err(Error::bad_input(
                path,
                format!(
                    "explored with --chaos-seed {}, but {} with {}: shards of one exploration share one seed",
                    e.chaos_seed,
                    first_path.display(),
                    first.chaos_seed
                ),
            ));
        }
        merged.interrupted |= e.interrupted;
        for name in &e.left_out {
            if !merged.left_out.contains(name) {
                merged.left_out.push(name.clone());
            }
        }
        for cell in &e.cells {
            if let Some(other) = from.insert(cell.natural.id(), path) {
                let n = &cell.natural;
                return Err(Error::bad_input(
                    path,
                    format!(
                        "cell {} × {} × {} (emulation {}) was explored in {} too: explorations join shards, not repeats",
                        n.case,
                        n.runtime,
                        n.driver,
                        n.emulation,
                        other.display()
                    ),
                ));
            }
            merged.cells.push(cell.clone());
        }
    }
    merged.cells = in_plan_order(merged.cells, |c| &c.natural);
    Ok(merged)
}

/// Why a text is not a results file.
#[derive(Debug, thiserror::Error)]
pub enum NotResults {
    /// Not JSON, or JSON without the fields a results file has: serde's line and column.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Another schema.
    #[error("its schema is {0}, expected \"{SCHEMA}\"")]
    OtherSchema(serde_json::Value),
    /// No schema at all.
    #[error("it has no \"schema\" field (expected \"{SCHEMA}\")")]
    NoSchema,
}

/// The text of a results file, checked: JSON first, then the schema name,
/// then the fields.
pub fn parse(text: &str) -> std::result::Result<Results, NotResults> {
    #[derive(Deserialize)]
    struct Header {
        schema: Option<serde_json::Value>,
    }
    let header: Header = serde_json::from_str(text)?;
    match header.schema {
        Some(serde_json::Value::String(s)) if s == SCHEMA => {}
        Some(other) => return Err(NotResults::OtherSchema(other)),
        None => return Err(NotResults::NoSchema),
    }
    Ok(serde_json::from_str(text)?)
}

/// Where a cell comes in a plan: its group, its case (external ones first), its runtime, and
/// the order it came in.
type PlanKey = (usize, (u8, usize), usize, usize);

/// Joins results into one. Cells come in the order of a plan: grouped by
/// driver, emulation and layers as they first appear; within a group the
/// external cases as they first appear, then the built-in cases and refrt
/// policies in their order.
pub fn merge(inputs: Vec<Results>) -> Results {
    let interrupted = inputs.iter().any(|r| r.interrupted);
    let mut parts: Vec<Vec<CellResult>> = Vec::new();
    let mut at: HashMap<CellId, usize> = HashMap::new();
    for cell in inputs.into_iter().flat_map(|r| r.cells) {
        match at.get(&cell.id()) {
            Some(&i) => parts[i].push(cell),
            None => {
                at.insert(cell.id(), parts.len());
                parts.push(vec![cell]);
            }
        }
    }
    let cells = in_plan_order(parts.into_iter().map(combine).collect(), |c| c);
    report::results(cells, interrupted)
}

/// `items` in the order of a plan, each placed by its cell (`cell_of`): grouped by driver,
/// emulation and layers as they first appear; within a group the external cases as they
/// come, then the built-in cases and runtimes in their order.
fn in_plan_order<T>(items: Vec<T>, cell_of: impl Fn(&T) -> &CellResult) -> Vec<T> {
    let mut groups: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut keyed: Vec<(PlanKey, T)> = items
        .into_iter()
        .enumerate()
        .map(|(order, item)| {
            let c = cell_of(&item);
            let group = (c.driver.clone(), c.emulation.clone(), c.layers.clone());
            let g = groups.iter().position(|x| *x == group).unwrap_or_else(|| {
                groups.push(group);
                groups.len() - 1
            });
            let case = match c.runtime == "external" {
                true => (0, 0),
                false => (1, case_rank(&c.case)),
            };
            ((g, case, runtime_rank(&c.runtime), order), item)
        })
        .collect();
    keyed.sort_by_key(|(key, _)| *key);
    keyed.into_iter().map(|(_, item)| item).collect()
}

/// The results of one cell from several files as one cell: runs, counts
/// and VUID counts added, artifacts one after another, VUIDs, signals and
/// findings joined, the verdict judged again from the sums.
fn combine(parts: Vec<CellResult>) -> CellResult {
    let mut parts = parts.into_iter();
    let first = parts.next().expect("a cell has at least one part");
    let rest: Vec<CellResult> = parts.collect();
    if rest.is_empty() {
        return first;
    }
    let outcomes: Vec<judge::PartOutcome> = std::iter::once(&first)
        .chain(&rest)
        .map(judge::PartOutcome::of)
        .collect();
    let mut c = first;
    // A results file is outside input: a count it claims is added once,
    // never counted up run by run, and sums that overflow saturate and make
    // the cell an error (a saturated count of passes would hide failures).
    let mut overflow = false;
    let mut counts_overflow = false;
    let mut add = |sum: &mut u64, n: u64| {
        overflow |= sum.checked_add(n).is_none();
        *sum = sum.saturating_add(n);
    };
    for p in rest {
        add(&mut c.runs, p.runs);
        counts_overflow |= c.counts.add_counts(&p.counts);
        for (id, n) in p.vuid_counts {
            add(c.vuid_counts.entry(id).or_insert(0), n);
        }
        union_sorted(&mut c.vuids, p.vuids);
        c.vuid_names = crate::host::vuid::renamed_ids(&c.vuids);
        union_sorted(&mut c.signals, p.signals);
        union_sorted(&mut c.allowed_vuids, p.allowed_vuids);
        for f in p.findings {
            if c.findings.len() < MAX_FINDINGS && !c.findings.contains(&f) {
                c.findings.push(f);
            }
        }
        c.artifacts.extend(p.artifacts);
        add(&mut c.duration_ms, p.duration_ms);
        c.device = join_text(c.device.take(), p.device);
        c.driver_manifest = join_text(c.driver_manifest.take(), p.driver_manifest);
    }
    c.pass_rate = crate::judge::cell::pass_rate(c.counts);
    c.pass_rate_95 = crate::judge::cell::pass_rate_95(c.counts);
    judge::merged(&mut c, &outcomes, overflow || counts_overflow);
    c
}

/// Distinct values joined ("A; B"), so two machines' devices both show.
fn join_text(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) if a.split("; ").any(|x| x == b) => Some(a),
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Baseline;
    use crate::support::toml_file::TomlFile;
    use crate::test_fixtures::{cell, counts, results};
    use vkexit_evidence::verdict::CellVerdict;

    fn file(cells: Vec<CellResult>) -> String {
        serde_json::to_string_pretty(&results(cells)).unwrap()
    }

    #[test]
    fn cells_of_different_shards_are_all_kept_in_plan_order() {
        let a = cell(
            "clean-exit",
            "refrt:guarded",
            CellVerdict::Pass,
            counts(2, 0, 0),
        );
        let b = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(2, 0, 0),
        );
        let c = cell(
            "buffer-kept-at-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(2, 0, 0),
        );
        let merged = merge(vec![results(vec![a, c]), results(vec![b])]);
        let names: Vec<_> = merged
            .cells
            .iter()
            .map(|c| format!("{} {}", c.case, c.runtime))
            .collect();
        assert_eq!(
            names,
            [
                "clean-exit refrt:never",
                "clean-exit refrt:guarded",
                "buffer-kept-at-exit refrt:never"
            ]
        );
        assert_eq!(merged.schema, SCHEMA);
    }

    #[test]
    fn external_cases_keep_their_place_first_in_their_group_as_a_plan_has_them() {
        let ext = |name: &str| cell(name, "external", CellVerdict::Pass, counts(1, 0, 0));
        let builtin = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(1, 0, 0),
        );
        // One run's file, in its plan order; and the same split in two.
        let one = merge(vec![results(vec![
            ext("b-test"),
            ext("a-test"),
            builtin.clone(),
        ])]);
        let two = merge(vec![
            results(vec![ext("b-test"), builtin]),
            results(vec![ext("a-test")]),
        ]);
        for (merged, want) in [
            (one, ["b-test", "a-test", "clean-exit"]),
            (two, ["b-test", "a-test", "clean-exit"]),
        ] {
            let names: Vec<&str> = merged.cells.iter().map(|c| c.case.as_str()).collect();
            assert_eq!(names, want);
        }
    }

    #[test]
    fn the_same_cell_twice_adds_up_and_is_judged_again() {
        // Two machines, each 2 runs of a cell known to fail with 00378.
        let id = "VUID-vkDestroyDevice-device-00378";
        let mut a = cell(
            "buffer-kept-at-exit",
            "refrt:guarded",
            CellVerdict::ExpectedFail,
            counts(0, 0, 2),
        );
        a.vuids = vec![id.into()];
        a.vuid_counts.insert(id.into(), 8);
        a.artifacts = vec!["/m1/run-0".into(), "/m1/run-1".into()];
        a.findings = vec!["f1".into()];
        a.expectation = Some("b.toml:3".into());
        let mut b = a.clone();
        b.artifacts = vec!["/m2/run-0".into()];
        b.findings = vec!["f1".into(), "f2".into()];
        b.device = Some("other GPU".into());
        let merged = merge(vec![results(vec![a.clone()]), results(vec![b.clone()])]);
        let c = &merged.cells[0];
        assert_eq!(merged.cells.len(), 1);
        assert_eq!(c.runs, 4);
        assert_eq!(c.counts.vuid, 4);
        assert_eq!(c.vuid_counts[id], 16);
        assert_eq!(c.verdict, CellVerdict::ExpectedFail);
        // Judged again by the built-in baseline, whatever judged the parts.
        assert_eq!(c.expectation.as_deref(), Some("built-in"));
        assert_eq!(c.artifacts, ["/m1/run-0", "/m1/run-1", "/m2/run-0"]);
        assert_eq!(c.findings, ["f1", "f2"]);
        assert_eq!(c.device.as_deref(), Some("llvmpipe; other GPU"));
        assert_eq!(c.duration_ms, 2468);

        // One machine passes where the other fails: flaky, and the gate is red.
        let mut pass = b.clone();
        pass.counts = counts(2, 0, 0);
        pass.vuids.clear();
        pass.vuid_counts.clear();
        pass.verdict = CellVerdict::UnexpectedPass;
        let merged = merge(vec![results(vec![a]), results(vec![pass])]);
        let c = &merged.cells[0];
        assert_eq!(c.verdict, CellVerdict::Flaky);
        assert_eq!(c.pass_rate, 0.5);
        assert!(!merged.is_green());
    }

    #[test]
    fn signals_are_unioned_and_external_cells_have_no_expectation() {
        let mut a = cell("my-test", "external", CellVerdict::Fail, counts(0, 1, 0));
        a.signals = vec!["SIGSEGV".into()];
        let mut b = a.clone();
        b.signals = vec!["SIGABRT".into()];
        let merged = merge(vec![results(vec![a]), results(vec![b])]);
        let c = &merged.cells[0];
        assert_eq!(c.signals, ["SIGABRT", "SIGSEGV"]);
        assert_eq!(c.verdict, CellVerdict::Fail);
        assert_eq!(c.reason.as_deref(), Some("0 of 2 runs passed"));
    }

    #[test]
    fn a_cell_that_ran_nowhere_keeps_its_reason() {
        let mut a = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Skipped,
            counts(0, 0, 0),
        );
        a.reason = Some("driver nvidia shows no device on this machine".into());
        let b = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(3, 0, 0),
        );
        let merged = merge(vec![results(vec![a.clone()]), results(vec![b])]);
        assert_eq!(merged.cells[0].verdict, CellVerdict::Pass);
        assert_eq!(merged.cells[0].runs, 3);
        let merged = merge(vec![results(vec![a.clone()]), results(vec![a])]);
        assert_eq!(merged.cells[0].verdict, CellVerdict::Skipped);
        assert_eq!(
            merged.cells[0].reason.as_deref(),
            Some("driver nvidia shows no device on this machine")
        );
    }

    #[test]
    fn a_part_that_could_not_run_keeps_the_cell_an_error() {
        let mut broken = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Error,
            counts(0, 0, 0),
        );
        broken.reason = Some("driver nvidia could not be probed: boom".into());
        let ran = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(3, 0, 0),
        );
        let merged = merge(vec![results(vec![ran]), results(vec![broken])]);
        let c = &merged.cells[0];
        assert_eq!(c.verdict, CellVerdict::Error);
        assert_eq!(c.runs, 3);
        let reason = c.reason.as_deref().unwrap();
        assert!(
            reason.starts_with("driver nvidia could not be probed: boom; where it ran: pass"),
            "{reason}"
        );
    }

    #[test]
    fn a_baseline_leaves_error_cells_errors() {
        let mut broken = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Error,
            counts(0, 0, 0),
        );
        broken.reason = Some("driver nvidia could not be probed: boom".into());
        let ran = cell(
            "clean-exit",
            "refrt:never",
            CellVerdict::Pass,
            counts(3, 0, 0),
        );
        let mut merged = merge(vec![results(vec![ran]), results(vec![broken])]);
        let file = TomlFile {
            path: "b.toml".into(),
            text: "[[expect]]\nexpect = \"pass\"\nreason = \"all clean\"\n".into(),
        };
        let baseline = Baseline {
            files: vec![crate::judge::BaselineFile::parse(&file).unwrap()],
        };
        crate::judge::rejudge(&mut merged, &baseline);
        assert_eq!(merged.cells[0].verdict, CellVerdict::Error);
        assert!(merged.cells[0].reason.as_deref().unwrap().contains("boom"));
    }

    #[test]
    fn an_interrupted_input_makes_the_merge_interrupted() {
        let mut a = results(vec![]);
        a.interrupted = true;
        let merged = merge(vec![a, results(vec![])]);
        assert!(merged.interrupted);
        assert!(!merged.is_green());
    }

    #[test]
    fn every_shard_of_a_split_must_be_there() {
        let p = Path::new("s.json");
        let check = |shards: &[Option<&str>]| {
            let inputs: Vec<_> = shards.iter().map(|s| (p, *s)).collect();
            check_shards(&inputs).map_err(|e| e.to_string())
        };
        assert!(check(&[Some("1/2"), Some("2/2")]).is_ok());
        assert!(check(&[Some("2/2"), Some("1/2"), Some("1/2"), None]).is_ok());
        assert!(check(&[Some("1/1")]).is_ok());
        assert!(check(&[None, None]).is_ok());
        let e = check(&[Some("1/3"), Some("3/3")]).unwrap_err();
        assert!(
            e.starts_with("shard 2/3 missing: the files given are s.json (1/3), s.json (3/3)"),
            "{e}"
        );
        let e = check(&[Some("1/2"), Some("2/2"), Some("2/4")]).unwrap_err();
        assert!(e.starts_with("shard 1/4, 3/4, 4/4 missing"), "{e}");
        let e = check(&[Some("3/2")]).unwrap_err();
        assert!(e.contains("bad \"shard\""), "{e}");
    }

    #[test]
    fn files_that_are_not_results_are_refused_with_a_position() {
        let e = parse("{\n  \"schema\": \"vkexit.results/1\",\n  oops\n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3 column 3"), "{e}");
        let e = parse("{\"schema\": \"vkexit.results/2\", \"cells\": []}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"vkexit.results/2\", expected \"vkexit.results/1\""),
            "{e}"
        );
        let e = parse("[1, 2]").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = parse("{\"cells\": []}").unwrap_err().to_string();
        assert!(e.contains("no \"schema\" field"), "{e}");
        let e = parse("{\"schema\": \"vkexit.results/1\", \"vkexit_version\": \"0.1.0\", \"cells\": [{\"case\": 1}]}")
            .unwrap_err().to_string();
        assert!(e.contains("line 1 column"), "{e}");
        let good = file(vec![cell(
            "c",
            "refrt:never",
            CellVerdict::Pass,
            counts(1, 0, 0),
        )]);
        assert_eq!(parse(&good).unwrap().cells.len(), 1);
    }
}
