//! `crash.jsonl`, from the crash handler: one `crash` record per crash signal (written from
//! the signal handler), a best-effort `backtrace` for the first, and `fatal` when a program's
//! own handler gave a fault back. Every process of a run's tree appends to the same file,
//! told apart by the stamp's `pid`.

crate::wire_names! {
    /// The events of the crash report.
    pub enum Event {
        /// A crash signal arrived: written from the signal handler, before anything else, so
        /// that it survives whatever the process does next.
        Crash = "crash",
        /// The frames of the first crash, from a forked child, after its `crash` record; may
        /// be missing when the process dies first.
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
    /// `crash`: the signal's number on this machine (11 for `SIGSEGV` on Linux).
    pub const SIGNO: &str = "signo";
    /// `crash`: the kernel's `si_code`, why the signal came (a fault's kind, or who sent it).
    pub const SI_CODE: &str = "si_code";
    /// `crash`: the `si_code`'s name for this signal, `SEGV_MAPERR`, `SI_USER`.
    pub const SI_CODE_NAME: &str = "si_code_name";
    /// `crash`: the faulting address, `null` for a sent signal.
    pub const ADDR: &str = "addr";
    /// `crash`: the process that sent the signal; absent for a fault or a signal the kernel
    /// raised.
    pub const SENDER_PID: &str = "sender_pid";
    /// `crash`, `fatal`: the program counter.
    pub const PC: &str = "pc";
    /// `crash`: whether `main` had returned, `exit` was called, the process was exiting;
    /// `null` unless the preloaded library tracks them.
    pub const MAIN_RETURNED: &str = "main_returned";
    /// `crash`: whether the program had called `exit` itself; `null` as for `main_returned`.
    pub const EXIT_CALLED: &str = "exit_called";
    /// `crash`: whether `exit` was running (`main` had returned, or `exit` was called), so
    /// the crash is one at exit; `null` as for `main_returned`.
    pub const EXITING: &str = "exiting";
    /// `crash`: a [`super::Writer`].
    pub const HANDLER: &str = "handler";
    /// `backtrace`: `[{ip, object, symbol, file, line}, …]` from the faulting pc outwards
    /// ([`super::frame_field`]).
    pub const FRAMES: &str = "frames";
    /// `backtrace`: how many outer frames did not fit in the record and were left out.
    pub const FRAMES_OMITTED: &str = "frames_omitted";
    /// `backtrace`: why there are no frames.
    pub const ERROR: &str = "error";
}

/// The fields of one frame of `backtrace`'s `frames`.
pub mod frame_field {
    /// The frame's instruction address, `"0x…"`.
    pub const IP: &str = "ip";
    /// The file of the object holding `ip`; absent when no loaded object holds it.
    pub const OBJECT: &str = "object";
    /// The function holding `ip`, demangled; absent without symbols, and for the
    /// preloaded handler's own frames, which it does not resolve.
    pub const SYMBOL: &str = "symbol";
    /// The source file, when debug information has it.
    pub const FILE: &str = "file";
    /// The source line in `file`, when debug information has it.
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
        /// A `crash` record. Boxed: a crash record is large, and its file holds few.
        Crash(Box<Crash>),
        /// A `backtrace` record.
        Backtrace(Backtrace),
        /// A `fatal` record.
        Fatal(Fatal),
    }

    /// A `crash` record: one crash signal in one process. Every field is `None` when the
    /// record lacks it (an older handler, a record cut by the crash).
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Crash {
        /// The parent process, to place the crash in the run's process tree.
        pub ppid: Option<i64>,
        /// The process's arguments joined by spaces, cut at 1 KiB.
        pub cmdline: Option<String>,
        /// A [`super::Then`]: whether the signal ends the process or the program's own
        /// handler decides.
        pub then: Option<String>,
        /// The signal's name, `SIGSEGV`.
        pub signal: Option<String>,
        /// The signal's number.
        pub signo: Option<i64>,
        /// The kernel's `si_code`: the fault's kind, or who sent the signal.
        pub si_code: Option<i64>,
        /// The `si_code`'s name for this signal, `SEGV_MAPERR`.
        pub si_code_name: Option<String>,
        /// The faulting address, `"0x…"`; `None` for a sent signal.
        pub addr: Option<String>,
        /// The process that sent the signal; `None` for a fault or a signal the kernel raised.
        pub sender_pid: Option<i64>,
        /// The program counter when the signal arrived, `"0x…"`.
        pub pc: Option<String>,
        /// The file whose mapping holds the pc, or `[anonymous]`, `unmapped`, `unknown`.
        pub pc_mapping: Option<String>,
        /// The `rwxp` of the pc's mapping; `None` when unmapped or unknown.
        pub pc_perms: Option<String>,
        /// The pc as an offset in its file, `"0x…"`, for `addr2line`; file mappings only.
        pub pc_offset: Option<String>,
        /// The file whose mapping holds the faulting address, or `[anonymous]`, `unmapped`,
        /// `unknown`; `None` for a sent signal.
        pub addr_mapping: Option<String>,
        /// The `rwxp` of the faulting address's mapping; `None` when there is none.
        pub addr_perms: Option<String>,
        /// The faulting address as an offset in its file, `"0x…"`; file mappings only.
        pub addr_offset: Option<String>,
        /// Whether `main` had returned; `None` when the preloaded library did not track it
        /// (a linked handler without it, or a program whose `main` it did not see).
        pub main_returned: Option<bool>,
        /// Whether the program had called `exit` itself; `None` as for `main_returned`.
        pub exit_called: Option<bool>,
        /// Whether `exit` was running (`main` had returned, or `exit` was called): a crash at
        /// exit; `None` as for `main_returned`.
        pub exiting: Option<bool>,
        /// A [`super::Writer`]: the preloaded or a linked copy of the handler.
        pub handler: Option<String>,
    }

    impl Crash {
        /// Whether the signal ends the process: its `then` is not `program-handler` (an older
        /// handler wrote none: its crash counts, so a crash is never lost for want of it).
        pub fn ends_process(&self) -> bool {
            self.then.as_deref() != Some(super::Then::ProgramHandler.as_str())
        }
    }

    /// A `backtrace` record: the stack of the first crash, innermost frame first.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Backtrace {
        /// The frames from the faulting pc outwards; empty when `error` says why.
        pub frames: Vec<Frame>,
        /// How many outer frames did not fit in the record.
        pub frames_omitted: u64,
        /// Why there are no frames: the child that walks the stack could not be forked, died,
        /// or took too long.
        pub error: Option<String>,
    }

    /// One frame of a `backtrace`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Frame {
        /// The instruction address, `"0x…"`.
        pub ip: String,
        /// The file of the object holding `ip`; `None` when no loaded object does.
        pub object: Option<String>,
        /// The function holding `ip`, demangled; `None` without symbols.
        pub symbol: Option<String>,
        /// The source file, when debug information has it.
        pub file: Option<String>,
        /// The source line in `file`, when debug information has it.
        pub line: Option<u64>,
    }

    /// A `fatal` record: a fault a program handler gave back now ends the process.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Fatal {
        /// The signal's name, `SIGSEGV`.
        pub signal: Option<String>,
        /// The program counter of the fault, `"0x…"`.
        pub pc: Option<String>,
    }

    impl crate::read::Entry for Entry {
        type Event = Event;

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
