"""What the Python-runtime exit-ordering scripts share: finding a runtime's wheels in the
runtime cache that ci/setup-python-more.sh fills, the step lines, and the worker that
releases objects while the main thread exits.

The scripts run under vkexit, which points HOME into each run's own directory, so the cache
is found as vkexit finds it (VKEXIT_RUNTIME_CACHE, then XDG_CACHE_HOME) and otherwise under
the user's home from the password database, never from HOME.
"""

import os
import pwd
import sys
import threading
from pathlib import Path

# Exit status for "this run could not do what it is for": vkexit judges it a failure, so a
# machine without the runtime or without a Vulkan device never looks like a passing run.
CANNOT_RUN = 3


def step(message):
    """One `vkexit-step:` line, as the built-in scenarios print them."""
    os.write(1, f"vkexit-step: {message}\n".encode())


def cannot_run(message):
    sys.stderr.write(message + "\n")
    sys.exit(CANNOT_RUN)


def cache_dir():
    named = os.environ.get("VKEXIT_RUNTIME_CACHE")
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_CACHE_HOME")
    home = Path(xdg) if xdg else Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache"
    return home / "vkexit" / "runtimes"


def use_runtime(name):
    """Puts the runtime's unpacked wheels for this interpreter first on sys.path."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    where = cache_dir() / name / f"cp{sys.version_info.major}{sys.version_info.minor}"
    if not (where / "PINS").is_file():
        cannot_run(
            f"{name} is not in the runtime cache for Python {version} ({where}): "
            "run ci/setup-python-more.sh"
        )
    sys.path.insert(0, str(where))
    return where


def worker_release(held, release):
    """A daemon thread that will hold the only references to `held` (the caller drops its own)
    and release them; returns the function that starts it. A script calls it as its last
    statement, so the worker runs while the main thread finalizes and then runs the C exit
    handlers (the driver's, the layers'): Python does not wait for daemon threads, and a
    runtime that releases the GIL inside its C release races the exit."""
    box = [held]

    def worker():
        step("worker releases the objects")
        release(box.pop())
        step("worker released the objects")

    thread = threading.Thread(target=worker, daemon=True)
    return thread.start


def park_on_daemon_thread(held):
    """Hands the only references to `held` to a daemon thread that blocks for ever. Python
    never frees a daemon thread's locals: at exit the thread is simply not resumed, so the
    objects are alive through finalization and the C exit handlers."""
    box = [held]
    parked = threading.Event()

    def worker():
        objects = box.pop()  # noqa: F841  (kept alive by this frame)
        parked.set()
        threading.Event().wait()

    threading.Thread(target=worker, daemon=True).start()
    parked.wait()
    step("objects parked on a daemon thread that never returns")
