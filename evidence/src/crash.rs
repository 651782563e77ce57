//! `crash.jsonl`, from the crash handler: one `crash` record per crash signal (written from
//! the signal handler), a best-effort `backtrace` for the first, and `fatal` when a program's
//! own handler gave a fault back. Every process of a run's tree appends to the same file,
//! told apart by the stamp's `pid`.

crate::wire_names! {
    /// The events of the crash report.
    pub enum Event {
        Crash = "crash",
        Backtrace = "backtrace",
        /// The default action ends the process now, after a program handler returned without
        /// curing a fault recorded with `then: program-handler`.
        Fatal = "fatal",
    }
}

crate::wire_names! {
    /// What happens after the `crash` record: its `then`. A record without one (from an
    /// older handler) counts as the end of the process.
    pub enum Then {
        /// The signal ends the process.
        DefaultAction = "default-action",
        /// The program's own handler decides, and may survive it.
        ProgramHandler = "program-handler",
    }
}

crate::wire_names! {
    /// Which copy of the crash handler wrote the record: its `handler`.
    pub enum Writer {
        /// `libvkexit_preload.so`, preloaded into every process of a run.
        Preload = "preload",
        /// A copy linked into the program.
        Linked = "linked",
    }
}

/// The fields of crash records, after the stamp ([`crate::field`]).
pub mod field {
    /// `crash`: the parent process.
    pub const PPID: &str = "ppid";
    /// `crash`: the process's arguments joined by spaces.
    pub const CMDLINE: &str = "cmdline";
    /// `crash`: a [`super::Then`].
    pub const THEN: &str = "then";
    /// `crash`, `fatal`: the signal's name, `SIGSEGV`.
    pub const SIGNAL: &str = "signal";
    pub const SIGNO: &str = "signo";
    pub const SI_CODE: &str = "si_code";
    pub const SI_CODE_NAME: &str = "si_code_name";
    /// `crash`: the faulting address, `null` for a sent signal.
    pub const ADDR: &str = "addr";
    /// `crash`: who sent the signal.
    pub const SENDER_PID: &str = "sender_pid";
    /// `crash`, `fatal`: the program counter.
    pub const PC: &str = "pc";
    /// `crash`: whether `main` had returned, `exit` was called, the process was exiting;
    /// `null` unless the preloaded library tracks them.
    pub const MAIN_RETURNED: &str = "main_returned";
    pub const EXIT_CALLED: &str = "exit_called";
    pub const EXITING: &str = "exiting";
    /// `crash`: a [`super::Writer`].
    pub const HANDLER: &str = "handler";
    /// `backtrace`: `[{ip, object, symbol, file, line}, …]` from the faulting pc outwards
    /// ([`super::frame_field`]).
    pub const FRAMES: &str = "frames";
    pub const FRAMES_OMITTED: &str = "frames_omitted";
    /// `backtrace`: why there are no frames.
    pub const ERROR: &str = "error";
}

/// The fields of one frame of `backtrace`'s `frames`.
pub mod frame_field {
    pub const IP: &str = "ip";
    /// The file of the object holding `ip`.
    pub const OBJECT: &str = "object";
    pub const SYMBOL: &str = "symbol";
    /// Source file and line, when debug information has them.
    pub const FILE: &str = "file";
    pub const LINE: &str = "line";
}

/// The three fields that say where an address of a `crash` record lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappingFields {
    /// The file of `/proc/self/maps` that holds it, or one of [`ANONYMOUS`], [`UNMAPPED`],
    /// [`UNKNOWN`].
    pub mapping: &'static str,
    /// The mapping's `rwxp`.
    pub perms: &'static str,
    /// The address as an offset in the file, for `addr2line` (file mappings only).
    pub offset: &'static str,
}

/// Where the pc lies.
pub const PC_MAPPING: MappingFields = MappingFields {
    mapping: "pc_mapping",
    perms: "pc_perms",
    offset: "pc_offset",
};

/// Where the faulting address lies (`addr_mapping` is `null` for a sent signal).
pub const ADDR_MAPPING: MappingFields = MappingFields {
    mapping: "addr_mapping",
    perms: "addr_perms",
    offset: "addr_offset",
};

/// A mapping with no file.
pub const ANONYMOUS: &str = "[anonymous]";
/// No mapping holds the address.
pub const UNMAPPED: &str = "unmapped";
/// The maps could not be read.
pub const UNKNOWN: &str = "unknown";

#[cfg(feature = "serde")]
pub use read::*;

#[cfg(feature = "serde")]
mod read {
    use super::Event;
    use serde::Deserialize;
    use serde_json::{from_value, Value};

    /// A crash record, read.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Entry {
        /// Boxed: a crash record is large, and its file holds few.
        Crash(Box<Crash>),
        Backtrace(Backtrace),
        Fatal(Fatal),
    }

    /// Text fields are `None` when the record lacks them (an older handler, a cut record).
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Crash {
        pub ppid: Option<i64>,
        pub cmdline: Option<String>,
        /// A [`super::Then`].
        pub then: Option<String>,
        pub signal: Option<String>,
        pub signo: Option<i64>,
        pub si_code: Option<i64>,
        pub si_code_name: Option<String>,
        pub addr: Option<String>,
        pub sender_pid: Option<i64>,
        pub pc: Option<String>,
        pub pc_mapping: Option<String>,
        pub pc_perms: Option<String>,
        pub pc_offset: Option<String>,
        pub addr_mapping: Option<String>,
        pub addr_perms: Option<String>,
        pub addr_offset: Option<String>,
        pub main_returned: Option<bool>,
        pub exit_called: Option<bool>,
        pub exiting: Option<bool>,
        /// A [`super::Writer`].
        pub handler: Option<String>,
    }

    impl Crash {
        /// Whether the signal ends the process: its `then` is not `program-handler` (an older
        /// handler wrote none: its crash counts, so a crash is never lost for want of it).
        pub fn ends_process(&self) -> bool {
            self.then.as_deref() != Some(super::Then::ProgramHandler.as_str())
        }
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Backtrace {
        pub frames: Vec<Frame>,
        pub frames_omitted: u64,
        pub error: Option<String>,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Frame {
        pub ip: String,
        pub object: Option<String>,
        pub symbol: Option<String>,
        pub file: Option<String>,
        pub line: Option<u64>,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Fatal {
        pub signal: Option<String>,
        pub pc: Option<String>,
    }

    impl crate::read::Entry for Entry {
        type Event = Event;

        fn event_of(ev: &str) -> Option<Event> {
            Event::from_wire(ev)
        }

        fn wire_name(event: Event) -> &'static str {
            event.as_str()
        }

        fn parse(event: Event, record: Value) -> serde_json::Result<Self> {
            Ok(match event {
                Event::Crash => Entry::Crash(from_value(record)?),
                Event::Backtrace => Entry::Backtrace(from_value(record)?),
                Event::Fatal => Entry::Fatal(from_value(record)?),
            })
        }

        fn event(&self) -> Event {
            match self {
                Entry::Crash(_) => Event::Crash,
                Entry::Backtrace(_) => Event::Backtrace,
                Entry::Fatal(_) => Event::Fatal,
            }
        }
    }
}
