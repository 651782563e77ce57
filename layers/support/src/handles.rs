//! A thread-safe map from Vulkan handles to per-object state.

use ash::vk::Handle;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError, RwLock};

/// Per-object state keyed by the handle's value (`VkInstance`, `VkDevice`, `VkQueue`, …).
///
/// The handle is only a key: it is never dereferenced, because a handle seen at exit may point
/// to memory the driver already freed. Values are shared as `Arc`s so a caller can use one
/// after releasing the map's lock. A panic while the lock was held does not poison the map
/// for later callers. `new` is `const`, so a map can be a `static`.
pub struct HandleMap<H, T> {
    entries: RwLock<BTreeMap<u64, Arc<T>>>,
    handle: PhantomData<fn(H)>,
}

impl<H: Handle, T> HandleMap<H, T> {
    /// An empty map.
    pub const fn new() -> Self {
        Self {
            entries: RwLock::new(BTreeMap::new()),
            handle: PhantomData,
        }
    }

    /// Stores `value` for `handle` and returns it; replaces (and returns) any previous value.
    pub fn insert(&self, handle: H, value: T) -> (Arc<T>, Option<Arc<T>>) {
        let value = Arc::new(value);
        let previous = self.write().insert(handle.as_raw(), Arc::clone(&value));
        (value, previous)
    }

    /// The state of `handle`, if it has any.
    pub fn get(&self, handle: H) -> Option<Arc<T>> {
        self.read().get(&handle.as_raw()).cloned()
    }

    /// Removes and returns the state of `handle`.
    pub fn remove(&self, handle: H) -> Option<Arc<T>> {
        self.write().remove(&handle.as_raw())
    }

    /// Whether `handle` has state.
    pub fn contains(&self, handle: H) -> bool {
        self.read().contains_key(&handle.as_raw())
    }

    /// How many handles have state.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no handle has state.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// A snapshot of every entry, ordered by handle value.
    pub fn entries(&self) -> Vec<(H, Arc<T>)> {
        self.read()
            .iter()
            .map(|(raw, value)| (H::from_raw(*raw), Arc::clone(value)))
            .collect()
    }

    /// Removes and returns every entry for which `remove` says yes.
    pub fn remove_where(&self, mut remove: impl FnMut(H, &T) -> bool) -> Vec<(H, Arc<T>)> {
        let mut entries = self.write();
        let keys: Vec<u64> = entries
            .iter()
            .filter(|(raw, value)| remove(H::from_raw(**raw), value))
            .map(|(raw, _)| *raw)
            .collect();
        keys.into_iter()
            .filter_map(|raw| entries.remove(&raw).map(|v| (H::from_raw(raw), v)))
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u64, Arc<T>>> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<u64, Arc<T>>> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<H: Handle, T> Default for HandleMap<H, T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk;

    static DEVICES: HandleMap<vk::Device, &'static str> = HandleMap::new();

    #[test]
    fn insert_get_remove_by_handle_value() {
        let map: HandleMap<vk::Instance, u32> = HandleMap::new();
        let a = vk::Instance::from_raw(0x1000);
        let b = vk::Instance::from_raw(0x2000);
        assert!(map.is_empty());
        assert!(map.insert(a, 1).1.is_none());
        assert_eq!(*map.insert(a, 2).1.unwrap(), 1);
        map.insert(b, 3);
        assert_eq!(map.len(), 2);
        assert_eq!(map.get(a).as_deref(), Some(&2));
        assert!(map.contains(b));
        assert_eq!(map.remove(a).as_deref(), Some(&2));
        assert!(map.get(a).is_none());
        assert!(map.remove(a).is_none());
        assert_eq!(map.entries().len(), 1);
    }

    #[test]
    fn works_as_a_static_across_threads() {
        let threads: Vec<_> = (1..=8u64)
            .map(|i| {
                std::thread::spawn(move || {
                    let device = vk::Device::from_raw(i * 0x10);
                    DEVICES.insert(device, "device");
                    assert!(DEVICES.get(device).is_some());
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let removed = DEVICES.remove_where(|device, _| device.as_raw() <= 0x40);
        assert_eq!(removed.len(), 4);
        assert_eq!(DEVICES.len(), 4);
    }

    #[test]
    fn a_panic_under_the_lock_does_not_poison_the_map() {
        let map: HandleMap<vk::Queue, u32> = HandleMap::new();
        map.insert(vk::Queue::from_raw(1), 1);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map.remove_where(|_, _| panic!("boom"));
        }));
        assert_eq!(map.get(vk::Queue::from_raw(1)).as_deref(), Some(&1));
    }
}
