"""Scaled-dot-product attention (torch.nn.functional.scaled_dot_product_attention, not causal) in float32 and
bfloat16: 4 B H L^2 D FLOPs. The reference is the math form in float64, a few heads at a time (an L x L score
matrix per head in float64 is the largest buffer of the burn)."""

from __future__ import annotations

from typing import Any

from envcheck.burn.workload import Device, Workload, float32_and_bfloat16, generator, randn

SHAPE = {"cuda": (2, 16, 4096, 128), "cpu": (1, 4, 128, 64)}  # batch, heads, sequence, head dim
TOLERANCE = {"float32": 1e-4, "bfloat16": 1e-2}
HEADS_AT_ONCE = 4


def _inputs(name: str, dtype_name: str, device: Device, seed: int) -> tuple[Any, Any, Any]:
    import torch

    gen = generator(name, seed)
    dtype = getattr(torch, dtype_name)
    shape = SHAPE[device.kind]
    return (
        randn(shape, gen, device, dtype),
        randn(shape, gen, device, dtype),
        randn(shape, gen, device, dtype),
    )


def _run(qkv: tuple[Any, Any, Any]) -> Any:
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(*qkv)


def _reference(qkv: tuple[Any, Any, Any]) -> Any:
    import torch

    q, k, v = (t.double().flatten(0, 1) for t in qkv)
    scale = q.shape[-1] ** -0.5
    out = torch.empty_like(q)
    for i in range(0, q.shape[0], HEADS_AT_ONCE):
        part = slice(i, i + HEADS_AT_ONCE)
        out[part] = torch.softmax(q[part] @ k[part].transpose(-1, -2) * scale, dim=-1) @ v[part]
    return out.view(qkv[0].shape)


def _work(qkv: tuple[Any, Any, Any]) -> float:
    batch, heads, length, dim = qkv[0].shape
    return float(4.0 * batch * heads * length * length * dim)


def workloads() -> list[Workload]:
    """Attention in float32 and bfloat16."""
    return float32_and_bfloat16("sdpa", "attention", TOLERANCE, _inputs, _run, _work, _reference)
