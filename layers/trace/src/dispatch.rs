//! The next layer, for every instance and device the layer sits in, and for those already
//! destroyed: a call on a destroyed device is recorded, then forwarded as the application
//! made it, which needs that device's table. Handles are keys only, never dereferenced.

use std::sync::Arc;

use ash::vk::{self, Handle};
use vkexit_layer_support::{Chain, HandleMap, NextDevice, NextInstance};

use crate::lifetimes::Key;
use crate::object::ObjectType;
use crate::tracer::tracer;

pub static CHAIN: Chain = Chain::new();

/// Tombstones: the next layer's tables of destroyed devices and instances.
static DEAD_DEVICES: HandleMap<vk::Device, Arc<NextDevice>> = HandleMap::new();
static DEAD_INSTANCES: HandleMap<vk::Instance, Arc<NextInstance>> = HandleMap::new();

/// The next layer's device, and whether it was destroyed; `None` for a handle the layer never
/// saw created.
pub fn device(device: vk::Device) -> Option<(Arc<NextDevice>, bool)> {
    if let Some(next) = CHAIN.device(device) {
        return Some((next, false));
    }
    DEAD_DEVICES
        .get(device)
        .map(|next| (Arc::clone(&*next), true))
}

/// As [`device`], for a call that creates objects: a destroyed device is recorded first.
pub fn device_for_create(call: &'static str, handle: vk::Device) -> Option<Arc<NextDevice>> {
    let (next, dead) = device(handle)?;
    if dead {
        if let Some(tracer) = tracer() {
            tracer.used(call, &[device_key(handle)]);
        }
    }
    Some(next)
}

/// The device as the handles a call passes: nothing to check while the device lives.
pub fn device_uses(handle: vk::Device, dead: bool) -> Option<Key> {
    dead.then(|| device_key(handle))
}

/// A new device, possibly with a destroyed one's handle value.
pub fn device_created(handle: vk::Device) {
    DEAD_DEVICES.remove(handle);
}

/// Moves a device the application destroys to the tombstones; for one already there, its
/// tombstone.
pub fn bury_device(handle: vk::Device) -> Option<Arc<NextDevice>> {
    match CHAIN.remove_device(handle) {
        Some(next) => {
            DEAD_DEVICES.insert(handle, Arc::clone(&next));
            Some(next)
        }
        None => DEAD_DEVICES.get(handle).map(|next| Arc::clone(&*next)),
    }
}

/// A new instance, possibly with a destroyed one's handle value.
pub fn instance_created(handle: vk::Instance) {
    DEAD_INSTANCES.remove(handle);
}

/// Moves an instance the application destroys, and the devices it still has, to the
/// tombstones; for one already there, its tombstone.
pub fn bury_instance(handle: vk::Instance) -> Option<Arc<NextInstance>> {
    let Some(next) = CHAIN.remove_instance(handle) else {
        return DEAD_INSTANCES.get(handle).map(|next| Arc::clone(&*next));
    };
    for device in CHAIN.devices() {
        if device.instance == handle {
            bury_device(device.handle);
        }
    }
    DEAD_INSTANCES.insert(handle, Arc::clone(&next));
    Some(next)
}

pub fn device_key(handle: vk::Device) -> Key {
    Key::new(ObjectType::Device, handle.as_raw())
}

pub fn instance_key(handle: vk::Instance) -> Key {
    Key::new(ObjectType::Instance, handle.as_raw())
}
