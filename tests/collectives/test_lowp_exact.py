"""bfloat16/float16 all-reduce verification stays meaningful at any world size.

The reduction itself is simulated here (world sizes 16 and 64 cannot run as real ranks on two cores):
each rank's contribution is summed in the low-precision dtype, in two different orders, as a
transport would. A real gloo run at a larger world size is in `test_gloo_lowp_exact_at_16_ranks`.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from envcheck.collectives import pattern

COUNT = 4096


def _reduce_in_dtype(world: int, dtype: torch.dtype, order: list[int]) -> torch.Tensor:
    total = torch.zeros(COUNT, dtype=dtype)
    for rank in order:
        total = total + pattern.lowp_contribution(rank, world, COUNT, dtype, torch.device("cpu"))
    return total


def _old_tolerance(world: int, dtype: torch.dtype) -> float:
    """The bound this code used to apply: (n-1) * eps * n * max|x|, quadratic in the world size."""
    return max(world - 1, 1) * float(torch.finfo(dtype).eps) * world * (30.0 / 7.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("world", [2, 16, 64, 200])
def test_low_precision_sum_is_exact_in_any_order(world: int, dtype: torch.dtype) -> None:
    forward = _reduce_in_dtype(world, dtype, list(range(world)))
    backward = _reduce_in_dtype(world, dtype, list(reversed(range(world))))
    for actual in (forward, backward):
        found = pattern.lowp_check(actual, world, dtype)
        assert found["wrong"] == 0 and found["max_abs_err"] == 0.0, found
    # the inputs are not trivial: most elements are non-zero and the sums vary
    assert int((forward != 0).sum()) > COUNT // 2 and len(set(forward.tolist())) > 5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("world", [2, 16, 64])
def test_one_wrong_element_the_old_bound_accepted_is_counted(world: int, dtype: torch.dtype) -> None:
    actual = _reduce_in_dtype(world, dtype, list(range(world)))
    index = int(torch.nonzero(actual != 0)[3].item())
    good = float(actual[index])
    actual[index] = torch.tensor(good + _old_tolerance(world, dtype) / 2, dtype=torch.float64).to(dtype)
    error = abs(float(actual[index]) - good)
    assert 0 < error <= _old_tolerance(world, dtype), "the old bound would have passed this element"
    found: dict[str, Any] = pattern.lowp_check(actual, world, dtype)
    assert found["wrong"] == 1 and found["max_abs_err"] == pytest.approx(error)


def test_contributors_keep_every_partial_sum_representable() -> None:
    assert pattern.significand_bits(torch.bfloat16) == 8 and pattern.significand_bits(torch.float16) == 11
    assert pattern.lowp_contributors(64, torch.bfloat16) == 64
    assert pattern.lowp_contributors(1000, torch.bfloat16) == 64
    assert pattern.lowp_contributors(1000, torch.float16) == 512
    for dtype in (torch.bfloat16, torch.float16):
        most = pattern.lowp_contributors(10**6, dtype) * pattern.LOWP_MAX
        assert most == 2 ** pattern.significand_bits(dtype)  # |partial sum| / LOWP_SCALE <= 2**p


def test_gloo_lowp_exact_at_16_ranks() -> None:
    """Real gloo ranks (forked, CPU) reduce bfloat16/float16 in their own order: still #wrong 0."""
    from envcheck.collectives.launch import LaunchPlan, launch

    outcome = launch(LaunchPlan("gloo", 16, ("all_reduce", "all_gather", "broadcast"), 60.0, start="fork"))
    assert outcome.ok, [r.log for r in outcome.ranks]
    for rank in outcome.ranks:
        for dtype in ("bfloat16", "float16"):
            assert (rank.found or {})["all_reduce"][dtype]["wrong"] == 0, rank.found
