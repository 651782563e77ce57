//! `vkexit explain`: the story of one kept run.

use super::Exit;
use crate::report::first_run::FirstRun;
use crate::support::errors::{Error, Result};

pub(super) fn explain(run_dir: &std::path::Path, svg: Option<&std::path::Path>) -> Result<Exit> {
    if !run_dir.is_dir() {
        return Err(Error::bad_input(
            run_dir,
            "not a run directory (failing runs keep theirs under vkexit-artifacts/CELL/run-K)",
        ));
    }
    let evidence = [
        "result.json",
        "command.txt",
        crate::explain::TIMELINE_FILE,
        crate::host::layers::TRACE_FILE,
        crate::host::layers::TEGRA_FILE,
        crate::explain::CRASH_FILE,
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
    match read_if_there(run_dir, "result.json").and_then(|text| {
        text.map(|t| serde_json::from_str::<serde_json::Value>(&t))
            .transpose()
            .map_err(|e| format!("result.json: {e}"))
    }) {
        Ok(Some(result)) => {
            let verdict = result["verdict"].as_str().unwrap_or("?");
            let reason = result["reason"].as_str().unwrap_or("");
            println!("verdict: {verdict}: {reason}");
        }
        Ok(None) => {}
        Err(why) => println!("could not read {why}"),
    }
    match read_if_there(run_dir, "command.txt") {
        Ok(Some(command)) => {
            if let Some(line) = command.lines().last() {
                println!("command: {line}");
            }
        }
        Ok(None) => {}
        Err(why) => println!("could not read {why}"),
    }
    // What the layer said and how the program ended, before the timeline.
    let run = FirstRun::read(run_dir);
    for m in &run.messages {
        println!("validation: {}", m.line());
        if !m.objects.is_empty() {
            println!("  objects: {}", m.objects.join(", "));
        }
    }
    if let Some(exit) = run.exit_line() {
        println!("{exit}");
        if run.stderr_tail.is_empty() {
            println!("stderr: (empty)");
        }
        for line in &run.stderr_tail {
            println!("stderr: {line}");
        }
    }
    let log = run_dir.join(crate::host::validation::LOG_FILE);
    if log.is_file() {
        println!("validation log: {}", log.display());
    }
    println!();
    let story = crate::explain::Story::read(run_dir);
    if let Some(path) = svg {
        let picture = crate::report::swimlane::of_run(run_dir);
        crate::report::write_atomically(path, picture.as_bytes())
            .map_err(|e| Error::io("cannot write the --svg picture", path, e))?;
    }
    print!("{}", story.render());
    Ok(Exit::Green)
}

/// A file of the run directory: `None` when it is not there, the reason when it is there but
/// cannot be read.
fn read_if_there(dir: &std::path::Path, name: &str) -> std::result::Result<Option<String>, String> {
    match std::fs::read_to_string(dir.join(name)) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}
