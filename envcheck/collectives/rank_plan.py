"""What every rank does once its process group is up: the requested collectives, one module each.

A step is a key of the collectives registry (envcheck.collectives.registry: `all_reduce`, `all_gather`, `broadcast`,
`sweep` ...), a module that satisfies the `Collective` Protocol: `run(rc: RankContext)` (the rank side, returning
this rank's findings) and `judge(findings, backend, world, options) -> Result`. Adding a collective is adding its
module and its line in the registry (plus the CheckSpec that names it).

`progress(phase)` is called right before each collective, after local preparation, so a rank that
never reaches a collective is told apart from the ranks waiting inside it.

Shared by the single-node launcher's ranks (`rank.py`) and the torchrun entry point.
"""

from __future__ import annotations

from typing import Any

from envcheck.collectives.rank_context import Progress, RankContext
from envcheck.collectives.rank_hook import RankHook
from envcheck.collectives.registry import collective
from envcheck.core.check import MEMORY_FRACTION


def run_plan(
    rank: int,
    world: int,
    device: Any,
    steps: tuple[str, ...],
    sizes: tuple[int, ...],
    progress: Progress,
    hook: RankHook | None = None,
    memory_fraction: float = MEMORY_FRACTION,
    floor_bytes: int | None = None,
) -> dict[str, Any]:
    """Run the requested steps in order and return this rank's findings, keyed by step."""
    rc = RankContext(rank, world, device, progress, hook, sizes, memory_fraction, floor_bytes)
    found: dict[str, Any] = {"rank": rank, "device": str(device)}
    for step in steps:
        found[step] = collective(step).run(rc)
    progress("done")
    return found
