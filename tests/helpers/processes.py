"""Process-tree utilities: find what a test left behind, wait, clean up, and set the signal dispositions a test
relies on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """PIDs of every live descendant of `pid` (from /proc), to prove nothing was orphaned."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def processes_with_marker(marker: str) -> list[int]:
    """PIDs whose environment or command line contains `marker` (to find orphans of a test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            blob = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob:
            found.append(int(entry.name))
    return found


def wait_for(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def kill_leftovers(driver: subprocess.Popen[str], marker: str) -> None:
    """A test's teardown: kill the driver's process group if it still runs, then anything carrying `marker`."""
    if driver.poll() is None:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    for pid in processes_with_marker(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def sigint_default() -> None:
    """preexec_fn for a child that a test will Ctrl-C: a shell's background job (`setsid bash .ci/run &`) starts
    with SIGINT ignored and every child inherits that, so the test sets the disposition it relies on."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
