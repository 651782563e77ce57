//! The layer chain: the next layer's entry points, how to create the next instance and device,
//! and the answers to `vkGetInstanceProcAddr`/`vkGetDeviceProcAddr`.

use crate::handles::HandleMap;
use crate::intercept::{Intercept, ALWAYS_OURS};
use ash::vk;
use ash_layer::{LayerDeviceCreateInfo, LayerFunction, LayerInstanceCreateInfo};
use std::ffi::{c_char, c_void, CStr};
use std::mem;
use std::sync::Arc;

/// The next layer's view of one `VkInstance`: its `vkGetInstanceProcAddr` and function table.
pub struct NextInstance {
    /// The instance handle, as the application sees it.
    pub handle: vk::Instance,
    /// The next layer's `vkGetInstanceProcAddr`, from this instance's link.
    pub get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    /// The instance functions of the next layer (Vulkan 1.0 to 1.3).
    pub fns: ash::Instance,
}

impl NextInstance {
    /// Calls the next layer's `vkDestroyInstance`.
    ///
    /// # Safety
    /// As `vkDestroyInstance`: every device of the instance is gone, `p_allocator` is the one
    /// the application passed.
    pub unsafe fn destroy(&self, p_allocator: *const vk::AllocationCallbacks) {
        // SAFETY: forwarded from the application's own valid call.
        unsafe { (self.fns.fp_v1_0().destroy_instance)(self.handle, p_allocator) }
    }
}

/// The next layer's view of one `VkDevice`: its `vkGetDeviceProcAddr` and function table.
pub struct NextDevice {
    /// The device handle, as the application sees it.
    pub handle: vk::Device,
    /// The instance the device was created from.
    pub instance: vk::Instance,
    /// The physical device the device was created on.
    pub physical_device: vk::PhysicalDevice,
    /// The next layer's `vkGetDeviceProcAddr`, from this device's link.
    pub get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
    /// The device functions of the next layer (Vulkan 1.0 to 1.3).
    pub fns: ash::Device,
}

impl NextDevice {
    /// Calls the next layer's `vkDestroyDevice`.
    ///
    /// # Safety
    /// As `vkDestroyDevice`: `p_allocator` is the one the application passed.
    pub unsafe fn destroy(&self, p_allocator: *const vk::AllocationCallbacks) {
        // SAFETY: forwarded from the application's own valid call.
        unsafe { (self.fns.fp_v1_0().destroy_device)(self.handle, p_allocator) }
    }
}

/// Finds this layer's `VK_LAYER_LINK_INFO` in a `VkInstanceCreateInfo` chain, returns the next
/// layer's `vkGetInstanceProcAddr` and advances the link for the next layer.
///
/// # Safety
/// `p_create_info` must be the create info the loader passed to this layer's `vkCreateInstance`.
pub unsafe fn take_instance_link(
    p_create_info: *const vk::InstanceCreateInfo,
) -> Option<vk::PFN_vkGetInstanceProcAddr> {
    // SAFETY: the loader's create info is valid for the call; its p_next chain holds the
    // loader's own `VkLayerInstanceCreateInfo`, which is writable and meant to be advanced.
    unsafe {
        let mut next = p_create_info.as_ref()?.p_next;
        while let Some(info) = next.cast::<LayerInstanceCreateInfo>().cast_mut().as_mut() {
            if info.s_type == vk::StructureType::LOADER_INSTANCE_CREATE_INFO
                && info.function == LayerFunction::LAYER_LINK_INFO
            {
                let link = info.u.p_layer_info.as_ref()?;
                info.u.p_layer_info = link.p_next;
                return link.pfn_next_get_instance_proc_addr;
            }
            next = info.p_next;
        }
        None
    }
}

/// Finds this layer's `VK_LAYER_LINK_INFO` in a `VkDeviceCreateInfo` chain, returns the next
/// layer's `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr` and advances the link.
///
/// # Safety
/// `p_create_info` must be the create info the loader passed to this layer's `vkCreateDevice`.
pub unsafe fn take_device_link(
    p_create_info: *const vk::DeviceCreateInfo,
) -> Option<(vk::PFN_vkGetInstanceProcAddr, vk::PFN_vkGetDeviceProcAddr)> {
    // SAFETY: as in `take_instance_link`, for the loader's `VkLayerDeviceCreateInfo`.
    unsafe {
        let mut next = p_create_info.as_ref()?.p_next;
        while let Some(info) = next.cast::<LayerDeviceCreateInfo>().cast_mut().as_mut() {
            if info.s_type == vk::StructureType::LOADER_DEVICE_CREATE_INFO
                && info.function == LayerFunction::LAYER_LINK_INFO
            {
                let link = info.u.p_layer_info.as_ref()?;
                info.u.p_layer_info = link.p_next;
                return Some((
                    link.pfn_next_get_instance_proc_addr?,
                    link.pfn_next_get_device_proc_addr?,
                ));
            }
            next = info.p_next;
        }
        None
    }
}

/// A layer's place in the chain: every instance and device it sits in, with the next layer's
/// functions for each, and which instance each physical device belongs to.
///
/// One per layer, as a `static`. It only tracks the chain; layer-specific state belongs in the
/// layer's own [`HandleMap`]s.
pub struct Chain {
    instances: HandleMap<vk::Instance, NextInstance>,
    devices: HandleMap<vk::Device, NextDevice>,
    physical_devices: HandleMap<vk::PhysicalDevice, vk::Instance>,
}

impl Chain {
    /// An empty chain.
    pub const fn new() -> Self {
        Self {
            instances: HandleMap::new(),
            devices: HandleMap::new(),
            physical_devices: HandleMap::new(),
        }
    }

    /// Creates the instance through the next layer (call from the layer's `vkCreateInstance`)
    /// and records it. On failure the next layer's `VkResult` is returned, or
    /// `VK_ERROR_INITIALIZATION_FAILED` when the loader gave no link.
    ///
    /// # Safety
    /// The arguments are those the loader passed to the layer's `vkCreateInstance`.
    pub unsafe fn create_instance(
        &self,
        p_create_info: *const vk::InstanceCreateInfo,
        p_allocator: *const vk::AllocationCallbacks,
        p_instance: *mut vk::Instance,
    ) -> Result<Arc<NextInstance>, vk::Result> {
        // SAFETY: the loader's arguments, used as the loader-layer interface prescribes.
        let next = unsafe { create_next_instance(p_create_info, p_allocator, p_instance) }?;
        let handle = next.handle;
        let (next, _) = self.instances.insert(handle, next);
        self.note_physical_devices(&next);
        Ok(next)
    }

    /// Forgets an instance (call from the layer's `vkDestroyInstance`, then call
    /// [`NextInstance::destroy`] on the result).
    pub fn remove_instance(&self, instance: vk::Instance) -> Option<Arc<NextInstance>> {
        self.physical_devices
            .remove_where(|_, owner| *owner == instance);
        self.instances.remove(instance)
    }

    /// The next layer's view of `instance`.
    pub fn instance(&self, instance: vk::Instance) -> Option<Arc<NextInstance>> {
        self.instances.get(instance)
    }

    /// The instance `physical_device` belongs to. Physical devices are enumerated when the
    /// instance is created, and again when an unknown one shows up.
    pub fn instance_of(&self, physical_device: vk::PhysicalDevice) -> Option<Arc<NextInstance>> {
        if let Some(owner) = self.physical_devices.get(physical_device) {
            return self.instances.get(*owner);
        }
        for (_, instance) in self.instances.entries() {
            self.note_physical_devices(&instance);
        }
        let owner = self.physical_devices.get(physical_device)?;
        self.instances.get(*owner)
    }

    /// Creates the device through the next layer (call from the layer's `vkCreateDevice`) and
    /// records it. Fails with `VK_ERROR_INITIALIZATION_FAILED` when the physical device's
    /// instance is unknown or the loader gave no link.
    ///
    /// # Safety
    /// The arguments are those the loader passed to the layer's `vkCreateDevice`.
    pub unsafe fn create_device(
        &self,
        physical_device: vk::PhysicalDevice,
        p_create_info: *const vk::DeviceCreateInfo,
        p_allocator: *const vk::AllocationCallbacks,
        p_device: *mut vk::Device,
    ) -> Result<Arc<NextDevice>, vk::Result> {
        let instance = self
            .instance_of(physical_device)
            .ok_or(vk::Result::ERROR_INITIALIZATION_FAILED)?;
        // SAFETY: the loader's arguments, used as the loader-layer interface prescribes.
        let next = unsafe {
            create_next_device(
                &instance,
                physical_device,
                p_create_info,
                p_allocator,
                p_device,
            )
        }?;
        Ok(self.devices.insert(next.handle, next).0)
    }

    /// Forgets a device (call from the layer's `vkDestroyDevice`, then call
    /// [`NextDevice::destroy`] on the result).
    pub fn remove_device(&self, device: vk::Device) -> Option<Arc<NextDevice>> {
        self.devices.remove(device)
    }

    /// The next layer's view of `device`.
    pub fn device(&self, device: vk::Device) -> Option<Arc<NextDevice>> {
        self.devices.get(device)
    }

    /// Every device the layer currently sits in.
    pub fn devices(&self) -> Vec<Arc<NextDevice>> {
        self.devices.entries().into_iter().map(|(_, d)| d).collect()
    }

    /// The answer of the layer's `vkGetInstanceProcAddr`: the layer's own function when `name`
    /// is in `intercepts`, otherwise the next layer's.
    ///
    /// An intercepted function the next layer does not provide for a known instance is not
    /// offered either, except the six every layer must answer itself (`vkGetInstanceProcAddr`,
    /// `vkGetDeviceProcAddr`, `vkCreateInstance`, `vkDestroyInstance`, `vkCreateDevice`,
    /// `vkDestroyDevice`).
    ///
    /// # Safety
    /// `name` must be a NUL-terminated string.
    pub unsafe fn instance_proc_addr(
        &self,
        intercepts: &[Intercept],
        instance: vk::Instance,
        name: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        if name.is_null() {
            return None;
        }
        // SAFETY: the caller passes a NUL-terminated name.
        let name_str = unsafe { CStr::from_ptr(name) };
        let next = self.instances.get(instance);
        let from_next = || {
            next.as_ref().and_then(|n| {
                // SAFETY: a next layer's GIPA called with its own instance and a valid name.
                unsafe { (n.get_instance_proc_addr)(instance, name) }
            })
        };
        match Intercept::find(intercepts, name_str, false) {
            Some(ours) if next.is_none() || ALWAYS_OURS.contains(&name_str) => Some(ours),
            Some(ours) => from_next().map(|_| ours),
            None => from_next(),
        }
    }

    /// The answer of the layer's `vkGetDeviceProcAddr`: the layer's own function when `name`
    /// is a device-scope entry of `intercepts`, otherwise the next layer's.
    ///
    /// # Safety
    /// `name` must be a NUL-terminated string.
    pub unsafe fn device_proc_addr(
        &self,
        intercepts: &[Intercept],
        device: vk::Device,
        name: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        if name.is_null() {
            return None;
        }
        // SAFETY: the caller passes a NUL-terminated name.
        let name_str = unsafe { CStr::from_ptr(name) };
        let next = self.devices.get(device)?;
        // SAFETY: a next layer's GDPA called with its own device and a valid name.
        let from_next = unsafe { (next.get_device_proc_addr)(device, name) };
        match Intercept::find(intercepts, name_str, true) {
            Some(ours) if ALWAYS_OURS.contains(&name_str) => Some(ours),
            Some(ours) => from_next.map(|_| ours),
            None => from_next,
        }
    }

    fn note_physical_devices(&self, instance: &NextInstance) {
        // SAFETY: enumerating physical devices of a live instance, through the next layer.
        if let Ok(physical_devices) = unsafe { instance.fns.enumerate_physical_devices() } {
            for physical_device in physical_devices {
                self.physical_devices
                    .insert(physical_device, instance.handle);
            }
        }
    }
}

impl Default for Chain {
    fn default() -> Self {
        Self::new()
    }
}

/// # Safety
/// As [`Chain::create_instance`].
unsafe fn create_next_instance(
    p_create_info: *const vk::InstanceCreateInfo,
    p_allocator: *const vk::AllocationCallbacks,
    p_instance: *mut vk::Instance,
) -> Result<NextInstance, vk::Result> {
    let failed = vk::Result::ERROR_INITIALIZATION_FAILED;
    // SAFETY: the loader's create info, walked once by this layer.
    let gipa = unsafe { take_instance_link(p_create_info) }.ok_or(failed)?;
    // SAFETY: vkCreateInstance is a global command, queried with a null instance.
    let create =
        unsafe { gipa(vk::Instance::null(), c"vkCreateInstance".as_ptr()) }.ok_or(failed)?;
    // SAFETY: the next layer's vkCreateInstance has this type.
    let create: vk::PFN_vkCreateInstance = unsafe { mem::transmute(create) };
    // SAFETY: forwarding the application's arguments, with the link advanced.
    let result = unsafe { create(p_create_info, p_allocator, p_instance) };
    if result != vk::Result::SUCCESS {
        return Err(result);
    }
    // SAFETY: on success the next layer wrote the new handle to p_instance.
    let handle = unsafe { *p_instance };
    let static_fn = ash::StaticFn {
        get_instance_proc_addr: gipa,
    };
    // SAFETY: loads the next layer's instance functions for the instance it just created.
    let fns = unsafe { ash::Instance::load(&static_fn, handle) };
    Ok(NextInstance {
        handle,
        get_instance_proc_addr: gipa,
        fns,
    })
}

/// # Safety
/// As [`Chain::create_device`].
unsafe fn create_next_device(
    instance: &NextInstance,
    physical_device: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo,
    p_allocator: *const vk::AllocationCallbacks,
    p_device: *mut vk::Device,
) -> Result<NextDevice, vk::Result> {
    let failed = vk::Result::ERROR_INITIALIZATION_FAILED;
    // SAFETY: the loader's create info, walked once by this layer.
    let (gipa, gdpa) = unsafe { take_device_link(p_create_info) }.ok_or(failed)?;
    // SAFETY: querying the next layer's vkCreateDevice for the instance it created.
    let create = unsafe { gipa(instance.handle, c"vkCreateDevice".as_ptr()) }.ok_or(failed)?;
    // SAFETY: the next layer's vkCreateDevice has this type.
    let create: vk::PFN_vkCreateDevice = unsafe { mem::transmute(create) };
    // SAFETY: forwarding the application's arguments, with the link advanced.
    let result = unsafe { create(physical_device, p_create_info, p_allocator, p_device) };
    if result != vk::Result::SUCCESS {
        return Err(result);
    }
    // SAFETY: on success the next layer wrote the new handle to p_device.
    let handle = unsafe { *p_device };
    let load = |name: &CStr| -> *const c_void {
        // SAFETY: the next layer's GDPA for the device it just created; a null result
        // stays null (ash then panics only if the missing function is called).
        unsafe { mem::transmute(gdpa(handle, name.as_ptr())) }
    };
    // SAFETY: loads the next layer's device functions through this device's own GDPA.
    let fns = unsafe { ash::Device::load_with(load, handle) };
    Ok(NextDevice {
        handle,
        instance: instance.handle,
        physical_device,
        get_device_proc_addr: gdpa,
        fns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk::Handle;
    use ash_layer::{LayerDeviceCreateInfoUnion, LayerDeviceLink, LayerInstanceLink};
    use std::ptr;

    unsafe extern "system" fn next_gipa(
        _: vk::Instance,
        _: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        None
    }
    unsafe extern "system" fn other_gipa(
        _: vk::Instance,
        _: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        None
    }
    unsafe extern "system" fn next_gdpa(_: vk::Device, _: *const c_char) -> vk::PFN_vkVoidFunction {
        None
    }

    #[test]
    fn instance_link_is_found_behind_other_structs_and_advanced() {
        let mut below = LayerInstanceLink {
            p_next: ptr::null_mut(),
            pfn_next_get_instance_proc_addr: Some(other_gipa),
            pfn_next_get_physical_device_proc_addr: None,
        };
        let mut ours = LayerInstanceLink {
            p_next: &mut below,
            pfn_next_get_instance_proc_addr: Some(next_gipa),
            pfn_next_get_physical_device_proc_addr: None,
        };
        let mut link_info = LayerInstanceCreateInfo::default();
        link_info.u.p_layer_info = &mut ours;
        // A loader-data struct first, as the loader puts it in the chain too.
        let data_info = LayerInstanceCreateInfo {
            p_next: (&link_info as *const LayerInstanceCreateInfo).cast(),
            function: LayerFunction::LOADER_DATA_CALLBACK,
            ..Default::default()
        };
        let app_struct = vk::ValidationFeaturesEXT {
            p_next: (&data_info as *const LayerInstanceCreateInfo).cast(),
            ..Default::default()
        };
        let create_info = vk::InstanceCreateInfo {
            p_next: (&app_struct as *const vk::ValidationFeaturesEXT).cast(),
            ..Default::default()
        };

        // SAFETY: the chain above is built from valid local structs.
        let first = unsafe { take_instance_link(&create_info) }.unwrap();
        assert_eq!(first as usize, next_gipa as *const () as usize);
        // SAFETY: still valid; the link now points at the layer below.
        let second = unsafe { take_instance_link(&create_info) }.unwrap();
        assert_eq!(second as usize, other_gipa as *const () as usize);
        // SAFETY: still valid; the link is now null.
        assert!(unsafe { take_instance_link(&create_info) }.is_none());
    }

    #[test]
    fn device_link_gives_both_proc_addrs() {
        let mut ours = LayerDeviceLink {
            p_next: ptr::null_mut(),
            pfn_next_get_instance_proc_addr: Some(next_gipa),
            pfn_next_get_device_proc_addr: Some(next_gdpa),
        };
        let link_info = LayerDeviceCreateInfo {
            u: LayerDeviceCreateInfoUnion {
                p_layer_info: &mut ours,
            },
            ..Default::default()
        };
        let create_info = vk::DeviceCreateInfo {
            p_next: (&link_info as *const LayerDeviceCreateInfo).cast(),
            ..Default::default()
        };
        // SAFETY: the chain above is built from valid local structs.
        let (gipa, gdpa) = unsafe { take_device_link(&create_info) }.unwrap();
        assert_eq!(gipa as usize, next_gipa as *const () as usize);
        assert_eq!(gdpa as usize, next_gdpa as *const () as usize);
        // SAFETY: null create info is answered with None.
        let from_null = unsafe { take_device_link(ptr::null()) };
        assert!(from_null.is_none());
        // SAFETY: a create info without a link is answered with None.
        let from_plain = unsafe { take_device_link(&vk::DeviceCreateInfo::default()) };
        assert!(from_plain.is_none());
    }

    unsafe extern "system" fn our_create_instance(
        _: *const vk::InstanceCreateInfo,
        _: *const vk::AllocationCallbacks,
        _: *mut vk::Instance,
    ) -> vk::Result {
        vk::Result::SUCCESS
    }

    #[test]
    fn unknown_handles_get_only_intercepted_functions() {
        static CHAIN: Chain = Chain::new();
        static INTERCEPTS: &[Intercept] = &[crate::intercept!(
            instance "vkCreateInstance", our_create_instance => vk::PFN_vkCreateInstance
        )];
        // SAFETY: NUL-terminated names.
        unsafe {
            let ours = CHAIN.instance_proc_addr(
                INTERCEPTS,
                vk::Instance::null(),
                c"vkCreateInstance".as_ptr(),
            );
            assert_eq!(
                ours.unwrap() as usize,
                our_create_instance as *const () as usize
            );
            assert!(CHAIN
                .instance_proc_addr(INTERCEPTS, vk::Instance::null(), c"vkQueueSubmit".as_ptr())
                .is_none());
            assert!(CHAIN
                .device_proc_addr(
                    INTERCEPTS,
                    vk::Device::from_raw(0x10),
                    c"vkCreateInstance".as_ptr()
                )
                .is_none());
            assert!(CHAIN
                .instance_proc_addr(INTERCEPTS, vk::Instance::null(), ptr::null())
                .is_none());
        }
    }
}
