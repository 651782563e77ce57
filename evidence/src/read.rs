//! Reading evidence back: JSON lines of untrusted text, in bounded memory. A line cut by a
//! crash, a line that is not a JSON object, or a record whose fields have the wrong types is
//! counted and skipped, never fatal; a record of an event this version does not know (from a
//! newer writer) is skipped without counting.

use crate::Wire;
use serde::Deserialize;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};

/// What every record starts with ([`crate::Record`] writes it). Absent from hand-written or
/// very old records: hence the options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Stamp {
    /// CLOCK_MONOTONIC nanoseconds, common to every process of the machine.
    pub t_ns: u64,
    /// The writing process: tells apart the processes of a run, which share each file.
    pub pid: Option<i64>,
    /// The writing kernel thread (`gettid`), as in a crash's or a worker's `tid`.
    pub tid: Option<i64>,
    /// The writing thread's name, at most 15 bytes.
    pub thread: Option<String>,
    /// Fields that did not fit were left out.
    pub truncated: bool,
}

/// The typed records of one evidence file: `trace::Entry`, `tegra::Entry`, `timeline::Entry`,
/// `crash::Entry`.
pub trait Entry: Sized {
    /// The file's event enum.
    type Event: Wire;
    /// The record of `event`, from its JSON object.
    fn parse(event: Self::Event, record: Value) -> serde_json::Result<Self>;
    /// Which event this is.
    fn event(&self) -> Self::Event;
}

/// One record of a file of `E`, with its stamp: `Ok(None)` for an event this version does not
/// know, `Err` for a record that does not hold what its event promises.
pub fn parse<E: Entry>(record: Value) -> Result<Option<(Stamp, E)>, serde_json::Error> {
    let Some(event) = record
        .get(crate::field::EV)
        .and_then(Value::as_str)
        .and_then(E::Event::from_wire)
    else {
        return Ok(None);
    };
    let stamp = Stamp::deserialize(&record)?;
    Ok(Some((stamp, E::parse(event, record)?)))
}

/// Reads a file of `E` records, handing each to `each` in file order; returns the number of
/// lines that were not records (not JSON objects, or not what their event promises).
pub fn records<E: Entry>(reader: impl Read, each: impl FnMut(Stamp, E)) -> std::io::Result<u64> {
    typed(reader, None, each)
}

/// Reads the records of one event from a file of `E` records, in file order: lines that do
/// not name the event are skipped unparsed (a timeline holds thousands of others). Returns
/// the number of bad lines among those that name it.
pub fn records_of<E: Entry>(
    reader: impl Read,
    event: E::Event,
    each: impl FnMut(Stamp, E),
) -> std::io::Result<u64> {
    let quoted = format!("\"{}\"", event.as_str());
    typed(reader, Some(quoted.as_bytes()), each)
}

fn typed<E: Entry>(
    reader: impl Read,
    naming: Option<&[u8]>,
    mut each: impl FnMut(Stamp, E),
) -> std::io::Result<u64> {
    let mut bad = 0;
    let not_objects = lines(reader, naming, |record| match parse::<E>(record) {
        Ok(Some((stamp, entry))) => each(stamp, entry),
        Ok(None) => {}
        Err(_) => bad += 1,
    })?;
    Ok(not_objects + bad)
}

/// Reads JSON lines, handing each object to `each`; returns the number of lines that were not
/// JSON objects.
pub fn objects(reader: impl Read, each: impl FnMut(Value)) -> std::io::Result<u64> {
    lines(reader, None, each)
}

/// [`objects`], of the lines that hold `naming` when it is given.
fn lines(
    reader: impl Read,
    naming: Option<&[u8]>,
    mut each: impl FnMut(Value),
) -> std::io::Result<u64> {
    const MAX_LINE: u64 = 1 << 20;
    let mut reader = BufReader::new(reader);
    let mut bad = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        // Records are small: a line longer than this is garbage, and the rest of it is read
        // as one more bad line.
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(bad);
        }
        // A mapped log ([`crate::MappedLog`]) leaves NUL bytes where a process did not fill
        // its chunk (at a crash, or between processes): they end a record like a newline,
        // and a record never holds one.
        for part in line.split(|&b| b == 0) {
            if part.iter().all(u8::is_ascii_whitespace)
                || naming.is_some_and(|name| !part.windows(name.len()).any(|w| w == name))
            {
                continue;
            }
            match serde_json::from_slice::<Value>(part) {
                Ok(v) if v.is_object() => each(v),
                _ => bad += 1,
            }
        }
    }
}
