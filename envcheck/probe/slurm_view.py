"""Slurm's own view of a job step, its nodes and its clock, read with Slurm's clients (each call with a timeout;
None when Slurm is not there or did not answer). Readers only, no verdicts.

- `scontrol show step J.S -o`: the step's StartTime (the controller's clock), State, NodeList, Tasks.
- `scontrol show node N -o`: the node's NodeAddr, State (DOWN*, DRAIN, NOT_RESPONDING...) and Reason.
- `sdiag`: its header `sdiag output at <date> (<epoch>)` is the controller's own time when it answered (slurmctld
  packs `time(NULL)` first into the reply: SchedMD/slurm src/slurmctld/statistics.c, pack_all_stat; sdiag prints it
  as `req_time`: src/sdiag/sdiag.c, _print_stats), so a node's clock can be judged against a clock that is not one
  of the nodes judged.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass

CALL_S = 5.0
_FIELD = re.compile(r"(\w+(?::\w+)?)=(.*?)(?= \w+(?::\w+)?=|$)")
_SDIAG_AT = re.compile(r"sdiag output at .*\((\d+)\)")


def _run(tool: str, *args: str, timeout_s: float = CALL_S) -> str | None:
    path = shutil.which(tool)
    if path is None:
        return None
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def fields(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value two` (scontrol's -o form) as a dict; a value may hold spaces (Reason=...)."""
    return {m.group(1): m.group(2).strip() for m in _FIELD.finditer(line.strip())}


def node(name: str, timeout_s: float = CALL_S) -> dict[str, str] | None:
    """`scontrol show node NAME -o` as fields (None outside Slurm or when NAME is not a node)."""
    out = _run("scontrol", "show", "node", name, "-o", timeout_s=timeout_s)
    return fields(out.splitlines()[0]) if out and out.strip() else None


def node_addr(name: str, timeout_s: float = CALL_S) -> str | None:
    """Slurm's NodeAddr of node `name` (None outside Slurm or when it is not a node)."""
    found = node(name, timeout_s)
    return (found or {}).get("NodeAddr") or None


def step(job: str, step_id: str, timeout_s: float = CALL_S) -> dict[str, str] | None:
    """`scontrol show step JOB.STEP -o` as fields: StartTime, State, NodeList, Tasks..."""
    out = _run("scontrol", "show", "step", f"{job}.{step_id}", "-o", timeout_s=timeout_s)
    return fields(out.splitlines()[0]) if out and out.strip() else None


def slurm_time(text: str) -> float | None:
    """A Slurm timestamp (`2026-11-28T19:09:27`, in this process's time zone, as scontrol prints it) as epoch."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class ControllerClock:
    """This node's wall clock against slurmctld's: offset (positive: this node is ahead) and the round trip."""

    offset_s: float
    round_trip_s: float


def controller_clock(timeout_s: float = CALL_S) -> ControllerClock | None:
    """This node's clock offset from the Slurm controller's, from one `sdiag` round trip (its epoch has 1 s
    resolution: the offset is known to about half a second plus half the round trip)."""
    before = time.time()
    began = time.monotonic()
    out = _run("sdiag", timeout_s=timeout_s)
    took = time.monotonic() - began
    epoch = sdiag_epoch(out or "")
    if epoch is None:
        return None
    middle = before + took / 2
    return ControllerClock(offset_s=middle - (epoch + 0.5), round_trip_s=took)  # the epoch is a whole second


def sdiag_epoch(text: str) -> int | None:
    """The controller's epoch in sdiag's header (None when sdiag said no data)."""
    match = _SDIAG_AT.search(text)
    return int(match.group(1)) if match else None
