"""What the IREE exit-ordering scripts share: IREE's runtime (iree-base-runtime) from the
runtime cache, a Vulkan device of its own, and device buffers moved to and from it.

IREE's Python API caches drivers and devices in module-level tables (get_driver, get_device);
these scripts make their own (create_hal_driver, create_default_device) so that they, not
the cache, decide when the device goes.
"""

import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pyrt  # noqa: E402
from pyrt import step  # noqa: E402,F401

ELEMENTS = 1 << 18


class Held:
    """The objects a script keeps: the driver (it owns the VkInstance), the device
    (VkDevice and its queues) and two device-local buffers with their HAL buffer views."""

    def __init__(self, rt, np):
        try:
            self.driver = rt._binding.create_hal_driver("vulkan")
            self.device = self.driver.create_default_device()
        except Exception as e:  # IREE raises a plain RuntimeError for a missing device
            pyrt.cannot_run(f"IREE cannot create a Vulkan device: {e}")
        step(f"IREE Vulkan device created: {self.device}")
        data = np.arange(ELEMENTS, dtype=np.float32)
        self.input = rt.asdevicearray(self.device, data)
        self.output = rt.asdevicearray(self.device, data * 2)
        self.staging = read_back(rt, self.device, self.output)
        value = self.staging.map().asarray((ELEMENTS,), np.dtype(np.float32))[3]
        if value != 6.0:
            pyrt.cannot_run(f"the device returned {value} for 6.0")
        step(f"two device buffers of {ELEMENTS * 4} bytes written, one copied back")


def read_back(rt, device, array):
    """Copies a device array into a new host-visible buffer on the device's queue, waiting on
    a timeline semaphore. (DeviceArray.to_host imports numpy's memory into Vulkan, which
    lavapipe refuses: numpy's allocation is not 4096-byte aligned.)"""
    source = array._buffer_view.get_buffer()
    usage = int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED)
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=usage,
        allocation_size=source.byte_length(),
    )
    semaphore = device.create_semaphore(0)
    device.queue_copy(
        source,
        staging,
        wait_semaphores=rt.HalFence.create_at(semaphore, 0),
        signal_semaphores=rt.HalFence.create_at(semaphore, 1),
    )
    rt.HalFence.create_at(semaphore, 1).wait()
    return staging


def load():
    """Imports iree.runtime (and numpy) from the cache; exits 3 when they are missing."""
    pyrt.use_runtime("iree")
    import numpy as np
    import iree.runtime as rt

    step(f"iree-base-runtime {metadata.version('iree-base-runtime')} imported")
    return rt, np


def start(rt, np):
    return Held(rt, np)


def release(held):
    """Buffers, then the device, then the driver: each dropped while nothing that uses it
    is left."""
    held.input = held.output = held.staging = None
    step("device buffers released")
    held.device = None
    step("device released")
    held.driver = None
    step("driver released")
