"""amp.clip_after_unscale: unscale_ then clip_grad_norm_ reports the float32 norm and takes the float32 step."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.numerics.grad_scaler import real_grad_scaler
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

MAX_NORM, LR = 0.5, 0.1
CLIP_TOL = {"float32": {"atol": 1e-6, "rtol": 1e-5}, "autocast": {"atol": 1e-3, "rtol": 1e-2}}
ClipStep = Callable[[Any, Any, Any], Any]  # (scaler, optimizer, parameters) -> total norm


def unscale_then_clip(scaler: Any, optimizer: Any, params: Any) -> Any:
    """The documented order: unscale_ first, then clip the true gradients."""
    import torch

    scaler.unscale_(optimizer)
    return torch.nn.utils.clip_grad_norm_(params, MAX_NORM)


def _setup(device: str) -> tuple[Any, Any, Any, Any]:
    import torch

    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    for p in model.parameters():
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    x, y = torch.randn(64, 16, generator=gen), torch.randn(64, 4, generator=gen)
    model = model.to(device)
    return model, torch.optim.SGD(model.parameters(), lr=LR), x.to(device), y.to(device)


def clip_comparisons(
    device: str, autocast_dtype: str | None, clip_step: ClipStep = unscale_then_clip
) -> list[Comparison]:
    """Total norm and stepped parameters under GradScaler (optionally with autocast) vs the float32 reference."""
    import torch

    ref_model, ref_opt, x, y = _setup(device)
    torch.nn.functional.mse_loss(ref_model(x), y).backward()
    ref_norm = torch.nn.utils.clip_grad_norm_(ref_model.parameters(), MAX_NORM)
    ref_opt.step()

    model, opt, x, y = _setup(device)
    kind = device.split(":")[0]
    scaler = real_grad_scaler(kind, init_scale=2.0**12)
    cast = (
        torch.autocast(kind, dtype=getattr(torch, autocast_dtype))
        if autocast_dtype
        else contextlib.nullcontext()
    )
    with cast:
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    norm = clip_step(scaler, opt, model.parameters())
    scaler.step(opt)
    scaler.update()
    label = autocast_dtype or "float32"
    tol = CLIP_TOL["autocast" if autocast_dtype else "float32"]
    after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref_after = torch.cat([p.detach().reshape(-1) for p in ref_model.parameters()])
    return [
        compare(
            torch.as_tensor(norm).reshape(1),
            ref_norm.reshape(1),
            op="total grad norm (scaled run vs fp32)",
            device=device,
            dtype=label,
            **tol,
        ),
        compare(after, ref_after, op="params after clipped step", device=device, dtype=label, **tol),
    ]


def clip_targets() -> list[tuple[str, str | None]]:
    """Float32 forward everywhere; autocast bfloat16 on CPU and float16 on CUDA."""
    pairs: list[tuple[str, str | None]] = []
    for device in check_devices():
        pairs += [(device, None), (device, "bfloat16" if device == "cpu" else "float16")]
    return pairs


def amp_clip_after_unscale(ctx: Context, clip_step: ClipStep = unscale_then_clip) -> Result:
    """GradScaler.unscale_ then clip_grad_norm_ matches the float32 reference norm and step."""
    with numerics_mode():
        comparisons = [c for device, dt in clip_targets() for c in clip_comparisons(device, dt, clip_step)]
    return comparisons_result(
        "clip after unscale_",
        comparisons,
        tolerances={"max_norm": MAX_NORM, **CLIP_TOL},
        remediation="call scaler.unscale_(optimizer) before clip_grad_norm_, then "
        "scaler.step(optimizer); clipping scaled gradients clips the wrong norm",
    )
