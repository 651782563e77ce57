#!/usr/bin/python3
"""handler-before-load for Taichi: a cleanup registered with atexit before Taichi is imported
releases the ndarray and the field and calls ti.reset(). Taichi registers no teardown of
its own, so the handler runs first at exit, before Python's finalization."""

import atexit

import taichi_case as case

kept = {}


def cleanup():
    case.step("cleanup handler runs")
    if "held" in kept:
        case.release(kept.pop("held"))
        case.teardown(kept.pop("ti"))


atexit.register(cleanup)
case.step("cleanup handler registered before Taichi is imported")
kept["ti"] = case.load()
kept["held"] = case.start(kept["ti"])
case.step("main returns")
