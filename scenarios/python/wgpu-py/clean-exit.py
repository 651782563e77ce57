#!/usr/bin/python3
"""clean-exit for wgpu-py: after one compute pass the buffer, the pipeline and the device
are destroyed and released, then the adapter, before the script ends."""

import gc

import wgpu_case as case

wgpu = case.load()
held = case.start(wgpu)
case.release(held)
gc.collect()
case.step("main returns")
