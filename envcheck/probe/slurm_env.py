"""Slurm's task variables as torchrun's: `srun ... python -m envcheck.distributed` needs no torchrun.

RANK/WORLD_SIZE/LOCAL_RANK come from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; MASTER_ADDR is the first
node of SLURM_JOB_NODELIST (rank 0 runs there: srun places task 0 on the first node of the step, and
the step spans the job's nodes); MASTER_PORT defaults to a port derived from the job id, so two jobs (or
steps) sharing a node do not collide. Rank 0 then hosts the TCPStore that carries the findings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping

SLURM_VARS = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST")
PORT_BASE, PORT_SPAN = 20000, 20000


def split_top(text: str) -> list[str]:
    """Split a hostlist at the commas outside brackets: `a[1-2],b` -> ['a[1-2]', 'b']."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p]


def expand_nodelist(text: str) -> list[str]:
    """Expand Slurm's hostlist forms: `node[01-04,07]`, `a,b`, `rack[1-2]-n[1-2]`, keeping zero padding."""
    hosts: list[str] = []
    for part in split_top(text.strip()):
        match = re.search(r"\[([^\]]+)\]", part)
        if match is None:
            hosts.append(part)
            continue
        head, tail = part[: match.start()], part[match.end() :]
        for item in match.group(1).split(","):
            lo, _, hi = item.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"cannot expand hostlist {text!r}: {item!r} is not N or N-M")
            for n in range(int(lo), int(hi or lo) + 1):
                hosts.extend(expand_nodelist(f"{head}{n:0{len(lo)}d}{tail}"))
    return hosts


def first_node(nodelist: str) -> str:
    """The first host of a nodelist: `scontrol show hostnames` when present, else our own parser."""
    scontrol = shutil.which("scontrol")
    if scontrol:
        try:
            out = subprocess.run(
                [scontrol, "show", "hostnames", nodelist],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.split()
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass
    hosts = expand_nodelist(nodelist)
    if not hosts:
        raise ValueError(f"SLURM_JOB_NODELIST={nodelist!r} names no host")
    return hosts[0]


def torchrun_env(env: Mapping[str, str]) -> dict[str, str]:
    """The torchrun variables to set from Slurm's, or {} when this is not a Slurm task (or torchrun set them)."""
    if "RANK" in env or any(v not in env for v in SLURM_VARS):
        return {}
    out = {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"], "LOCAL_RANK": env["SLURM_LOCALID"]}
    if "MASTER_ADDR" not in env:
        out["MASTER_ADDR"] = first_node(env["SLURM_JOB_NODELIST"])
    if "MASTER_PORT" not in env:
        job, step = env.get("SLURM_JOB_ID", "0"), env.get("SLURM_STEP_ID", "0")
        seed = (int(job) if job.isdigit() else 0) * 16 + (int(step) if step.isdigit() else 0)
        out["MASTER_PORT"] = str(PORT_BASE + seed % PORT_SPAN)  # each step its own port (no TIME_WAIT clash)
    return out
