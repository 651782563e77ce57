#!/usr/bin/python3
"""allocator-freed-after-teardown for ncnn (the events-freed-after-teardown ordering, with the
objects ncnn has): destroy_gpu_instance is called while the net and a blob allocator holding a
device buffer are alive in module globals. Python frees them afterwards, while finalizing,
on a device that is gone."""

import ncnn_case as case

ncnn = case.load()
device = case.start(ncnn)
net = case.gpu_net(ncnn, device)
case.infer(ncnn, net)
allocator, buffer = case.device_buffer(ncnn, device)
ncnn.destroy_gpu_instance()
case.step("destroy_gpu_instance with the net, the allocator and its buffer alive")
case.step("main returns")
