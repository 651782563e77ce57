//! The layer's entry points and the calls that make or end its place in the chain:
//! `vkGet*ProcAddr`, `vkCreateInstance`, `vkDestroyInstance`, `vkCreateDevice`,
//! `vkDestroyDevice`.

use std::ffi::c_char;

use ash::vk::{self, Handle};

use crate::dispatch::{self, device_key, instance_key, CHAIN};
use crate::intercepts::intercepts;
use crate::messengers;
use crate::tracer::tracer;

pub unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the caller passes a NUL-terminated name.
    unsafe { CHAIN.instance_proc_addr(intercepts(), instance, name) }
}

pub unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the caller passes a NUL-terminated name.
    unsafe { CHAIN.device_proc_addr(intercepts(), device, name) }
}

pub unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo,
    p_allocator: *const vk::AllocationCallbacks,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    let tracer = tracer();
    // Before the call: proof that the layer was there even if creation fails or crashes.
    if let Some(tracer) = tracer {
        tracer.loaded();
    }
    // SAFETY: the loader's create info, as the loader passed it.
    let witnessed = unsafe { messengers::witness_instance_messengers(p_create_info.cast()) };
    // SAFETY: the loader's arguments, the application's messengers in this layer's hands.
    let created = unsafe { CHAIN.create_instance(witnessed.info(), p_allocator, p_instance) };
    drop(witnessed);
    match created {
        Ok(next) => {
            dispatch::instance_created(next.handle);
            if let Some(tracer) = tracer {
                tracer.created("vkCreateInstance", &[instance_key(next.handle)], None);
            }
            vk::Result::SUCCESS
        }
        Err(result) => result,
    }
}

pub unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks,
) {
    if instance.is_null() {
        return;
    }
    let next = dispatch::bury_instance(instance);
    if let Some(tracer) = tracer() {
        tracer.destroying("vkDestroyInstance", &[], &[instance_key(instance)]);
    }
    if let Some(next) = next {
        // SAFETY: the application's own call, forwarded unchanged.
        unsafe { next.destroy(p_allocator) };
    }
    crate::teardown::returned("vkDestroyInstance");
}

pub unsafe extern "system" fn create_device(
    physical_device: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo,
    p_allocator: *const vk::AllocationCallbacks,
    p_device: *mut vk::Device,
) -> vk::Result {
    // SAFETY: the loader's arguments, as the loader passed them.
    let created =
        unsafe { CHAIN.create_device(physical_device, p_create_info, p_allocator, p_device) };
    match created {
        Ok(next) => {
            dispatch::device_created(next.handle);
            if let Some(tracer) = tracer() {
                let instance = instance_key(next.instance);
                tracer.created("vkCreateDevice", &[device_key(next.handle)], Some(instance));
            }
            vk::Result::SUCCESS
        }
        Err(result) => result,
    }
}

pub unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks,
) {
    if device.is_null() {
        return;
    }
    let next = dispatch::bury_device(device);
    if let Some(tracer) = tracer() {
        tracer.destroying("vkDestroyDevice", &[], &[device_key(device)]);
    }
    if let Some(next) = next {
        // SAFETY: the application's own call, forwarded unchanged, on the device's own table
        // even if it was destroyed before.
        unsafe { next.destroy(p_allocator) };
    }
    crate::teardown::returned("vkDestroyDevice");
}
