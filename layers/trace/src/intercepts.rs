//! The functions the layer intercepts. With a trace file (or destroy calls to report to the
//! preloaded library, `teardown.rs`), the lifecycle calls, the creation of
//! debug messengers and the create, allocate, destroy and free calls of every tracked type;
//! witnessing messengers only (`messengers.rs`), the lifecycle and the messengers; otherwise
//! only the six every layer must answer, so the application calls the next layer directly.
//! Every other call goes straight to the next layer: `vkGet*ProcAddr` hands out the next
//! layer's pointer.

use ash::vk;
use vkexit_layer_support::{intercept, Intercept};

use crate::lifecycle::*;
use crate::messengers::{create_debug_report_callback, create_debug_utils_messenger, witnessing};
use crate::objects::*;
use crate::teardown;
use crate::tracer::tracer;

/// What the layer answers to `vkGet*ProcAddr` itself.
pub fn intercepts() -> &'static [Intercept] {
    match (tracer().is_some() || teardown::reporting(), witnessing()) {
        (true, _) => TRACED,
        (false, true) => &TRACED[..WITNESSED],
        (false, false) => &TRACED[..LIFECYCLE],
    }
}

/// How many entries of [`TRACED`], from its start, every layer must intercept.
const LIFECYCLE: usize = 6;
/// How many, from its start, witnessing the application's messengers needs.
const WITNESSED: usize = LIFECYCLE + 2;

/// Intercepted when tracing: the lifecycle first, then every tracked create and destroy.
pub static TRACED: &[Intercept] = &[
    intercept!(instance "vkGetInstanceProcAddr", get_instance_proc_addr => vk::PFN_vkGetInstanceProcAddr),
    intercept!(device "vkGetDeviceProcAddr", get_device_proc_addr => vk::PFN_vkGetDeviceProcAddr),
    intercept!(instance "vkCreateInstance", create_instance => vk::PFN_vkCreateInstance),
    intercept!(instance "vkDestroyInstance", destroy_instance => vk::PFN_vkDestroyInstance),
    intercept!(instance "vkCreateDevice", create_device => vk::PFN_vkCreateDevice),
    intercept!(device "vkDestroyDevice", destroy_device => vk::PFN_vkDestroyDevice),
    intercept!(instance "vkCreateDebugUtilsMessengerEXT", create_debug_utils_messenger => vk::PFN_vkCreateDebugUtilsMessengerEXT),
    intercept!(instance "vkCreateDebugReportCallbackEXT", create_debug_report_callback => vk::PFN_vkCreateDebugReportCallbackEXT),
    intercept!(device "vkAllocateMemory", allocate_memory => vk::PFN_vkAllocateMemory),
    intercept!(device "vkFreeMemory", free_memory => vk::PFN_vkFreeMemory),
    intercept!(device "vkCreateBuffer", create_buffer => vk::PFN_vkCreateBuffer),
    intercept!(device "vkDestroyBuffer", destroy_buffer => vk::PFN_vkDestroyBuffer),
    intercept!(device "vkCreateBufferView", create_buffer_view => vk::PFN_vkCreateBufferView),
    intercept!(device "vkDestroyBufferView", destroy_buffer_view => vk::PFN_vkDestroyBufferView),
    intercept!(device "vkCreateImage", create_image => vk::PFN_vkCreateImage),
    intercept!(device "vkDestroyImage", destroy_image => vk::PFN_vkDestroyImage),
    intercept!(device "vkCreateImageView", create_image_view => vk::PFN_vkCreateImageView),
    intercept!(device "vkDestroyImageView", destroy_image_view => vk::PFN_vkDestroyImageView),
    intercept!(device "vkCreateEvent", create_event => vk::PFN_vkCreateEvent),
    intercept!(device "vkDestroyEvent", destroy_event => vk::PFN_vkDestroyEvent),
    intercept!(device "vkCreateSemaphore", create_semaphore => vk::PFN_vkCreateSemaphore),
    intercept!(device "vkDestroySemaphore", destroy_semaphore => vk::PFN_vkDestroySemaphore),
    intercept!(device "vkCreateFence", create_fence => vk::PFN_vkCreateFence),
    intercept!(device "vkDestroyFence", destroy_fence => vk::PFN_vkDestroyFence),
    intercept!(device "vkCreateCommandPool", create_command_pool => vk::PFN_vkCreateCommandPool),
    intercept!(device "vkDestroyCommandPool", destroy_command_pool => vk::PFN_vkDestroyCommandPool),
    intercept!(device "vkAllocateCommandBuffers", allocate_command_buffers => vk::PFN_vkAllocateCommandBuffers),
    intercept!(device "vkFreeCommandBuffers", free_command_buffers => vk::PFN_vkFreeCommandBuffers),
    intercept!(device "vkCreateDescriptorPool", create_descriptor_pool => vk::PFN_vkCreateDescriptorPool),
    intercept!(device "vkDestroyDescriptorPool", destroy_descriptor_pool => vk::PFN_vkDestroyDescriptorPool),
    intercept!(device "vkResetDescriptorPool", reset_descriptor_pool => vk::PFN_vkResetDescriptorPool),
    intercept!(device "vkAllocateDescriptorSets", allocate_descriptor_sets => vk::PFN_vkAllocateDescriptorSets),
    intercept!(device "vkFreeDescriptorSets", free_descriptor_sets => vk::PFN_vkFreeDescriptorSets),
    intercept!(device "vkCreateDescriptorSetLayout", create_descriptor_set_layout => vk::PFN_vkCreateDescriptorSetLayout),
    intercept!(device "vkDestroyDescriptorSetLayout", destroy_descriptor_set_layout => vk::PFN_vkDestroyDescriptorSetLayout),
    intercept!(device "vkCreatePipelineLayout", create_pipeline_layout => vk::PFN_vkCreatePipelineLayout),
    intercept!(device "vkDestroyPipelineLayout", destroy_pipeline_layout => vk::PFN_vkDestroyPipelineLayout),
    intercept!(device "vkCreatePipelineCache", create_pipeline_cache => vk::PFN_vkCreatePipelineCache),
    intercept!(device "vkDestroyPipelineCache", destroy_pipeline_cache => vk::PFN_vkDestroyPipelineCache),
    intercept!(device "vkCreateComputePipelines", create_compute_pipelines => vk::PFN_vkCreateComputePipelines),
    intercept!(device "vkCreateGraphicsPipelines", create_graphics_pipelines => vk::PFN_vkCreateGraphicsPipelines),
    intercept!(device "vkDestroyPipeline", destroy_pipeline => vk::PFN_vkDestroyPipeline),
    intercept!(device "vkCreateShaderModule", create_shader_module => vk::PFN_vkCreateShaderModule),
    intercept!(device "vkDestroyShaderModule", destroy_shader_module => vk::PFN_vkDestroyShaderModule),
    intercept!(device "vkCreateQueryPool", create_query_pool => vk::PFN_vkCreateQueryPool),
    intercept!(device "vkDestroyQueryPool", destroy_query_pool => vk::PFN_vkDestroyQueryPool),
    intercept!(device "vkCreateSampler", create_sampler => vk::PFN_vkCreateSampler),
    intercept!(device "vkDestroySampler", destroy_sampler => vk::PFN_vkDestroySampler),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use vkexit_layer_support::Scope;

    #[test]
    fn the_lifecycle_comes_first() {
        let names: Vec<_> = TRACED[..LIFECYCLE].iter().map(|i| i.name).collect();
        assert_eq!(
            names,
            [
                c"vkGetInstanceProcAddr",
                c"vkGetDeviceProcAddr",
                c"vkCreateInstance",
                c"vkDestroyInstance",
                c"vkCreateDevice",
                c"vkDestroyDevice"
            ]
        );
    }

    #[test]
    fn every_name_once_and_children_at_device_scope() {
        let names: HashSet<_> = TRACED.iter().map(|i| i.name).collect();
        assert_eq!(names.len(), TRACED.len());
        assert!(TRACED[LIFECYCLE..WITNESSED]
            .iter()
            .all(|i| i.scope == Scope::Instance));
        assert!(TRACED[WITNESSED..].iter().all(|i| i.scope == Scope::Device));
    }

    #[test]
    fn the_design_list_is_covered() {
        for name in [
            c"vkCreateBuffer",
            c"vkAllocateMemory",
            c"vkCreateEvent",
            c"vkCreateSemaphore",
            c"vkCreateFence",
            c"vkCreateCommandPool",
            c"vkCreateDescriptorPool",
            c"vkCreateComputePipelines",
        ] {
            assert!(Intercept::find(TRACED, name, true).is_some(), "{name:?}");
        }
    }
}
