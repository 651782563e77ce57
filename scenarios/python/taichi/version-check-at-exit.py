#!/usr/bin/python3
"""version-check-at-exit for Taichi: clean-exit with Taichi's version check left on, as users
run it. ti.init starts a daemon thread that posts the version over HTTPS (every run here: a
fresh HOME has no record of the last check); the script ends while the thread may still be in
OpenSSL, whose exit handler then frees what the thread is using."""

import os

os.environ["TI_SKIP_VERSION_CHECK"] = "OFF"

import taichi_case as case  # noqa: E402

ti = case.load()
held = case.start(ti)
case.release(held)
case.teardown(ti)
case.step("main returns")
