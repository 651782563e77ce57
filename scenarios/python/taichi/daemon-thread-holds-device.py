#!/usr/bin/python3
"""daemon-thread-holds-device for Taichi: a daemon thread (a background worker, say) holds the
only references to the field and the ndarray (the program stays in Taichi's module globals)
and is blocked when the main thread returns. Python never resumes it nor frees its locals,
so they are alive at exit."""

import taichi_case as case
import pyrt  # after the case module, which puts it on sys.path

ti = case.load()
held = case.start(ti)
pyrt.park_on_daemon_thread(held)
del held
case.step("main returns")
