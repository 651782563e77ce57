//! Which Vulkan functions a layer intercepts.

use std::ffi::CStr;

/// Any Vulkan entry point, as `vkGet*ProcAddr` returns it.
pub type VoidFn = unsafe extern "system" fn();

/// Whether a function is dispatched on an instance (or physical device) or on a device.
///
/// `vkGetInstanceProcAddr` returns intercepted functions of both scopes; `vkGetDeviceProcAddr`
/// only those of [`Scope::Device`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Global, instance and physical-device functions (`vkCreateInstance`, `vkCreateDevice`, …).
    Instance,
    /// Functions on a `VkDevice`, `VkQueue` or `VkCommandBuffer` (`vkDestroyDevice`, …).
    Device,
}

/// One function a layer intercepts: its Vulkan name, scope, and the layer's implementation.
///
/// Make one with [`intercept!`](crate::intercept!), which checks the function against its
/// `PFN_vk*` type.
#[derive(Clone, Copy, Debug)]
pub struct Intercept {
    /// The Vulkan name, such as `c"vkCreateDevice"`.
    pub name: &'static CStr,
    /// Where the function is dispatched.
    pub scope: Scope,
    /// The layer's function, cast to the generic entry-point type.
    pub pfn: VoidFn,
}

impl Intercept {
    /// The layer's function for `name` in `table`, if intercepted; `device_only` restricts the
    /// search to [`Scope::Device`] (the answer of `vkGetDeviceProcAddr`).
    pub fn find(table: &[Intercept], name: &CStr, device_only: bool) -> Option<VoidFn> {
        table
            .iter()
            .find(|i| i.name == name && (!device_only || i.scope == Scope::Device))
            .map(|i| i.pfn)
    }
}

/// The names every layer must intercept itself, whatever the next layer supports.
pub(crate) const ALWAYS_OURS: [&CStr; 6] = [
    c"vkGetInstanceProcAddr",
    c"vkGetDeviceProcAddr",
    c"vkCreateInstance",
    c"vkDestroyInstance",
    c"vkCreateDevice",
    c"vkDestroyDevice",
];

/// Builds an [`Intercept`]: `intercept!(instance "vkCreateDevice", create_device: vk::PFN_vkCreateDevice)`
/// or `intercept!(device "vkDestroyDevice", destroy_device: vk::PFN_vkDestroyDevice)`.
///
/// The function is first coerced to its `PFN_vk*` type, so a wrong signature does not compile.
/// Usable in a `static`.
#[macro_export]
macro_rules! intercept {
    (instance $name:literal, $f:expr => $pfn:ty) => {
        $crate::intercept!(@make $crate::Scope::Instance, $name, $f, $pfn)
    };
    (device $name:literal, $f:expr => $pfn:ty) => {
        $crate::intercept!(@make $crate::Scope::Device, $name, $f, $pfn)
    };
    (@make $scope:expr, $name:literal, $f:expr, $pfn:ty) => {
        $crate::Intercept {
            name: match ::core::ffi::CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("a Vulkan function name has no NUL inside"),
            },
            scope: $scope,
            pfn: {
                let typed: $pfn = $f;
                // SAFETY: every `PFN_vk*` is a non-null `unsafe extern "system" fn` pointer, the
                // same size and representation as `VoidFn`; callers cast it back before use.
                unsafe { ::core::mem::transmute::<$pfn, $crate::VoidFn>(typed) }
            },
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk;

    unsafe extern "system" fn create_device(
        _: vk::PhysicalDevice,
        _: *const vk::DeviceCreateInfo,
        _: *const vk::AllocationCallbacks,
        _: *mut vk::Device,
    ) -> vk::Result {
        vk::Result::SUCCESS
    }

    unsafe extern "system" fn destroy_device(_: vk::Device, _: *const vk::AllocationCallbacks) {}

    static TABLE: &[Intercept] = &[
        intercept!(instance "vkCreateDevice", create_device => vk::PFN_vkCreateDevice),
        intercept!(device "vkDestroyDevice", destroy_device => vk::PFN_vkDestroyDevice),
    ];

    #[test]
    fn instance_lookup_sees_both_scopes_device_lookup_only_device() {
        assert_eq!(TABLE[0].name, c"vkCreateDevice");
        assert!(Intercept::find(TABLE, c"vkCreateDevice", false).is_some());
        assert!(Intercept::find(TABLE, c"vkDestroyDevice", false).is_some());
        assert!(Intercept::find(TABLE, c"vkCreateDevice", true).is_none());
        assert!(Intercept::find(TABLE, c"vkDestroyDevice", true).is_some());
        assert!(Intercept::find(TABLE, c"vkQueueSubmit", false).is_none());
    }

    #[test]
    fn the_pointer_is_the_layers_function() {
        let pfn = Intercept::find(TABLE, c"vkDestroyDevice", true).unwrap();
        assert_eq!(pfn as usize, destroy_device as *const () as usize);
    }
}
