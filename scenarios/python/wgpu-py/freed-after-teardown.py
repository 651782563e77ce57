#!/usr/bin/python3
"""freed-after-teardown for wgpu-py: device.destroy(), wgpu's own teardown of a device, comes
first; the buffer, the pipeline and the bind group are released after it, on a destroyed
device."""

import gc

import wgpu_case as case

wgpu = case.load()
held = case.start(wgpu)
held.device.destroy()
case.step("device.destroy() with the buffer, the pipeline and the bind group alive")
held.bind_group = held.pipeline = None
held.buffer.destroy()
held.buffer = None
gc.collect()
case.step("bind group, pipeline and buffer released after the device's teardown")
case.step("main returns")
