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
STARTUP_PHASES = MappingProxyType({
    "not started": "starting the interpreter",
    "started": "importing torch",
    "store": "joining the rendezvous store",
    "init": "initialising the process group",
})
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
        parts.append(f"{_ranks([r.rank for r in behind])} {where}; all ranks were killed at the "
                     f"{outcome.plan.deadline_s:g}s deadline")
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
    return [{"rank": r.rank, "exit_code": r.exit_code, "killed": r.killed, "last_phase": r.phase}
            for r in outcome.ranks]


def remediation_for(backend: str) -> str:
    """The fix to suggest when ranks die or stall."""
    return NCCL_REMEDIATION if backend == "nccl" else GLOO_REMEDIATION
