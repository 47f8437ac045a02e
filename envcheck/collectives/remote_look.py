"""`python -m envcheck.collectives.remote_look ...`: what a node shows of a rank that never reached the store, run
on that node by Slurm (`srun --overlap -w NODE`, started by rank 0: envcheck.collectives.absent).

It answers, in one JSON line: the processes of the job step's missing ranks on this node (from /proc/PID/environ:
SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID and SLURMD_NODENAME, as slurmstepd sets them for every task; the same
user may read them), each with its command, state and age, and the leaf of each rank's process tree (what it is
doing now: `sleep 60`, a wrapper, or envcheck itself); MASTER_ADDR as this node resolves it; and whether a TCP
connection from here reaches rank 0's store, and slurmd's port on the same host. Imports no torch (fast to start).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from envcheck.collectives.rendezvous import SLURMD_PORT, connect_error, resolve

CONNECT_S = 2.0
COMMAND_CHARS = 160


def _environ(pid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if b"=" in item)
    return {k: v for k, _, v in pairs if k.startswith("SLURM")}


def _stat(pid: str) -> tuple[int, str, float] | None:
    """(ppid, state, age in seconds) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            rest = f.read().rpartition(")")[2].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return int(rest[1]), rest[0], round(uptime - int(rest[19]) / ticks, 1)


def _command(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return "?"
    return "".join(ch if ch.isprintable() else "?" for ch in " ".join(argv))[:COMMAND_CHARS]


def tasks(job: str, step: str, node: str, ranks: set[int]) -> list[dict[str, Any]]:
    """The processes of step JOB.STEP on this node whose SLURM_PROCID is one of `ranks`."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        env = _environ(pid)
        if env.get("SLURM_JOB_ID") != job or env.get("SLURM_STEP_ID") != step:
            continue
        if env.get("SLURMD_NODENAME", node) != node or not env.get("SLURM_PROCID", "").isdigit():
            continue
        rank = int(env["SLURM_PROCID"])
        stat = _stat(pid)
        if rank in ranks and stat is not None:
            ppid, state, age = stat
            found.append(
                {
                    "rank": rank,
                    "pid": int(pid),
                    "ppid": ppid,
                    "state": state,
                    "age_s": age,
                    "command": _command(pid),
                }
            )
    parents = {t["ppid"] for t in found}
    for t in found:
        t["leaf"] = t["pid"] not in parents  # what the rank's task is doing now
        t["envcheck"] = "envcheck.distributed" in str(t["command"])
        t["torch_loaded"] = _maps_torch(str(t["pid"])) if t["envcheck"] else None
    return found


def _maps_torch(pid: str) -> bool | None:
    """Whether the process has torch's library mapped yet (still importing it, or past that)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as f:
            return any("libtorch" in line for line in f)
    except OSError:
        return None


def look(job: str, step: str, ranks: set[int], name: str, port: int, to: list[str]) -> dict[str, Any]:
    """This node's view of the missing ranks and of the way to rank 0's store."""
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    addrs, error = resolve(name, port, 3.0)
    targets = list({a.removeprefix("::ffff:"): a for a in [*to, *addrs]}.values())[:4]  # one per host
    connect = {a: connect_error(a, port, CONNECT_S) for a in targets}
    witness = {a: connect_error(a, SLURMD_PORT, 1.0) for a, why in connect.items() if why}
    return {
        "node": node,
        "tasks": tasks(job, step, node, ranks),
        "resolve": {"name": name, "addresses": addrs, "error": error},
        "connect": connect,
        "witness": {"port": SLURMD_PORT, "errors": witness},
    }


def main(argv: list[str] | None = None) -> int:
    """Print this node's view as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m envcheck.collectives.remote_look")
    parser.add_argument("--job", required=True)
    parser.add_argument("--step", required=True)
    parser.add_argument("--ranks", required=True, help="comma list of SLURM_PROCIDs")
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--to", default="", help="comma list of rank 0's addresses")
    args = parser.parse_args(argv)
    ranks = {int(r) for r in args.ranks.split(",") if r.isdigit()}
    to = [a for a in args.to.split(",") if a]
    print(json.dumps(look(args.job, args.step, ranks, args.name, args.port, to)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
