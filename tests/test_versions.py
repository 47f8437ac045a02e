"""envcheck.core.versions: packaging-based parsing of versions and the pins wheels write in their metadata."""

from __future__ import annotations

import pytest

from envcheck.checks.cudnn import cudnn_pin
from envcheck.core.versions import (
    cuda_numbers,
    cuda_version_text,
    cudnn_numbers,
    cudnn_version_text,
    pinned,
    pinned_with_prefix,
    public,
    release,
    torch_minor_for,
    torchvision_minor_for,
)
from envcheck.images import matrix_rules


def test_release_and_public() -> None:
    assert release("2.13.0+cpu") == (2, 13, 0)
    assert release("13.0") == (13, 0)
    assert release("not-a-version") is None
    assert public("2.11.0+cu130") == "2.11.0"


@pytest.mark.parametrize(
    "lines, name, want",
    [
        (["torch (==2.11.0)"], "torch", "2.11.0"),
        (["Torch == 2.9.1"], "torch", "2.9.1"),
        (["torch>=2.0,==2.12.1"], "torch", "2.12.1"),
        (["torch==2.*"], "torch", None),
        (["torchvision==0.24.1"], "torch", None),
    ],
)
def test_pinned(lines: list[str], name: str, want: str | None) -> None:
    assert pinned(lines, name) == want


def test_pins_with_markers_and_extras() -> None:
    lines = [
        'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"',
        'cuda-toolkit[cudart,nvcc]==13.0.2; platform_system == "Linux"',
        "nvidia-nccl-cu13 (==2.28.3) ; platform_machine == 'x86_64'",
    ]
    assert pinned(lines, "cuda-toolkit") == "13.0.2"
    assert pinned_with_prefix(lines, "nvidia-nccl") == ("nvidia-nccl-cu13", "2.28.3")
    assert cudnn_pin(lines) == "nvidia-cudnn-cu12==9.10.2.21"


@pytest.mark.parametrize("value", ["2.9.1rc1", "2.9.1+cu128", "2.9", "2.9.1.post1", "02.9.1", "v2.9.1", 291])
def test_matrix_torch_must_be_a_plain_release(value: object) -> None:
    assert matrix_rules.check_torch(value) is not None


@pytest.mark.parametrize(
    "value, ok", [("12.8", True), ("13.0", True), ("12.8.1", False), ("12", False), ("12.8rc1", False)]
)
def test_matrix_cuda_is_major_minor(value: str, ok: bool) -> None:
    assert (matrix_rules.check_cuda(value) is None) is ok


def test_cuda_codes_decode_to_major_minor() -> None:
    assert cuda_numbers(12080) == (12, 8) and cuda_version_text(12080) == "12.8"
    assert cuda_version_text(13000) == "13.0" and cuda_version_text(11020) == "11.2"


def test_cudnn_codes_decode_in_both_encodings() -> None:
    assert cudnn_numbers(91900) == (9, 19, 0) and cudnn_version_text(91900) == "9.19.0"
    assert cudnn_version_text(90100) == "9.1.0" and cudnn_version_text(8902) == "8.9.2"


def test_torchvision_per_torch_rule_both_ways() -> None:
    assert torchvision_minor_for(8) == 23 and torchvision_minor_for(11) == 26
    assert torch_minor_for(26) == 11 and torch_minor_for(14) is None
