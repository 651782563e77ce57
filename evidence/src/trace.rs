//! `trace.jsonl`, from `VK_LAYER_VKEXIT_trace`: every create and destroy of the objects a
//! compute runtime uses, calls on destroyed handles, and the objects still alive at
//! `vkDestroyDevice`, at `vkDestroyInstance` and in the layer's exit handler.

crate::wire_names! {
    /// The events of the trace.
    pub enum Event {
        /// The layer sits in an instance being created: the first record of each instance.
        Loaded = "loaded",
        Create = "create",
        Destroy = "destroy",
        /// A call passed a handle that is no longer alive.
        DeadHandle = "dead-handle",
        /// The layer's exit handler begins, with the number of objects still alive.
        ExitHandlerStart = "exit-handler-start",
        ExitHandlerEnd = "exit-handler-end",
        /// An object alive at exit or at `vkDestroyInstance` (`when` says which).
        Alive = "alive",
        /// An object still alive when its device was destroyed.
        Orphaned = "orphaned",
    }
}

crate::wire_names! {
    /// When objects were found still alive: the `when` of `alive` and `orphaned`.
    pub enum When {
        /// In the layer's exit handler: what the driver's own exit handler would find.
        Exit = "exit",
        /// At `vkDestroyInstance`, of that instance.
        DestroyInstance = "destroy-instance",
        /// At `vkDestroyDevice`, of that device (an `orphaned` record).
        DestroyDevice = "destroy-device",
    }
}

/// The fields of trace records, after the stamp ([`crate::field`]).
pub mod field {
    /// `loaded`: the layer's name.
    pub const LAYER: &str = "layer";
    /// `loaded`: the layer's version.
    pub const VERSION: &str = "version";
    /// `loaded`: when the layer's exit handler was registered (CLOCK_MONOTONIC ns).
    pub const EXIT_HANDLER_T_NS: &str = "exit_handler_t_ns";
    /// The object's type, `VkDevice`.
    pub const TYPE: &str = "type";
    /// The object's handle, `"0x…"`.
    pub const HANDLE: &str = "handle";
    /// The parent's handle (`"0x0"` for none) and type.
    pub const PARENT: &str = "parent";
    pub const PARENT_TYPE: &str = "parent_type";
    /// The Vulkan call: that made the record, or that created the object (`alive`).
    pub const CALL: &str = "call";
    /// `dead-handle`: a sentence for people.
    pub const MESSAGE: &str = "message";
    /// `dead-handle`: the call that destroyed the object, or its ancestor.
    pub const DESTROYED_BY: &str = "destroyed_by";
    /// `dead-handle`: the destroyed device or instance the object belonged to.
    pub const ANCESTOR: &str = "ancestor";
    pub const ANCESTOR_TYPE: &str = "ancestor_type";
    /// `exit-handler-start`: objects alive.
    pub const LIVE: &str = "live";
    /// `alive`, `orphaned`: a [`super::When`].
    pub const WHEN: &str = "when";
    /// `alive`, `orphaned`: the thread that created the object, its id, and when.
    pub const CREATED_THREAD: &str = "created_thread";
    pub const CREATED_TID: &str = "created_tid";
    pub const CREATED_T_NS: &str = "created_t_ns";
}

#[cfg(feature = "serde")]
pub use read::*;

#[cfg(feature = "serde")]
mod read {
    use super::Event;
    use serde::Deserialize;
    use serde_json::{from_value, Value};

    /// A trace record, read.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Entry {
        Loaded(Loaded),
        Create(Object),
        Destroy(Object),
        DeadHandle(DeadHandle),
        ExitHandlerStart(ExitHandlerStart),
        ExitHandlerEnd,
        Alive(Alive),
        Orphaned(Alive),
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Loaded {
        pub layer: String,
        pub version: String,
        pub exit_handler_t_ns: u64,
    }

    /// `create`, `destroy`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Object {
        #[serde(rename = "type")]
        pub ty: String,
        pub handle: String,
        pub parent: String,
        pub parent_type: Option<String>,
        pub call: String,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct DeadHandle {
        pub call: String,
        #[serde(rename = "type")]
        pub ty: String,
        pub handle: String,
        pub message: String,
        pub destroyed_by: String,
        pub ancestor: Option<String>,
        pub ancestor_type: Option<String>,
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitHandlerStart {
        pub live: u64,
    }

    /// `alive`, `orphaned`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Alive {
        /// A [`super::When`]; empty from a cut record.
        pub when: String,
        #[serde(rename = "type")]
        pub ty: String,
        pub handle: String,
        pub parent: String,
        pub parent_type: Option<String>,
        pub call: String,
        pub created_thread: String,
        pub created_tid: i64,
        pub created_t_ns: u64,
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
                Event::Create => Entry::Create(from_value(record)?),
                Event::Destroy => Entry::Destroy(from_value(record)?),
                Event::DeadHandle => Entry::DeadHandle(from_value(record)?),
                Event::ExitHandlerStart => Entry::ExitHandlerStart(from_value(record)?),
                Event::ExitHandlerEnd => Entry::ExitHandlerEnd,
                Event::Alive => Entry::Alive(from_value(record)?),
                Event::Orphaned => Entry::Orphaned(from_value(record)?),
            })
        }

        fn event(&self) -> Event {
            match self {
                Entry::Loaded(_) => Event::Loaded,
                Entry::Create(_) => Event::Create,
                Entry::Destroy(_) => Event::Destroy,
                Entry::DeadHandle(_) => Event::DeadHandle,
                Entry::ExitHandlerStart(_) => Event::ExitHandlerStart,
                Entry::ExitHandlerEnd => Event::ExitHandlerEnd,
                Entry::Alive(_) => Event::Alive,
                Entry::Orphaned(_) => Event::Orphaned,
            }
        }
    }

    impl Alive {
        /// Its `when`, when it is one this version knows.
        pub fn when(&self) -> Option<super::When> {
            super::When::from_wire(&self.when)
        }
    }
}
