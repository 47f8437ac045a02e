"""Inputs whose collective result is known exactly (the nccl-tests idea), and element-wise verifiers.

Every rank fills its buffer from a formula of (rank, element index); the expected result is
computed independently on each rank, and every element is compared.
"""

from __future__ import annotations

from typing import Any

# float32 contributions are small integers: ((i + rank) % PERIOD) - OFFSET, so every partial sum
# is an integer far below 2**24 and exact in any reduction order.
PERIOD = 31
OFFSET = 15


def exact_contribution(rank: int, count: int, device: Any) -> Any:
    """This rank's integer-valued float32 all-reduce input (rank-dependent per element)."""
    import torch

    index = torch.arange(count, device=device, dtype=torch.int32 if count < 2**31 - PERIOD else torch.int64)
    return ((index + rank % PERIOD) % PERIOD - OFFSET).to(torch.float32)


def exact_sum(world_size: int, count: int, device: Any) -> Any:
    """The exact all-reduce sum of `exact_contribution` over all ranks (float32)."""
    import torch

    # One full period of ranks sums to zero for every element (PERIOD odd, OFFSET = PERIOD // 2),
    # so only the last `world_size % PERIOD` ranks matter: at most PERIOD - 1 vector passes.
    total = torch.zeros(count, device=device, dtype=torch.float32)
    for rank in range(world_size % PERIOD):
        total += exact_contribution(rank, count, device)
    return total


def count_wrong(actual: Any, expected: Any) -> tuple[int, int | None]:
    """How many elements differ, and the index of the first one (None when all match)."""
    import torch

    bad = actual != expected
    wrong = int(bad.sum().item())
    first = int(torch.nonzero(bad)[0].item()) if wrong else None
    return wrong, first


def lowp_contribution(rank: int, count: int, dtype: Any, device: Any) -> Any:
    """A bfloat16/float16 input with values that do not round trip exactly (so rounding happens)."""
    import torch

    index = torch.arange(count, device=device, dtype=torch.int64)
    return (((index * 7 + rank * 13) % 61 - 30).to(torch.float64) / 7.0).to(dtype)


def lowp_tolerance(world_size: int, dtype: Any) -> float:
    """Stated absolute tolerance: (n-1) roundings, each at most eps * |partial| <= eps * n * max|x|."""
    import torch

    max_abs = 30.0 / 7.0
    return max(world_size - 1, 1) * float(torch.finfo(dtype).eps) * world_size * max_abs


def lowp_check(actual: Any, world_size: int, dtype: Any) -> dict[str, Any]:
    """Compare a low-precision sum against the float64 sum of the rounded inputs."""
    import torch

    count = actual.numel()
    expected = torch.zeros(count, device=actual.device, dtype=torch.float64)
    for rank in range(world_size):
        expected += lowp_contribution(rank, count, dtype, actual.device).to(torch.float64)
    err = (actual.to(torch.float64) - expected).abs()
    tol = lowp_tolerance(world_size, dtype)
    return {"elements": count, "wrong": int((err > tol).sum().item()), "max_abs_err": float(err.max().item()),
            "tolerance": tol}


def gather_pattern(rank: int, count: int, device: Any) -> Any:
    """What rank `rank` contributes to all_gather (exact float32)."""
    import torch

    return (torch.arange(count, device=device, dtype=torch.int64) % 997 + rank * 1000).to(torch.float32)


def broadcast_pattern(count: int, device: Any) -> Any:
    """What the broadcast root sends (exact float32)."""
    import torch

    return (torch.arange(count, device=device, dtype=torch.int64) % 1009 * 3 + 7).to(torch.float32)
