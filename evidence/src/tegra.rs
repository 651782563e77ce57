//! `tegra.jsonl`, from `VK_LAYER_VKEXIT_tegra_exit`: the emulated driver's region, its worker
//! threads, and its exit handler, which unmaps the region under workers still running.

crate::wire_names! {
    /// The events of the emulated driver.
    pub enum Event {
        /// The layer sits in an instance being created: the proof that the emulation was on.
        Loaded = "loaded",
        /// A setting was not understood, and a default used.
        Warning = "warning",
        /// The region the workers run code in (libnvidia-eglcore's stand-in) is mapped.
        RegionMapped = "region-mapped",
        WorkerStarted = "worker-started",
        WorkerStopped = "worker-stopped",
        /// The driver's exit handler begins, with the number of workers still running.
        ExitHandlerStart = "exit-handler-start",
        RegionUnmapped = "region-unmapped",
        /// The deterministic mode waits for a live worker to fault.
        WaitingForFault = "waiting-for-fault",
        ExitHandlerEnd = "exit-handler-end",
    }
}

/// The fields of the emulated driver's records, after the stamp ([`crate::field`]).
pub mod field {
    /// `loaded`, `warning`: the layer's name.
    pub const LAYER: &str = "layer";
    /// `loaded`: `deterministic`, `racy` or `off`.
    pub const MODE: &str = "mode";
    /// `loaded`: the instance created, or the `VkResult` of a creation that failed.
    pub const INSTANCE: &str = "instance";
    pub const RESULT: &str = "result";
    /// `warning`: what was not understood.
    pub const MESSAGE: &str = "message";
    /// `region-mapped`, `region-unmapped`: the region's addresses, `"0x…"`.
    pub const START: &str = "start";
    pub const END: &str = "end";
    /// `worker-started`, `worker-stopped`: the device, the worker thread's name and id.
    pub const DEVICE: &str = "device";
    pub const WORKER: &str = "worker";
    pub const WORKER_TID: &str = "worker_tid";
    /// `worker-started`: the worker's sleep between rounds.
    pub const SLEEP_US: &str = "sleep_us";
    /// `exit-handler-start`: workers still running.
    pub const LIVE_WORKERS: &str = "live_workers";
}

#[cfg(feature = "serde")]
pub use read::*;

#[cfg(feature = "serde")]
mod read {
    use super::Event;
    use serde::Deserialize;
    use serde_json::{from_value, Value};

    /// A record of the emulated driver, read.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Entry {
        Loaded(Loaded),
        Warning(Warning),
        RegionMapped(Region),
        WorkerStarted(Worker),
        WorkerStopped(Worker),
        ExitHandlerStart(ExitHandlerStart),
        RegionUnmapped(Region),
        WaitingForFault,
        ExitHandlerEnd,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Loaded {
        pub layer: String,
        pub mode: String,
        pub instance: Option<String>,
        pub result: Option<String>,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Warning {
        pub layer: String,
        pub message: String,
    }

    /// `region-mapped`, `region-unmapped`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Region {
        pub start: String,
        pub end: String,
    }

    /// `worker-started`, `worker-stopped`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Worker {
        pub device: String,
        pub worker: String,
        pub worker_tid: i64,
        /// `worker-started` only.
        pub sleep_us: Option<u64>,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitHandlerStart {
        pub live_workers: u64,
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
                Event::Loaded => Entry::Loaded(from_value(record)?),
                Event::Warning => Entry::Warning(from_value(record)?),
                Event::RegionMapped => Entry::RegionMapped(from_value(record)?),
                Event::WorkerStarted => Entry::WorkerStarted(from_value(record)?),
                Event::WorkerStopped => Entry::WorkerStopped(from_value(record)?),
                Event::ExitHandlerStart => Entry::ExitHandlerStart(from_value(record)?),
                Event::RegionUnmapped => Entry::RegionUnmapped(from_value(record)?),
                Event::WaitingForFault => Entry::WaitingForFault,
                Event::ExitHandlerEnd => Entry::ExitHandlerEnd,
            })
        }

        fn event(&self) -> Event {
            match self {
                Entry::Loaded(_) => Event::Loaded,
                Entry::Warning(_) => Event::Warning,
                Entry::RegionMapped(_) => Event::RegionMapped,
                Entry::WorkerStarted(_) => Event::WorkerStarted,
                Entry::WorkerStopped(_) => Event::WorkerStopped,
                Entry::ExitHandlerStart(_) => Event::ExitHandlerStart,
                Entry::RegionUnmapped(_) => Event::RegionUnmapped,
                Entry::WaitingForFault => Event::WaitingForFault,
                Entry::ExitHandlerEnd => Event::ExitHandlerEnd,
            }
        }
    }
}
