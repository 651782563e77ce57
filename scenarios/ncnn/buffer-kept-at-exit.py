#!/usr/bin/python3
"""buffer-kept-at-exit for ncnn: the net and a blob allocator holding a device buffer stay in
module globals when the script ends, and destroy_gpu_instance is never called: the usual
shape of a Python script. Python's finalization frees the globals, then ncnn's own exit
handler tears the device down."""

import ncnn_case as case

ncnn = case.load()
device = case.start(ncnn)
net = case.gpu_net(ncnn, device)
case.infer(ncnn, net)
allocator, buffer = case.device_buffer(ncnn, device)
case.step("main returns with the net, the allocator and its buffer alive")
