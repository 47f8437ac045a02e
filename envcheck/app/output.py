"""The one output writer: every report, metrics file and bundle is written here (atomically, regular files
only, one error mapping), and stdout's failures (closed, broken pipe, full) are mapped once. The table's terminal
(envcheck.app.terminal) records its own failures here."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from envcheck.core.errors import ExitCode, FatalError
from envcheck.core.text import one_line


def write_reports(reports: Sequence[tuple[str | None, Callable[[], str | bytes]]]) -> list[str]:
    """Write each (path, render) whose path is set, every one attempted whatever the others did; the failures'
    one-line messages (a terminal that went away while the table was printed is one of them)."""
    failures = list(TERMINAL_LOST)
    for path, render in reports:
        if path:
            try:
                write_output(path, render())
            except WriteError as exc:
                failures.append(exc.message)
    return failures


def raise_failures(failures: Sequence[str]) -> None:
    """After every report was attempted: the failures as one WriteError (one line, exit 3), if any."""
    if failures:
        raise WriteError("; ".join(dict.fromkeys(failures)))


# What was lost on the terminal (stdout closed by its reader, full), recorded instead of exiting at once so
# every report is still written; write_reports returns it among the failures.
TERMINAL_LOST: list[str] = []


def lost(message: str) -> None:
    """Record what the terminal lost (once): write_reports returns it among the failures."""
    if message not in TERMINAL_LOST:
        TERMINAL_LOST.append(message)


def safe_streams() -> None:
    """Make stdout and stderr show what they cannot encode as escapes (`PYTHONIOENCODING=ascii`, a surrogate
    carrying an undecodable byte) instead of raising UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


class WriteError(FatalError):
    """A report could not be written (the checks themselves ran): one line, exit 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=ExitCode.INTERNAL)


def stdout_gone() -> None:
    """After EPIPE, point fd 1 at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def say(line: str, out: TextIO) -> str | None:
    """Print one line and flush it; the problem in words when the stream is full or closed."""
    try:
        print(line, file=out, flush=True)
    except (OSError, ValueError) as exc:
        if out is sys.stdout:
            stdout_gone()  # the interpreter's last flush must not fail again (exit 120)
        return f"{'stdout' if out is sys.stdout else 'stderr'} not written: {getattr(exc, 'strerror', None) or exc}"
    return None


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


def write_output(path: str, text: str | bytes) -> None:
    """Write a report to a path (atomically: a temp file in the same folder, then a rename, so a reader never
    sees half a report), or to stdout for '-'. Only a regular file is replaced (a FIFO, device or folder is
    refused); a new file gets mode 0644 (node_exporter often runs as another user), an existing one keeps its
    mode. A failure is a WriteError (one line, exit 3), never a traceback."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    if path == "-":
        if sys.stdout is None or _STDOUT_CLOSED:
            raise WriteError("cannot write the report to stdout: stdout is closed")
        try:
            buffer = getattr(sys.stdout, "buffer", None)
            if buffer is None:  # a text-only stream (a test's StringIO)
                sys.stdout.write(data.decode("utf-8", "surrogateescape"))
                sys.stdout.flush()
            else:
                sys.stdout.flush()
                buffer.write(data)
                buffer.flush()
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
            st = os.stat(target)
        except FileNotFoundError:
            mode = 0o644
        else:
            if not stat.S_ISREG(st.st_mode):
                raise WriteError(
                    f"cannot write {one_line(path)}: not a regular file (a FIFO, device or folder)"
                )
            mode = stat.S_IMODE(st.st_mode)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:200]}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise WriteError(f"cannot write {one_line(path)}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
