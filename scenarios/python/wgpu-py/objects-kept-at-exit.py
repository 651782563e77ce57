#!/usr/bin/python3
"""objects-kept-at-exit for wgpu-py: the adapter, the device, the buffer and the pipeline
stay in module globals when the script ends; Python's finalization runs their destructors
(the shape of wgpu-py #447: wgpuDevicePoll from destructors)."""

import wgpu_case as case

wgpu = case.load()
held = case.start(wgpu)
adapter, device, buffer, pipeline, bind_group = (
    held.adapter,
    held.device,
    held.buffer,
    held.pipeline,
    held.bind_group,
)
del held
case.step("main returns with the device and its objects in module globals")
