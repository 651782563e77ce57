#!/usr/bin/python3
"""objects-kept-at-exit for IREE: the driver, the device and its buffers stay in module
globals when the script ends, the usual shape of a script; Python's finalization frees them
in whatever order it clears the globals (the shape of IREE #5141 and #10505)."""

import iree_case as case

rt, np = case.load()
held = case.start(rt, np)
driver, device, data_in, data_out, staging = (
    held.driver,
    held.device,
    held.input,
    held.output,
    held.staging,
)
del held
case.step("main returns with the driver, the device and its buffers in module globals")
