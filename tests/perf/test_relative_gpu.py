"""perf.relative on real GPUs (skipped without one): every GPU and pair measured, every figure within its datasheet
peak, and a healthy node not blamed. Real: everything (torch, CUDA, NVML, the GPUs)."""

from __future__ import annotations

import pytest

from envcheck.core.result import Status
from envcheck.perf.per_device import GPU_KINDS
from tests.helpers import run_check

pytestmark = pytest.mark.gpu


def test_every_gpu_and_pair_is_measured_and_a_healthy_node_passes() -> None:
    import torch

    gpus = torch.cuda.device_count()
    result = run_check("perf.relative", level="full")
    assert result.status in (Status.PASS, Status.WARN), result
    figures = result.measured["figures"]
    per_gpu = {(f["kind"], f["subject"]) for f in figures if f["scope"] == "gpu"}
    assert {s for _, s in per_gpu} == {str(i) for i in range(gpus)}
    kinds = {k for k, _ in per_gpu}
    assert kinds == set(GPU_KINDS), kinds
    assert len([f for f in figures if f["scope"] == "pair"]) == gpus * (gpus - 1) // 2
    assert all(f["value"] > 0 and (f["pct_of_peak"] is None or f["pct_of_peak"] <= 100) for f in figures), (
        figures
    )
    if result.status is Status.WARN:  # a real finding on a real node: it must name a GPU or pair that exists
        assert all(f["subject"] in {f2["subject"] for f2 in figures} for f in result.measured["findings"])
