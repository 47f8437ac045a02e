"""envcheck's own failures in a cluster mode: never evidence against the node.

A report or metrics file that cannot be written, a full or closed stderr/stdout, and the job user's resource limits
(`ulimit -n`, `ulimit -u`: envcheck cannot open its files or start its workers) are envcheck's problem. In every
cluster mode they are one warning line and an exit code that never drains a node for them: prolog and preflight
keep the node's verdict (0 unless a node fault was found), npd says 'unknown' (2) unless a node fault was found.
"""

from __future__ import annotations

import errno
import resource
import sys
from collections.abc import Callable, Mapping

from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.policy import NODE_FAULT, NPD_UNKNOWN, OK, USAGE
from envcheck.core.errors import ExitCode, FatalError, UsageError, process_start_problem
from envcheck.core.text import one_line

# What slurmd sets in its prolog's and epilog's environment (SLURM_SCRIPT_CONTEXT, seen in Slurm 22.05): there a
# non-zero exit drains the node ("Prolog error"/"Epilog error").
SLURMD_SCRIPTS = frozenset({"prolog_slurmd", "epilog_slurmd"})

# Open files envcheck needs to start its workers (fork server, pipes, the worker's imports); measured here: with
# `ulimit -n 14` the run crashes, with 16 it finishes, so 64 leaves room for a check that opens a few more.
MIN_NOFILE = 64


def own_failure(mode: ModeName | None, code: int, what: str) -> int:
    """One warning line (when stderr takes it) and the exit code that keeps the node's verdict. Outside a cluster
    mode it is the run's error: one line, exit 3 (FatalError, printed by the app's handler)."""
    if mode is None:
        raise FatalError(what, exit_code=ExitCode.INTERNAL)
    try:
        print(
            f"envcheck: warning: {one_line(' '.join(what.split()))[:300]} (envcheck's own failure, not the node's)",
            file=sys.stderr,
            flush=True,
        )
    except (OSError, ValueError):  # a full or closed stderr: nothing more to say
        pass
    if mode is ModeName.NPD:
        return code if code == NODE_FAULT else NPD_UNKNOWN
    return code


def _limit(which: int) -> str:
    soft = resource.getrlimit(which)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


def describe(exc: BaseException, save_bug: Callable[[], str | None] = lambda: None) -> str:
    """Why envcheck could not finish, in words: a resource limit of the job's user, or its own bug (then
    `save_bug()` keeps the traceback: the app's crash log, passed down so cluster never imports app)."""
    if isinstance(exc, OSError) and exc.errno in (errno.EAGAIN, errno.ENOMEM):
        return process_start_problem(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
        return (
            f"too many open files (ulimit -n: {_limit(resource.RLIMIT_NOFILE)}); envcheck cannot start its "
            f"workers; raise it (ulimit -n {MIN_NOFILE * 16})"
        )
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return (
            f"cannot start a thread: the user's process limit is reached (ulimit -u: "
            f"{_limit(resource.RLIMIT_NPROC)}); raise it (ulimit -u) or end other processes of this user"
        )
    if isinstance(exc, OSError):
        return f"envcheck could not finish: {exc.strerror or exc}"
    where = save_bug()
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"internal error: {type(exc).__name__}: {text}" + (f"; traceback in {where}" if where else "")


def raise_nofile() -> str | None:
    """Lift the soft open-files limit to the hard one when it is below MIN_NOFILE (any process may); the one-line
    problem when even the hard limit is too small to start the workers, else None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= MIN_NOFILE:
        return None
    target = MIN_NOFILE if hard == resource.RLIM_INFINITY else min(MIN_NOFILE, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        target = soft
    if target >= MIN_NOFILE:
        return None
    return (
        f"ulimit -n is {soft} (hard limit {hard}): envcheck needs {MIN_NOFILE} open files to start its "
        f"workers; raise it (ulimit -n {MIN_NOFILE * 16})"
    )


def guarded(
    mode: ModeName, body: Callable[[], int], save_bug: Callable[[], str | None] = lambda: None
) -> int:
    """Run a cluster-mode `run`: bad input (2) and signals pass through; any other failure before the verdict is
    envcheck's own (one line; prolog and preflight 0, npd 2), never a traceback and never a drain."""
    problem = raise_nofile()
    if problem:
        return own_failure(mode, 0, problem)
    try:
        return body()
    except UsageError:
        raise
    except FatalError as exc:
        return own_failure(mode, 0, exc.message)
    except Exception as exc:  # envcheck's own failure: never evidence against the node
        return own_failure(mode, 0, describe(exc, save_bug))


def usage_error_code(mode: ModeName | None, env: Mapping[str, str]) -> int:
    """The exit code of envcheck's own usage error (a mistyped flag, a bad value) in a node mode (docs/cluster.md,
    "Usage errors in node modes"). Under slurmd's prolog or epilog it is 0: the same mistake is in every node's
    prolog, and a non-zero code would drain every node that gets a job; the error is reported instead (stderr, the
    metrics file, the health check). Everywhere else it stays 2: an admin trying the script by hand, NPD ("unknown":
    no condition is set), the health check (slurmd ignores its code; envcheck neither drains nor resumes), a
    preflight (the Job fails: its own command is wrong, no retry on another node can help)."""
    if env.get("SLURM_SCRIPT_CONTEXT") in SLURMD_SCRIPTS:
        return OK
    return USAGE if mode is not ModeName.NPD else NPD_UNKNOWN
