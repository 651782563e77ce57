//! wgpu-device-in-static: the device, its queue and a buffer live in a `static`, the usual
//! way to share one device in a program. Rust never drops statics, so at exit nothing
//! destroys the device: the driver's exit handlers run with it alive.

use std::sync::OnceLock;

use vkexit_wgpu_scenarios::{step, Gpu};

static GPU: OnceLock<(Gpu, wgpu::Buffer)> = OnceLock::new();

fn main() {
    let (gpu, buffer) = GPU.get_or_init(|| {
        let gpu = Gpu::open();
        let buffer = gpu.buffer_with_work();
        (gpu, buffer)
    });
    step!(
        "device, queue and buffer of {} bytes kept in a static",
        buffer.size()
    );
    gpu.queue.submit([]);
    step!("main returns");
}
