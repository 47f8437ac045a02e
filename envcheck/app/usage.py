"""envcheck's own usage errors in the node modes (docs/cluster.md, "Usage errors in node modes").

A mistyped flag in a prolog is in every node's prolog at once: exit 2 there would drain every node that gets a job.
It must not go unnoticed either. So a usage error of a run started with `--for MODE` (or started by slurmd as its
prolog or epilog, whatever the flags say) is: one line on stderr naming the mistake and that the node was not
checked; the exit code of envcheck.cluster.own.usage_error_code (0 under slurmd's prolog/epilog, else 2); the metrics
file, when `--prometheus` names a writable file (`envcheck_usage_error{mode} 1`, which the shipped alert rule
EnvcheckUsageError fires on); under slurmd's prolog, the state file, so that every health check run says so too.
The argument list is scanned here because argparse stopped at the mistake.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence

from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.own import SLURMD_SCRIPTS, usage_error_code
from envcheck.core.errors import ExitCode, UsageError
from envcheck.core.text import one_line

MODES = {m.value: m for m in ModeName}


def option_value(argv: Sequence[str], flag: str) -> str | None:
    """The value given to `flag` (`--flag V` or `--flag=V`; the last one wins, as argparse does), or None."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(flag + "="):
            found = arg[len(flag) + 1 :]
    return found


def node_mode(argv: Sequence[str], env: Mapping[str, str]) -> ModeName | None:
    """The node mode the command was meant to run in: `--for`'s value, else the prolog when slurmd started it."""
    named = MODES.get(option_value(argv, "--for") or "")
    if named is not None:
        return named
    return ModeName.PROLOG if env.get("SLURM_SCRIPT_CONTEXT") in SLURMD_SCRIPTS else None


def _metrics(argv: Sequence[str], mode: ModeName, code: int) -> str | None:
    """Write the usage error's textfile where `--prometheus` points, when that path is itself valid; a problem."""
    path = option_value(argv, "--prometheus")
    if not path:
        return None
    from envcheck.app.output import WriteError, write_output
    from envcheck.app.run_args import textfile_path
    from envcheck.cluster.prometheus import render_usage_error

    try:
        target = textfile_path(path)
    except argparse.ArgumentTypeError:  # the path itself is wrong: the error line already says so, or will
        return None
    try:
        write_output(target, render_usage_error(mode.value, code))
    except WriteError as exc:
        return f"metrics not written to {one_line(path)}: {exc.message}"
    return None


def _say(line: str, out: object) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=out, flush=True)  # type: ignore[call-overload]


def node_usage_error(argv: Sequence[str], exc: UsageError, env: Mapping[str, str] | None = None) -> int:
    """Report a usage error of a node-mode run and return its exit code; any other run's is re-raised."""
    env = os.environ if env is None else env
    mode = node_mode(argv, env)
    if mode is None:
        raise exc
    code = usage_error_code(mode, env)
    under_slurmd = env.get("SLURM_SCRIPT_CONTEXT") in SLURMD_SCRIPTS
    effect = (
        "exit 0 so that slurmd does not drain this node for it"
        if under_slurmd and code == ExitCode.OK
        else f"exit {code}, the node not judged"
    )
    _say(
        f"envcheck: error: {one_line(exc.message)} (a usage error in the {mode.value} command: this node was not "
        f"checked; {effect}; fix the command, see docs/cluster.md)",
        sys.stderr,
    )
    problems = [_metrics(argv, mode, code)]
    if under_slurmd:
        from envcheck.cluster.slurm_node import remember_usage_error

        problems.append(remember_usage_error(one_line(exc.message), env))
    for problem in problems:
        if problem:
            _say(f"envcheck: warning: {problem} (envcheck's own failure, not the node's)", sys.stderr)
    return code
