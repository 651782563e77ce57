//! Small helpers the engine's modules share, kept apart so that none of
//! them imports another for them.

/// `SIGSEGV` for 11; `SIG99` for a number that names no signal.
pub fn signal_name(signal: i32) -> String {
    match nix::sys::signal::Signal::try_from(signal) {
        Ok(s) => s.as_str().to_string(),
        Err(_) => format!("SIG{signal}"),
    }
}

/// Adds the strings of `from` that `into` lacks, and sorts it.
/// "1 cell", "2 cells": a count with its noun in the right number.
pub fn counted(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Adds `from` to the sorted, distinct `into`, keeping it so.
pub fn union_sorted(into: &mut Vec<String>, from: Vec<String>) {
    for s in from {
        if !into.contains(&s) {
            into.push(s);
        }
    }
    into.sort();
}

/// The cores this process may use: the default number of runs at once.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
