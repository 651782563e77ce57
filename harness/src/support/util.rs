//! Small helpers the engine's modules share, kept apart so that none of
//! them imports another for them.

use std::io::Write;
use std::path::Path;

/// Writes a report whole or not at all: into a temporary file next to
/// `path`, flushed to disk, then renamed over it. A vkexit killed while
/// writing, or a full disk, leaves the old file (or none), never half of a
/// new one that a later merge or gate would read as complete.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let written = std::fs::File::create(&temp).and_then(|mut f| {
        f.write_all(contents)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&temp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// `SIGSEGV` for 11; `SIG99` for a number that names no signal.
pub fn signal_name(signal: i32) -> String {
    match nix::sys::signal::Signal::try_from(signal) {
        Ok(s) => s.as_str().to_string(),
        Err(_) => format!("SIG{signal}"),
    }
}

/// Adds the strings of `from` that `into` lacks, and sorts it.
pub fn union_sorted(into: &mut Vec<String>, from: Vec<String>) {
    for s in from {
        if !into.contains(&s) {
            into.push(s);
        }
    }
    into.sort();
}
