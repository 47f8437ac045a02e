"""A real slow CPU "device" for the relative verdict: a cgroup v1 CFS quota that the measuring thread moves into while
it measures one device (the kernel throttles it; nothing sleeps). Used by tests/perf/test_relative_cpu.py and
bench/relative_margins.py."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
WHY_NOT = "needs root and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu"


def can_throttle() -> bool:
    """Whether this process may make a cgroup v1 cpu group (root, the v1 cpu controller mounted)."""
    return os.geteuid() == 0 and (CPU_CGROUP / "tasks").is_file()


@contextlib.contextmanager
def quota_group(name: str, quota_pct: int) -> Iterator[Path]:
    """A cpu group allowing `quota_pct` ms of CPU per 100 ms; on the way out every thread left in it goes back to the
    root group and the group is removed."""
    group = CPU_CGROUP / f"{name}-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text(str(quota_pct * 1000))
        yield group
    finally:
        for tid in (group / "tasks").read_text().split():
            (CPU_CGROUP / "tasks").write_text(tid)
        group.rmdir()


def measured_inside(group: Path, subject: str, real: Callable[..., Any]) -> Callable[..., Any]:
    """`per_device.measure_one`, except that device `subject` is measured by this thread from inside `group`."""

    def measure(kind: str, device: Any, plan: Any) -> Any:
        if device.subject != subject:
            return real(kind, device, plan)
        tid = str(threading.get_native_id())
        (group / "tasks").write_text(tid)
        try:
            return real(kind, device, plan)
        finally:
            (CPU_CGROUP / "tasks").write_text(tid)

    return measure
