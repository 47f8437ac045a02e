"""Gradient clipping's total norm in float64, as documented: the p-norm of the gradients' p-norms ("as if the norms
of the individual gradients were concatenated into a single vector"): max for inf, min for -inf, and for p = 0 the
number of non-zero gradients; the clip coefficient is min(1, max_norm/(total + 1e-6))."""

from __future__ import annotations

import math
from typing import Any

Tensor = Any


def _p_norm(values: Tensor, p: float) -> float:
    if math.isinf(p):
        return float(values.abs().max() if p > 0 else values.abs().min())
    if p == 0:
        return float((values != 0).sum())
    return float((values.abs() ** p).sum() ** (1 / p))


def total_norm(gs: list[Tensor], p: float) -> float:
    """The documented total norm in float64: the p-norm of the gradients' p-norms ("as if the norms of the
    individual gradients were concatenated into a single vector"; for p = 0 that counts non-zero gradients)."""
    import torch

    return _p_norm(
        torch.tensor([_p_norm(g.double().cpu().reshape(-1), p) for g in gs], dtype=torch.float64), p
    )
