//! `vkNegotiateLoaderLayerInterfaceVersion`: the loader's first call into a layer.

use ash::vk;
use ash_layer::{NegotiateLayerInterface, NegotiateLayerStructType};

/// The loader-layer interface version vkexit layers speak: version 2, where the loader gets the
/// layer's `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr` from the negotiation struct.
pub const LOADER_LAYER_INTERFACE_VERSION: u32 = 2;

/// Answers the loader's negotiation: interface version 2 and the layer's two entry points.
///
/// A loader that offers less than version 2 gets `VK_ERROR_INITIALIZATION_FAILED` (the loader
/// then skips the layer); one that offers more is told 2. The layer does not provide
/// `vk_layerGetPhysicalDeviceProcAddr`.
///
/// # Safety
/// `p_version_struct` must be null or point to a writable `VkNegotiateLayerInterface`, as the
/// loader passes it.
pub unsafe fn negotiate(
    p_version_struct: *mut NegotiateLayerInterface,
    get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
) -> vk::Result {
    // SAFETY: the caller promises null or a valid, exclusive pointer for this call.
    let Some(interface) = (unsafe { p_version_struct.as_mut() }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    answer(interface, get_instance_proc_addr, get_device_proc_addr)
}

fn answer(
    interface: &mut NegotiateLayerInterface,
    get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
) -> vk::Result {
    if interface.s_type != NegotiateLayerStructType::INTERFACE_STRUCT
        || interface.loader_layer_interface_version < LOADER_LAYER_INTERFACE_VERSION
    {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    interface.loader_layer_interface_version = LOADER_LAYER_INTERFACE_VERSION;
    interface.pfn_get_instance_proc_addr = Some(get_instance_proc_addr);
    interface.pfn_get_device_proc_addr = Some(get_device_proc_addr);
    interface.pfn_get_physical_device_proc_addr = None;
    vk::Result::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_char;
    use std::ptr;

    unsafe extern "system" fn gipa(_: vk::Instance, _: *const c_char) -> vk::PFN_vkVoidFunction {
        None
    }
    unsafe extern "system" fn gdpa(_: vk::Device, _: *const c_char) -> vk::PFN_vkVoidFunction {
        None
    }

    fn offered(version: u32) -> NegotiateLayerInterface {
        NegotiateLayerInterface {
            s_type: NegotiateLayerStructType::INTERFACE_STRUCT,
            p_next: ptr::null_mut(),
            loader_layer_interface_version: version,
            pfn_get_instance_proc_addr: None,
            pfn_get_device_proc_addr: None,
            pfn_get_physical_device_proc_addr: None,
        }
    }

    #[test]
    fn newer_loader_is_told_version_2_and_gets_both_entry_points() {
        let mut interface = offered(5);
        // SAFETY: a valid local struct.
        let result = unsafe { negotiate(&mut interface, gipa, gdpa) };
        assert_eq!(result, vk::Result::SUCCESS);
        assert_eq!(interface.loader_layer_interface_version, 2);
        assert!(interface.pfn_get_instance_proc_addr.is_some());
        assert!(interface.pfn_get_device_proc_addr.is_some());
        assert!(interface.pfn_get_physical_device_proc_addr.is_none());
    }

    #[test]
    fn older_loader_or_wrong_struct_is_refused() {
        let mut old = offered(1);
        // SAFETY: a valid local struct.
        let result = unsafe { negotiate(&mut old, gipa, gdpa) };
        assert_eq!(result, vk::Result::ERROR_INITIALIZATION_FAILED);
        assert_eq!(old.loader_layer_interface_version, 1);

        let mut wrong = offered(2);
        wrong.s_type = NegotiateLayerStructType::UNINTIALIZED;
        // SAFETY: a valid local struct.
        let result = unsafe { negotiate(&mut wrong, gipa, gdpa) };
        assert_eq!(result, vk::Result::ERROR_INITIALIZATION_FAILED);

        // SAFETY: null is allowed.
        let result = unsafe { negotiate(ptr::null_mut(), gipa, gdpa) };
        assert_eq!(result, vk::Result::ERROR_INITIALIZATION_FAILED);
    }
}
