#!/usr/bin/python3
"""daemon-thread-holds-device for wgpu-py: a daemon thread (a background worker, say) holds the
only references to the device and its objects and is blocked when the main thread returns.
Python never resumes it nor frees its locals, so they are alive at exit."""

import wgpu_case as case
import pyrt  # after the case module, which puts it on sys.path

wgpu = case.load()
held = case.start(wgpu)
pyrt.park_on_daemon_thread(held)
del held
case.step("main returns")
