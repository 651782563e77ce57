"""What the ncnn exit-ordering scripts share: finding the ncnn wheel that
ci/setup-python-runtimes.sh unpacked, and the Vulkan work each script does.

Each script imports ncnn itself, through `load()`, so that a script can decide
what happens before the import (handler-before-load registers its handler first).
"""

import os
import sys
from pathlib import Path

# Where ci/setup-python-runtimes.sh unpacks one ncnn wheel per Python version.
CACHE = Path(__file__).resolve().parents[2] / "target" / "real-runtimes" / "ncnn"

# One convolution and a ReLU: enough for ncnn to upload weights, build compute
# pipelines and record, submit and wait for command buffers on the device.
PARAM = """7767517
3 3
Input            data   0 1 data 0=16 1=16 2=4
Convolution      conv   1 1 data conv 0=8 1=3 4=1 5=1 6=288
ReLU             relu   1 1 conv out
"""

BUFFER_SIZE = 1 << 20


def step(message):
    """One `vkexit-step:` line, as the built-in scenarios print them."""
    os.write(1, f"vkexit-step: {message}\n".encode())


def wheel_dir():
    """The unpacked wheel for this interpreter: VKEXIT_NCNN_DIR, or the setup's cache."""
    named = os.environ.get("VKEXIT_NCNN_DIR")
    if named:
        return Path(named)
    return CACHE / f"cp{sys.version_info.major}{sys.version_info.minor}"


def load():
    """Imports ncnn from the cache. Exits 3 when it is missing or sees no Vulkan device,
    so a machine without it never looks like a passing run."""
    where = wheel_dir()
    if not (where / "ncnn").is_dir():
        sys.stderr.write(
            f"ncnn is not installed for Python {sys.version_info.major}.{sys.version_info.minor} "
            f"in {where}: run ci/setup-python-runtimes.sh\n"
        )
        sys.exit(3)
    sys.path.insert(0, str(where))
    import ncnn

    step(f"ncnn {ncnn.__version__} imported from {where}")
    return ncnn


def start(ncnn):
    """create_gpu_instance as ncnn's documentation shows it, and the default device, which
    must exist."""
    ncnn.create_gpu_instance()
    if ncnn.get_gpu_count() == 0:
        sys.stderr.write("ncnn sees no Vulkan device\n")
        sys.exit(3)
    index = ncnn.get_default_gpu_index()
    device = ncnn.get_gpu_device(index)
    step(f"create_gpu_instance: device {index} {device.info().device_name()}")
    return device


def gpu_net(ncnn, device):
    """A Net on the device, with its weights uploaded and its pipelines built."""
    net = ncnn.Net()
    net.opt.use_vulkan_compute = True
    if os.environ.get("VKEXIT_NCNN_FP16") == "0":
        # llvmpipe on arm64 (Mesa 22.3.6, LLVM 15, under qemu-user's CPU) aborts compiling ncnn's
        # fp16 shaders ("LLVM ERROR: Cannot select: v4f32 = fp_extend"): fp32 shaders instead.
        net.opt.use_fp16_packed = False
        net.opt.use_fp16_storage = False
        net.opt.use_fp16_arithmetic = False
        step("fp16 storage and arithmetic off (VKEXIT_NCNN_FP16=0)")
    net.set_vulkan_device(device)
    check(net.load_param_mem(PARAM), "load_param_mem")
    check(net.load_model(ncnn.DataReaderFromEmpty()), "load_model")
    step("net loaded on the device")
    return net


def infer(ncnn, net):
    """One inference on the device: upload, dispatch, download."""
    data = ncnn.Mat(16, 16, 4)
    data.fill(1.0)
    with net.create_extractor() as ex:
        check(ex.input("data", data), "input")
        ret, out = ex.extract("out")
        check(ret, "extract")
    step(f"inference ran on the device: output {out.w}x{out.h}x{out.c}")


def device_buffer(ncnn, device):
    """A blob allocator of the device and one VkBuffer from it.

    The allocator is made in Python, so Python owns it: deleting the buffer and then the
    allocator frees the buffer's VkBuffer and VkDeviceMemory. (The device's pooled
    allocators, acquire_blob_allocator, are also deleted by Python: see
    pool-allocator-reclaimed.py.)
    """
    allocator = ncnn.VkBlobAllocator(device)
    buffer = allocator.fastMalloc(BUFFER_SIZE)
    step(f"device buffer of {BUFFER_SIZE} bytes allocated")
    return allocator, buffer


def check(ret, what):
    if ret != 0:
        sys.stderr.write(f"ncnn {what} returned {ret}\n")
        sys.exit(4)
