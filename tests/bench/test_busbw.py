"""busbw comes from the distributed check's code, through the bench's one adapter."""

from __future__ import annotations

import pytest

from envcheck.bench import allreduce_adapter


def test_adapter_names_what_is_missing_until_the_distributed_package_lands() -> None:
    why = allreduce_adapter.sweep_unavailable()
    if why is None:
        pytest.skip("envcheck.checks.distributed is present; covered by test_busbw_formula")
    assert "envcheck.checks.distributed" in why


@pytest.mark.parametrize(("algbw", "world", "expected"), [(10.0, 2, 10.0), (10.0, 4, 15.0), (8.0, 8, 14.0)])
def test_busbw_formula(algbw: float, world: int, expected: float) -> None:
    """nccl-tests: busbw = algbw * 2(n-1)/n for all-reduce."""
    why = allreduce_adapter.sweep_unavailable()
    if why:
        pytest.skip(f"distributed package not merged yet: {why}")
    assert allreduce_adapter.busbw(algbw, world) == pytest.approx(expected)
