"""Every burn workload, in one explicit list (reached by reference), and the choice `--only` makes from it."""

from __future__ import annotations

from collections.abc import Sequence

from envcheck.burn import convolution, exchange, gemm, reductions, sdpa
from envcheck.burn.workload import Workload


def every_workload() -> list[Workload]:
    """All workloads in the order a round runs them: compute first, the collective last."""
    return [
        *gemm.workloads(),
        *sdpa.workloads(),
        *convolution.workloads(),
        *reductions.workloads(),
        *exchange.workloads(),
    ]


def names() -> list[str]:
    """Every workload's name."""
    return [w.name for w in every_workload()]


def unknown(chosen: Sequence[str]) -> list[str]:
    """The names in `chosen` that are neither a workload ('matmul.bfloat16') nor a family ('matmul')."""
    known = set(names())
    families = {n.split(".", 1)[0] for n in known}
    return [c for c in chosen if c not in known and c not in families]


def chosen(only: Sequence[str]) -> list[Workload]:
    """The workloads `only` names (a workload or a whole family); all of them when `only` is empty."""
    picked = set(only)
    return [w for w in every_workload() if not picked or w.name in picked or w.kind in picked]
