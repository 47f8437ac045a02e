"""train.clip_grad_norm and train.clip_grad_value: what the clipping utilities promise, checked on every device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

NORM_TOL = {"atol": 1e-6, "rtol": 1e-5}  # float32; torch divides by (norm + 1e-6)
ClipNorm = Callable[[list[Any], float], Any]
ClipValue = Callable[[list[Any], float], None]
REMEDIATION = "torch.nn.utils clipping is broken or patched here; reinstall torch"


def real_clip_grad_norm(params: list[Any], max_norm: float) -> Any:
    """torch.nn.utils.clip_grad_norm_ itself."""
    import torch

    return torch.nn.utils.clip_grad_norm_(params, max_norm)


def real_clip_grad_value(params: list[Any], clip_value: float) -> None:
    """torch.nn.utils.clip_grad_value_ itself."""
    import torch

    torch.nn.utils.clip_grad_value_(params, clip_value)


def _tied_model_grads(device: str) -> tuple[list[Any], list[Any]]:
    """An embedding tied to its output projection (one shared tensor), with gradients from one backward."""
    import torch

    torch.manual_seed(0)
    emb = torch.nn.Embedding(6, 4)
    head = torch.nn.Linear(4, 6)
    head.weight = emb.weight  # weight tying: model.parameters() yields it once
    model = torch.nn.Sequential(emb, head).to(device)
    torch.nn.functional.cross_entropy(
        model(torch.tensor([0, 3, 5, 1], device=device)), torch.tensor([1, 2, 3, 4], device=device)
    ).backward()
    params = list(model.parameters())
    return params, [p.grad.detach().clone() for p in params]


def clip_norm_comparisons(
    device: str, clip: ClipNorm = real_clip_grad_norm
) -> tuple[list[Comparison], dict[str, Any]]:
    """Pre-clip norm returned, rescale above max_norm, untouched below, direction kept, tied weight counted once."""
    import torch

    params, grads = _tied_model_grads(device)
    true_norm = torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))  # each tensor once
    cmp: list[Comparison] = []
    info: dict[str, Any] = {"true_norm": float(true_norm), "tied_tensors": 1, "parameters": len(params)}
    for label, max_norm in (("above", float(true_norm) / 4), ("below", float(true_norm) * 4)):
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        returned = torch.as_tensor(clip(params, max_norm)).reshape(1)
        cmp.append(
            compare(
                returned,
                true_norm.reshape(1),
                op=f"returned pre-clip norm ({label} max_norm, tied weight once)",
                device=device,
                dtype="float32",
                **NORM_TOL,
            )
        )
        after = torch.cat([p.grad.reshape(-1) for p in params])
        before = torch.cat([g.reshape(-1) for g in grads])
        if label == "above":
            cmp.append(
                compare(
                    torch.linalg.vector_norm(after).reshape(1),
                    torch.tensor([max_norm]),
                    op="norm after clipping equals max_norm",
                    device=device,
                    dtype="float32",
                    **NORM_TOL,
                )
            )
            cmp.append(
                compare(
                    after,
                    before * (max_norm / true_norm),
                    op="clipped grads keep their direction",
                    device=device,
                    dtype="float32",
                    **NORM_TOL,
                )
            )
        else:
            cmp.append(
                compare(
                    after,
                    before,
                    op="grads below max_norm untouched",
                    device=device,
                    dtype="float32",
                    atol=0.0,
                    rtol=0.0,
                )
            )
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    # Not judged: clip_grad_norm_ itself does not de-duplicate; a list naming the tied tensor twice counts it twice.
    info["norm_if_tied_tensor_listed_twice"] = float(
        torch.nn.utils.get_total_norm([g for g in grads] + [grads[0]])
    )
    return cmp, info


def train_clip_grad_norm(ctx: Context, clip: ClipNorm = real_clip_grad_norm) -> Result:
    """clip_grad_norm_ returns the pre-clip norm, rescales to max_norm only above it, keeps direction, counts tied weights once."""
    comparisons: list[Comparison] = []
    extra: dict[str, Any] = {}
    with numerics_mode():
        for device in check_devices():
            found, info = clip_norm_comparisons(device, clip)
            comparisons += found
            extra[f"norms@{device}"] = info
    return comparisons_result(
        "clip_grad_norm_", comparisons, tolerances=NORM_TOL, extra=extra, remediation=REMEDIATION
    )


def clip_value_comparisons(
    device: str, clip: ClipValue = real_clip_grad_value, clip_value: float = 1.0
) -> list[Comparison]:
    """Every element ends in [-v, v]; elements already inside are untouched."""
    import torch

    a = torch.nn.Parameter(torch.zeros(13, device=device))
    b = torch.nn.Parameter(torch.zeros(2, 3, device=device))
    a.grad = torch.linspace(-3.0, 3.0, 13, device=device)
    b.grad = torch.tensor([[0.5, -1.5, 1.0], [-0.25, 7.0, -1.0]], device=device)
    before = torch.cat([a.grad.reshape(-1), b.grad.reshape(-1)]).clone()
    clip([a, b], clip_value)
    after = torch.cat([a.grad.reshape(-1), b.grad.reshape(-1)])
    return [
        compare(
            after,
            before.clamp(-clip_value, clip_value),
            op=f"clip_grad_value_({clip_value:g})",
            device=device,
            dtype="float32",
            atol=0.0,
            rtol=0.0,
        )
    ]


def train_clip_grad_value(ctx: Context, clip: ClipValue = real_clip_grad_value) -> Result:
    """clip_grad_value_ bounds every gradient element to [-v, v] and leaves smaller ones alone."""
    with numerics_mode():
        comparisons = [c for device in check_devices() for c in clip_value_comparisons(device, clip)]
    return comparisons_result(
        "clip_grad_value_", comparisons, tolerances={"atol": 0.0, "rtol": 0.0}, remediation=REMEDIATION
    )
