//! wgpu-exit-while-dropping: a worker thread drops the buffer, queue and device while main
//! calls `std::process::exit(0)`. The exit handlers (the driver's, the layers') then run at
//! the same time as wgpu's teardown of the device on the other thread.

use std::sync::mpsc;
use std::thread;

use vkexit_wgpu_scenarios::{step, Gpu};

fn main() {
    let gpu = Gpu::open();
    let buffer = gpu.buffer_with_work();
    let Gpu {
        instance,
        adapter,
        device,
        queue,
    } = gpu;
    let (dropping, started) = mpsc::channel();
    let worker = thread::Builder::new()
        .name("device-dropper".into())
        .spawn(move || {
            let _ = dropping.send(());
            drop(buffer);
            drop(queue);
            drop(device);
            drop(adapter);
            drop(instance);
            step!("worker dropped the buffer, queue, device, adapter and instance");
        })
        .unwrap_or_else(|e| vkexit_wgpu_scenarios::fail(&format!("spawn failed: {e}")));
    let _ = started.recv();
    step!("process::exit(0) while the worker drops the device");
    // The worker is never joined: exit does not wait for it.
    let _unjoined = worker;
    std::process::exit(0);
}
