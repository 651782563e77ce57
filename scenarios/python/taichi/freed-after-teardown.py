#!/usr/bin/python3
"""freed-after-teardown for Taichi: ti.reset() destroys the program and its device while the
ndarray is alive; the script then releases it (the ordering of Taichi #3258 and PR #5227:
an ndarray outliving the device it was allocated on)."""

import taichi_case as case

ti = case.load()
held = case.start(ti)
case.teardown(ti)
case.release(held)
case.step("main returns")
