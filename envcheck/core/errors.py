"""The one error type the CLI turns into a one-line message and an exit code."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Every exit code envcheck gives (documented in docs/cluster.md; stable: change only with a major version)."""

    OK = 0
    FAILED = 1  # a check failed or errored; prolog and npd: a node fault (npd: "problem")
    USAGE = 2  # bad input, every mode (npd reads 2 as "unknown", which is what it is)
    NPD_UNKNOWN = 2  # npd: envcheck could not judge the node (an unclassified ERROR)
    INTERNAL = 3  # envcheck's own failure (a crash in its code, a report it could not write): no verdict
    PREFLIGHT_NODE = 10  # preflight: retry elsewhere (the node is at fault)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


INTERNAL_ERROR_EXIT = ExitCode.INTERNAL


class FatalError(Exception):
    """A problem the user must fix; printed as one line, never as a traceback."""

    def __init__(self, message: str, exit_code: int = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(FatalError):
    """Bad usage or bad input (exit code 2)."""


class StartFailure(RuntimeError):
    """A process could not be started (fork/spawn failed): the check reports `error` with this cause, no trace.
    `who` names the process that could not start (`rank 1 of 4`), as data: nothing parses the message."""

    def __init__(self, message: str, who: str = "") -> None:
        super().__init__(message)
        self.who = who


def process_start_problem(exc: OSError) -> str:
    """Why a fork/spawn failed, in words, with the fix (EAGAIN from fork is the user's process limit)."""
    import errno

    if exc.errno == errno.EAGAIN:
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
            limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
        except (ImportError, OSError, ValueError):
            limit = "?"
        return (
            f"cannot start a process: the user's process limit is reached (ulimit -u: {limit}); "
            "raise it (ulimit -u) or end other processes of this user"
        )
    if exc.errno == errno.ENOMEM:
        return (
            "cannot start a process: out of memory (fork failed with ENOMEM); free memory or raise the limit"
        )
    return f"cannot start a process: {exc.strerror or exc}"
