//! The mock's real Vulkan: an instance and a device, so the validation layer demonstrably loads,
//! and one deliberately invalid call for `--vuid`. No debug messenger is installed: an
//! application's messenger would silence the layer's own log.

use ash::vk;
use vkexit_fixtures::{setup_failed, step};

/// The VUID `--vuid` provokes, as layer 1.3.239 names it (newer layers say `-05137`).
pub const VUID_DESTROY_DEVICE_WITH_CHILD: &str = "VUID-vkDestroyDevice-device-00378";

pub struct MockVulkan {
    // Dropping the entry unloads the Vulkan loader, so it lives exactly as long as the objects.
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    buffer: Option<vk::Buffer>,
}

impl MockVulkan {
    /// Creates an instance and a device on physical device `index`; with `live_buffer`, also a
    /// buffer that is never destroyed. Failure ends the mock as a failed setup.
    pub fn create(index: u32, live_buffer: bool) -> MockVulkan {
        step!("load the Vulkan loader");
        // SAFETY: loads libvulkan.so.1 with dlopen; its initialisers are the loader's own.
        let entry = unsafe { ash::Entry::load() }
            .unwrap_or_else(|err| setup_failed(format_args!("loading Vulkan: {err}")));

        step!("create VkInstance");
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkexit-mock")
            .api_version(vk::API_VERSION_1_0);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: `info` and the `app` it points to outlive the call.
        let instance = unsafe { entry.create_instance(&info, None) }
            .unwrap_or_else(|err| vk_failed("vkCreateInstance", err));

        // SAFETY: `instance` is a live instance.
        let physical = unsafe { instance.enumerate_physical_devices() }
            .unwrap_or_else(|err| vk_failed("vkEnumeratePhysicalDevices", err));
        let Some(&physical) = physical.get(index as usize) else {
            setup_failed(format_args!(
                "no physical device {index}: the instance has {}",
                physical.len()
            ))
        };
        // SAFETY: `physical` was just enumerated from `instance`.
        let properties = unsafe { instance.get_physical_device_properties(physical) };
        let name = properties
            .device_name_as_c_str()
            .map(|n| n.to_string_lossy().into_owned());
        step!(
            "create VkDevice on physical device {index}: {}",
            name.as_deref().unwrap_or("(unnamed)")
        );
        let priorities = [1.0f32];
        // Family 0 exists on every device; the mock runs no work, so its capabilities do not matter.
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: `physical` belongs to `instance`; `info` and what it points to outlive the call.
        let device = unsafe { instance.create_device(physical, &info, None) }
            .unwrap_or_else(|err| vk_failed("vkCreateDevice", err));

        let buffer = live_buffer.then(|| {
            step!("create a 4096-byte VkBuffer that is never destroyed");
            let info = vk::BufferCreateInfo::default()
                .size(4096)
                .usage(vk::BufferUsageFlags::STORAGE_BUFFER)
                .sharing_mode(vk::SharingMode::EXCLUSIVE);
            // SAFETY: `device` is live; `info` outlives the call.
            unsafe { device.create_buffer(&info, None) }
                .unwrap_or_else(|err| vk_failed("vkCreateBuffer", err))
        });
        MockVulkan {
            _entry: entry,
            instance,
            device,
            buffer,
        }
    }

    /// Destroys what was created, children first, except a buffer left alive on purpose: then
    /// vkDestroyDevice runs with a live child, which the validation layer reports.
    pub fn destroy(self) {
        if self.buffer.is_some() {
            step!("destroy VkDevice while a VkBuffer is alive (expect {VUID_DESTROY_DEVICE_WITH_CHILD})");
        } else {
            step!("destroy VkDevice");
        }
        // SAFETY: the device is idle (nothing was ever submitted) and destroyed once; a live
        // buffer is the invalid usage `--vuid` asks for, which the layer reports rather than
        // crashes on, and lavapipe tolerates.
        unsafe { self.device.destroy_device(None) };
        step!("destroy VkInstance");
        // SAFETY: its only device is destroyed above; the instance is destroyed once.
        unsafe { self.instance.destroy_instance(None) };
    }

    /// Leaves instance and device alive for the rest of the process, loader included.
    pub fn keep(self) {
        step!("keep VkInstance and VkDevice alive at exit");
        std::mem::forget(self);
    }
}

fn vk_failed(call: &str, err: vk::Result) -> ! {
    setup_failed(format_args!("{call}: {err}"))
}
