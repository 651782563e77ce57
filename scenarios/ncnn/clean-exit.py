#!/usr/bin/python3
"""clean-exit for ncnn: a net on the device runs once, a device buffer is allocated, and
everything is freed, then destroy_gpu_instance, before the script ends.
This is the order ncnn documents; anything but a pass comes from ncnn's own exit path."""

import ncnn_case as case

ncnn = case.load()
device = case.start(ncnn)
net = case.gpu_net(ncnn, device)
case.infer(ncnn, net)
allocator, buffer = case.device_buffer(ncnn, device)

del buffer, allocator
case.step("device buffer and its allocator freed")
net.clear()
del net
case.step("net freed")
ncnn.destroy_gpu_instance()
case.step("destroy_gpu_instance")
case.step("main returns")
