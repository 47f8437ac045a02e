"""The failed tests of a `make test` phase or stream, one line each, for the list `make test` prints last.

A CI log may be shown only by its tail, and the streams' lines are interleaved: the summary line says which stream
failed, and this list says which test and why, where the tail reaches it. Each pytest process appends its own lines
to the file named by ENVCHECK_TEST_FAILURES (the Makefile makes it and removes it); a line is one short write, so the
streams running side by side do not mix their lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

VARIABLE = "ENVCHECK_TEST_FAILURES"
MESSAGE_CHARS = 200


def line(phase: str, nodeid: str, when: str, message: str) -> str:
    """`[phase] nodeid (when): message`, with the message's first line cut to MESSAGE_CHARS and every control
    character escaped (a test's message may quote what a program printed)."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    if len(first) > MESSAGE_CHARS:
        first = first[: MESSAGE_CHARS - 1] + "…"
    stage = "" if when == "call" else f" ({when})"
    text = f"[{phase}] {nodeid}{stage}: {first}" if first else f"[{phase}] {nodeid}{stage}"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def crash_message(report: Any) -> str:
    """What pytest's short summary says of a failed report: its crash's message, else its text's first line."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    return message if isinstance(message, str) else str(getattr(report, "longrepr", "") or "")


def append(path: str, phase: str, reports: Iterable[Any]) -> None:
    """Append one line per failed or errored report to `path`."""
    lines = [line(phase, r.nodeid, r.when, crash_message(r)) for r in reports]
    if not lines:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for text in lines:
            os.write(fd, (text + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)
