"""The kernel log read live for gpu.health: /dev/kmsg (never blocking) within the run's window and after the last
run's cursor, judged record by record by kernel_events.scan."""

from __future__ import annotations

import os
import time
from typing import Any

from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.probe.kernel_log import KMSG, read_cursor, read_kernel_log, write_cursor


def capture_xids(
    path: str = KMSG, state_file: str | None = None, window_s: float | None = None
) -> dict[str, Any]:
    """The kernel log's GPU events within the window, or why there are none to tell.

    `state_file` (ENVCHECK_XID_STATE) keeps the last run's cursor (boot id and /dev/kmsg sequence number),
    replaced atomically; `window_s` (ENVCHECK_XID_WINDOW_S) ignores Xids older than that many seconds."""
    state_file = state_file if state_file is not None else os.environ.get("ENVCHECK_XID_STATE") or None
    window_s = window_s if window_s is not None else _float(os.environ.get("ENVCHECK_XID_WINDOW_S"))
    lines, why = read_kernel_log(path)
    cursor = read_cursor(state_file) if state_file else None
    since = max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - window_s) if window_s else None
    found = scan(lines, cursor, since)
    out = {
        "source": path,
        "error": why,
        "xid": found["xid"],
        "bus": found["bus"],
        "driver": found["driver"],
        "window": {"after_seq": cursor, "since_s": round(since, 3) if since is not None else None},
    }
    if state_file and why is None and found["last_seq"] is not None:
        note = write_cursor(state_file, found["last_seq"])
        if note:
            out["cursor_error"] = note
    return out


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
