//! `trace.jsonl`, from `VK_LAYER_VKEXIT_trace`: every create and destroy of the objects a
//! compute runtime uses, calls on destroyed handles, and the objects still alive at
//! `vkDestroyDevice`, at `vkDestroyInstance` and in the layer's exit handler.

crate::wire_names! {
    /// The events of the trace.
    pub enum Event {
        /// The layer sits in an instance being created: the first record of each instance.
        Loaded = "loaded",
        /// A tracked object was created, by the call in `call`.
        Create = "create",
        /// A tracked object was destroyed, by the call in `call`.
        Destroy = "destroy",
        /// A call passed a handle that is no longer alive.
        DeadHandle = "dead-handle",
        /// The layer's exit handler begins, with the number of objects still alive.
        ExitHandlerStart = "exit-handler-start",
        /// The layer's exit handler returns, after its `alive` records.
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
    /// The handle of the object it was created from (its instance, device, or command or
    /// descriptor pool), `"0x0"` for an instance.
    pub const PARENT: &str = "parent";
    /// The parent's type, `VkDevice`; absent for an instance.
    pub const PARENT_TYPE: &str = "parent_type";
    /// The Vulkan call: that made the record, or that created the object (`alive`).
    pub const CALL: &str = "call";
    /// `dead-handle`: a sentence for people.
    pub const MESSAGE: &str = "message";
    /// `dead-handle`: the call that destroyed the object, or its ancestor.
    pub const DESTROYED_BY: &str = "destroyed_by";
    /// `dead-handle`: the destroyed device or instance the object belonged to, `"0x…"`;
    /// absent when the object itself was destroyed.
    pub const ANCESTOR: &str = "ancestor";
    /// `dead-handle`: the type of `ancestor`, `VkDevice`; absent with it.
    pub const ANCESTOR_TYPE: &str = "ancestor_type";
    /// `exit-handler-start`: objects alive.
    pub const LIVE: &str = "live";
    /// `alive`, `orphaned`: a [`super::When`].
    pub const WHEN: &str = "when";
    /// `alive`, `orphaned`: the name of the thread that created the object.
    pub const CREATED_THREAD: &str = "created_thread";
    /// `alive`, `orphaned`: the kernel thread id of the thread that created the object.
    pub const CREATED_TID: &str = "created_tid";
    /// `alive`, `orphaned`: when the object was created, CLOCK_MONOTONIC nanoseconds.
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
        /// A `loaded` record: the layer was in an instance.
        Loaded(Loaded),
        /// A `create` record.
        Create(Object),
        /// A `destroy` record.
        Destroy(Object),
        /// A `dead-handle` record: a use after destroy.
        DeadHandle(DeadHandle),
        /// An `exit-handler-start` record.
        ExitHandlerStart(ExitHandlerStart),
        /// An `exit-handler-end` record.
        ExitHandlerEnd,
        /// An `alive` record: an object left alive at exit or at `vkDestroyInstance`.
        Alive(Alive),
        /// An `orphaned` record: an object left alive at `vkDestroyDevice`.
        Orphaned(Alive),
    }

    /// A `loaded` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Loaded {
        /// The layer's name, `VK_LAYER_VKEXIT_trace`.
        pub layer: String,
        /// The layer's version, its crate's.
        pub version: String,
        /// When the layer's exit handler was registered, CLOCK_MONOTONIC nanoseconds: exit
        /// handlers registered after it run before it.
        pub exit_handler_t_ns: u64,
    }

    /// `create`, `destroy`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Object {
        /// The object's type, `VkBuffer`.
        #[serde(rename = "type")]
        pub ty: String,
        /// The object's handle, `"0x…"`.
        pub handle: String,
        /// The handle of the object it was created from (its instance, device or pool),
        /// `"0x0"` for an instance.
        pub parent: String,
        /// The parent's type, `VkDevice`; `None` for an instance.
        pub parent_type: Option<String>,
        /// The Vulkan call that created or destroyed it, `vkCreateBuffer`.
        pub call: String,
    }

    /// A `dead-handle` record: a call passed a handle that is no longer alive.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct DeadHandle {
        /// The Vulkan call that passed the handle.
        pub call: String,
        /// The dead object's type, `VkDevice`.
        #[serde(rename = "type")]
        pub ty: String,
        /// The dead object's handle, `"0x…"`.
        pub handle: String,
        /// A sentence for people: "vkDestroyEvent on a destroyed VkDevice 0x…".
        pub message: String,
        /// The call that destroyed the object, or its `ancestor`.
        pub destroyed_by: String,
        /// The destroyed device or instance the object belonged to, `"0x…"`; `None` when
        /// the object itself was destroyed.
        pub ancestor: Option<String>,
        /// The type of `ancestor`; `None` with it.
        pub ancestor_type: Option<String>,
    }

    /// An `exit-handler-start` record.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct ExitHandlerStart {
        /// Objects alive when the layer's exit handler began; its `alive` records name them.
        pub live: u64,
    }

    /// `alive`, `orphaned`: an object not destroyed in time.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
    #[serde(default)]
    pub struct Alive {
        /// A [`super::When`]; empty from a cut record.
        pub when: String,
        /// The object's type, `VkDevice`.
        #[serde(rename = "type")]
        pub ty: String,
        /// The object's handle, `"0x…"`.
        pub handle: String,
        /// The handle of the object it was created from (its instance, device or pool),
        /// `"0x0"` for an instance.
        pub parent: String,
        /// The parent's type; `None` for an instance.
        pub parent_type: Option<String>,
        /// The Vulkan call that created it.
        pub call: String,
        /// The name of the thread that created it.
        pub created_thread: String,
        /// The kernel thread id of the thread that created it.
        pub created_tid: i64,
        /// When it was created, CLOCK_MONOTONIC nanoseconds.
        pub created_t_ns: u64,
    }

    impl crate::read::Entry for Entry {
        type Event = Event;

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
