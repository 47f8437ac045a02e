"""Covering every pair of option values with few cases (a strength-2 covering array), for option spaces whose full
product is large and whose bugs need at most two options to meet.

`pairwise(factors)` picks, from the full product in its order, one case at a time the case that covers the most pairs
of (option, value) x (option, value) not covered yet, until every pair is covered (the greedy algorithm of AETG, Cohen
et al. 1997; deterministic: ties go to the earlier case). Every value of every option meets every value of every other
option in at least one case.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

Pair = tuple[tuple[int, Any], tuple[int, Any]]


def pairs_of(case: Sequence[Any]) -> set[Pair]:
    """The (option index, value) pairs one case covers."""
    named = list(enumerate(case))
    return {(a, b) for a, b in itertools.combinations(named, 2)}


def pairwise(factors: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Cases (tuples, one value per factor) that together cover every pair of values of two factors."""
    candidates = list(itertools.product(*factors))
    if len(factors) < 2:
        return candidates
    uncovered = set().union(*(pairs_of(c) for c in candidates))
    chosen: list[tuple[Any, ...]] = []
    while uncovered:
        best = max(candidates, key=lambda c: len(pairs_of(c) & uncovered))
        chosen.append(best)
        uncovered -= pairs_of(best)
    return chosen
