"""What the wgpu-py exit-ordering scripts share: wgpu-py (wgpu-native behind cffi) from the
runtime cache, a device on a Vulkan adapter, and a compute pass over a storage buffer.

wgpu-py keeps one wgpu instance for the process (the VkInstance) in a module global, which
no script can release; the scripts decide only about the adapter, the device and its objects.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pyrt  # noqa: E402
from pyrt import step  # noqa: E402,F401

ELEMENTS = 1 << 16

SHADER = """
@group(0) @binding(0) var<storage, read_write> data: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    data[id.x] = data[id.x] * 2.0;
}
"""


class Held:
    """What a script keeps: the adapter, the device, a storage buffer, and the compute
    pipeline with its bind group that doubled the buffer once."""

    def __init__(self, wgpu):
        self.adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if self.adapter is None or self.adapter.info["backend_type"] != "Vulkan":
            pyrt.cannot_run("wgpu found no Vulkan adapter")
        step(f"adapter {self.adapter.info['device']} on {self.adapter.info['backend_type']}")
        self.device = self.adapter.request_device_sync()
        data = memoryview(bytearray(ELEMENTS * 4)).cast("f")
        for i in range(ELEMENTS):
            data[i] = i
        self.buffer = self.device.create_buffer_with_data(
            data=data,
            usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC,
        )
        module = self.device.create_shader_module(code=SHADER)
        self.pipeline = self.device.create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": "main"}
        )
        self.bind_group = self.device.create_bind_group(
            layout=self.pipeline.get_bind_group_layout(0),
            entries=[{"binding": 0, "resource": {"buffer": self.buffer}}],
        )
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(self.pipeline)
        compute.set_bind_group(0, self.bind_group)
        compute.dispatch_workgroups(ELEMENTS // 64)
        compute.end()
        self.device.queue.submit([encoder.finish()])
        value = self.device.queue.read_buffer(self.buffer).cast("f")[3]
        if value != 6.0:
            pyrt.cannot_run(f"the compute pass wrote {value} for 6.0")
        step(f"a compute pass doubled a storage buffer of {ELEMENTS} floats")


def load():
    """Imports wgpu (and cffi) from the cache; exits 3 when they are missing."""
    pyrt.use_runtime("wgpu-py")
    import wgpu

    step(f"wgpu {wgpu.__version__} imported")
    return wgpu


def start(wgpu):
    return Held(wgpu)


def release(held):
    """The device's objects, then the device (destroyed, then dropped), then the adapter."""
    held.bind_group = held.pipeline = None
    held.buffer.destroy()
    held.buffer = None
    step("bind group, pipeline and buffer released")
    held.device.destroy()
    held.device = None
    step("device destroyed and released")
    held.adapter = None
    step("adapter released")
