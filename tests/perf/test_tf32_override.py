"""A TF32 figure is never presented as float32 (nor the reverse): the swap is measured, the variables name it.

No GPU here: the matmul probe's verdicts are given (the probe itself is tested for real on CPU, and with
TF32 rounding simulated, in tests/numerics/test_autograd_faults.py); the peaks are the H100 SXM
entry the real H100 run used (tests/perf/data/h100_bench_quick.json).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from envcheck.perf.matmul import matmul_names, tf32_override
from envcheck.perf.training_claims import amp_baseline_tf32_cause
from tests.perf.h100 import h100_run

H100 = h100_run()["device"]["peak"]["tflops"]


def probe(float32_mode: str, tf32_mode: str) -> Callable[[str, bool], str]:
    """A stand-in for the GPU matmul probe: what float32 computes without and with allow_tf32."""
    return lambda device, allow: tf32_mode if allow else float32_mode


@pytest.mark.parametrize(
    ("env", "modes", "expected"),
    [
        ({}, ("float32", "tf32"), (None, "measured")),  # healthy Ampere+
        (
            {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"},
            ("tf32", "tf32"),
            ("float32_is_tf32", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1"),
        ),  # NGC, honoured
        (
            {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"},
            ("float32", "tf32"),
            (None, "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1"),
        ),  # H100 proof host
        (
            {"NVIDIA_TF32_OVERRIDE": "0"},
            ("float32", "float32"),
            ("tf32_is_float32", "NVIDIA_TF32_OVERRIDE=0"),
        ),
        ({}, ("float32", "float32"), ("tf32_is_float32", "measured")),  # e.g. a V100
    ],
)
def test_override_is_measured_and_the_variable_names_it(
    env: dict[str, str], modes: tuple[str, str], expected: tuple[str | None, str]
) -> None:
    assert tf32_override("cuda:0", env, probe(*modes)) == expected


def test_float32_run_as_tf32_is_labelled_and_compared_with_the_tf32_peak() -> None:
    """The H100 run's 'matmul float32 4096' was 51.7 TFLOP/s of 67; under the override it would be ~400."""
    key, label, peak = matmul_names(
        "float32", 4096, H100, "float32_is_tf32", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1"
    )
    assert key == "matmul.float32_as_tf32.n4096" and peak == H100["tf32"] == 494.5
    assert label == "matmul float32 (ran as TF32: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1)"


def test_tf32_disabled_by_nvidia_override_is_compared_with_the_float32_peak() -> None:
    key, label, peak = matmul_names("tf32", 8192, H100, "tf32_is_float32", "NVIDIA_TF32_OVERRIDE=0")
    assert key == "matmul.tf32_as_float32.n8192" and "NVIDIA_TF32_OVERRIDE=0" in label and peak == 67.0


def test_without_override_names_are_unchanged() -> None:
    assert matmul_names("float32", 1024, H100, None) == ("matmul.float32.n1024", "matmul float32", 67.0)


def test_amp_baseline_is_tf32_only_where_measured_so_on_cuda() -> None:
    env = {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    assert amp_baseline_tf32_cause("cuda", env, probe("tf32", "tf32")) == "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1"
    assert amp_baseline_tf32_cause("cuda", env, probe("float32", "tf32")) is None
    assert amp_baseline_tf32_cause("cpu", env, probe("tf32", "tf32")) is None
