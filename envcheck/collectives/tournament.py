"""A round-robin tournament: every pair of n nodes exactly once, in n−1 rounds (n even) or n rounds (n odd).

The circle method: node 0 stays put, the others rotate one place per round, and position i meets position
n−1−i. In a round every node is in at most one pair, so all pairs of a round can run at once and the whole
pairwise measurement takes O(n) rounds instead of n(n−1)/2 one after another. With n odd a phantom node
makes the count even; whoever meets it sits the round out.
"""

from __future__ import annotations

Pair = tuple[int, int]


def rounds(n: int) -> list[list[Pair]]:
    """The rounds of pairs (i < j) of nodes 0..n−1; every pair once, no node twice in a round."""
    if n < 0:
        raise ValueError(f"the number of nodes must be >= 0, got {n}")
    if n < 2:
        return []
    slots: list[int | None] = [*range(n), *([None] if n % 2 else [])]
    size = len(slots)
    out: list[list[Pair]] = []
    for _ in range(size - 1):
        pairs = []
        for i in range(size // 2):
            a, b = slots[i], slots[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        out.append(sorted(pairs))
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return out
