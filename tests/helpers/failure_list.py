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
    """What failed: the crash's message; for a report given as text (a module that did not import, as xdist passes
    reports on), its last `E ` line (the exception), else its text."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str):
        return message
    text = str(getattr(report, "longrepr", "") or "")
    raised = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return raised[-1] if raised else text


def append(path: str, phase: str, reports: Iterable[Any]) -> None:
    """Append one line per failed or errored report to `path`."""
    lines = [line(phase, r.nodeid, r.when, crash_message(r)) for r in reports]
    if not lines:
        return
    try:  # not created here: a file `make test` has removed (it was stopped) stays removed
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        return
    try:
        for text in lines:
            os.write(fd, (text + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)
