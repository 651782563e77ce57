//! wgpu-process-exit-live-device: `std::process::exit(0)` while the device, its queue and a
//! buffer are alive on main's stack. `process::exit` runs no destructors, so wgpu never
//! destroys the device; only the C exit handlers run.

use vkexit_wgpu_scenarios::{step, Gpu};

fn main() {
    let gpu = Gpu::open();
    let buffer = gpu.buffer_with_work();
    step!(
        "process::exit(0) with the device, queue and buffer of {} bytes alive",
        buffer.size()
    );
    std::process::exit(0);
}
