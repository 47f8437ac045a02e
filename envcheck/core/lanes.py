"""Which isolation groups run side by side: the lanes of a run, planned before anything starts (pure).

Isolation groups run concurrently (one lane each, checks in a group in order), except that groups using the GPU
never overlap on a GPU host: they share one lane, run one after another, and each one's worker is closed (releasing
its CUDA context) before the next is forked, so no GPU is shared between groups (EXCLUSIVE_PROCESS mode would
refuse the second; in DEFAULT mode it would disturb timings). Only the last GPU group keeps its worker. CPU-only
groups, and the facts, overlap with everything.

Every worker is forked from one server that imported torch once; the modules the checks declare in `preload` are
imported there once the first workers are forked, so later groups inherit them: in the GPU lane the groups that
declare a preload go last and wait for it, the others never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.core.check import CheckSpec


@dataclass(frozen=True)
class Lanes:
    """The plan: each isolated spec (by its index in the run) in its group, the groups in lanes."""

    groups: dict[str, list[tuple[int, CheckSpec]]]
    lanes: list[list[str]]
    preloading: set[str]  # groups that declare a preload (they wait for it when not first in their lane)
    preloads: list[str]  # the modules to preload in the fork server
    waits_for_preload: bool  # whether any group is forked after the preload (two GPU groups or more)


def plan(specs: Sequence[CheckSpec], share_gpu: bool) -> Lanes:
    """The lanes for `specs`; with `share_gpu` (a host with no GPU to share) GPU groups overlap too."""
    groups: dict[str, list[tuple[int, CheckSpec]]] = {}
    for index, spec in enumerate(specs):
        if spec.isolated:
            groups.setdefault(spec.group, []).append((index, spec))
    gpu_groups = [] if share_gpu else [g for g, m in groups.items() if any(s.gpu for _, s in m)]
    preloading = {g for g, m in groups.items() if any(s.preload for _, s in m)}
    gpu_groups.sort(key=lambda g: g in preloading)  # stable; the preload overlaps the groups before them
    lanes = [[g] for g in groups if g not in gpu_groups] + ([gpu_groups] if gpu_groups else [])
    preloads = sorted({m for s in specs if s.isolated for m in s.preload})
    return Lanes(groups, lanes, preloading, preloads, bool(preloads) and len(gpu_groups) >= 2)
