"""all_gather of rank-tagged data, compared exactly on every element (part of `dist.collectives`)."""

from __future__ import annotations

from typing import Any

from envcheck.collectives import pattern
from envcheck.collectives.rank_context import RankContext
from envcheck.collectives.verdicts import exact_op_result
from envcheck.core.check import DistOptions

COUNT = 4096


def run(rc: RankContext) -> dict[str, Any]:
    """Gather every rank's pattern; count the elements that differ from what each rank sent."""
    import torch
    import torch.distributed as dist

    parts = [torch.empty(COUNT, device=rc.device) for _ in range(rc.world)]
    mine = pattern.gather_pattern(rc.rank, COUNT, rc.device)
    rc.progress("all_gather")
    dist.all_gather(parts, mine)
    wrong = sum(
        pattern.count_wrong(p, pattern.gather_pattern(r, COUNT, rc.device))[0] for r, p in enumerate(parts)
    )
    return {"elements": COUNT * rc.world, "wrong": wrong}


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Any:
    """Every gathered element exact."""
    return exact_op_result(findings, "all_gather", "all_gather", backend, world)
