#!/usr/bin/python3
"""worker-releases-at-exit for Taichi: a daemon thread holds the only references to the
field and the ndarray and releases them once the main thread has begun to exit, while the
main thread runs Taichi's exit handler, finalizes and runs the C exit handlers."""

import taichi_case as case
import pyrt  # after the case module, which puts it on sys.path

ti = case.load()
held = case.start(ti)
pyrt.release_on_worker_at_exit(held, case.release)
del held
case.step("main returns")
