"""Normalization statistics and dropout's affine map in closed form, as the torch.nn documentation states them:
BatchNorm normalizes with the biased batch variance and tracks r <- (1 - m)·r + m·stat with the unbiased one (m =
1/num_batches_tracked when momentum is None); InstanceNorm with track_running_stats tracks the batch mean of the
per-instance statistics; eval normalizes with the running statistics, or, without track_running_stats, with the batch's
(the instance's) own, as in training. AlphaDropout keeps SELU's mean and variance."""

from __future__ import annotations

from typing import Any

Tensor = Any
ALPHA, LAMBDA = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def norm_reference(
    instance: bool,
    batches: list[Tensor],
    momentum: float | None,
    affine: Tensor | None,
    eps: float,
    tracking: bool = True,
) -> tuple[list[Tensor], Tensor, Tensor, Tensor]:
    """Train-mode outputs of every batch (BatchNorm, or InstanceNorm), then running mean, running var (their initial
    zeros and ones without `tracking`), and the eval output of the last batch (from the running statistics; without
    `tracking`, from its own, the last train output)."""
    import torch

    channels = batches[0].shape[1]
    rm, rv = torch.zeros(channels, dtype=torch.float64), torch.ones(channels, dtype=torch.float64)
    outs = []
    for t, x in enumerate(batches, start=1):
        dims = tuple(d for d in range(x.dim()) if d != 1 and not (instance and d == 0))
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        n = x.numel() // (x.shape[1] * (x.shape[0] if instance else 1))
        y = (x - mean) / (var + eps).sqrt()
        outs.append(
            y
            if affine is None
            else y * affine[0].view(1, -1, *[1] * (x.dim() - 2)) + affine[1].view(1, -1, *[1] * (x.dim() - 2))
        )
        m = (1.0 / t if momentum is None else momentum) if tracking else 0.0
        batch_mean = mean.reshape(-1, channels).mean(0) if instance else mean.reshape(-1)
        batch_var = (
            (var * n / (n - 1)).reshape(-1, channels).mean(0) if instance else (var * n / (n - 1)).reshape(-1)
        )
        rm, rv = (1 - m) * rm + m * batch_mean, (1 - m) * rv + m * batch_var
    if not tracking:
        return outs, rm, rv, outs[-1]
    shape = (1, -1, *[1] * (batches[-1].dim() - 2))
    y = (batches[-1] - rm.view(shape)) / (rv.view(shape) + eps).sqrt()
    if affine is not None:
        y = y * affine[0].view(shape) + affine[1].view(shape)
    return outs, rm, rv, y


def alpha_dropout_affine(p: float) -> tuple[float, float, float]:
    """(a, b, α') of AlphaDropout: kept x -> a·x + b, dropped -> a·α' + b (Klambauer et al. 2017)."""
    alpha_p = -LAMBDA * ALPHA
    a = ((1 - p) * (1 + p * alpha_p**2)) ** -0.5
    return a, -a * alpha_p * p, alpha_p
