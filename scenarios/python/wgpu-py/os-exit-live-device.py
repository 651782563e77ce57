#!/usr/bin/python3
"""os-exit-live-device for wgpu-py: the script leaves through os._exit with the device and
its objects alive: no Python finalization, no destructor, no exit handler."""

import os

import wgpu_case as case

wgpu = case.load()
held = case.start(wgpu)
case.step("os._exit with the device and its objects alive")
os._exit(0)
