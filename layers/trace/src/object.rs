//! The Vulkan object types the layer tracks, named as the specification names them.

/// An object type whose create and destroy calls the layer records.
// Each variant is the Vulkan handle type of the same name (`Buffer` is `VkBuffer`).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectType {
    Instance,
    Device,
    DeviceMemory,
    Buffer,
    BufferView,
    Image,
    ImageView,
    Event,
    Semaphore,
    Fence,
    CommandPool,
    CommandBuffer,
    DescriptorPool,
    DescriptorSet,
    DescriptorSetLayout,
    PipelineLayout,
    Pipeline,
    PipelineCache,
    ShaderModule,
    QueryPool,
    Sampler,
}

impl ObjectType {
    /// The type's name in the specification, as written in records and messages.
    pub const fn name(self) -> &'static str {
        match self {
            ObjectType::Instance => "VkInstance",
            ObjectType::Device => "VkDevice",
            ObjectType::DeviceMemory => "VkDeviceMemory",
            ObjectType::Buffer => "VkBuffer",
            ObjectType::BufferView => "VkBufferView",
            ObjectType::Image => "VkImage",
            ObjectType::ImageView => "VkImageView",
            ObjectType::Event => "VkEvent",
            ObjectType::Semaphore => "VkSemaphore",
            ObjectType::Fence => "VkFence",
            ObjectType::CommandPool => "VkCommandPool",
            ObjectType::CommandBuffer => "VkCommandBuffer",
            ObjectType::DescriptorPool => "VkDescriptorPool",
            ObjectType::DescriptorSet => "VkDescriptorSet",
            ObjectType::DescriptorSetLayout => "VkDescriptorSetLayout",
            ObjectType::PipelineLayout => "VkPipelineLayout",
            ObjectType::Pipeline => "VkPipeline",
            ObjectType::PipelineCache => "VkPipelineCache",
            ObjectType::ShaderModule => "VkShaderModule",
            ObjectType::QueryPool => "VkQueryPool",
            ObjectType::Sampler => "VkSampler",
        }
    }

    /// Whether destroying an object of this type frees its children with it, as
    /// `vkDestroyCommandPool` frees the pool's command buffers (and, for a descriptor pool,
    /// `vkResetDescriptorPool` its sets).
    pub const fn frees_children(self) -> bool {
        matches!(self, ObjectType::CommandPool | ObjectType::DescriptorPool)
    }

    /// Whether the handle is a pointer to loader memory (dispatchable), whose value the
    /// allocator may hand out again once the object is destroyed.
    pub const fn is_dispatchable(self) -> bool {
        matches!(
            self,
            ObjectType::Instance | ObjectType::Device | ObjectType::CommandBuffer
        )
    }
}
