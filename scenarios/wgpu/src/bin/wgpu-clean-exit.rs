//! wgpu-clean-exit: the baseline. The buffer, queue, device, adapter and instance are dropped
//! in order before main returns, so wgpu destroys the device and the instance itself.

use vkexit_wgpu_scenarios::{step, Gpu};

fn main() {
    let gpu = Gpu::open();
    let buffer = gpu.buffer_with_work();
    drop(buffer);
    step!("buffer dropped");
    let Gpu {
        instance,
        adapter,
        device,
        queue,
    } = gpu;
    drop(queue);
    drop(device);
    step!("queue and device dropped");
    drop(adapter);
    drop(instance);
    step!("adapter and instance dropped");
    step!("main returns");
}
