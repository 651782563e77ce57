#!/usr/bin/python3
"""exit-without-destroy for ncnn: as clean-exit, but destroy_gpu_instance is never called,
so the device is torn down by ncnn's own exit handler. ncnn registers that handler in
create_gpu_instance, before the driver and the layers register theirs, so it runs after them."""

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
case.step("main returns without destroy_gpu_instance")
