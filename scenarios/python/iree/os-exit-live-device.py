#!/usr/bin/python3
"""os-exit-live-device for IREE: the script leaves through os._exit with the device and its
buffers alive: no Python finalization, no exit handler of any kind, no vkDestroyDevice."""

import os

import iree_case as case

rt, np = case.load()
held = case.start(rt, np)
case.step("os._exit with the device and its buffers alive")
os._exit(0)
