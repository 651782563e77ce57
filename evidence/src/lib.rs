//! What vkexit's writers and its reader share: the evidence a run leaves in its directory, and
//! the verdicts and results the harness makes of it.
//!
//! Writers run inside the program under test: the layers (`VK_LAYER_VKEXIT_trace`,
//! `VK_LAYER_VKEXIT_tegra_exit`), the crash handler and the preloaded exit timeline. Each
//! appends JSON lines to one evidence file ([`files`]) whose path the harness gives it in an
//! environment variable. A record is one line: `{"ev":…,"t_ns":…,"pid":…,"tid":…,"thread":…`
//! (the [`field`]s of the stamp: event, CLOCK_MONOTONIC nanoseconds, process, kernel thread and
//! its name), then the event's own fields.
//!
//! Each evidence file has a module that is its schema: [`timeline`], [`crash`], [`trace`],
//! [`tegra`]. In each, `Event` names the records (`as_str()` gives the wire name, a
//! `&'static str`, usable from a signal handler), `field` names their fields, and, with the
//! `serde` feature (on by default), `Entry` is a record read back, one struct per event.
//! Writer and reader use the same names, so renaming an event or a field is one edit here,
//! and the round-trip tests of this crate fail if the two sides disagree.
//!
//! The writer is [`Record`], built on the stack and written by [`EvidenceLog`] with one
//! `write()` (or by [`MappedLog`] into a shared mapping of the file): no allocation, no lock,
//! usable from signal and exit handlers. The reader is [`read::records`], for untrusted text:
//! a line cut by a crash is counted and skipped.
//!
//! Writing a record and reading it back:
//!
//! ```
//! use vkexit_evidence::{read, tegra, EvidenceLog, Record};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join(vkexit_evidence::files::TEGRA.name);
//! let log = EvidenceLog::open(&path).unwrap();
//!
//! // In the layer's exit handler: the stack, one write().
//! let mut record = Record::new(tegra::Event::ExitHandlerStart.as_str());
//! record.u64(tegra::field::LIVE_WORKERS, 1);
//! log.write(record).unwrap();
//!
//! // In the harness.
//! let mut live = None;
//! let bad_lines = read::records(std::fs::File::open(&path).unwrap(), |stamp, entry| {
//!     if let tegra::Entry::ExitHandlerStart(start) = entry {
//!         assert_eq!(stamp.pid, Some(i64::from(std::process::id())));
//!         live = Some(start.live_workers);
//!     }
//! })
//! .unwrap();
//! assert_eq!((live, bad_lines), (Some(1), 0));
//! ```
//!
//! Beside the evidence: the results file's types and schema version ([`results`]), the
//! verdicts of a run and of a cell ([`verdict`]) and vkexit's exit codes ([`exit_code`]).

/// An enum of wire names: `as_str()` without allocation, `from_wire()` for readers, `ALL`.
macro_rules! wire_names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The name on the wire. Async-signal-safe: a `&'static str`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )*
                }
            }

            /// The value of a wire name; `None` for one this version does not know.
            pub fn from_wire(name: &str) -> Option<Self> {
                match name {
                    $( $wire => Some($name::$variant), )*
                    _ => None,
                }
            }
        }

        impl $crate::Wire for $name {
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }

            fn from_wire(name: &str) -> Option<Self> {
                $name::from_wire(name)
            }
        }
    };
}

/// A closed set of names on the wire (every enum [`wire_names!`] makes), for code generic over
/// the evidence files.
pub trait Wire: Copy + Sized {
    /// The name on the wire.
    fn as_str(self) -> &'static str;
    /// The value of a wire name; `None` for one this version does not know.
    fn from_wire(name: &str) -> Option<Self>;
}
pub(crate) use wire_names;

pub mod crash;
pub mod exit_code;
pub mod exit_order;
pub mod files;
mod mapped;
mod record;
pub mod shared_dir;
pub mod slow_teardown;
pub mod tegra;
pub mod timeline;
pub mod trace;
pub mod validation_logs;

#[cfg(feature = "serde")]
pub mod explore;
#[cfg(feature = "serde")]
pub mod read;
#[cfg(feature = "serde")]
pub mod results;
#[cfg(feature = "serde")]
pub mod verdict;

pub use mapped::{MappedLog, CHUNK};
pub use record::{
    monotonic_ns, thread_id, thread_name, EvidenceLog, Record, NAME_REFRESH_NS, RECORD_CAPACITY,
};

/// The fields every record starts with, in this order.
pub mod field {
    /// The event: one of the file's `Event` wire names.
    pub const EV: &str = "ev";
    /// When it was written, CLOCK_MONOTONIC nanoseconds.
    pub const T_NS: &str = "t_ns";
    /// The writing process.
    pub const PID: &str = "pid";
    /// The writing kernel thread.
    pub const TID: &str = "tid";
    /// The writing thread's name, at most 15 bytes.
    pub const THREAD: &str = "thread";
    /// Last, and only when fields that did not fit were left out: `true`.
    pub const TRUNCATED: &str = "truncated";
}
