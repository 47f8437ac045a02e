"""Slurm's own view of the ranks that never reached the store: rank 0 asks Slurm to run a look on each of their
nodes (`srun --jobid J --overlap -w NODE python -m envcheck.collectives.remote_look`, a step beside ours), which
says whether the rank's task runs there and what it is doing, and whether that node reaches rank 0's store. When
Slurm cannot run it, `scontrol show node` says why (DOWN, NOT_RESPONDING, a drain reason).

Early (a few seconds after rank 0 hosts the store) a view is conclusive when a rank's task is gone, or its node
cannot reach the store that rank 0 is known to serve: waiting out the timeout would not change the cause.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from envcheck.collectives import remote_look
from envcheck.probe import slurm_view

IMPORTED_AT = time.time()  # about when envcheck began in this process (the entry imports this before torch)
REMOTE_S = 10.0
MAX_NODES = 8
ERROR_CHARS = 300


@dataclass
class NodeView:
    """One node's view (remote_look's answer), or why Slurm could not give it and the node's state."""

    node: str
    view: dict[str, Any] | None = None
    error: str | None = None
    state: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_of(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(job, step) of this srun task; None outside Slurm."""
    job, step = env.get("SLURM_JOB_ID"), env.get("SLURM_STEP_ID")
    return (job, step) if job and step else None


def _srun_env(env: Mapping[str, str]) -> dict[str, str]:
    """Our environment without the task's own SLURM_* variables (they would shape the new step like ours)."""
    return {k: v for k, v in env.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}


def _args(job: str, step: str, ranks: list[int], name: str, port: int, to: list[str]) -> list[str]:
    return [
        *("--job", job, "--step", step, "--ranks", ",".join(map(str, ranks))),
        *("--name", name, "--port", str(port), "--to", ",".join(to)),
    ]


def look_on(
    node: str,
    job: str,
    step: str,
    ranks: list[int],
    where: tuple[str, int, list[str]],
    env: Mapping[str, str],
) -> NodeView:
    """The look on `node`: in this process when it is this node, else through an overlapping srun step."""
    name, port, to = where
    if node == socket.gethostname():
        return NodeView(node, view=remote_look.look(job, step, set(ranks), name, port, to))
    srun = shutil.which("srun")
    if srun is None:
        return NodeView(node, error="srun is not on PATH here", state=slurm_view.node(node))
    argv = [
        *(srun, "--jobid", job, "--overlap", "-N1", "-n1", "-w", node, "--quiet", "--export=ALL"),
        *(sys.executable, "-m", "envcheck.collectives.remote_look", *_args(job, step, ranks, name, port, to)),
    ]
    try:
        proc = subprocess.Popen(
            argv,
            env=_srun_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        return NodeView(node, error=f"srun could not start: {exc}")
    try:
        out, err = proc.communicate(timeout=REMOTE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return NodeView(
            node, error=f"Slurm's look did not answer within {REMOTE_S:g}s", state=slurm_view.node(node)
        )
    try:
        return NodeView(node, view=json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        said = " ".join(err.split())[:ERROR_CHARS] or f"exit code {proc.returncode}"
        return NodeView(node, error=said, state=slurm_view.node(node))


def views(
    missing: list[int], layout: list[str], where: tuple[str, int, list[str]], env: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Each node's view of its missing ranks (at most MAX_NODES nodes, looked at together), as NodeView dicts."""
    step = step_of(env)
    if step is None:
        return {}
    by_node: dict[str, list[int]] = {}
    for rank in missing:
        if rank < len(layout):
            by_node.setdefault(layout[rank], []).append(rank)
    out: dict[str, dict[str, Any]] = {}

    def one(node: str, ranks: list[int]) -> None:
        out[node] = look_on(node, *step, ranks, where, env).as_dict()

    threads = [
        threading.Thread(target=one, args=(node, ranks), daemon=True)
        for node, ranks in list(by_node.items())[:MAX_NODES]
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(REMOTE_S + 2)
    return dict(out)


def started_late(env: Mapping[str, str], timeout_s: float) -> str | None:
    """For a rank that the store's port refused all along: whether envcheck began in it more than --timeout after
    Slurm started the step (the step's StartTime is the controller's clock; this node's offset from it, through
    sdiag, corrects our own), so that it came too late for rank 0, which waits --timeout for arrivals."""
    step = step_of(env)
    if step is None:
        return None
    fields = slurm_view.step(*step) or {}
    start = slurm_view.slurm_time(fields.get("StartTime", ""))
    clock = slurm_view.controller_clock()
    if start is None or clock is None:
        return None
    late = IMPORTED_AT - clock.offset_s - start
    if late <= timeout_s:
        return None
    return (
        f"the store's port refused every connection, and envcheck began here {late:.0f}s after Slurm started step "
        f"{step[0]}.{step[1]} ({fields['StartTime']}, Slurm's clock), more than rank 0's --timeout {timeout_s:g}s: "
        "this rank started too late (rank 0's report names the ranks it missed)"
    )


def gone(view: Mapping[str, Any], rank: int) -> bool:
    """Slurm's look ran on the rank's node and found no process of it."""
    seen = view.get("view")
    return seen is not None and not any(t["rank"] == rank for t in seen["tasks"])


def cut_off(view: Mapping[str, Any]) -> bool:
    """From the rank's node, no address of rank 0's store answers."""
    connect = (view.get("view") or {}).get("connect") or {}
    return bool(connect) and all(why is not None for why in connect.values())


def conclusive(found: Mapping[str, Mapping[str, Any]], missing: list[int], layout: list[str]) -> bool:
    """Whether waiting longer cannot change the cause: a missing rank's task is gone, or its node is cut off."""
    for rank in missing:
        view = found.get(layout[rank]) if rank < len(layout) else None
        if view is not None and (gone(view, rank) or cut_off(view)):
            return True
    return False
