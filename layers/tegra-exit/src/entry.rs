//! The Vulkan functions the layer intercepts. Everything else goes straight to the next layer
//! (the driver, when the layer sits last as vkexit puts it).

use crate::layer::{Layer, LAYER_NAME};
use crate::mode::Mode;
use crate::region;
use crate::worker::Worker;
use ash::vk::{self, Handle};
use std::ffi::c_char;
use vkexit_evidence::tegra::{field, Event};
use vkexit_evidence::Record;
use vkexit_layer_support::{intercept, Chain, HandleMap, Intercept};

static CHAIN: Chain = Chain::new();
/// The worker of each device that has one.
static WORKERS: HandleMap<vk::Device, Worker> = HandleMap::new();

pub static INTERCEPTS: &[Intercept] = &[
    intercept!(instance "vkGetInstanceProcAddr", get_instance_proc_addr => vk::PFN_vkGetInstanceProcAddr),
    intercept!(instance "vkCreateInstance", create_instance => vk::PFN_vkCreateInstance),
    intercept!(instance "vkDestroyInstance", destroy_instance => vk::PFN_vkDestroyInstance),
    intercept!(instance "vkCreateDevice", create_device => vk::PFN_vkCreateDevice),
    intercept!(device "vkGetDeviceProcAddr", get_device_proc_addr => vk::PFN_vkGetDeviceProcAddr),
    intercept!(device "vkDestroyDevice", destroy_device => vk::PFN_vkDestroyDevice),
];

pub unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the loader or the layer above passes a NUL-terminated name.
    unsafe { CHAIN.instance_proc_addr(INTERCEPTS, instance, name) }
}

pub unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the loader or the layer above passes a NUL-terminated name.
    unsafe { CHAIN.device_proc_addr(INTERCEPTS, device, name) }
}

/// Creates the instance below, records `loaded` (the proof that the emulation was active) and,
/// unless off, maps the region.
unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo,
    p_allocator: *const vk::AllocationCallbacks,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    let layer = Layer::get();
    // SAFETY: the loader's own arguments, passed on.
    let created = unsafe { CHAIN.create_instance(p_create_info, p_allocator, p_instance) };
    let mut loaded = Record::new(Event::Loaded.as_str());
    loaded
        .str(field::LAYER, LAYER_NAME)
        .str(field::MODE, layer.mode.name());
    match &created {
        Ok(next) => loaded.hex(field::INSTANCE, next.handle.as_raw()),
        Err(result) => loaded.str(field::RESULT, &format!("{result:?}")),
    };
    layer.write(loaded);
    if let Some(value) = &layer.unknown_mode {
        layer.warn(&format!(
            "unknown VKEXIT_TEGRA_MODE={value:?}, using deterministic"
        ));
    }
    if let Some(value) = &layer.bad_sleep {
        layer.warn(&format!(
            "bad VKEXIT_TEGRA_WORKER_SLEEP_US={value:?}, using the default"
        ));
    }
    if created.is_ok() && layer.mode != Mode::Off {
        map_region(layer);
    }
    created.err().unwrap_or(vk::Result::SUCCESS)
}

unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks,
) {
    if let Some(next) = CHAIN.remove_instance(instance) {
        // SAFETY: the application's own call, passed on.
        unsafe { next.destroy(p_allocator) };
    }
}

/// Creates the device below, then (unless off) starts its worker in the region.
unsafe extern "system" fn create_device(
    physical_device: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo,
    p_allocator: *const vk::AllocationCallbacks,
    p_device: *mut vk::Device,
) -> vk::Result {
    // SAFETY: the loader's own arguments, passed on.
    let created =
        unsafe { CHAIN.create_device(physical_device, p_create_info, p_allocator, p_device) };
    let next = match created {
        Ok(next) => next,
        Err(result) => return result,
    };
    let layer = Layer::get();
    if layer.mode != Mode::Off {
        start_worker(layer, next.handle);
    }
    vk::Result::SUCCESS
}

/// Stops and joins the device's worker, then destroys the device below: only
/// `vkDestroyDevice` stops the Tegra driver's thread.
unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks,
) {
    if let Some(worker) = WORKERS.remove(device) {
        worker.stop();
        let mut stopped = Record::new(Event::WorkerStopped.as_str());
        stopped
            .hex(field::DEVICE, device.as_raw())
            .str(field::WORKER, &worker.name)
            .i64(field::WORKER_TID, worker.tid);
        Layer::get().write(stopped);
    }
    if let Some(next) = CHAIN.remove_device(device) {
        // SAFETY: the application's own call, passed on.
        unsafe { next.destroy(p_allocator) };
    }
}

fn map_region(layer: &Layer) {
    match region::map() {
        Ok(Some(range)) => {
            let mut mapped = Record::new(Event::RegionMapped.as_str());
            mapped
                .hex(field::START, range.start as u64)
                .hex(field::END, range.end as u64);
            layer.write(mapped);
            crate::register_exit_handler_again_if_it_ran();
        }
        Ok(None) => {}
        Err(err) => layer.warn(&format!("cannot map the region: {err}")),
    }
}

fn start_worker(layer: &Layer, device: vk::Device) {
    if region::mapped().is_none() {
        map_region(layer);
    }
    match Worker::start(layer.worker_sleep, layer.mode == Mode::Racy) {
        Ok(worker) => {
            let mut started = Record::new(Event::WorkerStarted.as_str());
            started
                .hex(field::DEVICE, device.as_raw())
                .str(field::WORKER, &worker.name)
                .i64(field::WORKER_TID, worker.tid)
                .u64(field::SLEEP_US, layer.worker_sleep.as_micros() as u64);
            layer.write(started);
            if let (_, Some(old)) = WORKERS.insert(device, worker) {
                old.stop();
            }
        }
        Err(err) => layer.warn(&format!("cannot start a worker: {err}")),
    }
}
