"""Inputs whose collective result is known exactly (the nccl-tests idea), and element-wise verifiers.

Every rank fills its buffer from a formula of (rank, element index); the expected result is
computed independently on each rank, and every element is compared.
"""

from __future__ import annotations

import math
from typing import Any

# float32 contributions are small integers: ((i + rank) % PERIOD) - OFFSET, so every partial sum
# is an integer far below 2**24 and exact in any reduction order.
PERIOD = 31
OFFSET = 15


def exact_contribution(rank: int, count: int, device: Any, start: int = 0) -> Any:
    """This rank's integer-valued float32 all-reduce input for elements start..start+count-1."""
    import torch

    # The pattern has period PERIOD, so the index can be taken mod PERIOD: int32 at any size.
    kind = torch.int32 if count < 2**31 - 2 * PERIOD else torch.int64
    index = torch.arange(count, device=device, dtype=kind) + (start % PERIOD)
    return ((index + rank % PERIOD) % PERIOD - OFFSET).to(torch.float32)


def exact_sum(world_size: int, count: int, device: Any, start: int = 0) -> Any:
    """The exact all-reduce sum of `exact_contribution` over all ranks (float32)."""
    import torch

    # One full period of ranks sums to zero for every element (PERIOD odd, OFFSET = PERIOD // 2),
    # so only the last `world_size % PERIOD` ranks matter: at most PERIOD - 1 vector passes.
    total = torch.zeros(count, device=device, dtype=torch.float32)
    for rank in range(world_size % PERIOD):
        total += exact_contribution(rank, count, device, start)
    return total


# Filling and verifying a large buffer works through chunks of this many elements, so the
# temporaries (int32 index, its two intermediates, the float32 contribution, the expected sum and a
# bool mask) stay below VERIFY_WORKSPACE_BYTES whatever the message size.
VERIFY_CHUNK = 4 << 20
VERIFY_WORKSPACE_BYTES = 6 * 4 * VERIFY_CHUNK


def fill_exact(buf: Any, rank: int, chunk: int = VERIFY_CHUNK) -> None:
    """Write this rank's exact contribution into `buf` (float32, 1-D) in place, chunk by chunk."""
    for start in range(0, buf.numel(), chunk):
        part = buf[start : start + chunk]
        part.copy_(exact_contribution(rank, part.numel(), buf.device, start))


def count_wrong_exact(buf: Any, world_size: int, chunk: int = VERIFY_CHUNK) -> int:
    """#wrong of an all-reduced `fill_exact` buffer, compared chunk by chunk."""
    wrong = 0
    for start in range(0, buf.numel(), chunk):
        part = buf[start : start + chunk]
        wrong += count_wrong(part, exact_sum(world_size, part.numel(), buf.device, start))[0]
    return wrong


def count_wrong(actual: Any, expected: Any) -> tuple[int, int | None]:
    """How many elements differ, and the index of the first one (None when all match)."""
    import torch

    bad = actual != expected
    wrong = int(bad.sum().item())
    first = int(torch.nonzero(bad)[0].item()) if wrong else None
    return wrong, first


# bfloat16/float16 contributions are multiples of LOWP_SCALE with |x| <= LOWP_MAX * LOWP_SCALE. At most
# `lowp_contributors` ranks give an element a non-zero value, so every partial sum, in any reduction
# order, is a multiple of LOWP_SCALE below 2**(significand bits) of them: exactly representable. The
# reduction is therefore exact at any world size, and any wrong element counts (tolerance 0), where an
# error bound that grows with the world size (n-1 roundings of n-sized partial sums) accepts anything
# at 16 or 64 ranks.
LOWP_MAX = 4
LOWP_SCALE = 0.25
LOWP_PERIOD = 2 * LOWP_MAX + 1
LOWP_TOLERANCE = 0.0


def significand_bits(dtype: Any) -> int:
    """Precision p of a floating dtype (implicit bit included): 8 for bfloat16, 11 for float16."""
    import torch

    return round(-math.log2(float(torch.finfo(dtype).eps))) + 1


def lowp_contributors(world_size: int, dtype: Any) -> int:
    """How many ranks contribute non-zero values to each element (all of them up to 2**p / LOWP_MAX)."""
    return min(world_size, int(2 ** significand_bits(dtype)) // LOWP_MAX)


def lowp_contribution(rank: int, world_size: int, count: int, dtype: Any, device: Any) -> Any:
    """This rank's bfloat16/float16 all-reduce input; every partial sum of these is exact in `dtype`."""
    import torch

    index = torch.arange(count, device=device, dtype=torch.int64)
    value = ((index * 7 + rank * 13) % LOWP_PERIOD - LOWP_MAX).to(torch.float64) * LOWP_SCALE
    active = (index + rank) % world_size < lowp_contributors(world_size, dtype)
    return torch.where(active, value, torch.zeros_like(value)).to(dtype)


def lowp_expected(world_size: int, count: int, dtype: Any, device: Any) -> Any:
    """The exact sum of every rank's `lowp_contribution` (float64)."""
    import torch

    expected = torch.zeros(count, device=device, dtype=torch.float64)
    for rank in range(world_size):
        expected += lowp_contribution(rank, world_size, count, dtype, device).to(torch.float64)
    return expected


def lowp_check(actual: Any, world_size: int, dtype: Any) -> dict[str, Any]:
    """Compare a low-precision all-reduce result with the exact sum, element by element (tolerance 0)."""
    import torch

    count = actual.numel()
    err = (actual.to(torch.float64) - lowp_expected(world_size, count, dtype, actual.device)).abs()
    return {
        "elements": count,
        "wrong": int((err > LOWP_TOLERANCE).sum().item()),
        "max_abs_err": float(err.max().item()),
        "tolerance": LOWP_TOLERANCE,
        "contributors_per_element": lowp_contributors(world_size, dtype),
    }


def gather_pattern(rank: int, count: int, device: Any) -> Any:
    """What rank `rank` contributes to all_gather (exact float32)."""
    import torch

    return (torch.arange(count, device=device, dtype=torch.int64) % 997 + rank * 1000).to(torch.float32)


def broadcast_pattern(count: int, device: Any) -> Any:
    """What the broadcast root sends (exact float32)."""
    import torch

    return (torch.arange(count, device=device, dtype=torch.int64) % 1009 * 3 + 7).to(torch.float32)
