//! The records the layer writes, one JSON object per line. Each becomes an evidence record of
//! `vkexit-evidence`, which starts it with `ev`, `t_ns`, `pid`, `tid` and `thread`; the events
//! and fields are that crate's `trace` schema, which the harness reads with; README.md lists
//! them.

use std::fmt::Write;
use vkexit_evidence::trace::{field, Event};

pub use vkexit_evidence::trace::When;

/// A trace line. Trace records are a few hundred bytes (the longest, `dead-handle`, names two
/// handles and two calls); a 1 KiB line is a quarter of the cost of the general 4 KiB one to
/// set up on every tracked call.
pub type Line = vkexit_evidence::Record<LINE_CAPACITY>;
/// The bytes of one trace line; a field that does not fit is left out and the line marked
/// `truncated`.
pub const LINE_CAPACITY: usize = 1024;

use crate::lifetimes::{Death, Key, Origin};

/// The layer's name, as the loader knows it and as `loaded` records give it.
pub const LAYER_NAME: &str = "VK_LAYER_VKEXIT_trace";

/// One line of the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// The layer sits in an instance being created: the first record of each instance.
    /// `exit_handler_t_ns` is when its exit handler was registered (at library load).
    Loaded {
        /// The layer's version, its crate's.
        version: &'static str,
        /// When the exit handler was registered, CLOCK_MONOTONIC nanoseconds.
        exit_handler_t_ns: u64,
    },
    /// An object was created.
    Create {
        /// The object created.
        key: Key,
        /// The object it was created from (its instance, device or pool); `None` for an
        /// instance.
        parent: Option<Key>,
        /// The Vulkan call that created it, `vkCreateBuffer`.
        call: &'static str,
    },
    /// An object was destroyed (or freed, or destroyed with its pool).
    Destroy {
        /// The object destroyed.
        key: Key,
        /// The object it was created from (its instance, device or pool); `None` for an
        /// instance.
        parent: Option<Key>,
        /// The Vulkan call that destroyed it.
        call: &'static str,
    },
    /// `call` passed `key`, which is no longer alive.
    DeadHandle {
        /// The Vulkan call that passed the dead handle.
        call: &'static str,
        /// The dead object.
        key: Key,
        /// How it died: destroyed itself, or with its device or instance.
        death: Death,
    },
    /// The layer's exit handler begins.
    ExitHandlerStart {
        /// Objects still alive: what the driver's own exit handler would find.
        live: usize,
    },
    /// The layer's exit handler returns, after its `Alive` records.
    ExitHandlerEnd,
    /// An object not destroyed in time: written as `alive`, or as `orphaned` when `when` is
    /// `DestroyDevice`.
    Alive {
        /// When it was found alive: at exit, at `vkDestroyInstance` or at `vkDestroyDevice`.
        when: When,
        /// The object alive.
        key: Key,
        /// The object it was created from (its instance, device or pool); `None` for an
        /// instance.
        parent: Option<Key>,
        /// The call that created it.
        call: &'static str,
        /// The thread that created it, and when.
        origin: Origin,
    },
}

impl Record {
    /// The event: what `ev` says.
    pub const fn ev(&self) -> Event {
        match self {
            Record::Loaded { .. } => Event::Loaded,
            Record::Create { .. } => Event::Create,
            Record::Destroy { .. } => Event::Destroy,
            Record::DeadHandle { .. } => Event::DeadHandle,
            Record::ExitHandlerStart { .. } => Event::ExitHandlerStart,
            Record::ExitHandlerEnd => Event::ExitHandlerEnd,
            // Objects a destroyed device leaves behind get their own event: readers of `alive`
            // know only `exit` and `destroy-instance`.
            Record::Alive {
                when: When::DestroyDevice,
                ..
            } => Event::Orphaned,
            Record::Alive { .. } => Event::Alive,
        }
    }

    /// The evidence line: stamped now, on the calling thread, then this record's fields.
    pub fn line(&self) -> Line {
        let mut line = Line::start(self.ev().as_str());
        self.fill(&mut line);
        line
    }

    /// Adds this record's fields to `line` (a line of this record's `ev`), in place: a line is
    /// 4 KiB, and the hot path does not move it.
    pub fn fill(&self, line: &mut Line) {
        match self {
            Record::Loaded {
                version,
                exit_handler_t_ns,
            } => {
                line.str(field::LAYER, LAYER_NAME)
                    .str(field::VERSION, version)
                    .u64(field::EXIT_HANDLER_T_NS, *exit_handler_t_ns);
            }
            Record::Create { key, parent, call } | Record::Destroy { key, parent, call } => {
                object(line, *key, *parent).str(field::CALL, call);
            }
            Record::DeadHandle { call, key, death } => {
                line.str(field::CALL, call)
                    .str(field::TYPE, key.ty.name())
                    .hex(field::HANDLE, key.handle)
                    .str(field::MESSAGE, &message(call, *key, *death));
                match death {
                    Death::Destroyed { call } => {
                        line.str(field::DESTROYED_BY, call);
                    }
                    Death::Orphaned { ancestor, call } => {
                        line.str(field::DESTROYED_BY, call)
                            .str(field::ANCESTOR_TYPE, ancestor.ty.name())
                            .hex(field::ANCESTOR, ancestor.handle);
                    }
                }
            }
            Record::ExitHandlerStart { live } => {
                line.u64(field::LIVE, *live as u64);
            }
            Record::ExitHandlerEnd => {}
            Record::Alive {
                when,
                key,
                parent,
                call,
                origin,
            } => {
                line.str(field::WHEN, when.as_str());
                object(line, *key, *parent)
                    .str(field::CALL, call)
                    .bytes_str(field::CREATED_THREAD, origin.thread.as_bytes())
                    .i64(field::CREATED_TID, origin.tid)
                    .u64(field::CREATED_T_NS, origin.t_ns);
            }
        }
    }
}

/// "vkDestroyEvent on a destroyed VkDevice 0x…", or for an object whose device or instance was
/// destroyed, "vkDestroyBuffer on a VkBuffer 0x… whose VkDevice 0x… was destroyed".
pub fn message(call: &str, key: Key, death: Death) -> String {
    let mut out = String::with_capacity(96);
    let _ = match death {
        Death::Destroyed { .. } => {
            write!(
                out,
                "{call} on a destroyed {} {:#x}",
                key.ty.name(),
                key.handle
            )
        }
        Death::Orphaned { ancestor, .. } => write!(
            out,
            "{call} on a {} {:#x} whose {} {:#x} was destroyed",
            key.ty.name(),
            key.handle,
            ancestor.ty.name(),
            ancestor.handle
        ),
    };
    out
}

fn object(line: &mut Line, key: Key, parent: Option<Key>) -> &mut Line {
    line.str(field::TYPE, key.ty.name())
        .hex(field::HANDLE, key.handle);
    match parent {
        Some(p) => line
            .hex(field::PARENT, p.handle)
            .str(field::PARENT_TYPE, p.ty.name()),
        None => line.hex(field::PARENT, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifetimes::ThreadName;
    use crate::object::ObjectType;
    use serde_json::{json, Value};

    const DEVICE: Key = Key::new(ObjectType::Device, 0x55d0_0000_1000);
    const BUFFER: Key = Key::new(ObjectType::Buffer, 0x2a);

    /// The record as JSON, without the identity fields the writer adds.
    fn parse(record: &Record) -> Value {
        let line = record.line();
        let text = format!("{}}}", String::from_utf8_lossy(line.as_bytes()));
        let mut value: Value = serde_json::from_str(&text).expect("a record is one JSON object");
        let fields = value.as_object_mut().unwrap();
        for stamp in ["t_ns", "pid", "tid", "thread"] {
            assert!(fields.remove(stamp).is_some(), "{stamp} in {text}");
        }
        value
    }

    #[test]
    fn loaded_names_the_layer_and_its_version() {
        let record = Record::Loaded {
            version: "0.1.0",
            exit_handler_t_ns: 5,
        };
        assert_eq!(
            parse(&record),
            json!({"ev": "loaded", "layer": "VK_LAYER_VKEXIT_trace", "version": "0.1.0",
                   "exit_handler_t_ns": 5})
        );
        assert!(String::from_utf8_lossy(record.line().as_bytes()).starts_with("{\"ev\":\"loaded\""));
    }

    #[test]
    fn create_and_destroy_give_type_handle_parent_and_call() {
        let create = Record::Create {
            key: BUFFER,
            parent: Some(DEVICE),
            call: "vkCreateBuffer",
        };
        assert_eq!(
            parse(&create),
            json!({"ev": "create", "type": "VkBuffer", "handle": "0x2a",
                   "parent": "0x55d000001000", "parent_type": "VkDevice",
                   "call": "vkCreateBuffer"})
        );
        let destroy = Record::Destroy {
            key: Key::new(ObjectType::Instance, 0x10),
            parent: None,
            call: "vkDestroyInstance",
        };
        assert_eq!(
            parse(&destroy),
            json!({"ev": "destroy", "type": "VkInstance", "handle": "0x10", "parent": "0x0",
                   "call": "vkDestroyInstance"})
        );
    }

    #[test]
    fn dead_handle_says_what_was_used_after_what() {
        let record = Record::DeadHandle {
            call: "vkDestroyEvent",
            key: DEVICE,
            death: Death::Destroyed {
                call: "vkDestroyDevice",
            },
        };
        assert_eq!(
            parse(&record),
            json!({"ev": "dead-handle", "call": "vkDestroyEvent", "type": "VkDevice",
                   "handle": "0x55d000001000",
                   "message": "vkDestroyEvent on a destroyed VkDevice 0x55d000001000",
                   "destroyed_by": "vkDestroyDevice"})
        );
        let orphan = Record::DeadHandle {
            call: "vkDestroyBuffer",
            key: BUFFER,
            death: Death::Orphaned {
                ancestor: DEVICE,
                call: "vkDestroyDevice",
            },
        };
        let v = parse(&orphan);
        assert_eq!(
            v["message"],
            "vkDestroyBuffer on a VkBuffer 0x2a whose VkDevice 0x55d000001000 was destroyed"
        );
        assert_eq!(v["ancestor"], "0x55d000001000");
        assert_eq!(v["ancestor_type"], "VkDevice");
    }

    #[test]
    fn alive_carries_where_and_when_the_object_was_created() {
        let record = Record::Alive {
            when: When::Exit,
            key: DEVICE,
            parent: Some(Key::new(ObjectType::Instance, 0x10)),
            call: "vkCreateDevice",
            origin: Origin {
                thread: ThreadName::new(b"wor\"ker\n"),
                tid: 12,
                t_ns: 99,
            },
        };
        assert_eq!(
            parse(&record),
            json!({"ev": "alive", "when": "exit", "type": "VkDevice",
                   "handle": "0x55d000001000", "parent": "0x10", "parent_type": "VkInstance",
                   "call": "vkCreateDevice", "created_thread": "wor\"ker\n", "created_tid": 12,
                   "created_t_ns": 99})
        );
    }

    #[test]
    fn objects_a_destroyed_device_leaves_are_orphaned_not_alive() {
        let record = Record::Alive {
            when: When::DestroyDevice,
            key: BUFFER,
            parent: Some(DEVICE),
            call: "vkCreateBuffer",
            origin: Origin {
                thread: ThreadName::new(b"main"),
                tid: 1,
                t_ns: 2,
            },
        };
        let v = parse(&record);
        assert_eq!(
            (&v["ev"], &v["when"]),
            (&json!("orphaned"), &json!("destroy-device"))
        );
    }

    #[test]
    fn exit_handler_start_counts_the_live_objects() {
        assert_eq!(
            parse(&Record::ExitHandlerStart { live: 3 }),
            json!({"ev": "exit-handler-start", "live": 3})
        );
        assert_eq!(
            parse(&Record::ExitHandlerEnd),
            json!({"ev": "exit-handler-end"})
        );
    }
}
