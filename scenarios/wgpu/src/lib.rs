//! What the wgpu exit-ordering scenarios share: a wgpu device on the Vulkan backend, one
//! buffer, and one submission that clears and writes it, so the device has a queue, memory,
//! a command pool and a fence in use before the ordering under test begins.
//!
//! Each scenario prints one `vkexit-step:` line per step and ends with a 0 status itself, so
//! anything else vkexit sees comes from how wgpu and the driver behave at exit.

use std::future::Future;
use std::io::Write;
use std::pin::pin;
use std::process;
use std::task::{Context, Poll, Waker};

/// The size of the storage buffer every wgpu scenario works on.
pub const BUFFER_SIZE: u64 = 1 << 20;

/// Writes `vkexit-step: <message>` as one line.
pub fn step(message: std::fmt::Arguments<'_>) {
    // One write of a whole line: stdout is line-buffered, and a closed stdout must not change
    // how the scenario exits, so the error is ignored.
    let _ = std::io::stdout()
        .lock()
        .write_all(format!("vkexit-step: {message}\n").as_bytes());
}

/// Writes a step line, with `format!`'s arguments.
#[macro_export]
macro_rules! step {
    ($($arg:tt)*) => {
        $crate::step(::std::format_args!($($arg)*))
    };
}

/// An instance, the adapter it found, and a device with its queue.
pub struct Gpu {
    /// The wgpu instance (Vulkan backend only).
    pub instance: wgpu::Instance,
    /// The adapter it chose.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// The device's queue.
    pub queue: wgpu::Queue,
}

impl Gpu {
    /// Opens the first Vulkan adapter: vkexit shows each run one driver, and that driver may
    /// be a CPU one (lavapipe), which wgpu's own adapter choice would pass over.
    pub fn open() -> Gpu {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN,
            // No validation or debug messenger of wgpu's own: vkexit enables the layer.
            flags: wgpu::InstanceFlags::empty(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        step!("instance created (Vulkan backend)");
        let adapter = block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN))
            .into_iter()
            .next()
            .unwrap_or_else(|| fail("wgpu found no Vulkan adapter"));
        let info = adapter.get_info();
        step!(
            "adapter {} ({:?}, driver {} {})",
            info.name,
            info.device_type,
            info.driver,
            info.driver_info
        );
        let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("vkexit"),
            ..Default::default()
        }))
        .unwrap_or_else(|e| fail(&format!("request_device failed: {e}")));
        step!("device and queue created");
        Gpu {
            instance,
            adapter,
            device,
            queue,
        }
    }

    /// A storage buffer, cleared and written by one submission that has completed.
    pub fn buffer_with_work(&self) -> wgpu::Buffer {
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("vkexit buffer"),
            size: BUFFER_SIZE,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.clear_buffer(&buffer, 0, None);
        self.queue.write_buffer(&buffer, 0, &[0xa5; 256]);
        self.queue.submit([encoder.finish()]);
        if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
            fail(&format!("waiting for the submission failed: {e}"));
        }
        step!("buffer of {BUFFER_SIZE} bytes created, cleared and written on the device");
        buffer
    }
}

/// Runs a future to completion on this thread. wgpu's native futures are ready when first
/// polled, so this never spins in practice; an executor crate would only add threads.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::yield_now();
    }
}

/// Setup failed: exit 3 with the reason, so it never looks like an exit-time failure.
pub fn fail(reason: &str) -> ! {
    eprintln!("wgpu scenario: {reason}");
    process::exit(3);
}
