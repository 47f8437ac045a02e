"""Turn a failed launch into words: which ranks died or stalled where, with their logs and a fix."""

from __future__ import annotations

import signal
from types import MappingProxyType
from typing import Any

from envcheck.collectives.launch import LaunchOutcome, RankOutcome

NCCL_REMEDIATION = (
    "If it hangs or dies in NCCL init/P2P: retry with NCCL_P2P_DISABLE=1 (then NCCL_SHM_DISABLE=1) to find "
    "the broken transport; check `nvidia-smi topo -m` and disable the IOMMU or ACS for P2P (iommu=pt); "
    "give containers shared memory with `docker run --ipc=host` or `--shm-size=8g` (/dev/shm too small "
    "breaks the SHM transport) and pinned memory with `--ulimit memlock=-1`"
)
GLOO_REMEDIATION = (
    "Check loopback networking (GLOO_SOCKET_IFNAME=lo) and that nothing kills processes or limits "
    "threads in this container; the rank logs in details show the error"
)


# Phases before the first collective, and what a rank in each is doing. A launch whose slowest rank
# is still in one of these when the deadline hits is a slow start (cold cache, busy machine), not a
# broken transport: no rank has sent anything over NCCL yet.
STARTUP_PHASES = MappingProxyType(
    {
        "not started": "starting the interpreter",
        "started": "importing torch",
        "store": "joining the rendezvous store",
        "init": "initialising the process group",
    }
)
SLOW_START_REMEDIATION = (
    "The ranks did not finish starting within the deadline, so no transport was tested. Usual causes: "
    "a cold file cache or slow filesystem (torch on NFS/overlay: warm it with `python -c 'import torch'`), "
    "an overloaded machine, or NCCL init waiting on a GPU held by another process (`nvidia-smi`). "
    "The rank logs in details show where each rank was"
)


def slow_start(outcome: LaunchOutcome) -> list[RankOutcome]:
    """The ranks still starting up when the deadline hit, if that is the whole failure; else [].

    A failure is a slow start when the deadline was hit, no rank died or raised, and some rank had not
    reached the first collective ('barrier'). Ranks that reached a collective and stalled there, or
    ranks that raised (in init or a collective), point at the transport instead.
    """
    if not outcome.deadline_hit or any(not r.killed and r.exit_code != 0 for r in outcome.ranks):
        return []
    return [r for r in outcome.ranks if r.killed and r.phase in STARTUP_PHASES]


def describe_slow_start(outcome: LaunchOutcome) -> str:
    """E.g. `rank 1 still importing torch ('started') at the 18s deadline`."""
    parts = []
    for phase in STARTUP_PHASES:
        ranks = [r.rank for r in slow_start(outcome) if r.phase == phase]
        if ranks:
            parts.append(f"{_ranks(ranks)} still {STARTUP_PHASES[phase]} ('{phase}')")
    return f"{', '.join(parts)} at the {outcome.plan.deadline_s:g}s deadline"


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _ending(rank: RankOutcome) -> str:
    code = rank.exit_code
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    error = (rank.found or {}).get("error")
    return f"exited with code {code}" + (f" ({error})" if error else "")


def describe_failure(outcome: LaunchOutcome) -> str:
    """One line naming the ranks that stalled (and where) or died (and how)."""
    parts = []
    killed = [r for r in outcome.ranks if r.killed]
    if outcome.deadline_hit and killed:
        least = min(len(r.phases) for r in killed)
        behind = [r for r in killed if len(r.phases) == least]
        ahead = sorted({r.phase for r in outcome.ranks if len(r.phases) > least})
        where = f"stalled after '{behind[0].phase}'"
        if ahead:
            where += f" and never reached '{ahead[0]}'"
        parts.append(
            f"{_ranks([r.rank for r in behind])} {where}; all ranks were killed at the "
            f"{outcome.plan.deadline_s:g}s deadline"
        )
    # The rank that got least far is listed first: it is usually the cause, the others its victims.
    for rank in sorted(outcome.ranks, key=lambda r: len(r.phases)):
        if not rank.killed and rank.exit_code != 0:
            parts.append(f"rank {rank.rank} {_ending(rank)} after reaching '{rank.phase}'")
    if not parts:
        bad = [r.rank for r in outcome.ranks if not r.found]
        parts.append(f"{_ranks(bad)} wrote no findings")
    return "; ".join(parts)


def failure_details(outcome: LaunchOutcome) -> str:
    """Every rank's ending, phases and captured output (NCCL_DEBUG=INFO on the GPU path)."""
    chunks = []
    for rank in outcome.ranks:
        phases = " -> ".join(f"{p}@{t - outcome.started_at:.2f}s" for p, t in rank.phases)
        ending = "killed by the coordinator" if rank.killed else _ending(rank)
        chunks.append(f"--- rank {rank.rank}: {ending}; phases: {phases or 'none'}")
        trace = (rank.found or {}).get("traceback")
        if trace:
            chunks.append(trace.rstrip())
        if rank.log.strip():
            chunks.append(rank.log.rstrip())
    if outcome.shm_removed:
        chunks.append("removed leftover NCCL shared memory: " + ", ".join(outcome.shm_removed))
    return "\n".join(chunks)


def rank_table(outcome: LaunchOutcome) -> list[dict[str, Any]]:
    """Per-rank measured values for the report."""
    return [
        {"rank": r.rank, "exit_code": r.exit_code, "killed": r.killed, "last_phase": r.phase}
        for r in outcome.ranks
    ]


def remediation_for(backend: str) -> str:
    """The fix to suggest when ranks die or stall."""
    return NCCL_REMEDIATION if backend == "nccl" else GLOO_REMEDIATION


# What a rank shows when the job user's limits, not the node, stopped it: EAGAIN from fork/pthread_create under
# `ulimit -u` (torch 2.13 here: `RuntimeError: Resource temporarily unavailable`), EMFILE under `ulimit -n`
# (`Too many open files`; not ENFILE's `... in system`, which is the node's table). A gloo rank whose thread could not
# start may also just abort (`terminate called without an active exception`, seen here under `ulimit -u 14`), so the
# user's headroom under RLIMIT_NPROC is judged as well.
LIMIT_ERRORS = (
    ("Resource temporarily unavailable", "RLIMIT_NPROC", "ulimit -u"),
    ("Too many open files", "RLIMIT_NOFILE", "ulimit -n"),
)
TASKS_PER_RANK = 16  # threads one gloo rank may start (its store, pairs, torch's pools), with room to spare


def user_tasks(uid: int) -> int:
    """Processes and threads of `uid` now (what RLIMIT_NPROC counts), from /proc."""
    import os

    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"].strip())
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return total


def limit_cause(details: str, world: int) -> str | None:
    """Which limit of this user stopped the ranks ('nofile' or 'nproc'), when their output shows one, or the user's
    process limit leaves no room for `world` ranks; None otherwise: then the failure is the node's."""
    import os
    import resource

    for text, name, flag in LIMIT_ERRORS:
        if text in details and f"{text} in system" not in details:
            if resource.getrlimit(getattr(resource, name))[0] != resource.RLIM_INFINITY:
                return "nofile" if flag == "ulimit -n" else "nproc"
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    if soft != resource.RLIM_INFINITY and user_tasks(os.getuid()) + TASKS_PER_RANK * world > soft:
        return "nproc"
    return None
