//! The mock's real Vulkan: an instance and a device, so the validation layer demonstrably loads,
//! and deliberately invalid calls for `--vuid` and `--vuids`. By default no debug messenger is
//! installed; `--silent-messenger` installs one that swallows every message, as an application
//! that hides validation does, to show the layer's own log still gets them.

use std::sync::atomic::{AtomicU64, Ordering};

use ash::vk;
use vkexit_fixtures::{setup_failed, step};

/// The VUID `--vuid` provokes, as layer 1.3.239 names it (newer layers say `-05137`).
pub const VUID_DESTROY_DEVICE_WITH_CHILD: &str = "VUID-vkDestroyDevice-device-00378";

/// Messages the silent messenger was handed, and how many of them were validation errors, for the
/// log line at its destruction.
static SWALLOWED: AtomicU64 = AtomicU64::new(0);
static SWALLOWED_ERRORS: AtomicU64 = AtomicU64::new(0);

/// The mock's Vulkan objects: an instance, perhaps a device and buffers, and its messenger.
pub struct MockVulkan {
    // Dropping the entry unloads the Vulkan loader, so it lives exactly as long as the objects.
    _entry: ash::Entry,
    instance: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    device: ash::Device,
    live_buffers: Vec<vk::Buffer>,
}

impl MockVulkan {
    /// Creates an instance and a device on physical device `index`, then `live_buffers` buffers
    /// that are never destroyed; with `silent_messenger`, a debug messenger that swallows every
    /// message; with `disable_validation`, the instance asks the validation layer to check
    /// nothing; with `layer_settings`, an empty VkLayerSettingsCreateInfoEXT is chained into the
    /// instance's `pNext`. Failure ends the mock as a failed setup.
    pub fn create(
        index: u32,
        live_buffers: u32,
        silent_messenger: bool,
        disable_validation: bool,
        layer_settings: bool,
    ) -> MockVulkan {
        step!("load the Vulkan loader");
        // SAFETY: loads libvulkan.so.1 with dlopen; its initialisers are the loader's own.
        let entry = unsafe { ash::Entry::load() }
            .unwrap_or_else(|err| setup_failed(format_args!("loading Vulkan: {err}")));

        step!("create VkInstance");
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkexit-mock")
            .api_version(vk::API_VERSION_1_0);
        let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
        let enabled = if silent_messenger {
            &extensions[..]
        } else {
            &[]
        };
        let disable_all = [vk::ValidationFeatureDisableEXT::ALL];
        let mut features =
            vk::ValidationFeaturesEXT::default().disabled_validation_features(&disable_all);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_extension_names(enabled);
        if disable_validation {
            step!(
                "ask the validation layer to check nothing (VkValidationFeaturesEXT DISABLE_ALL)"
            );
            info = info.push_next(&mut features);
        }
        let mut settings = vk::LayerSettingsCreateInfoEXT::default();
        if layer_settings {
            step!("chain VkLayerSettingsCreateInfoEXT (no setting) into VkInstanceCreateInfo");
            info = info.push_next(&mut settings);
        }
        // SAFETY: `info`, the `app`, the extension names, the features and the settings it points
        // to outlive the call.
        let instance = unsafe { entry.create_instance(&info, None) }
            .unwrap_or_else(|err| vk_failed("vkCreateInstance", err));
        let messenger = silent_messenger.then(|| create_silent_messenger(&entry, &instance));

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

        if live_buffers > 0 {
            step!("create {live_buffers} 4096-byte VkBuffer(s) that are never destroyed");
        }
        let info = vk::BufferCreateInfo::default()
            .size(4096)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let live_buffers = (0..live_buffers)
            // SAFETY: `device` is live; `info` outlives the call.
            .map(|_| unsafe { device.create_buffer(&info, None) })
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|err| vk_failed("vkCreateBuffer", err));
        MockVulkan {
            _entry: entry,
            instance,
            messenger,
            device,
            live_buffers,
        }
    }

    /// Destroys what was created, children first, except buffers left alive on purpose: then
    /// vkDestroyDevice runs with live children, one VUID each, which the validation layer
    /// reports.
    pub fn destroy(self) {
        match self.live_buffers.len() {
            0 => step!("destroy VkDevice"),
            n => step!(
                "destroy VkDevice while {n} VkBuffer(s) are alive (expect {VUID_DESTROY_DEVICE_WITH_CHILD} ×{n})"
            ),
        }
        // SAFETY: the device is idle (nothing was ever submitted) and destroyed once; live
        // buffers are the invalid usage `--vuid` asks for, which the layer reports rather than
        // crashes on, and lavapipe tolerates.
        unsafe { self.device.destroy_device(None) };
        if let Some((loader, messenger)) = self.messenger {
            let all = SWALLOWED.load(Ordering::Relaxed);
            let errors = SWALLOWED_ERRORS.load(Ordering::Relaxed);
            step!("destroy the silent debug messenger; it swallowed {errors} validation error(s) among {all} message(s)");
            // SAFETY: the messenger belongs to the live instance and is destroyed once.
            unsafe { loader.destroy_debug_utils_messenger(messenger, None) };
        }
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

/// Creates a VkInstance and destroys it at once, `when` says when (for the log): the
/// validation layer opens its log again for it, as a program that probes the driver does.
pub fn short_lived_instance(when: &str) {
    step!("create and destroy a second VkInstance {when}");
    // SAFETY: loads libvulkan.so.1 with dlopen (again, if the first instance holds it).
    let entry = unsafe { ash::Entry::load() }
        .unwrap_or_else(|err| setup_failed(format_args!("loading Vulkan: {err}")));
    let app = vk::ApplicationInfo::default()
        .application_name(c"vkexit-mock-second")
        .api_version(vk::API_VERSION_1_0);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: `info` and the `app` it points to outlive the call.
    let instance = unsafe { entry.create_instance(&info, None) }
        .unwrap_or_else(|err| vk_failed("vkCreateInstance", err));
    // SAFETY: the instance has no children and is destroyed once.
    unsafe { instance.destroy_instance(None) };
}

/// Installs the application's own messenger for every severity and type; its callback swallows
/// each message.
fn create_silent_messenger(
    entry: &ash::Entry,
    instance: &ash::Instance,
) -> (ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT) {
    step!("install a debug messenger that swallows every message");
    let loader = ash::ext::debug_utils::Instance::new(entry, instance);
    let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::VERBOSE
                | vk::DebugUtilsMessageSeverityFlagsEXT::INFO
                | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(swallow_message));
    // SAFETY: the instance was created with VK_EXT_debug_utils enabled; `info` outlives the call
    // and its callback is a static function.
    let messenger = unsafe { loader.create_debug_utils_messenger(&info, None) }
        .unwrap_or_else(|err| vk_failed("vkCreateDebugUtilsMessengerEXT", err));
    (loader, messenger)
}

/// The application's callback: counts the message and drops it. Returning VK_FALSE lets the
/// call that raised it go on, as the spec requires of an application callback.
unsafe extern "system" fn swallow_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    _data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut std::ffi::c_void,
) -> vk::Bool32 {
    SWALLOWED.fetch_add(1, Ordering::Relaxed);
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
        && types.contains(vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION)
    {
        SWALLOWED_ERRORS.fetch_add(1, Ordering::Relaxed);
    }
    vk::FALSE
}

fn vk_failed(call: &str, err: vk::Result) -> ! {
    setup_failed(format_args!("{call}: {err}"))
}
