"""broadcast from the last rank, compared exactly on every element (part of `dist.collectives`)."""

from __future__ import annotations

from typing import Any

from envcheck.collectives import pattern
from envcheck.collectives.rank_context import RankContext
from envcheck.collectives.verdicts import exact_op_result
from envcheck.core.check import DistOptions

COUNT = 4096


def run(rc: RankContext) -> dict[str, Any]:
    """The last rank sends a known pattern; every rank counts the elements that differ from it."""
    import torch
    import torch.distributed as dist

    root = rc.world - 1
    expected = pattern.broadcast_pattern(COUNT, rc.device)
    buf = expected.clone() if rc.rank == root else torch.full((COUNT,), -1.0, device=rc.device)
    rc.progress("broadcast")
    dist.broadcast(buf, src=root)
    return {"elements": COUNT, "wrong": pattern.count_wrong(buf, expected)[0], "root": root}


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Any:
    """Every broadcast element exact."""
    return exact_op_result(findings, "broadcast", f"broadcast (root {world - 1})", backend, world)
