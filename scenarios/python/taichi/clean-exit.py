#!/usr/bin/python3
"""clean-exit for Taichi: the ndarray and the field are released, then ti.reset() destroys
the program and its Vulkan device, before the script ends."""

import taichi_case as case

ti = case.load()
held = case.start(ti)
case.release(held)
case.teardown(ti)
case.step("main returns")
