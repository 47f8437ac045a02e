"""train.grad_accumulation: k micro-batches with loss/k give the gradient of one k-times-larger batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

K, MICRO = 4, 8
ACC_TOL = {"atol": 1e-6, "rtol": 1e-5}  # float32: only the summation order differs
MicroLoss = Callable[[Any, int], Any]


def divide_by_k(loss: Any, k: int) -> Any:
    """The correct micro-batch loss for a mean-reduced loss: loss / k."""
    return loss / k


def _model(device: str) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(device)


def accumulation_comparisons(device: str, micro_loss: MicroLoss = divide_by_k) -> list[Comparison]:
    """Gradients after K accumulated micro-batches vs one backward over the whole batch."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    x, y = (
        torch.randn(K * MICRO, 6, generator=gen).to(device),
        torch.randn(K * MICRO, 3, generator=gen).to(device),
    )
    big = _model(device)
    F.mse_loss(big(x), y).backward()
    acc = _model(device)
    for i in range(K):
        part = slice(i * MICRO, (i + 1) * MICRO)
        micro_loss(F.mse_loss(acc(x[part]), y[part]), K).backward()
    return [
        compare(
            pa.grad,
            pb.grad,
            op=f"{name}.grad after {K} micro-batches",
            device=device,
            dtype="float32",
            **ACC_TOL,
        )
        for (name, pa), pb in zip(acc.named_parameters(), big.parameters(), strict=True)
    ]


def train_grad_accumulation(ctx: Context, micro_loss: MicroLoss = divide_by_k) -> Result:
    """Accumulating K micro-batch gradients of loss/K equals the large-batch gradient on every device."""
    with numerics_mode():
        comparisons = [c for device in check_devices() for c in accumulation_comparisons(device, micro_loss)]
    return comparisons_result(
        f"gradient accumulation (k={K})",
        comparisons,
        tolerances={**ACC_TOL, "k": K},
        remediation="divide each micro-batch's mean loss by the number of accumulation "
        "steps before backward(), and zero_grad only after optimizer.step()",
    )
