"""The collectives, by the step name a launch plan carries (data that crosses into the ranks): one explicit typed
registry, as pre-commit's languages, so mypy checks every collective against the `Collective` Protocol and nothing
is found by building a module name."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

from envcheck.collectives import (
    all_gather,
    all_reduce,
    broadcast,
    ddp,
    ddp_buffers,
    pairs,
    sweep,
    sync_batchnorm,
)
from envcheck.collectives.rank_context import RankContext
from envcheck.core.check import DistOptions
from envcheck.core.result import Result


class Collective(Protocol):
    """One collective: the rank side and the verdict over every rank's findings."""

    def run(self, rc: RankContext) -> Any: ...

    def judge(
        self, findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions
    ) -> Result: ...


COLLECTIVES: Mapping[str, Collective] = MappingProxyType(
    {
        "all_reduce": all_reduce,
        "all_gather": all_gather,
        "broadcast": broadcast,
        "sweep": sweep,
        "pairs": pairs,
        "ddp": ddp,
        "ddp_buffers": ddp_buffers,
        "sync_batchnorm": sync_batchnorm,
    }
)


def collective(step: str) -> Collective:
    """The collective a plan's `step` names (ValueError for anything that is not one of ours)."""
    try:
        return COLLECTIVES[step]
    except KeyError:
        raise ValueError(
            f"{step!r} is not a collective of envcheck.collectives (one of {', '.join(COLLECTIVES)})"
        ) from None
