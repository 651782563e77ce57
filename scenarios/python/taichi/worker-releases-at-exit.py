#!/usr/bin/python3
"""worker-releases-at-exit for Taichi: a daemon thread holds the only references to the
field and the ndarray and starts releasing them as the main thread returns; the main thread
does not wait for it, and finalizes (the program with it) and runs the C exit handlers."""

import taichi_case as case
import pyrt  # after the case module, which puts it on sys.path

ti = case.load()
held = case.start(ti)
start_worker = pyrt.worker_release(held, case.release)
del held
case.step("main returns as the worker starts releasing")
start_worker()
