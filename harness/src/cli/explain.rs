//! `vkexit explain`: the story of one kept run.

use super::Outcome;
use crate::support::errors::{Error, Result};

pub(super) fn explain(run_dir: &std::path::Path) -> Result<Outcome> {
    if !run_dir.is_dir() {
        return Err(Error::bad_input(
            run_dir,
            "not a run directory (failing runs keep theirs under vkexit-artifacts/CELL/run-K)",
        ));
    }
    let evidence = [
        "result.json",
        "command.txt",
        crate::classify::explain::TIMELINE_FILE,
        crate::host::layers::TRACE_FILE,
        crate::host::layers::TEGRA_FILE,
        crate::classify::explain::CRASH_FILE,
    ];
    if !evidence.iter().any(|f| run_dir.join(f).is_file()) {
        let has_runs = std::fs::read_dir(run_dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("run-"));
        let hint = match has_runs {
            false => "failing runs keep theirs under vkexit-artifacts/CELL/run-K",
            true => "it is a cell's directory: explain one of its run-K directories",
        };
        return Err(Error::bad_input(
            run_dir,
            format!(
                "no evidence to explain (none of {}); {hint}",
                evidence.join(", ")
            ),
        ));
    }
    if let Ok(text) = std::fs::read_to_string(run_dir.join("result.json")) {
        if let Ok(result) = serde_json::from_str::<serde_json::Value>(&text) {
            let verdict = result["verdict"].as_str().unwrap_or("?");
            let reason = result["reason"].as_str().unwrap_or("");
            println!("verdict: {verdict}: {reason}");
        }
    }
    if let Ok(command) = std::fs::read_to_string(run_dir.join("command.txt")) {
        if let Some(line) = command.lines().last() {
            println!("command: {line}");
        }
    }
    println!();
    print!(
        "{}",
        crate::classify::explain::Story::read(run_dir).render()
    );
    Ok(Outcome::Green)
}
