#!/usr/bin/python3
"""handler-before-load for IREE: a cleanup registered with atexit before IREE is imported
releases the buffers, the device and the driver at exit."""

import atexit

import iree_case as case

kept = {}


def cleanup():
    case.step("cleanup handler runs")
    if "held" in kept:
        case.release(kept.pop("held"))


atexit.register(cleanup)
case.step("cleanup handler registered before IREE is imported")
rt, np = case.load()
kept["held"] = case.start(rt, np)
case.step("main returns")
