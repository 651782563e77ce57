#!/usr/bin/python3
"""worker-releases-at-exit for wgpu-py: a daemon thread holds the only references to the
device and its objects and starts destroying and releasing them as the main thread returns;
the main thread does not wait for it, and finalizes and runs the C exit handlers while the
worker is inside wgpu-native (cffi releases the GIL there): the shape of gfx-rs/wgpu #5084."""

import wgpu_case as case
import pyrt  # after the case module, which puts it on sys.path

wgpu = case.load()
held = case.start(wgpu)
start_worker = pyrt.worker_release(held, case.release)
del held
case.step("main returns as the worker starts releasing")
start_worker()
