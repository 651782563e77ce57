#!/usr/bin/python3
"""handler-before-load for ncnn: an atexit cleanup handler is registered before ncnn is
imported; it frees the buffer, its allocator and the net, then calls destroy_gpu_instance.
Python runs its atexit handlers while finalizing, before any C exit handler (ncnn's, the
driver's, the layers'), so here the handler comes first whatever the import order."""

import atexit

import ncnn_case as case

kept = {}


def cleanup():
    case.step("cleanup handler runs")
    kept.pop("buffer", None)
    kept.pop("allocator", None)
    case.step("device buffer and its allocator freed")
    net = kept.pop("net", None)
    if net is not None:
        net.clear()
    del net
    case.step("net freed")
    ncnn.destroy_gpu_instance()
    case.step("destroy_gpu_instance")


atexit.register(cleanup)
case.step("cleanup handler registered before ncnn is imported")

ncnn = case.load()
device = case.start(ncnn)
kept["net"] = case.gpu_net(ncnn, device)
case.infer(ncnn, kept["net"])
kept["allocator"], kept["buffer"] = case.device_buffer(ncnn, device)
case.step("main returns")
