"""`ddp.differential` at the quick level: two cases of ddp.py (the default, and one that moves every option)."""

from __future__ import annotations

from typing import Any

from envcheck.collectives import ddp
from envcheck.collectives.rank_plan import RankContext
from envcheck.core.check import DistOptions
from envcheck.core.result import Result


def run(rc: RankContext) -> dict[str, Any]:
    """The quick cases on this rank."""
    return ddp.run_cases(rc, quick=True)


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Result:
    """As ddp.judge."""
    return ddp.judge(findings, backend, world, options, step="ddp_quick")
