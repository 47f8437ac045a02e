"""`all_reduce_sweep`: the whole sweep from outside (launch ranks, run, collect rows) for bench code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envcheck.collectives.failures import describe_failure
from envcheck.collectives.launch import LaunchPlan, launch
from envcheck.collectives.verdicts import sweep_rows


def all_reduce_sweep(
    backend: str, world_size: int, sizes: Sequence[int], timeout_s: float
) -> list[dict[str, Any]]:
    """Rows of {bytes, dtype, time_us, time_s, algbw_gbps, busbw_gbps, wrong}; RuntimeError names failed ranks.

    `sizes` are bytes (multiples of 4); empty on NCCL means the ranks choose from their free memory.
    """
    plan = LaunchPlan(backend, world_size, ("sweep",), timeout_s, tuple(int(s) for s in sizes), start="fork")
    outcome = launch(plan)
    if not outcome.ok:
        raise RuntimeError(f"all-reduce sweep failed: {describe_failure(outcome)}")
    rows = sweep_rows([r.found or {} for r in outcome.ranks])
    for row in rows:
        row["time_s"] = row["time_us"] / 1e6
    return rows
