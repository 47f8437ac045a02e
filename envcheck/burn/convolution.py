"""A 3x3 convolution (stride 1, padding 1) in float32 and bfloat16: 2 N K H W C 9 FLOPs. float32 runs with cuDNN's
TF32 switched off, so it is the float32 the name says; the reference is the same convolution in float64."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from envcheck.burn.workload import Device, Workload, float32_and_bfloat16, generator, randn

SHAPE = {"cuda": (32, 256, 56, 56, 256), "cpu": (2, 16, 32, 32, 32)}  # N, C, H, W, K (output channels)
TOLERANCE = {"float32": 1e-4, "bfloat16": 1e-2}


@contextlib.contextmanager
def _no_tf32() -> Iterator[None]:
    import torch

    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = old


def _inputs(name: str, dtype_name: str, device: Device, seed: int) -> tuple[Any, Any]:
    import torch

    n, c, h, w, k = SHAPE[device.kind]
    gen = generator(name, seed)
    dtype = getattr(torch, dtype_name)
    return randn((n, c, h, w), gen, device, dtype), randn((k, c, 3, 3), gen, device, dtype, scale=0.1)


def _run(xw: tuple[Any, Any]) -> Any:
    import torch.nn.functional as F

    with _no_tf32():
        return F.conv2d(xw[0], xw[1], padding=1)


def _reference(xw: tuple[Any, Any]) -> Any:
    import torch.nn.functional as F

    return F.conv2d(xw[0].double(), xw[1].double(), padding=1)


def _work(xw: tuple[Any, Any]) -> float:
    n, c, h, w = xw[0].shape
    k, _, kh, kw = xw[1].shape
    return float(2.0 * n * k * h * w * c * kh * kw)


def workloads() -> list[Workload]:
    """The convolution in float32 and bfloat16."""
    return float32_and_bfloat16("conv", "convolution", TOLERANCE, _inputs, _run, _work, _reference)
