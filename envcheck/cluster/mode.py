"""The cluster options of `envcheck run` and what happens after the checks ran: class policy, the
one-line reason, draining the node from a Slurm prolog, and the Prometheus textfile."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from envcheck.cluster.policy import NODE_FAULT, NPD_UNKNOWN, Mode, decide, reclassify
from envcheck.cluster.prometheus import render, textfile_path
from envcheck.core.result import Result
from envcheck.core.text import one_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--for` and `--prometheus` (validated by argparse, before any check runs)."""
    parser.add_argument("--for", dest="for_mode", choices=[m.value for m in Mode], metavar="MODE",
                        help="exit policy for a cluster: prolog (Slurm), preflight (Kubernetes), npd "
                             "(node-problem-detector); only node faults fail (see docs/cluster.md)")
    parser.add_argument("--prometheus", type=textfile_path, metavar="FILE",
                        help="write a node_exporter textfile (atomically) with each check's status and key figures")


def adjust(args: argparse.Namespace, results: Sequence[Result]) -> list[Result]:
    """Results as the cluster mode classes them (a node that lost its GPUs is a node fault)."""
    mode = Mode(args.for_mode) if getattr(args, "for_mode", None) else None
    return reclassify(results, mode, getattr(args, "expect_gpus", None))


def drain(reason: str, env: Mapping[str, str]) -> str | None:
    """From a Slurm prolog (SLURMD_NODENAME set), drain this node with envcheck's reason; a note on failure.

    slurmd drains a node whose prolog failed with the reason "Prolog error"; draining it first, with the
    finding, is what makes `sinfo -R` say why.
    """
    node = env.get("SLURMD_NODENAME")
    scontrol = shutil.which("scontrol")
    if not node or not scontrol:
        return None
    try:
        done = subprocess.run([scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"scontrol update failed: {exc}"
    return None if done.returncode == 0 else f"scontrol update failed: {(done.stderr or done.stdout).strip()}"


def _say(line: str, out: Any) -> None:
    """One line; a closed or full stdout is the table's loss, not a reason to skip the metrics file."""
    try:
        print(line, file=out, flush=True)
    except OSError:
        from envcheck.app.output import stdout_gone

        if out is sys.stdout:
            stdout_gone()


def finish(args: argparse.Namespace, results: Sequence[Result], facts: Mapping[str, Any], code: int) -> int:
    """Apply --for (exit code, reason line, warnings) and write --prometheus; returns the exit code."""
    mode = Mode(args.for_mode) if getattr(args, "for_mode", None) else None
    if mode is not None:
        decision = decide(results, mode)
        # keep `--json -`/`--junit -` pure
        out = sys.stderr if "-" in (getattr(args, "json", None), getattr(args, "junit", None)) else sys.stdout
        for line in decision.warnings:
            _say(f"envcheck: warning: {line}", sys.stderr)
        if decision.reason:
            _say(decision.reason, out)  # npd's message, the prolog's Reason=, the pod's log
            if mode is Mode.PROLOG and decision.code:
                note = drain(decision.reason, os.environ)
                if note:
                    _say(f"envcheck: warning: {note}", sys.stderr)
        elif mode is Mode.NPD:
            _say("envcheck: node OK" if decision.code == 0 else "envcheck: could not judge the node", out)
        code = decision.code
    if getattr(args, "prometheus", None):
        from envcheck.app.output import WriteError, write_output

        try:  # the one writer (envcheck.app.output): atomic, regular files only, one error mapping
            write_output(args.prometheus, render(results, facts, mode=mode.value if mode else "run", exit_code=code))
        except WriteError as exc:  # envcheck's own failure: never evidence against the node
            if mode is None:
                raise  # `run` without --for: one line, exit 3, after the other reports (envcheck.app.commands)
            return own_failure(mode, code, f"metrics not written to {args.prometheus}: {exc.message}")
    return code


def own_failure(mode: Mode | None, code: int, what: str) -> int:
    """envcheck could not finish its own job (a write, its stderr): one line, and an exit code that never drains
    a node for it: prolog and preflight keep the node's verdict (0 unless a node fault was found), npd says
    'unknown' (2) unless a node fault was found. Outside cluster modes the caller's handler decides (raise)."""
    try:
        print(f"envcheck: warning: {one_line(' '.join(what.split()))[:300]} (envcheck's own failure, not the node's)",
              file=sys.stderr)
    except (OSError, ValueError):  # a full or closed stderr: nothing more to say
        pass
    if mode is None:
        raise OSError(what)
    if mode is Mode.NPD:
        return code if code == NODE_FAULT else NPD_UNKNOWN
    return code
