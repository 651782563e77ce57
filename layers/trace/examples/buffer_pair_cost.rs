//! Times `vkCreateBuffer` + `vkDestroyBuffer` pairs on the first device, and prints
//! `ns-per-pair: N` for whatever layers the environment enables. `tests/per_call_cost.rs` runs
//! it with and without the trace layer to measure what the layer adds.
//!
//! Usage: buffer_pair_cost [PAIRS]   (default 200000)

use std::time::Instant;

use ash::vk;

fn main() {
    let pairs: u32 = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("PAIRS is a number"))
        .unwrap_or(200_000);
    // SAFETY: loads the system's Vulkan loader; every call below follows the specification
    // and each object is destroyed before its parent.
    unsafe {
        let entry = ash::Entry::load().expect("the Vulkan loader (libvulkan.so.1)");
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .expect("vkCreateInstance");
        let physical = instance.enumerate_physical_devices().expect("devices")[0];
        let priorities = [1.0];
        let queue = vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&priorities);
        let queues = [queue];
        let device = instance
            .create_device(
                physical,
                &vk::DeviceCreateInfo::default().queue_create_infos(&queues),
                None,
            )
            .expect("vkCreateDevice");
        let info = vk::BufferCreateInfo::default()
            .size(4096)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
        let pair = || {
            let buffer = device.create_buffer(&info, None).expect("vkCreateBuffer");
            device.destroy_buffer(buffer, None);
        };
        for _ in 0..pairs / 10 {
            pair();
        }
        let start = Instant::now();
        for _ in 0..pairs {
            pair();
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(pairs);
        println!("ns-per-pair: {ns:.0}");
        device.destroy_device(None);
        instance.destroy_instance(None);
    }
}
