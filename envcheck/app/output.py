"""The one output writer: every report, metrics file and bundle is written here (atomically, regular files
only, one error mapping), and stdout's failures (closed, broken pipe, full) are mapped once."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from envcheck.core.errors import FatalError


def write_reports(reports: Sequence[tuple[str | None, Callable[[], str]]]) -> list[str]:
    """Write each (path, render) whose path is set, every one attempted; the failures' one-line messages."""
    failures = []
    for path, render in reports:
        if path:
            try:
                write_output(path, render())
            except WriteError as exc:
                failures.append(exc.message)
    return failures



class WriteError(FatalError):
    """A report could not be written (the checks themselves ran): one line, exit 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=3)



def stdout_gone() -> None:
    """After EPIPE, point fd 1 at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass



_STDOUT_CLOSED = False



def reopen_closed_stdout() -> None:
    """Started with stdout closed (`>&-`): put /dev/null on fd 1, so no file or socket opened later lands
    there and the table can be printed (to nowhere), and remember that a report for '-' cannot be written."""
    global _STDOUT_CLOSED
    if sys.stdout is not None:
        return
    _STDOUT_CLOSED = True
    fd = os.open(os.devnull, os.O_WRONLY)
    if fd != 1:
        os.dup2(fd, 1)
        os.close(fd)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)



def write_output(path: str, text: str) -> None:
    """Write a report to a path (atomically: a temp file in the same folder, then a rename, so a reader never
    sees half a report), or to stdout for '-'. A failure is a WriteError (one line, exit 3), never a traceback."""
    if path == "-":
        if sys.stdout is None or _STDOUT_CLOSED:
            raise WriteError("cannot write the report to stdout: stdout is closed")
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            stdout_gone()
            raise WriteError("cannot write the report to stdout: its reader exited (broken pipe)") from None
        except OSError as exc:  # ENOSPC (stdout is /dev/full), EIO ...
            stdout_gone()
            raise WriteError(f"cannot write the report to stdout: {exc.strerror}") from None
        return
    target = Path(os.path.realpath(path))
    tmp: str | None = None
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o644
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:200]}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

