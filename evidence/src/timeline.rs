//! `timeline.jsonl`, from the preloaded library: when the program's `main` started and
//! returned, who called `exit`, every exit handler registered and run, the loader's
//! finalization, `dlopen`/`dlclose`, and the Vulkan loader and drivers the process loaded.
//! Fields that name an object or a symbol are `null` when it is unknown.

crate::wire_names! {
    /// The events of the exit timeline.
    pub enum Event {
        /// The library's constructor ran: the first record of each process.
        PreloadLoaded = "preload-loaded",
        /// The program's `main` is called (through `__libc_start_main`).
        MainStart = "main-start",
        /// `main` returned: glibc calls `exit` next, with its status.
        MainReturned = "main-returned",
        /// The program called `exit` itself, from `caller`.
        ExitCalled = "exit-called",
        /// An exit handler was registered: an `atexit` function, or a C++ static destructor
        /// (unless `VKEXIT_TIMELINE_HANDLERS=atexit`, which records those in runs).
        HandlerRegistered = "handler-registered",
        /// A run of C++ static destructors of one object, registered one after another and
        /// not timed one by one (written when the run ends).
        HandlersRegistered = "handlers-registered",
        /// A wrapped exit handler begins; a `handler-start` without its `handler-end` is the
        /// handler the process died in.
        HandlerStart = "handler-start",
        /// A wrapped exit handler returned.
        HandlerEnd = "handler-end",
        /// The loader's finalization (`.fini_array`, `__attribute__((destructor))`).
        DlFiniStart = "dl-fini-start",
        /// The loader's finalization returned: the exit's last step that the library sees.
        DlFiniEnd = "dl-fini-end",
        /// A library destructor (an entry of an object's `.fini_array`: a function marked
        /// `__attribute__((destructor))`, or the C++ runtime's hook that runs the object's
        /// remaining static destructors) begins, inside the loader's finalization; one without
        /// its end is the destructor the process died in.
        LibraryDestructorStart = "library-destructor-start",
        /// A library destructor returned.
        LibraryDestructorEnd = "library-destructor-end",
        /// A `dlopen` call returned (or, unobserved, was handed to glibc).
        Dlopen = "dlopen",
        /// A `dlclose` call returned.
        Dlclose = "dlclose",
        /// A Vulkan loader or driver is in the process.
        VulkanObject = "vulkan-object",
        /// The exit handlers pending when exit began were run in another order than
        /// glibc's, as `VKEXIT_EXIT_ORDER` asked (or in glibc's, with thread timing perturbed
        /// by `VKEXIT_CHAOS_SEED`): which order, and which handlers it moved.
        ExitReordered = "exit-reordered",
        /// Before an exit handler ran, the exiting thread waited for the process's other
        /// runnable threads to sleep, block or end (`VKEXIT_CHAOS_SEED`): the other threads'
        /// states when it began.
        ChaosPause = "chaos-pause",
        /// A `vkDestroy*`/`vkFree*` call made during exit returned, and the thread that made it
        /// was held as a slower device's teardown would hold it, so that the threads asleep at
        /// the call wake into what it destroyed (`VKEXIT_SLOW_TEARDOWN`): the other threads'
        /// states at the call, how long it was held, how many of the sleepers woke.
        TeardownHold = "teardown-hold",
        /// vkexit's layer that reports each destroy call to the preloaded library is in the
        /// process (`VKEXIT_SLOW_TEARDOWN`): without it no destroy call is seen.
        TeardownWatched = "teardown-watched",
        /// A process of the run opened a file for writing (or made, renamed or removed one)
        /// in the working directory it shares with other runs (`VKEXIT_SHARED_DIR`): the
        /// name at that directory's top level, once per process.
        SharedWrite = "shared-write",
    }
}

crate::wire_names! {
    /// How an exit handler was registered: the `kind` of `handler-registered`.
    pub enum HandlerKind {
        /// `atexit(f)`: a function called with no argument.
        Atexit = "atexit",
        /// `__cxa_atexit`: a C++ static destructor.
        CxaAtexit = "cxa-atexit",
    }
}

crate::wire_names! {
    /// What a `vulkan-object` is: its `role`.
    pub enum Role {
        /// `libvulkan.so*`.
        Loader = "loader",
        /// A library that exports a Vulkan driver's entry points.
        Driver = "driver",
        /// `libVkLayer_khronos_validation.so`: the validation layer's library, as the dynamic
        /// loader found it.
        ValidationLayer = "validation-layer",
        /// A Vulkan driver's manifest the loader opened to read (the first one a process
        /// opens): the process asked the loader for drivers (`vkCreateInstance`,
        /// `vkEnumerateInstanceExtensionProperties`), even where no driver then loaded.
        DriverManifest = "driver-manifest",
    }
}

/// The fields of timeline records, after the stamp ([`crate::field`]).
pub mod field {
    /// `preload-loaded`: the program's file.
    pub const PROGRAM: &str = "program";
    /// `preload-loaded`: the crash handler was installed.
    pub const CRASH_REPORT: &str = "crash_report";
    /// `main-start`: the number of arguments `main` got.
    pub const ARGC: &str = "argc";
    /// `main-returned`, `exit-called`: the exit status given.
    pub const STATUS: &str = "status";
    /// `exit-called`, `dlopen`, `vulkan-object`: the file of the object whose code made the
    /// call (`vulkan-object`: that loaded it); `null` when unknown.
    pub const CALLER: &str = "caller";
    /// `exit-called`: the return address of the call to `exit`, `"0x…"`.
    pub const CALLER_ADDRESS: &str = "caller_address";
    /// `handler-*`: the handler's number, from 1 in each process.
    pub const ID: &str = "id";
    /// `handler-registered`, `handlers-registered`: a [`super::HandlerKind`].
    pub const KIND: &str = "kind";
    /// `handler-registered`, `handlers-registered`: the object that registered it.
    pub const REGISTRANT: &str = "registrant";
    /// `handler-registered`: the handler's address, `"0x…"`.
    pub const FUNCTION: &str = "function";
    /// `handler-registered`: the handler's symbol, atexit handlers only; `null` when unknown.
    pub const SYMBOL: &str = "symbol";
    /// `handler-registered`: the file of the object holding the handler; `null` when unknown.
    pub const FUNCTION_OBJECT: &str = "function_object";
    /// `handler-registered`: the handler's offset in `function_object`, `"0x…"`, for
    /// `addr2line`; absent when the object is unknown.
    pub const FUNCTION_OFFSET: &str = "function_offset";
    /// `handler-registered`: the file of the object whose code registered it (made the call to
    /// `atexit` or `__cxa_atexit`); absent when unknown.
    pub const CALL_OBJECT: &str = "call_object";
    /// `handler-registered`: the return address of that call, as an offset in `call_object`,
    /// `"0x…"`: the call ends just before it (`addr2line` of one less names its line).
    pub const CALL_OFFSET: &str = "call_offset";
    /// `handler-registered`: the object a C++ static destructor destroys, `"0x…"`;
    /// `__cxa_atexit` only.
    pub const ARG: &str = "arg";
    /// `handler-registered`, `handlers-registered`: whether the handler runs through the
    /// library's wrapper (timed) or as registered.
    pub const WRAPPED: &str = "wrapped";
    /// `handlers-registered`: the first id of the run.
    pub const FIRST_ID: &str = "first_id";
    /// `handlers-registered`: the last id of the run.
    pub const LAST_ID: &str = "last_id";
    /// `handlers-registered`: how many handlers the run holds (`last_id - first_id + 1`).
    pub const COUNT: &str = "count";
    /// `handlers-registered`: when the run's first handler was registered, CLOCK_MONOTONIC
    /// nanoseconds.
    pub const FIRST_T_NS: &str = "first_t_ns";
    /// `dlopen`, `dlclose`, `vulkan-object`: the file, as given to `dlopen` or as the loader
    /// knows it.
    pub const PATH: &str = "path";
    /// `dlopen`: the `RTLD_*` flags given, `"0x…"`.
    pub const MODE: &str = "mode";
    /// `dlopen`, `dlclose`: the handle, `"0x…"`; `null` from a `dlopen` that failed or was
    /// not observed.
    pub const HANDLE: &str = "handle";
    /// `dlopen`: whether it returned a handle; `null` when not observed.
    pub const OK: &str = "ok";
    /// `dlopen`: whether the call was seen from inside (`false`: handed to glibc as it is,
    /// when the library opened depends on the caller's own link map, and written before it).
    pub const OBSERVED: &str = "observed";
    /// `dlopen`, `dlclose`: when the call began, CLOCK_MONOTONIC nanoseconds; the record's
    /// `t_ns` is when it returned.
    pub const CALL_NS: &str = "call_ns";
    /// `dlclose`: what it returned, 0 for success.
    pub const RESULT: &str = "result";
    /// `vulkan-object`: a [`super::Role`].
    pub const ROLE: &str = "role";
    /// `exit-reordered`: the exit orders applied, as given (`module,linked`); empty when only
    /// thread timing was perturbed.
    pub const ORDER: &str = "order";
    /// `exit-reordered`: how many pending handlers it moved.
    pub const MOVED: &str = "moved";
    /// `exit-reordered`: the ids of the handlers moved, comma-separated, in their new run
    /// order.
    pub const MOVED_IDS: &str = "moved_ids";
    /// `exit-reordered`: the ids of every pending handler, comma-separated, in the order they
    /// were then run (at most the first 64).
    pub const RUN_ORDER: &str = "run_order";
    /// `exit-reordered`: how many handlers were pending when exit began.
    pub const PENDING: &str = "pending";
    /// `exit-reordered`, `chaos-pause`: the thread-timing seed; absent without one.
    pub const CHAOS_SEED: &str = "chaos_seed";
    /// `chaos-pause`: the handler about to run.
    pub const BEFORE_ID: &str = "before_id";
    /// `chaos-pause`: how long the exiting thread waited, nanoseconds.
    pub const WAITED_NS: &str = "waited_ns";
    /// `chaos-pause` in older timelines: how many other threads were alive when the pause
    /// began (now [`ALIVE`]).
    pub const RUNNING: &str = "running";
    /// `chaos-pause`, `teardown-hold`: how many other threads of the process were alive (in
    /// `/proc/self/task`) when it began; each is one of the four below.
    pub const ALIVE: &str = "alive";
    /// `chaos-pause`, `teardown-hold`: of those, running or runnable (`R`).
    pub const RUNNABLE: &str = "runnable";
    /// `chaos-pause`, `teardown-hold`: of those, asleep in a timed sleep (`nanosleep`,
    /// `clock_nanosleep`): they wake by themselves.
    pub const ASLEEP: &str = "asleep";
    /// `chaos-pause`, `teardown-hold`: of those, blocked, waiting on something else (a futex,
    /// a read, a poll, the disk).
    pub const BLOCKED: &str = "blocked";
    /// `chaos-pause`, `teardown-hold`: of those, stopped (by a signal or a tracer) or ended
    /// and not yet reaped (zombie).
    pub const STOPPED: &str = "stopped";
    /// `teardown-hold`: the Vulkan call that returned (`vkDestroyDevice`).
    pub const CALL: &str = "call";
    /// `teardown-hold`: how long the thread that made the call was held, nanoseconds.
    pub const HELD_NS: &str = "held_ns";
    /// `teardown-hold`: how many of the threads asleep at the call woke while it was held.
    pub const WOKE: &str = "woke";
    /// `handler-registered`, `handlers-registered`: who registered it, as the exit orders move
    /// handlers: `app`, `runtime`, `vulkan`, `system` ([`crate::exit_order::Class`]).
    pub const CLASS: &str = "class";
    /// `handler-registered`, `handlers-registered`: when: `before-main`, `in-dlopen`, `running`
    /// ([`crate::exit_order::Phase`]).
    pub const PHASE: &str = "phase";
    /// `shared-write`: the name written, at the top level of the shared directory.
    pub const NAME: &str = "name";
    /// `library-destructor-start`: the file of the object whose `.fini_array` holds it.
    pub const OBJECT: &str = "object";
    /// `library-destructor-start`: the file name of the object whose destructors it was run
    /// before, as `VKEXIT_EXIT_ORDER` asked; absent when it ran in the loader's order.
    pub const MOVED_BEFORE: &str = "moved_before";
}

#[cfg(feature = "serde")]
pub use read::*;

#[cfg(feature = "serde")]
mod read {
    use super::Event;
    use serde::Deserialize;
    use serde_json::{from_value, Value};

    /// A timeline record, read.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Entry {
        /// A `preload-loaded` record: a process of the run started with the library.
        PreloadLoaded(PreloadLoaded),
        /// A `main-start` record.
        MainStart(MainStart),
        /// A `main-returned` record.
        MainReturned(Status),
        /// An `exit-called` record.
        ExitCalled(ExitCalled),
        /// A `handler-registered` record.
        HandlerRegistered(HandlerRegistered),
        /// A `handlers-registered` record: C++ static destructors, not timed one by one.
        HandlersRegistered(HandlersRegistered),
        /// A `handler-start` record.
        HandlerStart(Handler),
        /// A `handler-end` record.
        HandlerEnd(Handler),
        /// A `dl-fini-start` record.
        DlFiniStart,
        /// A `dl-fini-end` record.
        DlFiniEnd,
        /// A `library-destructor-start` record.
        LibraryDestructorStart(LibraryDestructor),
        /// A `library-destructor-end` record.
        LibraryDestructorEnd(Handler),
        /// A `dlopen` record.
        Dlopen(Dlopen),
        /// A `dlclose` record.
        Dlclose(Dlclose),
        /// A `vulkan-object` record.
        VulkanObject(VulkanObject),
        /// An `exit-reordered` record.
        ExitReordered(ExitReordered),
        /// A `chaos-pause` record.
        ChaosPause(ChaosPause),
        /// A `teardown-hold` record.
        TeardownHold(TeardownHold),
        /// A `teardown-watched` record.
        TeardownWatched,
        /// A `shared-write` record.
        SharedWrite(SharedWrite),
    }

    /// A `library-destructor-start` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct LibraryDestructor {
        /// Its number, from 1 in each process, in the order the loader would run them; its
        /// `library-destructor-end` carries the same.
        pub id: u64,
        /// The file of the object whose `.fini_array` holds it; `None` when unknown.
        pub object: Option<String>,
        /// Who the object is, as the exit orders move it (`app`, `runtime`, `vulkan`,
        /// `system`).
        pub class: Option<String>,
        /// The function's symbol; `None` when the symbol table does not name it.
        pub symbol: Option<String>,
        /// The function's offset in `object`, `"0x…"`, for `addr2line`.
        pub function_offset: Option<String>,
        /// The file name of the object it was run before, as an exit order asked; `None`
        /// when it ran where the loader ran it.
        pub moved_before: Option<String>,
    }

    /// A `shared-write` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct SharedWrite {
        /// The name written, at the top level of the shared directory.
        pub name: String,
    }

    /// An `exit-reordered` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitReordered {
        /// The exit orders applied, as given; empty when only thread timing was perturbed.
        pub order: String,
        /// How many pending handlers were moved.
        pub moved: u64,
        /// The ids of the moved handlers, comma-separated, in their new run order.
        pub moved_ids: String,
        /// The ids of the pending handlers in the order they then ran (at most 64).
        pub run_order: String,
        /// How many handlers were pending when exit began.
        pub pending: u64,
        /// The thread-timing seed, when one was given.
        pub chaos_seed: Option<u64>,
    }

    impl ExitReordered {
        /// The moved handlers' ids.
        pub fn moved_ids(&self) -> Vec<u64> {
            ids(&self.moved_ids)
        }

        /// The pending handlers' ids in the order they ran (at most 64).
        pub fn run_order(&self) -> Vec<u64> {
            ids(&self.run_order)
        }
    }

    fn ids(list: &str) -> Vec<u64> {
        list.split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    }

    /// The other threads of a process at one moment, by state: `chaos-pause`, `teardown-hold`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ThreadStates {
        /// How many were alive (each is one of the four below).
        pub alive: u64,
        /// Running or runnable.
        pub runnable: u64,
        /// Asleep in a timed sleep: they wake by themselves.
        pub asleep: u64,
        /// Blocked, waiting on something else.
        pub blocked: u64,
        /// Stopped, or ended and not yet reaped.
        pub stopped: u64,
    }

    /// A `chaos-pause` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ChaosPause {
        /// The handler about to run.
        pub before_id: u64,
        /// How long the exiting thread waited, nanoseconds.
        pub waited_ns: u64,
        /// Older timelines: how many other threads were alive (their states unrecorded).
        pub running: u64,
        /// The other threads' states when the pause began.
        #[serde(flatten)]
        pub threads: ThreadStates,
        /// The seed.
        pub chaos_seed: u64,
    }

    /// A `teardown-hold` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct TeardownHold {
        /// The Vulkan call that returned.
        pub call: String,
        /// How long the thread that made it was held, nanoseconds (0: nothing to wait for).
        pub held_ns: u64,
        /// The other threads' states at the call.
        #[serde(flatten)]
        pub threads: ThreadStates,
        /// How many of those asleep at the call woke while it was held.
        pub woke: u64,
    }

    /// A `preload-loaded` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct PreloadLoaded {
        /// The program's file; `None` when it could not be read.
        pub program: Option<String>,
        /// Whether the library installed its crash handler in this process, so a crash
        /// leaves a `crash` record.
        pub crash_report: bool,
    }

    /// A `main-start` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct MainStart {
        /// The number of arguments `main` got.
        pub argc: i64,
    }

    /// `main-returned`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Status {
        /// What `main` returned: the exit status glibc passes on to `exit`.
        pub status: i64,
    }

    /// An `exit-called` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitCalled {
        /// The status given to `exit`.
        pub status: i64,
        /// The file of the object whose code called `exit`; `None` when unknown.
        pub caller: Option<String>,
        /// The return address of the call, `"0x…"`.
        pub caller_address: String,
    }

    /// A `handler-registered` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct HandlerRegistered {
        /// The handler's number, from 1 in each process; its `handler-start` and
        /// `handler-end` carry the same.
        pub id: u64,
        /// A [`super::HandlerKind`].
        pub kind: String,
        /// The file of the object that registered it; `None` when unknown.
        pub registrant: Option<String>,
        /// The handler's address, `"0x…"`.
        pub function: String,
        /// The handler's symbol; `atexit` handlers only, `None` when unknown.
        pub symbol: Option<String>,
        /// The file of the object holding the handler; `None` when unknown.
        pub function_object: Option<String>,
        /// The handler's offset in `function_object`, `"0x…"`; `None` when it is unknown.
        pub function_offset: Option<String>,
        /// The object a C++ static destructor destroys, `"0x…"`; `None` for `atexit`.
        pub arg: Option<String>,
        /// The file of the object whose code registered it; `None` when unknown.
        pub call_object: Option<String>,
        /// The return address of the registering call, an offset in `call_object`, `"0x…"`.
        pub call_offset: Option<String>,
        /// Whether it runs through the library's wrapper, timed by `handler-start` and
        /// `handler-end`; `false`: it runs as registered, unseen.
        pub wrapped: bool,
        /// Who registered it, as the exit orders move handlers; `None` in older timelines.
        pub class: Option<String>,
        /// When it was registered; `None` in older timelines.
        pub phase: Option<String>,
    }

    /// A `handlers-registered` record: a run of C++ static destructors of one object.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct HandlersRegistered {
        /// The first handler's id.
        pub first_id: u64,
        /// The last handler's id.
        pub last_id: u64,
        /// How many handlers the run holds.
        pub count: u64,
        /// A [`super::HandlerKind`] (`cxa-atexit`).
        pub kind: String,
        /// When the first was registered, CLOCK_MONOTONIC nanoseconds; the record's `t_ns`
        /// is when the run ended.
        pub first_t_ns: u64,
        /// Whether they run through the library's wrapper (`false`: not timed).
        pub wrapped: bool,
        /// The file of the object that registered them; `None` when unknown.
        pub registrant: Option<String>,
        /// Who registered them, as the exit orders move handlers; `None` in older timelines.
        pub class: Option<String>,
        /// When the first was registered; `None` in older timelines.
        pub phase: Option<String>,
    }

    /// `handler-start`, `handler-end`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Handler {
        /// The id of the handler's `handler-registered` record.
        pub id: u64,
    }

    /// A `dlopen` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Dlopen {
        /// The file asked for; `None`: the program itself (`dlopen(NULL, …)`).
        pub path: Option<String>,
        /// The `RTLD_*` flags given, `"0x…"`.
        pub mode: String,
        /// The handle returned, `"0x…"`; `None` when it failed or was not observed.
        pub handle: Option<String>,
        /// Whether it returned a handle; `None` when not observed.
        pub ok: Option<bool>,
        /// Whether the call was seen from inside (`false`: handed to glibc as it is, the
        /// record written before the call).
        pub observed: bool,
        /// When the call began, CLOCK_MONOTONIC nanoseconds; `None` when not observed.
        pub call_ns: Option<u64>,
        /// The file of the object that called `dlopen`; `None` when unknown.
        pub caller: Option<String>,
    }

    /// A `dlclose` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Dlclose {
        /// The file of the object closed, as the loader knows it.
        pub path: String,
        /// The handle closed, `"0x…"`.
        pub handle: String,
        /// What `dlclose` returned, 0 for success.
        pub result: i64,
        /// When the call began, CLOCK_MONOTONIC nanoseconds; the object's finalizers ran
        /// between it and the record's `t_ns`.
        pub call_ns: u64,
    }

    /// A `vulkan-object` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct VulkanObject {
        /// A [`super::Role`].
        pub role: String,
        /// The object's file, as loaded.
        pub path: String,
        /// The file of the object whose `dlopen` loaded it; `None` when it was found among the
        /// loaded objects instead (linked at start, or loaded unobserved).
        pub caller: Option<String>,
    }

    impl HandlerRegistered {
        /// Its `kind`, when it is one this version knows.
        pub fn kind(&self) -> Option<super::HandlerKind> {
            super::HandlerKind::from_wire(&self.kind)
        }
    }

    impl VulkanObject {
        /// Its `role`, when it is one this version knows.
        pub fn role(&self) -> Option<super::Role> {
            super::Role::from_wire(&self.role)
        }
    }

    impl crate::read::Entry for Entry {
        type Event = Event;

        fn parse(event: Event, record: Value) -> serde_json::Result<Self> {
            Ok(match event {
                Event::PreloadLoaded => Entry::PreloadLoaded(from_value(record)?),
                Event::MainStart => Entry::MainStart(from_value(record)?),
                Event::MainReturned => Entry::MainReturned(from_value(record)?),
                Event::ExitCalled => Entry::ExitCalled(from_value(record)?),
                Event::HandlerRegistered => Entry::HandlerRegistered(from_value(record)?),
                Event::HandlersRegistered => Entry::HandlersRegistered(from_value(record)?),
                Event::HandlerStart => Entry::HandlerStart(from_value(record)?),
                Event::HandlerEnd => Entry::HandlerEnd(from_value(record)?),
                Event::DlFiniStart => Entry::DlFiniStart,
                Event::DlFiniEnd => Entry::DlFiniEnd,
                Event::LibraryDestructorStart => Entry::LibraryDestructorStart(from_value(record)?),
                Event::LibraryDestructorEnd => Entry::LibraryDestructorEnd(from_value(record)?),
                Event::Dlopen => Entry::Dlopen(from_value(record)?),
                Event::Dlclose => Entry::Dlclose(from_value(record)?),
                Event::VulkanObject => Entry::VulkanObject(from_value(record)?),
                Event::ExitReordered => Entry::ExitReordered(from_value(record)?),
                Event::ChaosPause => Entry::ChaosPause(from_value(record)?),
                Event::TeardownHold => Entry::TeardownHold(from_value(record)?),
                Event::TeardownWatched => Entry::TeardownWatched,
                Event::SharedWrite => Entry::SharedWrite(from_value(record)?),
            })
        }

        fn event(&self) -> Event {
            match self {
                Entry::PreloadLoaded(_) => Event::PreloadLoaded,
                Entry::MainStart(_) => Event::MainStart,
                Entry::MainReturned(_) => Event::MainReturned,
                Entry::ExitCalled(_) => Event::ExitCalled,
                Entry::HandlerRegistered(_) => Event::HandlerRegistered,
                Entry::HandlersRegistered(_) => Event::HandlersRegistered,
                Entry::HandlerStart(_) => Event::HandlerStart,
                Entry::HandlerEnd(_) => Event::HandlerEnd,
                Entry::DlFiniStart => Event::DlFiniStart,
                Entry::DlFiniEnd => Event::DlFiniEnd,
                Entry::LibraryDestructorStart(_) => Event::LibraryDestructorStart,
                Entry::LibraryDestructorEnd(_) => Event::LibraryDestructorEnd,
                Entry::Dlopen(_) => Event::Dlopen,
                Entry::Dlclose(_) => Event::Dlclose,
                Entry::VulkanObject(_) => Event::VulkanObject,
                Entry::ExitReordered(_) => Event::ExitReordered,
                Entry::ChaosPause(_) => Event::ChaosPause,
                Entry::TeardownHold(_) => Event::TeardownHold,
                Entry::TeardownWatched => Event::TeardownWatched,
                Entry::SharedWrite(_) => Event::SharedWrite,
            }
        }
    }
}
