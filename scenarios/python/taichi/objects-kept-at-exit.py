#!/usr/bin/python3
"""objects-kept-at-exit for Taichi: the field and the ndarray stay in module globals and
ti.reset() is never called, the usual shape of a script. Taichi registers no teardown of
its own: Python's finalization frees them with the program (the shape of Taichi #3258)."""

import taichi_case as case

ti = case.load()
held = case.start(ti)
field, array = held.field, held.array
del held
case.step("main returns with the field and the ndarray in module globals")
