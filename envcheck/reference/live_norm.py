"""A normalization layer stepped in float64 with its options read at every forward, as torch documents them for a live
module (options set after construction), the reference of the live-option sequences of modules.train_eval.

BatchNorm (torch/nn/modules/batchnorm.py, `_BatchNorm.forward` and its comments, the class docs): a forward in train()
with track_running_stats on and a num_batches_tracked buffer counts the batch and, with momentum None, uses the
cumulative factor 1/num_batches_tracked; batch statistics normalize in train() and in eval() when the buffers are None
(a module built without tracking has none, and turning the flag on later creates none); the buffers move only in
train() with the flag on, as r <- (1 - m)·r + m·stat with the unbiased variance. So a tracked module whose flag is
turned off keeps its buffers frozen, normalizes with the batch in train() and with the frozen buffers in eval().
reset_running_stats() sets the buffers to 0, 1 and 0; load_state_dict(strict=False) leaves every missing key as it is.

InstanceNorm (`_InstanceNorm`): statistics per sample and channel; with tracking on, eval() normalizes with the running
statistics (the batch mean of the per-instance ones) and train() updates them with momentum (None is passed as 0.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Tensor = Any


@dataclass
class NormState:
    """The options and buffers of one normalization layer, as the reference sees them."""

    instance: bool
    tracking: bool
    momentum: float | None
    eps: float
    training: bool = True
    mean: Tensor = None  # None: no buffers (built without tracking)
    var: Tensor = None
    count: int | None = None
    affine: Tensor = None  # stacked (weight, bias), float64; None without affine

    @classmethod
    def built(cls, instance: bool, tracking: bool, momentum: float | None, eps: float, channels: int,
              affine: Tensor | None) -> NormState:  # fmt: skip
        """The state right after construction: buffers (and a count, for BatchNorm) only with tracking."""
        import torch

        mean = torch.zeros(channels, dtype=torch.float64) if tracking else None
        var = torch.ones(channels, dtype=torch.float64) if tracking else None
        count = 0 if tracking and not instance else None
        return cls(instance, tracking, momentum, eps, True, mean, var, count, affine)

    def reset(self) -> None:
        """reset_running_stats(): buffers back to their initial values, where the flag is on."""
        if self.tracking and self.mean is not None:
            self.mean, self.var = self.mean * 0, self.var * 0 + 1
            self.count = 0 if self.count is not None else None

    def forward(self, x: Tensor) -> Tensor:
        """One forward of float64 `x` (N, C, *), updating the buffers as documented."""
        dims = tuple(d for d in range(x.dim()) if d != 1 and not (self.instance and d == 0))
        n = x.numel() // (x.shape[1] * (x.shape[0] if self.instance else 1))
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.tracking and self.count is not None:
            self.count += 1
            factor = 1.0 / self.count if self.momentum is None else self.momentum
        batch_mean = x.mean(dim=dims, keepdim=True)
        batch_var = ((x - batch_mean) ** 2).mean(dim=dims, keepdim=True)
        use_batch = self.training or self.mean is None or (self.instance and not self.tracking)
        shape = (1, -1, *[1] * (x.dim() - 2))
        if use_batch:
            y = (x - batch_mean) / (batch_var + self.eps).sqrt()
        else:
            y = (x - self.mean.view(shape)) / (self.var.view(shape) + self.eps).sqrt()
        if self.training and self.tracking and self.mean is not None:
            unbiased = batch_var * n / (n - 1)
            channels = x.shape[1]
            stat_mean = batch_mean.reshape(-1, channels).mean(0)
            stat_var = unbiased.reshape(-1, channels).mean(0)
            self.mean = (1 - factor) * self.mean + factor * stat_mean
            self.var = (1 - factor) * self.var + factor * stat_var
        if self.affine is not None:
            y = y * self.affine[0].view(shape) + self.affine[1].view(shape)
        return y
