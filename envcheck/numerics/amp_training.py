"""amp.training_convergence: a small model trained N steps under AMP ends near the float32 run, with no NaN."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed
from envcheck.numerics.grad_scaler import MakeScaler, real_grad_scaler
from envcheck.reference.compare import scalar_measured
from envcheck.reference.devices import cuda_devices, native_bf16, numerics_mode
from envcheck.reference.suspects import wrong_math_fix

STEPS, LR = 60, 0.1
LOSS_TOL = {"rtol": 0.05, "atol": 0.01}  # |amp - fp32| <= atol + rtol * fp32, final loss evaluated in float32


def _model_and_data(device: str) -> tuple[Any, Any, Any]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(256, 32, generator=gen)
    y = (x @ torch.randn(32, 10, generator=gen)).argmax(1)  # a learnable teacher
    return model.to(device), x.to(device), y.to(device)


def final_loss(
    device: str, amp_dtype: str | None, make_scaler: MakeScaler | None, steps: int = STEPS
) -> tuple[float, int]:
    """Train with SGD+momentum (which, unlike Adam, exposes unscaled gradients); return the float32-evaluated final loss and how many steps had a non-finite loss."""
    import torch
    import torch.nn.functional as F

    model, x, y = _model_and_data(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    kind = device.split(":")[0]
    scaler = make_scaler(kind) if make_scaler is not None else None
    bad_steps = 0
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        cast = (
            torch.autocast(kind, dtype=getattr(torch, amp_dtype)) if amp_dtype else contextlib.nullcontext()
        )
        with cast:
            loss = F.cross_entropy(model(x), y)
        bad_steps += int(not torch.isfinite(loss).item())
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    with torch.no_grad():
        return float(F.cross_entropy(model(x).float(), y).item()), bad_steps


def convergence_targets() -> list[tuple[str, str, bool]]:
    """(device, dtype, uses GradScaler): CPU bfloat16; float16 + GradScaler and bfloat16 on each GPU model."""

    pairs = [("cpu", "bfloat16", False)]
    for device in cuda_devices():
        pairs.append((device, "float16", True))
        if native_bf16(device):
            pairs.append((device, "bfloat16", False))
    return pairs


def convergence_problems(
    device: str, dtype: str, scaled: bool, make_scaler: MakeScaler = real_grad_scaler, steps: int = STEPS
) -> tuple[dict[str, Any], list[str]]:
    """Compare one AMP run with its float32 twin."""
    reference, _ = final_loss(device, None, None, steps)
    amp, bad_steps = final_loss(device, dtype, make_scaler if scaled else None, steps)
    gap = abs(amp - reference) if math.isfinite(amp) else float("inf")
    limit = LOSS_TOL["atol"] + LOSS_TOL["rtol"] * reference
    measured = {
        "fp32_final_loss": reference,
        "amp_final_loss": amp,
        "abs_gap": gap,
        "allowed_gap": limit,
        "non_finite_steps": bad_steps,
        "grad_scaler": scaled,
        "steps": steps,
        "margin": scalar_measured(gap, limit)["margin"],
    }
    problems = []
    if bad_steps or not math.isfinite(amp):
        problems.append(
            f"AMP {dtype} on {device}: {bad_steps} of {steps} steps had a non-finite loss (final {amp:.4g})"
        )
    if gap > limit:
        problems.append(
            f"AMP {dtype} on {device} ended at loss {amp:.4g} vs float32 {reference:.4g} "
            f"(gap {gap:.3g} > allowed {limit:.3g})"
        )
    return measured, problems


def amp_training_convergence(ctx: Context, make_scaler: MakeScaler = real_grad_scaler) -> Result:
    """A small MLP trained under AMP ends within tolerance of its float32 twin, with no NaN."""
    measured: dict[str, Any] = {}
    problems: list[str] = []
    with numerics_mode():
        for device, dtype, scaled in convergence_targets():
            found, bad = convergence_problems(device, dtype, scaled, make_scaler)
            measured[f"{device}/{dtype}"] = found
            problems += bad
    expected = {"final_loss_tolerance": LOSS_TOL, "non_finite_steps": 0, "steps": STEPS}
    if problems:
        fix, fault, _ = wrong_math_fix(
            "AMP training diverges here: check the scaler order (scale -> backward -> "
            "step -> update), then reinstall torch"
        )
        return failed(
            f"AMP training: {first_of(problems)}",
            fix,
            measured=measured,
            expected=expected,
            details="\n".join(problems),
            fault_class=fault,
        )
    gaps = ", ".join(f"{k} gap {v['abs_gap']:.3g}" for k, v in measured.items())
    return passed(
        f"AMP training matches float32 after {STEPS} steps: {gaps}", measured=measured, expected=expected
    )
