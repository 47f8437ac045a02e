"""The shared check plumbing: pick ranks, launch (each check its own launch), judge, bisect transports.

Each collective lives in its own module (`all_reduce`, `all_gather`, `broadcast`, `sweep`); a check
names the collective steps it launches, and each step's module judges its own findings.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from envcheck.collectives import failures as diagnosis
from envcheck.collectives.launch import LaunchOutcome, LaunchPlan, _rank_env, launch
from envcheck.collectives.rank_hook import HOOK_VAR
from envcheck.collectives.verdicts import combine, interface_cause
from envcheck.core.check import Context, DistOptions
from envcheck.core.hardening import MIN_SHM_BYTES, SHM_FIX, SHM_SMALL, nofile_low, nproc_low
from envcheck.core.result import FaultClass, Result, errored, failed, skipped
from envcheck.probe.facts import shm_bytes
from envcheck.probe.interfaces import interfaces

ALL_REDUCE_TIMEOUT_S = 65.0  # spec timeouts (the engine's hard bound): room for 3 NCCL attempts of 18 s
# Internal deadlines, kept below the spec timeouts so that we, not the engine, kill the ranks and can
# name the stalled ones. NCCL ranks (forked when CUDA is untouched here, else spawned) init NCCL, so get longer.
CORRECTNESS_DEADLINE_S = MappingProxyType({"gloo": 12.0, "nccl": 18.0})
MARGIN_S = 3.0
MIN_RETRY_S = 5.0
SLOW_START_FACTOR = 2.0  # a slow start is retried once, unchanged, with this much longer a deadline
# Transport bisection (NCCL only): each retry disables one more transport.
BISECTION: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("P2P", (("NCCL_P2P_DISABLE", "1"),)),
    ("SHM", (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"))),
)
Launcher = Callable[[LaunchPlan], LaunchOutcome]
# A collective's verdict over every rank's findings (`judge(findings, backend, world, options)`).
Judge = Callable[[list[dict[str, Any]], str, int, DistOptions], Result]


def choose_ranks(ctx: Context) -> tuple[str, int] | Result:
    """(backend, world size): one NCCL rank per GPU, else `cpu_ranks` gloo ranks; or a SKIP/ERROR."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return skipped("this torch build has no torch.distributed")
    # device_count() asks NVML first (torch's documented fork-safe check): no cuInit in this coordinator,
    # so the NCCL ranks can be forked from it (launch.can_fork) instead of each importing torch again.
    if torch.cuda.device_count() > 0 and not ctx.allow_cpu:
        if not dist.is_nccl_available():
            return failed(
                "CUDA is available but this torch build has no NCCL backend",
                "install a CUDA build of torch (pip install torch --index-url "
                "https://download.pytorch.org/whl/cu128)",
                fault_class=FaultClass.IMAGE,
            )
        return "nccl", int(torch.cuda.device_count())
    ranks = ctx.options.dist.cpu_ranks
    if ranks < 1:
        return errored(f"cpu_ranks must be a positive integer, got {ranks!r} (use --cpu-ranks 2)")
    if not dist.is_gloo_available():
        return skipped("this torch build has no gloo backend")
    return "gloo", ranks


def launch_with_bisection(
    plan: LaunchPlan, budget_s: float, launcher: Launcher = launch
) -> tuple[LaunchOutcome, str | None, list[str]]:
    """Launch; on an NCCL transport failure retry with transports disabled. Returns (outcome, fixed-by, notes).

    A slow start (ranks still importing torch or initialising when the deadline hit, see
    `diagnosis.slow_start`) is not a transport failure: it is retried once as it was, with a longer
    deadline when the budget allows, and never bisected. Only a launch whose ranks reached a collective
    and stalled or raised there is retried with P2P, then SHM, disabled.
    """
    began = time.monotonic()
    first = launcher(plan)
    if first.ok or plan.backend != "nccl" or os.environ.get(HOOK_VAR):
        return first, None, []
    notes: list[str] = []
    if interface_cause(diagnosis.failure_details(first), _rank_env(first.plan), interfaces()):
        return first, None, notes  # a socket interface that is not there: no transport retry can change that
    if diagnosis.slow_start(first):
        left = budget_s - (time.monotonic() - began)
        if left < MIN_RETRY_S:
            notes.append(
                f"slow start ({diagnosis.describe_slow_start(first)}); no retry: {left:.0f}s of budget left"
            )
            return first, None, notes
        retry = replace(plan, deadline_s=min(plan.deadline_s * SLOW_START_FACTOR, left - 2.0))
        notes.append(
            f"slow start ({diagnosis.describe_slow_start(first)}); retried unchanged with a "
            f"{retry.deadline_s:.0f}s deadline"
        )
        first = launcher(retry)
        if first.ok or diagnosis.slow_start(first):
            return first, None, notes
    for transport, env in BISECTION:
        left = budget_s - (time.monotonic() - began)
        if left < MIN_RETRY_S:
            notes.append(f"retry without {transport} not tried: {left:.0f}s of budget left")
            break
        outcome = launcher(replace(plan, deadline_s=min(plan.deadline_s, left - 2.0), env=env))
        if outcome.ok:
            return outcome, transport, notes
        notes.append(f"still failing with {' '.join(f'{k}={v}' for k, v in env)}")
    return first, None, notes


def launch_failure(outcome: LaunchOutcome, notes: list[str]) -> Result:
    """FAIL naming the ranks that stalled or died (or were still starting), with every rank's log."""
    measured = {
        "ranks": diagnosis.rank_table(outcome),
        "elapsed_s": outcome.elapsed_s,
        "deadline_s": outcome.plan.deadline_s,
        "bisection": notes,
    }
    limit = diagnosis.limit_cause(diagnosis.failure_details(outcome), len(outcome.ranks))
    if limit:  # the job user's ulimit, not the node: config (runtime.nproc_low/nofile_low), never a drain
        low = nofile_low if limit == "nofile" else nproc_low
        what = f"{outcome.plan.backend} ranks could not start their processes or threads"
        return replace(low(what), measured=measured, details=diagnosis.failure_details(outcome))
    if diagnosis.slow_start(outcome):
        return failed(
            f"{outcome.plan.backend} ranks did not start in time (slow start, not a transport "
            f"failure): {diagnosis.describe_slow_start(outcome)}",
            diagnosis.SLOW_START_REMEDIATION,
            measured=measured,
            details=diagnosis.failure_details(outcome),
            fault_class=FaultClass.NODE,
        )
    try:  # the interface the ranks' socket variable names is missing: the cause, not the transport
        cause = interface_cause(diagnosis.failure_details(outcome), _rank_env(outcome.plan), interfaces())
    except OSError:
        cause = None
    if cause:
        return failed(
            f"{outcome.plan.backend} ranks failed to initialise: {cause[0]}",
            cause[1],
            measured=measured,
            details=diagnosis.failure_details(outcome),
            fault_class=FaultClass.CONFIG,
        )
    summary = diagnosis.describe_failure(outcome)
    return failed(
        f"{outcome.plan.backend} ranks failed: {summary}",
        diagnosis.remediation_for(outcome.plan.backend),
        measured=measured,
        details=diagnosis.failure_details(outcome),
        fault_class=FaultClass.NODE,
    )


def transport_fixed(result: Result, transport: str, outcome: LaunchOutcome) -> Result:
    """Ranks only worked with a transport disabled: the environment is broken; say which fix works. The SHM
    transport cured by NCCL_SHM_DISABLE where /dev/shm is under 1 GiB is the container's setting (`config`, like
    container.shm's shm.small): --ipc=host or --shm-size fixes it, and the node is not at fault."""
    env = " ".join(f"{k}={v}" for k, v in outcome.plan.env)
    shm = shm_bytes()
    if transport == "SHM" and isinstance(shm, int) and shm < MIN_SHM_BYTES:
        return failed(
            f"NCCL failed with default transports but passed with {env}: its shared-memory transport "
            f"needs more than this /dev/shm of {shm / 2**20:.0f} MiB ({result.summary})",
            f"give the job shared memory: {SHM_FIX}; until then export {env}",
            measured={**result.measured, "fixed_by": env, "shm_bytes": shm},
            details=result.details,
            fault_class=FaultClass.CONFIG,
            code=SHM_SMALL,
        )
    return failed(
        f"NCCL failed with default transports but passed with {env}: the {transport} transport "
        f"is broken here ({result.summary})",
        f"Export {env} for now; fix the cause: for P2P check IOMMU/ACS (iommu=pt) and "
        "`nvidia-smi topo -m`; for SHM give the container --ipc=host or --shm-size=8g",
        measured={**result.measured, "fixed_by": env},
        details=result.details,
        fault_class=FaultClass.NODE,
    )


def correctness_plan(ctx: Context, began: float, steps: tuple[str, ...]) -> LaunchPlan | Result:
    """A launch of the given collective steps, with a deadline inside what is left of the timeout."""
    chosen = choose_ranks(ctx)  # imports torch: seconds on a cold or busy machine
    if isinstance(chosen, Result):
        return chosen
    backend, world = chosen
    left = ALL_REDUCE_TIMEOUT_S - MARGIN_S - (time.monotonic() - began)
    return LaunchPlan(
        backend, world, steps, max(2.0, min(CORRECTNESS_DEADLINE_S[backend], left)), start="fork"
    )


def correctness_check(ctx: Context, judges: Mapping[str, Judge], launcher: Launcher = launch) -> Result:
    """One check = one launch of its collectives (no state shared with other checks), each judged by
    its module's `judge` (given by reference, keyed by the step the ranks run), combined into one result; NCCL
    transport bisection on failure."""
    steps = tuple(judges)
    began = time.monotonic()
    plan = correctness_plan(ctx, began, steps)
    if isinstance(plan, Result):
        return plan
    budget_s = ALL_REDUCE_TIMEOUT_S - MARGIN_S - (time.monotonic() - began)
    outcome, fixed_by, notes = launch_with_bisection(plan, budget_s, launcher)
    if not outcome.ok:
        return launch_failure(outcome, notes)
    findings = [r.found or {} for r in outcome.ranks]
    result = combine(
        [judge(findings, plan.backend, plan.world_size, ctx.options.dist) for judge in judges.values()]
    )
    if notes:
        result = replace(result, measured={**result.measured, "launch_notes": notes})
    return transport_fixed(result, fixed_by, outcome) if fixed_by else result
