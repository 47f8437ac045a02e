"""Weight averaging by hand, in float64, as torch.optim.swa_utils documents it: SWA is the running mean of the
weights it saw (a_k = a_{k-1} + (p_k - a_{k-1})/k), EMA a_1 = p_1 and a_k = d·a_{k-1} + (1 - d)·p_k; update_bn leaves
each BatchNorm with the equal-weight average over the loader's batches of each batch's mean and unbiased variance;
SWALR anneals lr(t) = swa_lr·α + lr_0·(1 - α), α = anneal(min(1, t/anneal_epochs)) (t >= 1 when anneal_epochs = 0)."""

from __future__ import annotations

import math
from typing import Any

Tensor = Any


def running_average(snapshots: list[list[Tensor]], decay: float | None) -> list[Tensor]:
    """SWA (decay None) or EMA of successive weight lists."""
    avg = [s.clone() for s in snapshots[0]]
    for k, snap in enumerate(snapshots[1:], start=1):
        avg = [
            decay * a + (1 - decay) * s if decay is not None else a + (s - a) / (k + 1)
            for a, s in zip(avg, snap, strict=True)
        ]
    return avg


def batch_average_statistics(activations: list[Tensor]) -> tuple[Tensor, Tensor]:
    """(mean, unbiased variance) per feature, each averaged with equal weight over the batches."""
    import torch

    return (
        torch.stack([a.mean(0) for a in activations]).mean(0),
        torch.stack([a.var(0, unbiased=True) for a in activations]).mean(0),
    )


def swalr(t: int, lr0: float, swa_lr: float, anneal_epochs: int, strategy: str) -> float:
    """SWALR's learning rate after t scheduler steps."""
    step = max(1, t) if anneal_epochs == 0 else t
    x = max(0.0, min(1.0, step / max(1, anneal_epochs)))
    alpha = (1 - math.cos(math.pi * x)) / 2 if strategy == "cos" else x
    return swa_lr * alpha + lr0 * (1 - alpha)
