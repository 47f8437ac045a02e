"""Which node each rank of a Slurm step runs on, from the step's own variables (no Slurm call).

srun places tasks in blocks by default (`SLURM_STEP_TASKS_PER_NODE=2(x2),1`: ranks 0-1 on the first node,
2-3 on the second, 4 on the third) and round-robin with `--distribution=cyclic`. A rank that never arrives is
then named with its node even though it never said anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from envcheck.probe.slurm_env import expand_nodelist


def tasks_per_node(text: str) -> list[int]:
    """Expand Slurm's compressed count list: `2(x3),1` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            raise ValueError(f"cannot read tasks per node {text!r}: {part!r} is not N or N(xM)")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def rank_nodes(env: Mapping[str, str]) -> list[str] | None:
    """Node of every rank of this srun step, or None outside a step (or with a layout we cannot tell)."""
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    counts_text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    if (
        not nodelist
        or not counts_text
        or env.get("SLURM_DISTRIBUTION", "block").split(":")[0] not in ("block", "cyclic")
    ):
        return None
    try:
        nodes, counts = expand_nodelist(nodelist), tasks_per_node(counts_text)
    except ValueError:
        return None
    if len(nodes) != len(counts):
        return None
    if env.get("SLURM_DISTRIBUTION", "block").startswith("cyclic"):
        out, left = [], list(counts)
        while any(left):
            for i, node in enumerate(nodes):
                if left[i]:
                    out.append(node)
                    left[i] -= 1
        return out
    return [node for node, count in zip(nodes, counts, strict=True) for _ in range(count)]
