//! Creation and destruction of a device's children, forwarded unchanged. A creation is
//! recorded after the next layer returns the handle; a destruction before it runs, so that a
//! crash below still finds the record on disk.

use std::slice;

use ash::vk::{self, Handle};

use crate::dispatch::{self, device_key};
use crate::lifetimes::Key;
use crate::object::ObjectType;
use crate::tracer::tracer;

/// What a call on a device the layer never saw created returns: there is no next layer to
/// forward it to.
const UNKNOWN_DEVICE: vk::Result = vk::Result::ERROR_DEVICE_LOST;

/// `vkCreate*`/`vkAllocateMemory`: one object from one create info.
macro_rules! create_one {
    ($f:ident, $call:literal, $ty:ident, $info:ident, $handle:ident, $field:ident) => {
        pub unsafe extern "system" fn $f(
            device: vk::Device,
            p_info: *const vk::$info<'_>,
            p_allocator: *const vk::AllocationCallbacks<'_>,
            p_object: *mut vk::$handle,
        ) -> vk::Result {
            let Some(next) = dispatch::device_for_create($call, device) else {
                return UNKNOWN_DEVICE;
            };
            let create = next.fns.fp_v1_0().$field;
            // SAFETY: the application's own call, forwarded unchanged.
            let result = unsafe { create(device, p_info, p_allocator, p_object) };
            if result == vk::Result::SUCCESS {
                if let Some(tracer) = tracer() {
                    // SAFETY: on success the next layer wrote the new handle to p_object.
                    let handle = unsafe { *p_object };
                    let key = Key::new(ObjectType::$ty, handle.as_raw());
                    tracer.created($call, &[key], Some(device_key(device)));
                }
            }
            result
        }
    };
}

/// `vkDestroy*`/`vkFreeMemory`: one object, possibly null.
macro_rules! destroy_one {
    ($f:ident, $call:literal, $ty:ident, $handle:ident, $field:ident) => {
        pub unsafe extern "system" fn $f(
            device: vk::Device,
            object: vk::$handle,
            p_allocator: *const vk::AllocationCallbacks<'_>,
        ) {
            let Some((next, dead)) = dispatch::device(device) else {
                return;
            };
            if let Some(tracer) = tracer() {
                let uses = dispatch::device_uses(device, dead);
                let object =
                    (!object.is_null()).then(|| Key::new(ObjectType::$ty, object.as_raw()));
                tracer.destroying($call, uses.as_slice(), object.as_slice());
            }
            // SAFETY: the application's own call, forwarded unchanged.
            unsafe { (next.fns.fp_v1_0().$field)(device, object, p_allocator) };
            crate::teardown::returned($call);
        }
    };
}

create_one!(
    allocate_memory,
    "vkAllocateMemory",
    DeviceMemory,
    MemoryAllocateInfo,
    DeviceMemory,
    allocate_memory
);
destroy_one!(
    free_memory,
    "vkFreeMemory",
    DeviceMemory,
    DeviceMemory,
    free_memory
);
create_one!(
    create_buffer,
    "vkCreateBuffer",
    Buffer,
    BufferCreateInfo,
    Buffer,
    create_buffer
);
destroy_one!(
    destroy_buffer,
    "vkDestroyBuffer",
    Buffer,
    Buffer,
    destroy_buffer
);
create_one!(
    create_buffer_view,
    "vkCreateBufferView",
    BufferView,
    BufferViewCreateInfo,
    BufferView,
    create_buffer_view
);
destroy_one!(
    destroy_buffer_view,
    "vkDestroyBufferView",
    BufferView,
    BufferView,
    destroy_buffer_view
);
create_one!(
    create_image,
    "vkCreateImage",
    Image,
    ImageCreateInfo,
    Image,
    create_image
);
destroy_one!(destroy_image, "vkDestroyImage", Image, Image, destroy_image);
create_one!(
    create_image_view,
    "vkCreateImageView",
    ImageView,
    ImageViewCreateInfo,
    ImageView,
    create_image_view
);
destroy_one!(
    destroy_image_view,
    "vkDestroyImageView",
    ImageView,
    ImageView,
    destroy_image_view
);
create_one!(
    create_event,
    "vkCreateEvent",
    Event,
    EventCreateInfo,
    Event,
    create_event
);
destroy_one!(destroy_event, "vkDestroyEvent", Event, Event, destroy_event);
create_one!(
    create_semaphore,
    "vkCreateSemaphore",
    Semaphore,
    SemaphoreCreateInfo,
    Semaphore,
    create_semaphore
);
destroy_one!(
    destroy_semaphore,
    "vkDestroySemaphore",
    Semaphore,
    Semaphore,
    destroy_semaphore
);
create_one!(
    create_fence,
    "vkCreateFence",
    Fence,
    FenceCreateInfo,
    Fence,
    create_fence
);
destroy_one!(destroy_fence, "vkDestroyFence", Fence, Fence, destroy_fence);
create_one!(
    create_command_pool,
    "vkCreateCommandPool",
    CommandPool,
    CommandPoolCreateInfo,
    CommandPool,
    create_command_pool
);
destroy_one!(
    destroy_command_pool,
    "vkDestroyCommandPool",
    CommandPool,
    CommandPool,
    destroy_command_pool
);
create_one!(
    create_descriptor_pool,
    "vkCreateDescriptorPool",
    DescriptorPool,
    DescriptorPoolCreateInfo,
    DescriptorPool,
    create_descriptor_pool
);
destroy_one!(
    destroy_descriptor_pool,
    "vkDestroyDescriptorPool",
    DescriptorPool,
    DescriptorPool,
    destroy_descriptor_pool
);
create_one!(
    create_descriptor_set_layout,
    "vkCreateDescriptorSetLayout",
    DescriptorSetLayout,
    DescriptorSetLayoutCreateInfo,
    DescriptorSetLayout,
    create_descriptor_set_layout
);
destroy_one!(
    destroy_descriptor_set_layout,
    "vkDestroyDescriptorSetLayout",
    DescriptorSetLayout,
    DescriptorSetLayout,
    destroy_descriptor_set_layout
);
create_one!(
    create_pipeline_layout,
    "vkCreatePipelineLayout",
    PipelineLayout,
    PipelineLayoutCreateInfo,
    PipelineLayout,
    create_pipeline_layout
);
destroy_one!(
    destroy_pipeline_layout,
    "vkDestroyPipelineLayout",
    PipelineLayout,
    PipelineLayout,
    destroy_pipeline_layout
);
create_one!(
    create_pipeline_cache,
    "vkCreatePipelineCache",
    PipelineCache,
    PipelineCacheCreateInfo,
    PipelineCache,
    create_pipeline_cache
);
destroy_one!(
    destroy_pipeline_cache,
    "vkDestroyPipelineCache",
    PipelineCache,
    PipelineCache,
    destroy_pipeline_cache
);
create_one!(
    create_shader_module,
    "vkCreateShaderModule",
    ShaderModule,
    ShaderModuleCreateInfo,
    ShaderModule,
    create_shader_module
);
destroy_one!(
    destroy_shader_module,
    "vkDestroyShaderModule",
    ShaderModule,
    ShaderModule,
    destroy_shader_module
);
create_one!(
    create_query_pool,
    "vkCreateQueryPool",
    QueryPool,
    QueryPoolCreateInfo,
    QueryPool,
    create_query_pool
);
destroy_one!(
    destroy_query_pool,
    "vkDestroyQueryPool",
    QueryPool,
    QueryPool,
    destroy_query_pool
);
create_one!(
    create_sampler,
    "vkCreateSampler",
    Sampler,
    SamplerCreateInfo,
    Sampler,
    create_sampler
);
destroy_one!(
    destroy_sampler,
    "vkDestroySampler",
    Sampler,
    Sampler,
    destroy_sampler
);
destroy_one!(
    destroy_pipeline,
    "vkDestroyPipeline",
    Pipeline,
    Pipeline,
    destroy_pipeline
);

/// `vkCreate*Pipelines`: one pipeline per create info.
macro_rules! create_pipelines {
    ($f:ident, $call:literal, $info:ident, $field:ident) => {
        pub unsafe extern "system" fn $f(
            device: vk::Device,
            cache: vk::PipelineCache,
            count: u32,
            p_infos: *const vk::$info<'_>,
            p_allocator: *const vk::AllocationCallbacks<'_>,
            p_pipelines: *mut vk::Pipeline,
        ) -> vk::Result {
            let Some(next) = dispatch::device_for_create($call, device) else {
                return UNKNOWN_DEVICE;
            };
            // SAFETY: the application's own call, forwarded unchanged.
            let result = unsafe {
                (next.fns.fp_v1_0().$field)(device, cache, count, p_infos, p_allocator, p_pipelines)
            };
            // A failed batch may have created some pipelines, but a negative result does not
            // promise that the array was written: only what a success wrote is recorded.
            if result.as_raw() >= 0 {
                // SAFETY: the next layer wrote `count` handles (null for the failed ones).
                let keys = unsafe { keys(ObjectType::Pipeline, p_pipelines, count) };
                created($call, &keys, device_key(device));
            }
            result
        }
    };
}

create_pipelines!(
    create_compute_pipelines,
    "vkCreateComputePipelines",
    ComputePipelineCreateInfo,
    create_compute_pipelines
);
create_pipelines!(
    create_graphics_pipelines,
    "vkCreateGraphicsPipelines",
    GraphicsPipelineCreateInfo,
    create_graphics_pipelines
);

pub unsafe extern "system" fn allocate_command_buffers(
    device: vk::Device,
    p_info: *const vk::CommandBufferAllocateInfo<'_>,
    p_command_buffers: *mut vk::CommandBuffer,
) -> vk::Result {
    const CALL: &str = "vkAllocateCommandBuffers";
    let Some(next) = dispatch::device_for_create(CALL, device) else {
        return UNKNOWN_DEVICE;
    };
    // SAFETY: the application's own call, forwarded unchanged.
    let result =
        unsafe { (next.fns.fp_v1_0().allocate_command_buffers)(device, p_info, p_command_buffers) };
    if result == vk::Result::SUCCESS {
        // SAFETY: the application's allocate info, and on success as many command buffers.
        let (pool, keys) = unsafe {
            let info = &*p_info;
            let keys = keys(
                ObjectType::CommandBuffer,
                p_command_buffers,
                info.command_buffer_count,
            );
            (info.command_pool, keys)
        };
        created(
            CALL,
            &keys,
            Key::new(ObjectType::CommandPool, pool.as_raw()),
        );
    }
    result
}

pub unsafe extern "system" fn free_command_buffers(
    device: vk::Device,
    pool: vk::CommandPool,
    count: u32,
    p_command_buffers: *const vk::CommandBuffer,
) {
    let Some((next, dead)) = dispatch::device(device) else {
        return;
    };
    if let Some(tracer) = tracer() {
        let uses = uses_with_pool(
            device,
            dead,
            Key::new(ObjectType::CommandPool, pool.as_raw()),
        );
        // SAFETY: the application passes `count` command buffers.
        let objects = unsafe { keys(ObjectType::CommandBuffer, p_command_buffers, count) };
        tracer.destroying("vkFreeCommandBuffers", &uses, &objects);
    }
    // SAFETY: the application's own call, forwarded unchanged.
    unsafe { (next.fns.fp_v1_0().free_command_buffers)(device, pool, count, p_command_buffers) };
    crate::teardown::returned("vkFreeCommandBuffers");
}

pub unsafe extern "system" fn allocate_descriptor_sets(
    device: vk::Device,
    p_info: *const vk::DescriptorSetAllocateInfo<'_>,
    p_sets: *mut vk::DescriptorSet,
) -> vk::Result {
    const CALL: &str = "vkAllocateDescriptorSets";
    let Some(next) = dispatch::device_for_create(CALL, device) else {
        return UNKNOWN_DEVICE;
    };
    // SAFETY: the application's own call, forwarded unchanged.
    let result = unsafe { (next.fns.fp_v1_0().allocate_descriptor_sets)(device, p_info, p_sets) };
    if result == vk::Result::SUCCESS {
        // SAFETY: the application's allocate info, and on success as many sets.
        let (pool, keys) = unsafe {
            let info = &*p_info;
            let keys = keys(ObjectType::DescriptorSet, p_sets, info.descriptor_set_count);
            (info.descriptor_pool, keys)
        };
        created(
            CALL,
            &keys,
            Key::new(ObjectType::DescriptorPool, pool.as_raw()),
        );
    }
    result
}

pub unsafe extern "system" fn free_descriptor_sets(
    device: vk::Device,
    pool: vk::DescriptorPool,
    count: u32,
    p_sets: *const vk::DescriptorSet,
) -> vk::Result {
    let Some((next, dead)) = dispatch::device(device) else {
        return UNKNOWN_DEVICE;
    };
    if let Some(tracer) = tracer() {
        let uses = uses_with_pool(
            device,
            dead,
            Key::new(ObjectType::DescriptorPool, pool.as_raw()),
        );
        // SAFETY: the application passes `count` sets.
        let objects = unsafe { keys(ObjectType::DescriptorSet, p_sets, count) };
        tracer.destroying("vkFreeDescriptorSets", &uses, &objects);
    }
    // SAFETY: the application's own call, forwarded unchanged.
    let result = unsafe { (next.fns.fp_v1_0().free_descriptor_sets)(device, pool, count, p_sets) };
    crate::teardown::returned("vkFreeDescriptorSets");
    result
}

pub unsafe extern "system" fn reset_descriptor_pool(
    device: vk::Device,
    pool: vk::DescriptorPool,
    flags: vk::DescriptorPoolResetFlags,
) -> vk::Result {
    let Some((next, dead)) = dispatch::device(device) else {
        return UNKNOWN_DEVICE;
    };
    if let Some(tracer) = tracer() {
        let pool_key = Key::new(ObjectType::DescriptorPool, pool.as_raw());
        let uses = uses_with_pool(device, dead, pool_key);
        tracer.freeing_children("vkResetDescriptorPool", &uses, pool_key);
    }
    // SAFETY: the application's own call, forwarded unchanged.
    unsafe { (next.fns.fp_v1_0().reset_descriptor_pool)(device, pool, flags) }
}

fn created(call: &'static str, keys: &[Key], parent: Key) {
    if let (Some(tracer), false) = (tracer(), keys.is_empty()) {
        tracer.created(call, keys, Some(parent));
    }
}

/// The device (when destroyed) and the pool a free passes.
fn uses_with_pool(device: vk::Device, dead: bool, pool: Key) -> Vec<Key> {
    dispatch::device_uses(device, dead)
        .into_iter()
        .chain((pool.handle != 0).then_some(pool))
        .collect()
}

/// The non-null handles of an array of `count`, as keys of type `ty`.
///
/// # Safety
/// `handles` is null or points to `count` handles.
unsafe fn keys<H: Handle + Copy>(ty: ObjectType, handles: *const H, count: u32) -> Vec<Key> {
    if handles.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: the caller promises `count` readable handles.
    let handles = unsafe { slice::from_raw_parts(handles, count as usize) };
    handles
        .iter()
        .filter(|h| !h.is_null())
        .map(|h| Key::new(ty, h.as_raw()))
        .collect()
}
