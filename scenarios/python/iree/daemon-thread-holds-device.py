#!/usr/bin/python3
"""daemon-thread-holds-device for IREE: a daemon thread (a background worker, say) holds the
only references to the driver, the device and its buffers and is blocked when the main
thread returns. Python never resumes it nor frees its locals, so they are alive at exit."""

import iree_case as case
import pyrt  # after the case module, which puts it on sys.path

rt, np = case.load()
held = case.start(rt, np)
pyrt.park_on_daemon_thread(held)
del held
case.step("main returns")
