"""Slurm by the book: what the prolog leaves behind, and what the HealthCheckProgram (`--for health`) does to the node.

Slurm 22.05's rules (docs/cluster.md cites them): a prolog "should not call Slurm commands"; a prolog that exits
non-zero drains the node with the fixed reason "Prolog error" (slurmctld's node_mgr.c); the HealthCheckProgram "may
be used to ... DRAIN the node" and "any action to be taken must be explicitly performed by the program (e.g. execute
scontrol update NodeName=foo State=drain Reason=...)", and it is killed after 60 s. So the prolog only exits 1 and
leaves its reason in a local state file; the health check drains with envcheck's reason (prefix `envcheck:`),
relabels a "Prolog error" that envcheck's own prolog caused, and resumes a node only when the drain is envcheck's
and the check it names passes again (as LBNL NHC and soperator do). A node drained by anyone else is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from envcheck.core.result import FaultClass, Result, Status

PREFIX = "envcheck:"
PROLOG_ERROR = "Prolog error"  # slurmctld's reason for a node whose prolog failed (src/slurmctld/node_mgr.c)
STATE_VAR = "ENVCHECK_SLURM_STATE"
STATE_FILE = "/var/lib/envcheck/slurm-prolog.json"
SLURM_CALL_S = 5.0  # each sinfo/scontrol call; the health check must end within slurmd's 60 s
REASON_MAX = 200


def state_file(env: Mapping[str, str]) -> Path:
    """Where the prolog leaves its last node-fault reason for the health check."""
    return Path(env.get(STATE_VAR) or STATE_FILE)


def remember_prolog(reason: str | None, env: Mapping[str, str]) -> str | None:
    """The prolog's verdict, kept locally (a node fault's reason, or nothing once the node passes); a one-line
    problem when it cannot be kept. No Slurm command is called."""
    path = state_file(env)
    try:
        if reason is None:
            path.unlink(missing_ok=True)
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"reason": reason, "time": time.time()}) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        return f"prolog verdict not kept in {path}: {exc.strerror or exc}"
    return None


def remember_usage_error(message: str, env: Mapping[str, str]) -> str | None:
    """The prolog's own command line was wrong (it exited 0: the node was not judged): kept in the same state file,
    so that the health check says so on every run until a prolog parses again (which replaces or removes the file).
    A one-line problem when it cannot be kept."""
    path = state_file(env)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"usage_error": message, "time": time.time()}) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        return f"usage error not kept in {path}: {exc.strerror or exc}"
    return None


def prolog_usage_error(env: Mapping[str, str]) -> str | None:
    """The prolog's last usage error, when its last run had one (None otherwise)."""
    try:
        data = json.loads(state_file(env).read_text())
    except (OSError, ValueError):
        return None
    return str(data["usage_error"]) if isinstance(data, dict) and "usage_error" in data else None


def _prolog_reason(env: Mapping[str, str]) -> str | None:
    try:
        data = json.loads(state_file(env).read_text())
    except (OSError, ValueError):
        return None
    return str(data["reason"]) if isinstance(data, dict) and "reason" in data else None


@dataclass(frozen=True)
class Node:
    """What sinfo says about one node: its state (e.g. 'idle', 'drained') and its reason ('' when none)."""

    name: str
    state: str
    reason: str


def _slurm(*argv: str) -> tuple[str | None, str]:
    """(stdout, '') of a Slurm command, or (None, the problem in one line)."""
    path = shutil.which(argv[0])
    if path is None:
        return None, f"{argv[0]} not found on PATH"
    try:
        done = subprocess.run(
            [path, *argv[1:]], capture_output=True, text=True, timeout=SLURM_CALL_S, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]} did not answer within {SLURM_CALL_S:g} s"
    except OSError as exc:
        return None, f"{argv[0]} could not start: {exc.strerror}"
    if done.returncode != 0:
        return None, f"{' '.join(argv[:2])} failed: {' '.join((done.stderr or done.stdout).split())[:200]}"
    return done.stdout, ""


def read_node(name: str) -> Node | str:
    """The node's state and reason from sinfo, or the problem."""
    out, problem = _slurm("sinfo", "--noheader", "--Node", f"--nodes={name}", "--format=%T|%E")
    if out is None:
        return problem
    line = out.strip().splitlines()[0] if out.strip() else ""
    state, _, reason = line.partition("|")
    if not state:
        return f"sinfo does not know node {name}"
    return Node(name, state.strip(), "" if reason.strip() == "none" else reason.strip())


def _named_check(reason: str) -> str | None:
    """'gpu.health' from 'envcheck: [node] gpu.health: ...'."""
    body = reason[len(PREFIX) :].strip()
    if body.startswith("[node] "):
        return body[len("[node] ") :].split(":", 1)[0].strip() or None
    return None


def _passes(results: Sequence[Result], check: str) -> bool:
    return any(
        r.name == check and r.status in (Status.PASS, Status.WARN) and r.fault_class is not FaultClass.NODE
        for r in results
    )


def act(
    reason: str, results: Sequence[Result], env: Mapping[str, str], resume_hold: str | None = None
) -> list[str]:
    """The health check's action on this node (SLURMD_NODENAME, else the short host name): drain with envcheck's
    reason on a node fault, resume an envcheck drain whose check passes again (unless `resume_hold` says why not
    yet: too few clean runs in a row, cluster.streaks); what it did, one line each."""
    name = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    node = read_node(name)
    if isinstance(node, str):
        return [f"node left as it is: {node}"]
    ours = node.reason.startswith(PREFIX)
    prolog = _prolog_reason(env)
    if node.reason == PROLOG_ERROR and prolog:  # slurmd drained it for envcheck's prolog: envcheck's to label
        ours, node = True, Node(name, node.state, f"{PREFIX} {prolog}")
    if node.reason and not ours:
        return [f"node {name} is drained by someone else ({node.reason[:80]}): left as it is"]
    if reason:
        text = f"{PREFIX} {reason}"[:REASON_MAX]
        _, problem = _slurm("scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={text}")
        return [problem] if problem else [f"node {name} drained: {text}"]
    if not node.reason:
        return []
    check = _named_check(node.reason)
    if check is None or not _passes(results, check):
        return [
            f"node {name} stays drained: {check or 'its check'} did not pass in this run ({node.reason[:80]})"
        ]
    if resume_hold:
        return [f"node {name} stays drained: {check} passes, {resume_hold} ({node.reason[:80]})"]
    _, problem = _slurm("scontrol", "update", f"NodeName={name}", "State=RESUME")
    if problem:
        return [problem]
    remember_prolog(None, env)
    return [f"node {name} resumed: {check} passes again (was: {node.reason[:80]})"]
