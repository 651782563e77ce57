"""A pytest file on wgpu-py (wgpu-native over Vulkan), the shape of a Python runtime's own GPU
tests: each test opens a device and runs a compute pass. One releases everything; one leaves
the device to a daemon thread that is still blocked when the interpreter exits, so it is alive
when the driver's exit handlers run: harmless on desktop drivers, a crash under the Jetson's
exit behaviour (`vkexit run --emulate tegra`). Plain pytest passes both.

wgpu-py comes from vkexit's runtime cache (ci/setup-python-more.sh), through the exit-ordering
scripts' helpers in scenarios/python/wgpu-py.
"""

import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scenarios/python/wgpu-py"))
import wgpu_case as case  # noqa: E402
import pyrt  # noqa: E402


def test_device_released_before_exit():
    wgpu = case.load()
    held = case.start(wgpu)
    case.release(held)
    gc.collect()


def test_device_held_by_a_daemon_thread_at_exit():
    wgpu = case.load()
    held = case.start(wgpu)
    pyrt.park_on_daemon_thread(held)
