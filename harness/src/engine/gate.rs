//! One gate: every part of an Invocation run, each cell given its runs' fold held to its
//! expectation, a failing cell whose crashes lie in a layer run again without it, and every
//! step told to the reporters.

use super::invocation::{Invocation, Part};
use super::runs::{judged_runs, Judged};
use crate::host::layers::layer_phrase;
use crate::judge::cell::CellFold;
use crate::report::events::{GateEvent, Naming, Reporter};
use crate::run::{self, Flow};
use crate::support::errors::Result;
use std::collections::BTreeSet;
use vkexit_evidence::results::{CellResult, Counts, LayerCrash, Results, WithoutLayer};
use vkexit_evidence::verdict::RunVerdict;

/// Makes every run of the invocation, judges every cell, and tells `reporters` each step;
/// the results, as the results file holds them.
pub(crate) fn run(invocation: &Invocation, reporters: &mut [&mut dyn Reporter]) -> Result<Results> {
    let mut tell = |event: &GateEvent| crate::report::events::tell(reporters, event);
    tell(&GateEvent::Notes(&invocation.notes))?;
    tell(&GateEvent::Started {
        cells: invocation.runnable_cells(),
        runs: invocation.runs,
        naming: Naming::of(invocation.cells().filter(|c| c.not_run.is_none())),
    })?;
    let mut cells = Vec::new();
    let mut failed = None;
    for part in &invocation.parts {
        cells.extend(run_part(invocation, part, &mut |e| {
            if failed.is_none() {
                failed = tell(e).err();
            }
        })?);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let mut results = crate::report::results(cells, run::interrupt::interrupted());
    results.shard = invocation.settings.shard.map(|s| s.to_string());
    tell(&GateEvent::Finished(&results))?;
    Ok(results)
}

fn run_part(
    invocation: &Invocation,
    part: &Part,
    tell: &mut dyn FnMut(&GateEvent),
) -> Result<Vec<CellResult>> {
    let options = invocation.options(part);
    let plan = &part.plan;
    // Each run is folded into its cell as it finishes: memory stays flat
    // however many runs there are.
    let mut folds: Vec<CellFold> = plan.cells.iter().map(|_| CellFold::default()).collect();
    // The allowed ids taken out of each cell's runs, sorted.
    let mut removed: Vec<BTreeSet<String>> = vec![BTreeSet::new(); plan.cells.len()];
    let shared = judged_runs(invocation, part, &options, &mut *tell, |_, judged| {
        let Judged { record, allowed } = judged;
        removed[record.cell].extend(allowed);
        folds[record.cell].add(&record);
        Flow::Go
    })?;
    let mut notes: Vec<String> = shared.made_again.iter().map(made_again_note).collect();
    notes.extend(writers_note(&shared.written, plan));
    if !notes.is_empty() {
        tell(&GateEvent::Notes(&notes));
    }
    let mut wrote: Vec<Option<String>> = vec![None; plan.cells.len()];
    for w in shared.written {
        wrote[w.cell] = Some(shared_dir_note(&plan.cells[w.cell], &w));
    }
    let judged = plan
        .cells
        .iter()
        .zip(&part.expectations)
        .zip(folds)
        .zip(removed);
    let mut results = Vec::with_capacity(plan.cells.len());
    for (((cell, expectation), fold), removed) in judged {
        let mut result = fold.summarize(cell, expectation.as_ref());
        result.exit_order = options.exit_order.clone();
        result.chaos_seed = options.chaos_seed;
        result.slow_teardown = options.chain.slow_teardown;
        result.allowed_vuids = removed.into_iter().collect();
        result.crash_in_layer = match fold.crash_layer() {
            Some((layer, crashed)) => Some(layer_crash(invocation, part, cell, layer, crashed)?),
            None => None,
        };
        if let Some(layer) = &result.crash_in_layer {
            result.findings.insert(0, layer.summary.clone());
        }
        for (i, note) in cell.props.notes.iter().enumerate() {
            result.findings.insert(i, note.clone());
        }
        if let Some(note) = wrote[results.len()].take() {
            result.findings.push(note);
        }
        results.push(result);
    }
    Ok(results)
}

/// What a cell whose runs wrote into their shared directory is told, once.
fn shared_dir_note(cell: &crate::plan::Cell, written: &crate::run::shared_dir::Written) -> String {
    format!(
        "{}: its runs write into the shared directory {} ({}); no other run started there \
         while one of them ran — `--private-cwd` gives each run its own",
        cell.case,
        written.dir.display(),
        names_shown(&written.names)
    )
}

/// What the user is told of the cells that wrote into each shared directory: one line a
/// directory, however many of its tests wrote there.
fn writers_note(
    written: &[crate::run::shared_dir::Written],
    plan: &crate::plan::Plan,
) -> Vec<String> {
    let mut dirs: Vec<(&std::path::Path, Vec<&str>, BTreeSet<&str>)> = Vec::new();
    for w in written {
        let at = match dirs.iter().position(|(d, _, _)| *d == w.dir) {
            Some(at) => at,
            None => {
                dirs.push((&w.dir, Vec::new(), BTreeSet::new()));
                dirs.len() - 1
            }
        };
        dirs[at].1.push(plan.cells[w.cell].case.as_str());
        dirs[at].2.extend(w.names.iter().map(String::as_str));
    }
    dirs.into_iter()
        .map(|(dir, cases, names)| {
            let names: Vec<String> = names.into_iter().map(str::to_string).collect();
            let who = match cases.as_slice() {
                [one] => format!("{one}: its runs write"),
                many => format!("{} tests write", many.len()),
            };
            format!(
                "{who} into the shared directory {} ({}); no other run started there while one \
                 of them ran — `--private-cwd` gives each run its own",
                dir.display(),
                names_shown(&names)
            )
        })
        .collect()
}

/// The first few names, and how many more.
fn names_shown(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut shown = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        shown.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    shown
}

/// What a directory whose runs were made again is told, once.
fn made_again_note(again: &crate::run::shared_dir::MadeAgain) -> String {
    let runs = match again.runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let cells = match again.cells {
        1 => "1 test".to_string(),
        n => format!("{n} tests"),
    };
    format!(
        "{}: {runs} of {cells} overlapped a run that wrote there before vkexit knew it \
         wrote; each was made again alone, and only that run counts",
        again.dir.display()
    )
}

/// A failing cell whose `crashed` crashing runs all had their pc in `layer`'s library: which
/// layer, and, when vkexit put that layer in the chain and may take it out, what the same
/// runs do without it — in one line too: "crash in the validation layer 1.3.239; without
/// validation: pass 5/5".
pub(crate) fn layer_crash(
    invocation: &Invocation,
    part: &Part,
    cell: &crate::plan::Cell,
    layer: String,
    crashed_runs: u64,
) -> Result<LayerCrash> {
    let without = match invocation.settings.rerun_without_layer {
        true => run_without_layer(invocation, part, cell, &layer)?,
        false => None,
    };
    let version = match layer.as_str() {
        "validation" => part
            .chain
            .validation
            .as_ref()
            .map(|v| v.api_version.clone()),
        _ => None,
    };
    let mut summary = format!("crash in {}", layer_phrase(&layer));
    if let Some(v) = &version {
        summary.push_str(&format!(" {v}"));
    }
    if let Some(without) = &without {
        summary.push_str(&format!("; without {layer}: {}", without.summary));
    }
    Ok(LayerCrash {
        layer,
        version,
        crashed_runs,
        without,
        summary,
    })
}

/// The cell's runs made again, as many as the invocation makes, with `layer` taken out of the
/// chain ([`Invocation::without_layer`]); `None` when vkexit may not take it out or was
/// interrupted.
fn run_without_layer(
    invocation: &Invocation,
    part: &Part,
    cell: &crate::plan::Cell,
    layer: &str,
) -> Result<Option<WithoutLayer>> {
    if run::interrupt::interrupted() {
        return Ok(None);
    }
    let Some(options) = invocation.without_layer(part, layer) else {
        return Ok(None);
    };
    let mut alone = cell.clone();
    alone.layers = options.chain.names();
    if layer == "validation" {
        alone.validation_layer = None;
    }
    let single = Part {
        chain: options.chain.clone(),
        plan: crate::plan::Plan {
            cells: vec![alone],
            notes: Vec::new(),
            helpers: part.plan.helpers.clone(),
        },
        expectations: vec![None],
        allows: vec![Vec::new()],
    };
    let mut records = Vec::new();
    judged_runs(
        invocation,
        &single,
        &options,
        |_| {},
        |_, judged| {
            records.push(judged.record);
            Flow::Go
        },
    )?;
    Ok(Some(without_summary(&records)))
}

fn without_summary(runs: &[crate::judge::run::RunRecord]) -> WithoutLayer {
    let mut counts = Counts::default();
    let mut signals: Vec<String> = Vec::new();
    for r in runs {
        counts.add(r.classification.verdict);
        if let Some(s) = &r.classification.signal {
            if !signals.contains(s) {
                signals.push(s.clone());
            }
        }
    }
    let n = counts.total();
    let parts: Vec<String> = RunVerdict::ALL
        .iter()
        .filter(|&&v| counts.get(v) > 0)
        .map(|&v| match v {
            RunVerdict::Crash if !signals.is_empty() => {
                format!("crash {} {}/{n}", signals.join(" "), counts.get(v))
            }
            v => format!("{} {}/{n}", v.name(), counts.get(v)),
        })
        .collect();
    WithoutLayer {
        runs: n,
        counts,
        signals,
        summary: match parts.is_empty() {
            true => "no run finished".into(),
            false => parts.join(", "),
        },
    }
}
