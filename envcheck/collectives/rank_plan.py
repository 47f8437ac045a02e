"""What every rank does once its process group is up: the requested collectives, one module each.

A step is the name of a module of this package (`all_reduce`, `all_gather`, `broadcast`, `sweep`)
that defines `run(rc: RankContext) -> dict` (the rank side, returning this rank's findings) and
`judge(findings, backend, world, options) -> Result`. There is no registry to update: adding a
collective is adding its module (plus the CheckSpec that names it).

`progress(phase)` is called right before each collective, after local preparation, so a rank that
never reaches a collective is told apart from the ranks waiting inside it.

Shared by the single-node launcher's ranks (`rank.py`) and the torchrun entry point.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from envcheck.collectives.rank_hook import RankHook
from envcheck.core.check import MEMORY_FRACTION

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RankContext:
    """Everything a collective's rank side gets: who it is, where, and the plan's parameters."""

    rank: int
    world: int
    device: Any
    progress: Progress
    hook: RankHook | None = None  # ENVCHECK_RANK_HOOK: called before each collective (the tests' faults)
    sizes: tuple[int, ...] = ()
    memory_fraction: float = MEMORY_FRACTION
    floor_bytes: int | None = None  # dist.busbw: a busbw floor's message size, swept too when the budget allows


def collective(step: str) -> ModuleType:
    """The module implementing `step` (ValueError for anything that is not one of ours)."""
    module = None
    if step.isidentifier():
        try:
            module = importlib.import_module(f"envcheck.collectives.{step}")
        except ModuleNotFoundError:
            module = None
    if module is None or not callable(getattr(module, "run", None)) or not callable(getattr(module, "judge", None)):
        raise ValueError(f"{step!r} is not a collective module of envcheck.collectives")
    return module


def run_plan(rank: int, world: int, device: Any, steps: tuple[str, ...], sizes: tuple[int, ...],
             progress: Progress, hook: RankHook | None = None, memory_fraction: float = MEMORY_FRACTION,
             floor_bytes: int | None = None) -> dict[str, Any]:
    """Run the requested steps in order and return this rank's findings, keyed by step."""
    rc = RankContext(rank, world, device, progress, hook, sizes, memory_fraction, floor_bytes)
    found: dict[str, Any] = {"rank": rank, "device": str(device)}
    for step in steps:
        found[step] = collective(step).run(rc)
    progress("done")
    return found
