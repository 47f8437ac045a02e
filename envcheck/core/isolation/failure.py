"""Why a worker or the fork server gave no answer, what result a check gets then, and the process helpers both
parent-side handles share."""

from __future__ import annotations

import dataclasses
import enum
import os
import signal
import time
from dataclasses import dataclass
from typing import IO

from envcheck.core.check import CheckSpec
from envcheck.core.hardening import runtime_cause
from envcheck.core.result import Result, errored

MAX_DETAILS = 20_000


class FailureKind(str, enum.Enum):
    """Why a worker gave no answer."""

    TIMEOUT = "timeout"  # it ran past its deadline and its process group was killed
    SIGNAL = "signal"  # it was killed by a signal (a segfault, the OOM killer)
    EXIT = "exit"  # it exited
    PROTOCOL = "protocol"  # it answered something that is not a reply
    START = "start"  # it could not be started


@dataclass(frozen=True)
class WorkerFailure:
    """The worker timed out, died or could not start instead of answering."""

    kind: FailureKind
    reason: str
    output: str = ""
    run_deadline: bool = (
        False  # the whole-run deadline, not the check's own timeout, ended it (says so already)
    )


def deadline_left(deadline: float) -> float:
    """Seconds until `deadline` (monotonic), never negative."""
    return max(0.0, deadline - time.monotonic())


def tail(log: IO[bytes] | None, mark: int = 0) -> str:
    """What a process wrote to `log` since `mark` (its last MAX_DETAILS characters)."""
    if log is None or log.closed:
        return ""
    log.seek(mark)
    return log.read().decode(errors="replace")[-MAX_DETAILS:]


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (or `pid` alone, before its setsid)."""
    for kill in (os.killpg, os.kill):  # before its setsid the worker has no group of its own yet
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def close_fds(*fds: int) -> None:
    """Close each fd, ignoring one already closed."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def failure_result(spec: CheckSpec, failure: WorkerFailure, timeout: float, start: float) -> Result:
    """The ERROR (or, for a hardened runtime's limit, the config FAIL) of a check whose worker gave no answer."""
    reason = failure.reason
    if failure.kind in (FailureKind.START, FailureKind.EXIT):  # a hardened runtime's limit is named as config
        what = "its worker could not be started" if failure.kind is FailureKind.START else "its worker died"
        cause = runtime_cause(RuntimeError(f"{reason}\n{failure.output[-4000:]}"), what)
        if cause is not None:
            return dataclasses.replace(cause, details=failure.output).named(
                spec.name, time.monotonic() - start
            )
    if failure.kind is FailureKind.TIMEOUT and not failure.run_deadline:
        reason += " (the whole-run --timeout)" if timeout < spec.timeout_s else " (its timeout)"
    return errored(
        reason,
        details=failure.output,
        measured={"timeout_s": round(timeout, 3), "worker_failure": failure.kind.value},
        crashed=failure.kind is not FailureKind.TIMEOUT,
    ).named(spec.name, time.monotonic() - start)
