#!/usr/bin/python3
"""pool-allocator-reclaimed for ncnn: the device's own blob allocator is taken with
acquire_blob_allocator and given back with reclaim_blob_allocator, the documented pairing,
and everything is freed before destroy_gpu_instance. The Python binding returns that
allocator as an object Python owns, so it is deleted twice: once by Python when the last
reference goes, once by the device when it is destroyed."""

import ncnn_case as case

ncnn = case.load()
device = case.start(ncnn)
allocator = device.acquire_blob_allocator()
case.step("acquire_blob_allocator")
device.reclaim_blob_allocator(allocator)
case.step("reclaim_blob_allocator")
del allocator
case.step("the Python reference to the allocator dropped")
ncnn.destroy_gpu_instance()
case.step("destroy_gpu_instance")
case.step("main returns")
