"""What a collective's rank side is given (`RankContext`): who it is, where, and the plan's parameters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
    floor_bytes: int | None = (
        None  # dist.busbw: a busbw floor's message size, swept too when the budget allows
    )
