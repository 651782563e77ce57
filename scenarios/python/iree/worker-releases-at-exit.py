#!/usr/bin/python3
"""worker-releases-at-exit for IREE: a daemon thread holds the only references to the
driver, the device and its buffers and starts releasing them as the main thread returns;
the main thread does not wait for it, and finalizes and runs the C exit handlers."""

import iree_case as case
import pyrt  # after the case module, which puts it on sys.path

rt, np = case.load()
held = case.start(rt, np)
start_worker = pyrt.worker_release(held, case.release)
del held
case.step("main returns as the worker starts releasing")
start_worker()
