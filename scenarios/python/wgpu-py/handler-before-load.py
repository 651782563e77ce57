#!/usr/bin/python3
"""handler-before-load for wgpu-py: a cleanup registered with atexit before wgpu is imported
destroys and releases the buffer, the pipeline, the device and the adapter at exit."""

import atexit
import gc

import wgpu_case as case

kept = {}


def cleanup():
    case.step("cleanup handler runs")
    if "held" in kept:
        case.release(kept.pop("held"))
        gc.collect()


atexit.register(cleanup)
case.step("cleanup handler registered before wgpu is imported")
wgpu = case.load()
kept["held"] = case.start(wgpu)
case.step("main returns")
