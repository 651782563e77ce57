//! The exit timeline: the file named by `VKEXIT_TIMELINE_FILE`, JSON lines through
//! `vkexit-evidence`'s writer; its events and fields are that crate's `timeline` schema.

use std::ffi::CStr;
use std::sync::OnceLock;

use vkexit_evidence::{files, EvidenceLog, Record};

/// The timeline file: JSON lines, appended.
pub const TIMELINE_FILE_VAR: &str = files::TIMELINE.var;

static LOG: OnceLock<Option<EvidenceLog>> = OnceLock::new();

/// Opens the timeline, from the library's set-up only: what it finds is kept, and before the
/// C library is ready the environment may not be (an interposed call then uses [`get`], which
/// says the timeline is not open yet). Not for exit handlers or signal handlers: it may read
/// the environment and allocate.
pub(crate) fn open() -> Option<&'static EvidenceLog> {
    LOG.get_or_init(|| EvidenceLog::from_env(TIMELINE_FILE_VAR, "vkexit-preload"))
        .as_ref()
}

/// The timeline if it is open. Async-signal-safe: one atomic load.
pub(crate) fn get() -> Option<&'static EvidenceLog> {
    LOG.get().and_then(Option::as_ref)
}

/// Appends `record` if the timeline is open. Async-signal-safe (one `write`). Inlined: a
/// record is 4 KiB, and each move of it by value is a copy.
#[inline(always)]
pub(crate) fn write(record: Record) {
    if let Some(log) = get() {
        let _ = log.write(record);
    }
}

/// Adds `key` as a C string (a file, a symbol), or `null`.
pub(crate) fn c_str_field(record: &mut Record, key: &str, value: Option<&CStr>) {
    match value {
        Some(text) => record.bytes_str(key, text.to_bytes()),
        None => record.raw(key, "null"),
    };
}
