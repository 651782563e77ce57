//! Object lifetimes as a state machine: creations and destructions in; the live set, the
//! records to write and the dead-handle findings out. Pure (no Vulkan, no I/O, no clock): the
//! layer passes what it saw while holding its lock, and writes what comes back after releasing
//! it.
//!
//! Objects are keyed by type and handle *value*. A destroyed handle leaves a tombstone, so a
//! later call that passes it again is a finding; a new object that gets the same value (the
//! allocator reuses freed memory) replaces the tombstone. Destroying a device or an instance
//! orphans whatever of it is still alive: the objects are reported, then tombstoned too.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::object::ObjectType;
use crate::record::{Record, When};

/// A handle's value: a dispatchable handle's pointer, or a non-dispatchable 64-bit handle.
pub type Handle = u64;

/// Tombstones of ordinary objects kept for double-destroy findings; the oldest go first. Small
/// enough to stay in cache (a larger map doubles the cost of a tracked call). Instances and
/// devices are always kept: calls on them are the findings that matter most.
pub const DEFAULT_DEAD_CAPACITY: usize = 1 << 14;

/// One object: its type and handle value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The object's type.
    pub ty: ObjectType,
    /// Its handle's value.
    pub handle: Handle,
}

impl Key {
    /// The key of the object of type `ty` with handle `handle`.
    pub const fn new(ty: ObjectType, handle: Handle) -> Self {
        Key { ty, handle }
    }
}

/// Where and when an object was created, repeated in its `alive` records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The creating thread's name.
    pub thread: ThreadName,
    /// The creating thread's kernel id.
    pub tid: i64,
    /// When, in nanoseconds of the monotonic clock.
    pub t_ns: u64,
}

/// A kernel thread name (at most 15 bytes), kept inline so that noting an origin never
/// allocates.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ThreadName {
    bytes: [u8; 16],
    len: u8,
}

impl ThreadName {
    /// The first 16 bytes of `name`.
    pub fn new(name: &[u8]) -> Self {
        let mut bytes = [0; 16];
        let len = name.len().min(bytes.len());
        bytes[..len].copy_from_slice(&name[..len]);
        ThreadName {
            bytes,
            len: len as u8,
        }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for ThreadName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Hashes keys with one multiply per word: handle values are pointers or counters, not
/// attacker-chosen, and SipHash would cost more than the rest of a tracked call.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type KeyMap<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;
type KeySet = HashSet<Key, BuildHasherDefault<KeyHasher>>;

/// A live object.
#[derive(Clone, Debug)]
pub struct Live {
    /// The object it was created from (a device's instance, a buffer's device), if tracked.
    pub parent: Option<Key>,
    /// The call that created it.
    pub call: &'static str,
    /// Where and when it was created.
    pub origin: Origin,
    instance: Option<Handle>,
    device: Option<Handle>,
    seq: u64,
    /// Live objects with this same key: a driver may give equal handles to equal objects.
    count: u32,
}

/// How a handle that is no longer alive went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Death {
    /// Destroyed by `call` (for a pool's children, with the pool).
    Destroyed {
        /// The destroying call.
        call: &'static str,
    },
    /// Never destroyed itself; `ancestor`, its device or instance, was, by `call`.
    Orphaned {
        /// The device or instance destroyed.
        ancestor: Key,
        /// The call that destroyed it.
        call: &'static str,
    },
}

#[derive(Clone, Copy, Debug)]
struct Tombstone {
    death: Death,
    seq: u64,
}

/// The live set and the tombstones of everything the layer saw created.
#[derive(Debug)]
pub struct Lifetimes {
    live: KeyMap<Live>,
    /// Children of pools (command buffers, descriptor sets), freed with them.
    children: KeyMap<KeySet>,
    dead: KeyMap<Tombstone>,
    /// Tombstones in the order they were made, for eviction; entries whose sequence number no
    /// longer matches the tombstone are stale.
    dead_order: VecDeque<(Key, u64)>,
    dead_capacity: usize,
    seq: u64,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self::with_dead_capacity(DEFAULT_DEAD_CAPACITY)
    }
}

impl Lifetimes {
    /// An empty set, keeping [`DEFAULT_DEAD_CAPACITY`] tombstones.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set, keeping `dead_capacity` tombstones of ordinary objects.
    pub fn with_dead_capacity(dead_capacity: usize) -> Self {
        Lifetimes {
            live: KeyMap::default(),
            children: KeyMap::default(),
            dead: KeyMap::default(),
            dead_order: VecDeque::new(),
            dead_capacity,
            seq: 0,
        }
    }

    /// How many objects are alive.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// The live object with this key, if any.
    pub fn live(&self, key: Key) -> Option<&Live> {
        self.live.get(&key)
    }

    /// How `key` went, if it is dead (and its tombstone not yet evicted).
    pub fn death(&self, key: Key) -> Option<Death> {
        self.dead.get(&key).map(|t| t.death)
    }

    /// Checks the handles a call passes besides the objects it destroys (its device, the
    /// pool it frees from): one `dead-handle` record for each that is dead. Returns whether
    /// any was.
    pub fn check_uses(&self, call: &'static str, uses: &[Key], out: &mut Vec<Record>) -> bool {
        let mut found = false;
        for &key in uses {
            if let Some(death) = self.death(key) {
                out.push(Record::DeadHandle { call, key, death });
                found = true;
            }
        }
        found
    }

    /// `call` returned `key`, a new object of `parent` (`None` for an instance; the instance for
    /// a device; the pool for a command buffer or descriptor set; the device otherwise).
    pub fn create(
        &mut self,
        call: &'static str,
        key: Key,
        parent: Option<Key>,
        origin: Origin,
        out: &mut Vec<Record>,
    ) {
        out.push(Record::Create { key, parent, call });
        if let Some(live) = self.live.get_mut(&key) {
            live.count += 1;
            return;
        }
        self.dead.remove(&key);
        let (instance, device) = self.owners(key, parent);
        if let Some(parent) = parent.filter(|p| p.ty.frees_children()) {
            self.children.entry(parent).or_default().insert(key);
        }
        self.seq += 1;
        self.live.insert(
            key,
            Live {
                parent,
                call,
                origin,
                instance,
                device,
                seq: self.seq,
                count: 1,
            },
        );
    }

    /// `call` destroys `objects` (null handles left out), passing also `uses`. Records, in this
    /// order: dead handles among `uses`; for each object, a dead-handle record if it is dead
    /// (unless a used handle already was: one cause is enough), else the objects a device or
    /// instance still has (`alive`, then orphaned) and its `destroy` record, followed by those
    /// of a pool's children.
    pub fn destroy(
        &mut self,
        call: &'static str,
        uses: &[Key],
        objects: &[Key],
        out: &mut Vec<Record>,
    ) {
        let used_dead = self.check_uses(call, uses, out);
        for &key in objects {
            if let Some(death) = self.death(key) {
                if !used_dead {
                    out.push(Record::DeadHandle { call, key, death });
                }
                continue;
            }
            let parent = match self.live.get_mut(&key) {
                Some(live) if live.count > 1 => {
                    live.count -= 1;
                    out.push(Record::Destroy {
                        key,
                        parent: live.parent,
                        call,
                    });
                    continue;
                }
                Some(live) => live.parent,
                // Created before the layer saw it, or a bogus handle: still the call asked.
                None => uses.first().copied(),
            };
            match key.ty {
                ObjectType::Device => self.orphan(call, key, When::DestroyDevice, out),
                ObjectType::Instance => self.orphan(call, key, When::DestroyInstance, out),
                _ => {}
            }
            out.push(Record::Destroy { key, parent, call });
            self.bury(key, parent, Death::Destroyed { call });
            self.free_children(call, key, out);
        }
    }

    /// `call` frees every child of `pool` and keeps the pool (`vkResetDescriptorPool`).
    pub fn free_children_of(
        &mut self,
        call: &'static str,
        uses: &[Key],
        pool: Key,
        out: &mut Vec<Record>,
    ) {
        if !self.check_uses(call, uses, out) {
            self.free_children(call, pool, out);
        }
    }

    /// The exit handler's report: how many objects live, then each, oldest first.
    pub fn report_at_exit(&self, out: &mut Vec<Record>) {
        out.push(Record::ExitHandlerStart {
            live: self.live.len(),
        });
        let mut live: Vec<(&Key, &Live)> = self.live.iter().collect();
        live.sort_by_key(|(_, l)| l.seq);
        out.extend(live.into_iter().map(|(&key, l)| alive(When::Exit, key, l)));
    }

    /// The instance and device `key` belongs to, from its parent's.
    fn owners(&self, key: Key, parent: Option<Key>) -> (Option<Handle>, Option<Handle>) {
        let own_device = (key.ty == ObjectType::Device).then_some(key.handle);
        match parent {
            None if key.ty == ObjectType::Instance => (Some(key.handle), None),
            None => (None, own_device),
            Some(p) if p.ty == ObjectType::Instance => (Some(p.handle), own_device),
            Some(p) => match self.live.get(&p) {
                Some(l) => (l.instance, l.device),
                None => (None, (p.ty == ObjectType::Device).then_some(p.handle)),
            },
        }
    }

    /// Reports and tombstones what is still alive of the device or instance `owner` that
    /// `call` destroys.
    fn orphan(&mut self, call: &'static str, owner: Key, when: When, out: &mut Vec<Record>) {
        let belongs = |l: &Live| match owner.ty {
            ObjectType::Device => l.device == Some(owner.handle),
            _ => l.instance == Some(owner.handle),
        };
        let mut orphans: Vec<(Key, u64)> = self
            .live
            .iter()
            .filter(|(k, l)| **k != owner && belongs(l))
            .map(|(k, l)| (*k, l.seq))
            .collect();
        orphans.sort_by_key(|(_, seq)| *seq);
        for (key, _) in orphans {
            let live = &self.live[&key];
            out.push(alive(when, key, live));
            let parent = live.parent;
            self.bury(
                key,
                parent,
                Death::Orphaned {
                    ancestor: owner,
                    call,
                },
            );
        }
    }

    /// Destroys the children of a pool with it (or with its reset).
    fn free_children(&mut self, call: &'static str, pool: Key, out: &mut Vec<Record>) {
        let Some(children) = self.children.remove(&pool) else {
            return;
        };
        let mut children: Vec<(Key, u64)> = children
            .into_iter()
            .filter_map(|k| self.live.get(&k).map(|l| (k, l.seq)))
            .collect();
        children.sort_by_key(|(_, seq)| *seq);
        for (key, _) in children {
            out.push(Record::Destroy {
                key,
                parent: Some(pool),
                call,
            });
            self.bury(key, Some(pool), Death::Destroyed { call });
        }
    }

    /// Moves `key` from the live set to the tombstones.
    fn bury(&mut self, key: Key, parent: Option<Key>, death: Death) {
        self.live.remove(&key);
        if let Some(pool) = parent.filter(|p| p.ty.frees_children()) {
            if let Some(siblings) = self.children.get_mut(&pool) {
                siblings.remove(&key);
            }
        }
        self.seq += 1;
        self.dead.insert(
            key,
            Tombstone {
                death,
                seq: self.seq,
            },
        );
        if matches!(key.ty, ObjectType::Instance | ObjectType::Device) {
            return;
        }
        self.dead_order.push_back((key, self.seq));
        while self.dead_order.len() > self.dead_capacity {
            let Some((old, seq)) = self.dead_order.pop_front() else {
                break;
            };
            if self.dead.get(&old).is_some_and(|t| t.seq == seq) {
                self.dead.remove(&old);
            }
        }
    }
}

fn alive(when: When, key: Key, live: &Live) -> Record {
    Record::Alive {
        when,
        key,
        parent: live.parent,
        call: live.call,
        origin: live.origin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ObjectType::*;

    const INSTANCE: Key = Key::new(Instance, 0x1000);
    const DEVICE: Key = Key::new(Device, 0x2000);
    const BUFFER: Key = Key::new(Buffer, 0x30);
    const MEMORY: Key = Key::new(DeviceMemory, 0x31);
    const EVENT: Key = Key::new(Event, 0x32);
    const POOL: Key = Key::new(CommandPool, 0x40);
    const CB1: Key = Key::new(CommandBuffer, 0x5000);
    const CB2: Key = Key::new(CommandBuffer, 0x5100);

    fn origin(t_ns: u64) -> Origin {
        Origin {
            thread: ThreadName::new(b"main"),
            tid: 7,
            t_ns,
        }
    }

    /// An instance with one device.
    fn with_device() -> Lifetimes {
        let mut l = Lifetimes::new();
        let mut out = Vec::new();
        l.create("vkCreateInstance", INSTANCE, None, origin(1), &mut out);
        l.create(
            "vkCreateDevice",
            DEVICE,
            Some(INSTANCE),
            origin(2),
            &mut out,
        );
        l
    }

    fn create(l: &mut Lifetimes, call: &'static str, key: Key, parent: Key, t: u64) {
        l.create(call, key, Some(parent), origin(t), &mut Vec::new());
    }

    fn destroy(l: &mut Lifetimes, call: &'static str, uses: &[Key], key: Key) -> Vec<Record> {
        let mut out = Vec::new();
        l.destroy(call, uses, &[key], &mut out);
        out
    }

    fn exit(l: &Lifetimes) -> Vec<Record> {
        let mut out = Vec::new();
        l.report_at_exit(&mut out);
        out
    }

    fn alive_keys(records: &[Record], at: When) -> Vec<Key> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Alive { when, key, .. } if *when == at => Some(*key),
                _ => None,
            })
            .collect()
    }

    fn dead_handles(records: &[Record]) -> Vec<(Key, Death)> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::DeadHandle { key, death, .. } => Some((*key, *death)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn create_records_the_object_with_its_parent() {
        let mut l = with_device();
        let mut out = Vec::new();
        l.create("vkCreateBuffer", BUFFER, Some(DEVICE), origin(3), &mut out);
        assert_eq!(
            out,
            [Record::Create {
                key: BUFFER,
                parent: Some(DEVICE),
                call: "vkCreateBuffer"
            }]
        );
        assert_eq!(l.live_count(), 3);
    }

    #[test]
    fn clean_teardown_leaves_nothing_alive_and_no_finding() {
        let mut l = with_device();
        create(&mut l, "vkCreateBuffer", BUFFER, DEVICE, 3);
        create(&mut l, "vkAllocateMemory", MEMORY, DEVICE, 4);
        let mut out = Vec::new();
        out.extend(destroy(&mut l, "vkDestroyBuffer", &[DEVICE], BUFFER));
        out.extend(destroy(&mut l, "vkFreeMemory", &[DEVICE], MEMORY));
        out.extend(destroy(&mut l, "vkDestroyDevice", &[], DEVICE));
        out.extend(destroy(&mut l, "vkDestroyInstance", &[], INSTANCE));
        assert!(dead_handles(&out).is_empty(), "{out:?}");
        assert!(out.iter().all(|r| matches!(r, Record::Destroy { .. })));
        assert_eq!(exit(&l), [Record::ExitHandlerStart { live: 0 }]);
    }

    #[test]
    fn never_destroyed_instance_and_device_are_alive_at_exit_oldest_first() {
        let l = with_device();
        let records = exit(&l);
        assert_eq!(records[0], Record::ExitHandlerStart { live: 2 });
        assert_eq!(alive_keys(&records, When::Exit), [INSTANCE, DEVICE]);
        let Record::Alive { origin, call, .. } = &records[2] else {
            panic!("{records:?}")
        };
        assert_eq!((origin.thread.as_bytes(), origin.t_ns), (&b"main"[..], 2));
        assert_eq!(*call, "vkCreateDevice");
    }

    #[test]
    fn destroying_a_device_reports_its_live_children_and_orphans_them() {
        let mut l = with_device();
        create(&mut l, "vkCreateBuffer", BUFFER, DEVICE, 3);
        create(&mut l, "vkAllocateMemory", MEMORY, DEVICE, 4);
        let out = destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        assert_eq!(alive_keys(&out, When::DestroyDevice), [BUFFER, MEMORY]);
        assert!(matches!(
            out.last(),
            Some(Record::Destroy { key: DEVICE, .. })
        ));
        assert_eq!(alive_keys(&exit(&l), When::Exit), [INSTANCE]);
        assert_eq!(
            l.death(BUFFER),
            Some(Death::Orphaned {
                ancestor: DEVICE,
                call: "vkDestroyDevice"
            })
        );
    }

    #[test]
    fn a_free_on_a_destroyed_device_is_one_dead_handle_for_the_device() {
        let mut l = with_device();
        create(&mut l, "vkCreateEvent", EVENT, DEVICE, 3);
        destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        let out = destroy(&mut l, "vkDestroyEvent", &[DEVICE], EVENT);
        assert_eq!(
            dead_handles(&out),
            [(
                DEVICE,
                Death::Destroyed {
                    call: "vkDestroyDevice"
                }
            )]
        );
        assert_eq!(out.len(), 1, "{out:?}");
    }

    #[test]
    fn a_create_on_a_destroyed_device_is_a_dead_handle() {
        let mut l = with_device();
        destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        let mut out = Vec::new();
        assert!(l.check_uses("vkCreateEvent", &[DEVICE], &mut out));
        assert_eq!(dead_handles(&out).len(), 1);
    }

    #[test]
    fn double_destroy_is_a_dead_handle_for_the_object() {
        let mut l = with_device();
        create(&mut l, "vkCreateEvent", EVENT, DEVICE, 3);
        destroy(&mut l, "vkDestroyEvent", &[DEVICE], EVENT);
        let out = destroy(&mut l, "vkDestroyEvent", &[DEVICE], EVENT);
        assert_eq!(
            out,
            [Record::DeadHandle {
                call: "vkDestroyEvent",
                key: EVENT,
                death: Death::Destroyed {
                    call: "vkDestroyEvent"
                }
            }]
        );
    }

    #[test]
    fn destroying_a_device_twice_is_a_dead_handle() {
        let mut l = with_device();
        destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        let out = destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        assert_eq!(dead_handles(&out).len(), 1);
    }

    #[test]
    fn destroying_the_instance_reports_and_orphans_its_devices_and_their_children() {
        let mut l = with_device();
        create(&mut l, "vkCreateBuffer", BUFFER, DEVICE, 3);
        let out = destroy(&mut l, "vkDestroyInstance", &[], INSTANCE);
        assert_eq!(alive_keys(&out, When::DestroyInstance), [DEVICE, BUFFER]);
        assert_eq!(l.live_count(), 0);
        let out = destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        assert_eq!(
            dead_handles(&out),
            [(
                DEVICE,
                Death::Orphaned {
                    ancestor: INSTANCE,
                    call: "vkDestroyInstance"
                }
            )]
        );
    }

    #[test]
    fn a_reused_handle_value_is_a_new_live_object() {
        let mut l = with_device();
        destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        create(&mut l, "vkCreateDevice", DEVICE, INSTANCE, 5);
        assert!(l.death(DEVICE).is_none());
        let mut out = Vec::new();
        assert!(!l.check_uses("vkCreateEvent", &[DEVICE], &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn equal_handles_of_two_live_objects_need_two_destroys() {
        let mut l = with_device();
        create(&mut l, "vkCreateSampler", Key::new(Sampler, 9), DEVICE, 3);
        create(&mut l, "vkCreateSampler", Key::new(Sampler, 9), DEVICE, 4);
        let first = destroy(&mut l, "vkDestroySampler", &[DEVICE], Key::new(Sampler, 9));
        let second = destroy(&mut l, "vkDestroySampler", &[DEVICE], Key::new(Sampler, 9));
        assert!(dead_handles(&first).is_empty() && dead_handles(&second).is_empty());
        assert_eq!(l.live_count(), 2);
    }

    #[test]
    fn destroying_a_pool_destroys_its_command_buffers() {
        let mut l = with_device();
        create(&mut l, "vkCreateCommandPool", POOL, DEVICE, 3);
        create(&mut l, "vkAllocateCommandBuffers", CB1, POOL, 4);
        create(&mut l, "vkAllocateCommandBuffers", CB2, POOL, 5);
        let out = destroy(&mut l, "vkDestroyCommandPool", &[DEVICE], POOL);
        let destroyed: Vec<Key> = out
            .iter()
            .map(|r| match r {
                Record::Destroy { key, .. } => *key,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(destroyed, [POOL, CB1, CB2]);
        assert_eq!(l.live_count(), 2);
        let mut out = Vec::new();
        l.destroy("vkFreeCommandBuffers", &[DEVICE, POOL], &[CB1], &mut out);
        assert_eq!(
            dead_handles(&out),
            [(
                POOL,
                Death::Destroyed {
                    call: "vkDestroyCommandPool"
                }
            )]
        );
    }

    #[test]
    fn a_freed_command_buffer_leaves_its_pool() {
        let mut l = with_device();
        create(&mut l, "vkCreateCommandPool", POOL, DEVICE, 3);
        create(&mut l, "vkAllocateCommandBuffers", CB1, POOL, 4);
        let mut out = Vec::new();
        l.destroy("vkFreeCommandBuffers", &[DEVICE, POOL], &[CB1], &mut out);
        let out = destroy(&mut l, "vkDestroyCommandPool", &[DEVICE], POOL);
        assert_eq!(out.len(), 1, "{out:?}");
    }

    #[test]
    fn resetting_a_descriptor_pool_frees_its_sets_and_keeps_the_pool() {
        let mut l = with_device();
        let pool = Key::new(DescriptorPool, 0x60);
        let set = Key::new(DescriptorSet, 0x61);
        create(&mut l, "vkCreateDescriptorPool", pool, DEVICE, 3);
        create(&mut l, "vkAllocateDescriptorSets", set, pool, 4);
        let mut out = Vec::new();
        l.free_children_of("vkResetDescriptorPool", &[DEVICE, pool], pool, &mut out);
        assert_eq!(
            out,
            [Record::Destroy {
                key: set,
                parent: Some(pool),
                call: "vkResetDescriptorPool"
            }]
        );
        assert!(l.live(pool).is_some());
        assert!(l.live(set).is_none());
    }

    #[test]
    fn children_of_pools_are_orphaned_with_their_device() {
        let mut l = with_device();
        create(&mut l, "vkCreateCommandPool", POOL, DEVICE, 3);
        create(&mut l, "vkAllocateCommandBuffers", CB1, POOL, 4);
        let out = destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        assert_eq!(alive_keys(&out, When::DestroyDevice), [POOL, CB1]);
    }

    #[test]
    fn oldest_tombstones_of_ordinary_objects_are_evicted_but_devices_are_kept() {
        let mut l = Lifetimes::with_dead_capacity(2);
        let mut out = Vec::new();
        l.create("vkCreateInstance", INSTANCE, None, origin(1), &mut out);
        l.create(
            "vkCreateDevice",
            DEVICE,
            Some(INSTANCE),
            origin(2),
            &mut out,
        );
        for h in 1..=3 {
            let key = Key::new(Event, h);
            create(&mut l, "vkCreateEvent", key, DEVICE, 2 + h);
            destroy(&mut l, "vkDestroyEvent", &[DEVICE], key);
        }
        assert!(l.death(Key::new(Event, 1)).is_none());
        assert!(l.death(Key::new(Event, 3)).is_some());
        destroy(&mut l, "vkDestroyDevice", &[], DEVICE);
        for h in 4..=6 {
            create(&mut l, "vkCreateEvent", Key::new(Event, h), INSTANCE, 10);
            destroy(&mut l, "vkDestroyEvent", &[], Key::new(Event, h));
        }
        assert!(l.death(DEVICE).is_some());
    }

    #[test]
    fn a_destroy_of_an_unknown_handle_is_recorded_with_the_device_as_parent() {
        let mut l = with_device();
        let out = destroy(&mut l, "vkDestroyFence", &[DEVICE], Key::new(Fence, 77));
        assert_eq!(
            out,
            [Record::Destroy {
                key: Key::new(Fence, 77),
                parent: Some(DEVICE),
                call: "vkDestroyFence"
            }]
        );
    }

    /// What the state machine itself adds to a create/destroy pair (the lock, writing and the
    /// next layer not included): `cargo test --release -p vkexit-layer-trace -- --ignored`.
    #[test]
    #[ignore]
    fn cost_of_a_create_destroy_pair() {
        let mut l = with_device();
        let mut out = Vec::with_capacity(4);
        let pairs = 1_000_000u64;
        let start = std::time::Instant::now();
        for h in 0..pairs {
            let key = Key::new(Buffer, 0x1_0000_0000 + h);
            l.create("vkCreateBuffer", key, Some(DEVICE), origin(h), &mut out);
            l.destroy("vkDestroyBuffer", &[], &[key], &mut out);
            out.clear();
        }
        let ns = start.elapsed().as_nanos() as u64 / pairs;
        eprintln!("lifetimes: {ns} ns per create/destroy pair");
    }
}
