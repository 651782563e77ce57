//! A Rust test program (libtest) on the Vulkan API, the shape of a runtime's `cargo test`
//! teardown tests: each test makes an instance, a device and a buffer; one leaves its buffer
//! alive when the device is destroyed (VUID-vkDestroyDevice-device-00378 under validation).
//! Plain `cargo test` passes all of them; vkexit runs each in its own process under the layer.
//! It needs nothing but the Vulkan loader:
//!   rustc --edition 2021 --test -O suites/libtest/teardown.rs -o teardown-tests

use std::ffi::c_void;
use std::ptr::{null, null_mut};

type Instance = *mut c_void;
type PhysicalDevice = *mut c_void;
type Device = *mut c_void;
type Buffer = u64;

#[repr(C)]
struct ApplicationInfo {
    s_type: u32,
    next: *const c_void,
    application_name: *const u8,
    application_version: u32,
    engine_name: *const u8,
    engine_version: u32,
    api_version: u32,
}

#[repr(C)]
struct InstanceCreateInfo {
    s_type: u32,
    next: *const c_void,
    flags: u32,
    application_info: *const ApplicationInfo,
    layer_count: u32,
    layers: *const *const u8,
    extension_count: u32,
    extensions: *const *const u8,
}

#[repr(C)]
struct DeviceQueueCreateInfo {
    s_type: u32,
    next: *const c_void,
    flags: u32,
    family: u32,
    count: u32,
    priorities: *const f32,
}

#[repr(C)]
struct DeviceCreateInfo {
    s_type: u32,
    next: *const c_void,
    flags: u32,
    queue_info_count: u32,
    queue_infos: *const DeviceQueueCreateInfo,
    layer_count: u32,
    layers: *const *const u8,
    extension_count: u32,
    extensions: *const *const u8,
    features: *const c_void,
}

#[repr(C)]
struct BufferCreateInfo {
    s_type: u32,
    next: *const c_void,
    flags: u32,
    size: u64,
    usage: u32,
    sharing_mode: u32,
    family_count: u32,
    families: *const u32,
}

#[link(name = "vulkan")]
extern "C" {
    fn vkCreateInstance(info: *const InstanceCreateInfo, a: *const c_void, out: *mut Instance) -> i32;
    fn vkEnumeratePhysicalDevices(i: Instance, count: *mut u32, out: *mut PhysicalDevice) -> i32;
    fn vkCreateDevice(p: PhysicalDevice, info: *const DeviceCreateInfo, a: *const c_void, out: *mut Device) -> i32;
    fn vkCreateBuffer(d: Device, info: *const BufferCreateInfo, a: *const c_void, out: *mut Buffer) -> i32;
    fn vkDestroyBuffer(d: Device, b: Buffer, a: *const c_void);
    fn vkDestroyDevice(d: Device, a: *const c_void);
    fn vkDestroyInstance(i: Instance, a: *const c_void);
}

struct Gpu {
    instance: Instance,
    device: Device,
    buffer: Buffer,
}

impl Gpu {
    fn open(size: u64) -> Gpu {
        let app = ApplicationInfo {
            s_type: 0,
            next: null(),
            application_name: b"teardown-tests\0".as_ptr(),
            application_version: 1,
            engine_name: null(),
            engine_version: 0,
            api_version: 1 << 22 | 1 << 12, // 1.1
        };
        let info = InstanceCreateInfo {
            s_type: 1,
            next: null(),
            flags: 0,
            application_info: &app,
            layer_count: 0,
            layers: null(),
            extension_count: 0,
            extensions: null(),
        };
        let mut gpu = Gpu { instance: null_mut(), device: null_mut(), buffer: 0 };
        // SAFETY: every pointer points at a live local of the right layout for the call.
        unsafe {
            assert_eq!(vkCreateInstance(&info, null(), &mut gpu.instance), 0);
            let (mut count, mut physical) = (1u32, null_mut());
            let listed = vkEnumeratePhysicalDevices(gpu.instance, &mut count, &mut physical);
            assert!(listed >= 0 && count == 1, "no Vulkan device");
            let priority = 1.0f32;
            let queue = DeviceQueueCreateInfo {
                s_type: 2,
                next: null(),
                flags: 0,
                family: 0,
                count: 1,
                priorities: &priority,
            };
            let info = DeviceCreateInfo {
                s_type: 3,
                next: null(),
                flags: 0,
                queue_info_count: 1,
                queue_infos: &queue,
                layer_count: 0,
                layers: null(),
                extension_count: 0,
                extensions: null(),
                features: null(),
            };
            assert_eq!(vkCreateDevice(physical, &info, null(), &mut gpu.device), 0);
            let info = BufferCreateInfo {
                s_type: 12,
                next: null(),
                flags: 0,
                size,
                usage: 0x20, // STORAGE_BUFFER
                sharing_mode: 0,
                family_count: 0,
                families: null(),
            };
            assert_eq!(vkCreateBuffer(gpu.device, &info, null(), &mut gpu.buffer), 0);
        }
        gpu
    }

    /// Destroys the device and the instance; the buffer first only when asked.
    fn close(self, destroy_buffer: bool) {
        // SAFETY: the handles were made by `open` and are destroyed once, children first.
        unsafe {
            if destroy_buffer {
                vkDestroyBuffer(self.device, self.buffer, null());
            }
            vkDestroyDevice(self.device, null());
            vkDestroyInstance(self.instance, null());
        }
    }
}

mod teardown {
    use super::Gpu;

    #[test]
    fn destroys_its_buffer() {
        Gpu::open(4096).close(true);
    }

    #[test]
    fn keeps_its_buffer_at_device_destroy() {
        Gpu::open(4096).close(false);
    }

    #[test]
    #[ignore = "needs a machine with more than one GPU"]
    fn spreads_over_two_devices() {
        Gpu::open(4096).close(true);
    }
}
