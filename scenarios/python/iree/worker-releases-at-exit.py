#!/usr/bin/python3
"""worker-releases-at-exit for IREE: a daemon thread holds the only references to the
driver, the device and its buffers and releases them once the main thread has begun to
exit, while the main thread finalizes and runs the C exit handlers."""

import iree_case as case
import pyrt  # after the case module, which puts it on sys.path

rt, np = case.load()
held = case.start(rt, np)
pyrt.release_on_worker_at_exit(held, case.release)
del held
case.step("main returns")
