#!/usr/bin/python3
"""worker-releases-at-exit for wgpu-py: a daemon thread holds the only references to the
device and its objects and destroys and releases them once the main thread has begun to
exit, while the main thread finalizes and runs the C exit handlers (the shape of
gfx-rs/wgpu #5084)."""

import wgpu_case as case
import pyrt  # after the case module, which puts it on sys.path

wgpu = case.load()
held = case.start(wgpu)
pyrt.release_on_worker_at_exit(held, case.release)
del held
case.step("main returns")
