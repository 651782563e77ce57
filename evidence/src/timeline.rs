//! `timeline.jsonl`, from the preloaded library: when the program's `main` started and
//! returned, who called `exit`, every exit handler registered and run, the loader's
//! finalization, `dlopen`/`dlclose`, and the Vulkan loader and drivers the process loaded.
//! Fields that name an object or a symbol are `null` when it is unknown.

crate::wire_names! {
    /// The events of the exit timeline.
    pub enum Event {
        /// The library's constructor ran: the first record of each process.
        PreloadLoaded = "preload-loaded",
        MainStart = "main-start",
        MainReturned = "main-returned",
        ExitCalled = "exit-called",
        HandlerRegistered = "handler-registered",
        /// A run of C++ static destructors of one object, registered one after another and
        /// not timed one by one (written when the run ends).
        HandlersRegistered = "handlers-registered",
        HandlerStart = "handler-start",
        HandlerEnd = "handler-end",
        /// The loader's finalization (`.fini_array`, `__attribute__((destructor))`).
        DlFiniStart = "dl-fini-start",
        DlFiniEnd = "dl-fini-end",
        Dlopen = "dlopen",
        Dlclose = "dlclose",
        /// A Vulkan loader or driver is in the process.
        VulkanObject = "vulkan-object",
    }
}

crate::wire_names! {
    /// How an exit handler was registered: the `kind` of `handler-registered`.
    pub enum HandlerKind {
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
    }
}

/// The fields of timeline records, after the stamp ([`crate::field`]).
pub mod field {
    /// `preload-loaded`: the program's file.
    pub const PROGRAM: &str = "program";
    /// `preload-loaded`: the crash handler was installed.
    pub const CRASH_REPORT: &str = "crash_report";
    /// `main-start`.
    pub const ARGC: &str = "argc";
    /// `main-returned`, `exit-called`: the status.
    pub const STATUS: &str = "status";
    /// `exit-called`, `dlopen`, `vulkan-object`: the object whose code made the call.
    pub const CALLER: &str = "caller";
    /// `exit-called`: the return address of the call.
    pub const CALLER_ADDRESS: &str = "caller_address";
    /// `handler-*`: the handler's number, from 1 in each process.
    pub const ID: &str = "id";
    /// `handler-registered`, `handlers-registered`: a [`super::HandlerKind`].
    pub const KIND: &str = "kind";
    /// `handler-registered`, `handlers-registered`: the object that registered it.
    pub const REGISTRANT: &str = "registrant";
    /// `handler-registered`: the function, its symbol (atexit handlers only), its object and
    /// its offset in that object, and the argument (C++ static destructors).
    pub const FUNCTION: &str = "function";
    pub const SYMBOL: &str = "symbol";
    pub const FUNCTION_OBJECT: &str = "function_object";
    pub const FUNCTION_OFFSET: &str = "function_offset";
    pub const ARG: &str = "arg";
    /// `handler-registered`, `handlers-registered`: whether the handler runs through the
    /// library's wrapper (timed) or as registered.
    pub const WRAPPED: &str = "wrapped";
    /// `handlers-registered`: the first and last id of the run, how many, and when the first
    /// was registered.
    pub const FIRST_ID: &str = "first_id";
    pub const LAST_ID: &str = "last_id";
    pub const COUNT: &str = "count";
    pub const FIRST_T_NS: &str = "first_t_ns";
    /// `dlopen`, `dlclose`, `vulkan-object`: the file.
    pub const PATH: &str = "path";
    /// `dlopen`: the mode, the handle returned, whether it succeeded, and whether the call
    /// was seen from inside (`false`: handed to glibc as it is, when the library opened
    /// depends on the caller's own link map).
    pub const MODE: &str = "mode";
    pub const HANDLE: &str = "handle";
    pub const OK: &str = "ok";
    pub const OBSERVED: &str = "observed";
    /// `dlopen`, `dlclose`: when the call began; the record's `t_ns` is when it returned.
    pub const CALL_NS: &str = "call_ns";
    /// `dlclose`: what it returned.
    pub const RESULT: &str = "result";
    /// `vulkan-object`: a [`super::Role`].
    pub const ROLE: &str = "role";
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
        PreloadLoaded(PreloadLoaded),
        MainStart(MainStart),
        MainReturned(Status),
        ExitCalled(ExitCalled),
        HandlerRegistered(HandlerRegistered),
        HandlersRegistered(HandlersRegistered),
        HandlerStart(Handler),
        HandlerEnd(Handler),
        DlFiniStart,
        DlFiniEnd,
        Dlopen(Dlopen),
        Dlclose(Dlclose),
        VulkanObject(VulkanObject),
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct PreloadLoaded {
        pub program: Option<String>,
        pub crash_report: bool,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct MainStart {
        pub argc: i64,
    }

    /// `main-returned`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Status {
        pub status: i64,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitCalled {
        pub status: i64,
        pub caller: Option<String>,
        pub caller_address: String,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct HandlerRegistered {
        pub id: u64,
        /// A [`super::HandlerKind`].
        pub kind: String,
        pub registrant: Option<String>,
        pub function: String,
        pub symbol: Option<String>,
        pub function_object: Option<String>,
        pub function_offset: Option<String>,
        pub arg: Option<String>,
        pub wrapped: bool,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct HandlersRegistered {
        pub first_id: u64,
        pub last_id: u64,
        pub count: u64,
        /// A [`super::HandlerKind`].
        pub kind: String,
        pub first_t_ns: u64,
        pub wrapped: bool,
        pub registrant: Option<String>,
    }

    /// `handler-start`, `handler-end`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Handler {
        pub id: u64,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Dlopen {
        /// `null`: the program itself (`dlopen(NULL, …)`).
        pub path: Option<String>,
        pub mode: String,
        pub handle: Option<String>,
        /// `null` when not observed.
        pub ok: Option<bool>,
        pub observed: bool,
        pub call_ns: Option<u64>,
        pub caller: Option<String>,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Dlclose {
        pub path: String,
        pub handle: String,
        pub result: i64,
        pub call_ns: u64,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct VulkanObject {
        /// A [`super::Role`].
        pub role: String,
        pub path: String,
        pub caller: Option<String>,
    }

    impl HandlerRegistered {
        pub fn kind(&self) -> Option<super::HandlerKind> {
            super::HandlerKind::from_wire(&self.kind)
        }
    }

    impl VulkanObject {
        pub fn role(&self) -> Option<super::Role> {
            super::Role::from_wire(&self.role)
        }
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
                Event::Dlopen => Entry::Dlopen(from_value(record)?),
                Event::Dlclose => Entry::Dlclose(from_value(record)?),
                Event::VulkanObject => Entry::VulkanObject(from_value(record)?),
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
                Entry::Dlopen(_) => Event::Dlopen,
                Entry::Dlclose(_) => Event::Dlclose,
                Entry::VulkanObject(_) => Event::VulkanObject,
            }
        }
    }
}
