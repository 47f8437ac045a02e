"""Deliberately broken checks, importable by the spawned worker (module:function references)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time

from envcheck.core.check import Context
from envcheck.core.result import Result, passed


def sleeps_forever(ctx: Context) -> Result:
    """Hangs, and starts a grandchild that would hang too (it must die with the group)."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                     env={**os.environ, "ENVCHECK_TEST_MARKER": ctx.options["marker"]})
    print("about to hang", flush=True)
    time.sleep(3600)
    return passed("unreachable")


def segfaults(ctx: Context) -> Result:
    """Dereferences NULL."""
    print("about to segfault", flush=True)
    ctypes.string_at(0)
    return passed("unreachable")


def exits_hard(ctx: Context) -> Result:
    """Leaves without cleanup."""
    print("about to os._exit(7)", flush=True)
    os._exit(7)


def raises(ctx: Context) -> Result:
    """Raises an ordinary exception."""
    raise ValueError("boom from a check")


def healthy(ctx: Context) -> Result:
    """Passes and prints something that must not reach the protocol stream."""
    print("noise on stdout from a check")
    return passed("fine", measured={"pid": os.getpid()})
