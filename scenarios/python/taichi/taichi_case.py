"""What the Taichi exit-ordering scripts share: Taichi from the runtime cache, started on its
Vulkan backend, a field and an ndarray on the device, and a kernel run over both.

ti.init(arch=ti.vulkan) falls back to the CPU, with only a warning, when Vulkan cannot be
used; `start` checks the backend it got, so such a run exits 3 instead of passing.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pyrt  # noqa: E402
from pyrt import step  # noqa: E402,F401

ELEMENTS = 1 << 16


class Held:
    """What a script keeps: a field (in Taichi's own SNode tree, owned by the program) and an
    ndarray (a device allocation Python owns), both written by a kernel."""

    def __init__(self, ti):
        self.field = ti.field(ti.f32, shape=ELEMENTS)
        self.array = ti.ndarray(ti.f32, shape=ELEMENTS)

        @ti.kernel
        def fill(out: ti.types.ndarray(dtype=ti.f32, ndim=1)):
            for i in range(ELEMENTS):
                self.field[i] = i * 2.0
                out[i] = self.field[i] + 1.0

        fill(self.array)
        value = self.array[3]
        if value != 7.0:
            pyrt.cannot_run(f"the kernel wrote {value} for 7.0")
        step(f"a kernel wrote a field and an ndarray of {ELEMENTS} floats on the device")


def load():
    """Imports taichi (and numpy) from the cache; exits 3 when they are missing."""
    pyrt.use_runtime("taichi")
    # ti.init starts a daemon thread that posts the version to Taichi's server over HTTPS; it
    # can still be loading certificates when OpenSSL's exit handler runs, and crash there
    # (version-check-at-exit.py). The other scripts turn it off to measure Vulkan alone.
    os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
    import taichi as ti

    step(f"taichi {'.'.join(map(str, ti.__version__))} imported")
    return ti


def start(ti):
    # The offline cache would make later runs load kernels from disk instead of compiling
    # them, so a run's Vulkan work would depend on the runs before it.
    ti.init(arch=ti.vulkan, offline_cache=False, log_level=ti.WARN)
    arch = ti.lang.impl.current_cfg().arch
    if arch != ti.vulkan:
        pyrt.cannot_run(f"Taichi started on {arch}, not on Vulkan")
    step("ti.init(arch=ti.vulkan)")
    return Held(ti)


def release(held):
    held.array = None
    step("ndarray released")
    held.field = None
    step("field released")


def teardown(ti):
    """Taichi's own teardown: ti.reset() destroys the program, its device included."""
    ti.reset()
    step("ti.reset")
