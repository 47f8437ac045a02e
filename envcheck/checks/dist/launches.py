"""The dist.* check bodies that launch ranks for a thin collective (envcheck.collectives.all_reduce, .sweep) and
judge what they found: beside their specs (checks/dist), so a collective's module holds only its rank side and its
verdict, and the collectives registry imports no launcher."""

from __future__ import annotations

from envcheck.collectives import all_reduce
from envcheck.collectives.common import Launcher, choose_ranks, correctness_check, launch_failure
from envcheck.collectives.launch import LaunchPlan, launch
from envcheck.collectives.sweep import CPU_SIZES, SWEEP_DEADLINE_S, judge
from envcheck.core.check import Context
from envcheck.core.result import Result


def nccl_all_reduce(ctx: Context, launcher: Launcher = launch) -> Result:
    """The `dist.all_reduce` check: its own launch, judged by all_reduce's `judge`."""
    return correctness_check(ctx, {"all_reduce": all_reduce.judge}, launcher)


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
