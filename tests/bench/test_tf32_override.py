"""A TF32 figure is never presented as float32 (nor the reverse) when the TF32 variables are set.

No GPU here: the decision and the names are pure functions of the environment; the peaks are the
H100 SXM entry the real H100 run used (tests/bench/data/h100_bench_quick.json).
"""

from __future__ import annotations

import pytest

from envcheck.bench.matmul import matmul_names, tf32_override
from envcheck.bench.training_claims import amp_baseline_is_tf32
from tests.bench.h100 import h100_run

H100 = h100_run()["device"]["peak"]["tflops"]


@pytest.mark.parametrize(("env", "override"), [
    ({}, None),
    ({"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}, "float32_is_tf32"),          # NGC images
    ({"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "0"}, None),
    ({"NVIDIA_TF32_OVERRIDE": "0"}, "tf32_is_float32"),
    ({"NVIDIA_TF32_OVERRIDE": "0", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}, "tf32_is_float32"),  # cuBLAS wins
])
def test_override_is_detected(env: dict[str, str], override: str | None) -> None:
    assert tf32_override(env) == override


def test_float32_run_as_tf32_is_labelled_and_compared_with_the_tf32_peak() -> None:
    """The H100 run's 'matmul float32 4096' was 51.7 TFLOP/s of 67; under the override it would be ~400."""
    key, label, peak = matmul_names("float32", 4096, H100, "float32_is_tf32")
    assert key == "matmul.float32_as_tf32.n4096" and peak == H100["tf32"] == 494.5
    assert label == "matmul float32 (TF32 via TORCH_ALLOW_TF32_CUBLAS_OVERRIDE)"


def test_tf32_disabled_by_nvidia_override_is_compared_with_the_float32_peak() -> None:
    key, label, peak = matmul_names("tf32", 8192, H100, "tf32_is_float32")
    assert key == "matmul.tf32_as_float32.n8192" and "NVIDIA_TF32_OVERRIDE=0" in label and peak == 67.0


def test_without_override_names_are_unchanged() -> None:
    assert matmul_names("float32", 1024, H100, None) == ("matmul.float32.n1024", "matmul float32", 67.0)


def test_amp_baseline_under_the_override_is_tf32_on_cuda_only() -> None:
    env = {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    assert amp_baseline_is_tf32("cuda", env) is True
    assert amp_baseline_is_tf32("cpu", env) is False
    assert amp_baseline_is_tf32("cuda", {}) is False
