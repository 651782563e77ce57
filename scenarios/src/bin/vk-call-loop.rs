//! Not an exit scenario: the timed loop behind `vkexit bench`'s per-call layer cost. On the
//! first device of whatever driver and layers the environment selects, it times
//! `vkCreateBuffer` + `vkDestroyBuffer` pairs (calls a layer tracks) and
//! `vkGetBufferMemoryRequirements` (a call no vkexit layer tracks), then prints
//!
//! ```text
//! tracked-ns-per-call: N
//! untracked-ns-per-call: N
//! tracked-cpu-ns-per-call: N
//! untracked-cpu-ns-per-call: N
//! ```
//!
//! (wall time, then the thread's CPU time, which other programs on the machine hardly move).
//!
//! Usage: vk-call-loop [PAIRS]   (default 200000; as many untracked calls as pairs × 2)

use std::time::Instant;

use ash::vk;

fn main() {
    let pairs: u32 = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("PAIRS is a number"))
        .unwrap_or(200_000)
        .max(10);
    // SAFETY: loads the system's Vulkan loader; every call below follows the specification and
    // each object is destroyed before its parent.
    unsafe {
        let entry = ash::Entry::load().expect("the Vulkan loader (libvulkan.so.1)");
        let app = vk::ApplicationInfo::default()
            .application_name(c"vk-call-loop")
            .api_version(vk::API_VERSION_1_1);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .expect("vkCreateInstance");
        let physical = instance.enumerate_physical_devices().expect("devices")[0];
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&priorities)];
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
        // Warm-up: the first calls pay for page faults and lazy binding.
        for _ in 0..pairs / 10 {
            pair();
        }
        let (start, cpu) = (Instant::now(), thread_cpu_ns());
        for _ in 0..pairs {
            pair();
        }
        let tracked = start.elapsed().as_nanos() as f64 / (2.0 * f64::from(pairs));
        let tracked_cpu = (thread_cpu_ns() - cpu) as f64 / (2.0 * f64::from(pairs));

        let buffer = device.create_buffer(&info, None).expect("vkCreateBuffer");
        let calls = 2 * pairs;
        let mut sink = 0u64;
        for _ in 0..calls / 10 {
            sink ^= device.get_buffer_memory_requirements(buffer).size;
        }
        let (start, cpu) = (Instant::now(), thread_cpu_ns());
        for _ in 0..calls {
            sink ^= device.get_buffer_memory_requirements(buffer).size;
        }
        let untracked = start.elapsed().as_nanos() as f64 / f64::from(calls);
        let untracked_cpu = (thread_cpu_ns() - cpu) as f64 / f64::from(calls);
        std::hint::black_box(sink);
        device.destroy_buffer(buffer, None);

        println!("tracked-ns-per-call: {tracked:.1}");
        println!("untracked-ns-per-call: {untracked:.1}");
        println!("tracked-cpu-ns-per-call: {tracked_cpu:.1}");
        println!("untracked-cpu-ns-per-call: {untracked_cpu:.1}");
        device.destroy_device(None);
        instance.destroy_instance(None);
    }
}

/// The calling thread's CPU time, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local timespec; the clock exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
