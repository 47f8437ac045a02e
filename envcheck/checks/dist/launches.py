"""The dist.* check bodies: each launches ranks for thin collectives (envcheck.collectives.all_reduce, .all_gather,
.broadcast, .sweep, .ddp, .sync_batchnorm) and judges what they found. They sit beside their specs (checks/dist), so a
collective's module holds only its rank side and its verdict, and the collectives registry imports no launcher.

`ddp.differential` (full level) is one launch of real ranks (gloo on CPU, one NCCL rank per GPU) running ddp.py's
option space and SyncBatchNorm (NCCL ranks). Its deadline is its own: the option space takes longer than a collective.
Not at the quick level: constructing a DistributedDataParallel imports torch._dynamo in every rank (1-3 s each,
measured 15 s for the whole check in a quick run on the 2-core dev box with CUDA torch 2.14.1), ten times the quick
level's margin."""

from __future__ import annotations

import time
from dataclasses import replace

from envcheck.collectives import all_gather, all_reduce, broadcast, ddp, ddp_buffers, sync_batchnorm
from envcheck.collectives.common import (Launcher, choose_ranks, correctness_check, launch_failure,
                                         launch_with_bisection)
from envcheck.collectives.launch import LaunchPlan, launch
from envcheck.collectives.sweep import CPU_SIZES, SWEEP_DEADLINE_S, judge
from envcheck.collectives.verdicts import combine
from envcheck.core.check import Context
from envcheck.core.result import Result, Status

DDP_TIMEOUT_S = 240.0  # ddp.differential's spec timeout (the engine's hard bound)
DDP_DEADLINE_S = 200.0  # ours, inside it, so that we name stalled ranks


def nccl_all_reduce(ctx: Context, launcher: Launcher = launch) -> Result:
    """The `dist.all_reduce` check: its own launch, judged by all_reduce's `judge`."""
    return correctness_check(ctx, {"all_reduce": all_reduce.judge}, launcher)


def all_gather_broadcast(ctx: Context, launcher: Launcher = launch) -> Result:
    """The `dist.collectives` check: all_gather and broadcast reproduce every element exactly."""
    return correctness_check(ctx, {"all_gather": all_gather.judge, "broadcast": broadcast.judge}, launcher)


def all_reduce_busbw(ctx: Context, launcher: Launcher = launch) -> Result:
    """The `dist.busbw` check: sweep message sizes; report algbw/busbw (GB/s), judge against --min-busbw."""
    chosen = choose_ranks(ctx)
    if isinstance(chosen, Result):
        return chosen
    backend, world = chosen
    # GPU sizes are chosen by the ranks from their free memory (the coordinator never touches CUDA).
    plan = LaunchPlan(backend, world, ("sweep",), SWEEP_DEADLINE_S, () if backend == "nccl" else CPU_SIZES,
                      start="fork", memory_fraction=ctx.options.devices.memory_fraction,
                      floor_bytes=ctx.options.dist.min_busbw_at_bytes if ctx.options.dist.min_busbw_gbps else None)
    outcome = launcher(plan)
    if not outcome.ok:
        return launch_failure(outcome, [])
    return judge([r.found or {} for r in outcome.ranks], backend, world, ctx.options.dist)


def ddp_differential(ctx: Context, launcher: Launcher = launch) -> Result:
    """DDP (and, on GPUs, SyncBatchNorm) equal one process on the concatenated batch, across their options."""
    began = time.monotonic()
    chosen = choose_ranks(ctx)
    if isinstance(chosen, Result):
        return chosen
    backend, world = chosen
    # by reference, keyed by the ranks' step
    judges = {"ddp": ddp.judge, "ddp_buffers": ddp_buffers.judge, "sync_batchnorm": sync_batchnorm.judge}
    steps = tuple(judges)
    left = DDP_TIMEOUT_S - 5.0 - (time.monotonic() - began)
    plan = LaunchPlan(backend, world, steps, max(5.0, min(DDP_DEADLINE_S, left)), start="fork")
    outcome, fixed_by, notes = launch_with_bisection(plan, left, launcher)
    if not outcome.ok:
        return launch_failure(outcome, notes)
    findings = [r.found or {} for r in outcome.ranks]
    results = [judge(findings, backend, world, ctx.options.dist) for judge in judges.values()]
    result = combine(results)
    warnings = [r for r in results if r.status is Status.WARN]
    if warnings and result.status is Status.PASS:  # combine() knows pass and fail; keep a known-bug warning
        result = replace(warnings[0], measured=result.measured, summary="; ".join(r.summary for r in results))
    if notes or fixed_by:
        result = replace(result, measured={**result.measured, "launch_notes": notes, "fixed_by": fixed_by})
    return result
