"""On a CUDA host every numerics check also covers each GPU, and passes (unverified on the CPU-only dev box)."""

from __future__ import annotations

import pytest

from envcheck import numerics
from envcheck.checks.check_registry import registry
from envcheck.core.result import Status
from tests.helpers import run_check

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", [s.name for s in numerics.CHECKS])
def test_check_passes_and_covers_cuda(name: str) -> None:
    result = run_check(name, isolated=False)
    # as in test_healthy: a cited upstream bug of this torch (envcheck.reference.known_bugs) is a WARN naming it
    known = result.measured.get("known_upstream_bugs")
    assert result.status is Status.PASS or (result.status is Status.WARN and known), (
        result.summary,
        result.details,
    )
    assert "cuda:0" in repr(result.measured), result.measured


def test_checkpointing_lowers_cuda_peak_memory() -> None:
    result = run_check("train.checkpointing", isolated=False)
    peaks = result.measured["peak_bytes@cuda:0"]
    assert peaks["checkpointed"] < peaks["plain"]


def test_autocast_float16_on_cuda_uses_float32_softmax() -> None:
    result = run_check("amp.autocast_dtypes", isolated=False)
    assert result.measured["cuda:0/float16"]["softmax"] == "float32"
    assert result.measured["cuda:0/float16"]["matmul"] == "float16"
    assert registry()["autograd.device_agreement"].needs.cuda
