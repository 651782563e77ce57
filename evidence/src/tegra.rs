//! `tegra.jsonl`, from `VK_LAYER_VKEXIT_tegra_exit`: the emulated driver's region, its worker
//! threads, and its exit handler, which unmaps the region under workers still running.

crate::wire_names! {
    /// The events of the emulated driver.
    pub enum Event {
        /// The layer sits in an instance being created: the proof that the emulation was on.
        Loaded = "loaded",
        /// Something kept the emulation from working as set: a setting not understood (a
        /// default is used), a region or a worker that could not be made.
        Warning = "warning",
        /// The region the workers run code in (libnvidia-eglcore's stand-in) is mapped.
        RegionMapped = "region-mapped",
        /// A device was created, and the worker thread that stands for the driver's was
        /// started for it, running code in the region.
        WorkerStarted = "worker-started",
        /// `vkDestroyDevice` stopped and joined the device's worker: the one clean way out.
        WorkerStopped = "worker-stopped",
        /// The driver's exit handler begins, with the number of workers still running.
        ExitHandlerStart = "exit-handler-start",
        /// The exit handler unmapped the region, under any worker still running in it.
        RegionUnmapped = "region-unmapped",
        /// The deterministic mode waits for a live worker to fault.
        WaitingForFault = "waiting-for-fault",
        /// The exit handler returns with the process alive: no worker was live, the mode is
        /// `racy` (a worker may still fault later), or the wait for a fault ran out.
        ExitHandlerEnd = "exit-handler-end",
    }
}

/// The fields of the emulated driver's records, after the stamp ([`crate::field`]).
pub mod field {
    /// `loaded`, `warning`: the layer's name.
    pub const LAYER: &str = "layer";
    /// `loaded`: `deterministic`, `racy` or `off`.
    pub const MODE: &str = "mode";
    /// `loaded`: the instance created, `"0x…"`; absent when the creation failed.
    pub const INSTANCE: &str = "instance";
    /// `loaded`: the `VkResult` of a creation that failed, `ERROR_INCOMPATIBLE_DRIVER`;
    /// absent when it succeeded.
    pub const RESULT: &str = "result";
    /// `warning`: what went wrong, a sentence for people.
    pub const MESSAGE: &str = "message";
    /// `region-mapped`, `region-unmapped`: the region's first address, `"0x…"`.
    pub const START: &str = "start";
    /// `region-mapped`, `region-unmapped`: the address just past the region, `"0x…"`.
    pub const END: &str = "end";
    /// `worker-started`, `worker-stopped`: the `VkDevice` the worker belongs to, `"0x…"`.
    pub const DEVICE: &str = "device";
    /// `worker-started`, `worker-stopped`: the worker thread's name.
    pub const WORKER: &str = "worker";
    /// `worker-started`, `worker-stopped`: the worker's kernel thread id, as in a crash's
    /// stamp when the worker is the thread that faults.
    pub const WORKER_TID: &str = "worker_tid";
    /// `worker-started`: the worker's sleep between rounds, in microseconds.
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
        /// A `loaded` record: the emulation was on in an instance.
        Loaded(Loaded),
        /// A `warning` record: the emulation could not work as set.
        Warning(Warning),
        /// A `region-mapped` record.
        RegionMapped(Region),
        /// A `worker-started` record.
        WorkerStarted(Worker),
        /// A `worker-stopped` record.
        WorkerStopped(Worker),
        /// An `exit-handler-start` record.
        ExitHandlerStart(ExitHandlerStart),
        /// A `region-unmapped` record: the exit handler pulled the region from under the
        /// workers.
        RegionUnmapped(Region),
        /// A `waiting-for-fault` record.
        WaitingForFault,
        /// An `exit-handler-end` record.
        ExitHandlerEnd,
    }

    /// A `loaded` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Loaded {
        /// The layer's name, `VK_LAYER_VKEXIT_tegra_exit`.
        pub layer: String,
        /// The emulation's mode: `deterministic`, `racy` or `off`.
        pub mode: String,
        /// The instance created, `"0x…"`; `None` when the creation failed.
        pub instance: Option<String>,
        /// The `VkResult` of a creation that failed; `None` when it succeeded.
        pub result: Option<String>,
    }

    /// A `warning` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Warning {
        /// The layer's name, `VK_LAYER_VKEXIT_tegra_exit`.
        pub layer: String,
        /// What went wrong, a sentence for people.
        pub message: String,
    }

    /// `region-mapped`, `region-unmapped`: the region the workers run code in.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Region {
        /// The region's first address, `"0x…"`.
        pub start: String,
        /// The address just past the region, `"0x…"`: a crash's pc between the two is a
        /// worker returning to unmapped code.
        pub end: String,
    }

    /// `worker-started`, `worker-stopped`: the thread that stands for the driver's.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Worker {
        /// The `VkDevice` the worker belongs to, `"0x…"`.
        pub device: String,
        /// The worker thread's name.
        pub worker: String,
        /// The worker's kernel thread id.
        pub worker_tid: i64,
        /// The worker's sleep between rounds, in microseconds; `worker-started` only.
        pub sleep_us: Option<u64>,
    }

    /// An `exit-handler-start` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitHandlerStart {
        /// Workers still running when the exit handler began: more than 0 is the bug (a
        /// device the program never destroyed).
        pub live_workers: u64,
    }

    impl crate::read::Entry for Entry {
        type Event = Event;

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
