"""train.clip_options (full level): torch.nn.utils.clip_grad_norm_ across its options (norm_type 1, 2, 3.5, inf,
-inf and 0; foreach None, False, True; max_norm above and below the norm; float32 and bfloat16 gradients together;
error_if_nonfinite with inf and NaN gradients), get_total_norm + clip_grads_with_norm_ where torch has them, and
clip_grad_value_ with foreach, vs float64 closed forms: total = (Σ|g|^p)^(1/p) over every element of every gradient
(max |g| for inf, min for -inf; as documented, the norm of the per-gradient norms, which for 0 counts the non-zero
gradients), every gradient times min(1, max_norm/(total + 1e-6)).
With error_if_nonfinite=True a non-finite total must raise and leave the gradients alone (pytorch#53843); with False it
must return the non-finite total. Tolerance: a p-norm of n terms, (n + 8)·u·total, plus the rounding of a bfloat16
result, u_bf16·total (Higham 2002 eq. 4.4).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.clip_norms import total_norm
from envcheck.reference.compare import Comparison, Tensor, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

NORMS = (1.0, 2.0, 3.5, math.inf, -math.inf, 0.0)
FOREACH = (None, False, True)


def grads(device: str, mixed: bool, bad: str | None) -> list[Tensor]:
    """Three gradients (one bfloat16 when mixed), optionally with an inf or NaN element."""
    import torch

    gen = torch.Generator().manual_seed(0)
    gs = [
        torch.randn(5, 4, generator=gen),
        torch.randn(7, generator=gen) * 3,
        torch.randn(2, 3, generator=gen),
    ]
    gs[1][2] = 0.0
    if mixed:
        gs[2] = gs[2].bfloat16()
    if bad:
        gs[0][1, 1] = float(bad)
    return [g.to(device) for g in gs]


def clip_comparisons(device: str) -> tuple[list[Comparison], list[str]]:
    """Every option set of clip_grad_norm_ (and its two halves) vs the closed form."""
    import torch

    comps: list[Comparison] = []
    problems: list[str] = []
    u32, ubf = torch.finfo(torch.float32).eps / 2, torch.finfo(torch.bfloat16).eps / 2
    for p, foreach, mixed, factor, split in itertools.product(
        NORMS, FOREACH, (False, True), (0.25, 4.0), (False, True)
    ):
        if split and not hasattr(torch.nn.utils, "get_total_norm"):
            continue
        gs = grads(device, mixed, None)
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in gs]
        for q, g in zip(params, gs, strict=True):
            q.grad = g.clone()
        want = total_norm(gs, p)
        max_norm = want * factor
        label = (
            f"clip_grad_norm_(norm_type={p}, foreach={foreach}, mixed_dtypes={mixed}, max_norm={factor}x"
            f"{', via get_total_norm + clip_grads_with_norm_' if split else ''})"
        )
        try:
            if split:
                got = torch.nn.utils.get_total_norm([q.grad for q in params], p, foreach=foreach)
                torch.nn.utils.clip_grads_with_norm_(params, max_norm, got, foreach=foreach)
            else:
                got = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=p, foreach=foreach)
        except RuntimeError as exc:
            if foreach and "foreach" in str(exc):
                continue  # foreach=True on a device or norm without a foreach kernel: torch says so
            problems.append(f"{label} on {device}: {exc}"[:300])
            continue
        n = sum(g.numel() for g in gs)
        tol = (n + 8) * u32 * want + (ubf * want if mixed else 0.0)
        comps.append(
            compare(
                torch.as_tensor(got).reshape(1),
                torch.tensor([want]),
                op=f"{label} returned total norm",
                device=device,
                dtype="float32",
                atol=tol,
                rtol=0.0,
            )
        )
        coef = min(1.0, max_norm / (want + 1e-6))
        for i, (q, g) in enumerate(zip(params, gs, strict=True)):
            ref = g.double().cpu() * coef
            u = ubf if g.dtype == torch.bfloat16 else u32  # the coefficient carries the total's error
            rel = (n + 10) * u32 + (ubf if mixed else 0.0) + u
            comps.append(
                compare(
                    q.grad,
                    ref,
                    op=f"{label} gradient {i}",
                    device=device,
                    dtype=str(g.dtype)[6:],
                    atol=rel * float(ref.abs().max()),
                    rtol=0.0,
                )
            )
    return comps, problems


def nonfinite_problems(device: str) -> list[str]:
    """error_if_nonfinite: True raises and leaves gradients alone; False returns the non-finite total."""
    import torch

    out = []
    for bad, foreach, error in itertools.product(("inf", "nan"), FOREACH, (True, False)):
        gs = grads(device, False, bad)
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in gs]
        for q, g in zip(params, gs, strict=True):
            q.grad = g.clone()
        label = f"clip_grad_norm_(error_if_nonfinite={error}, foreach={foreach}) with a {bad} gradient on {device}"
        try:
            got = torch.nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=error, foreach=foreach)
        except RuntimeError as exc:
            if error:
                if not all(
                    torch.equal(q.grad, g)
                    or (torch.isnan(q.grad) == torch.isnan(g)).all()
                    and torch.equal(q.grad.nan_to_num(), g.nan_to_num())
                    for q, g in zip(params, gs, strict=True)
                ):
                    out.append(f"{label}: raised, but changed the gradients first")
                continue
            if foreach and "foreach" in str(exc):
                continue
            out.append(f"{label}: raised {exc}"[:300])
            continue
        if error:
            out.append(
                f"{label}: returned {float(got)} instead of raising (non-finite gradients pass silently)"
            )
        elif math.isfinite(float(got)):
            out.append(f"{label}: returned a finite total norm {float(got)}")
    return out


def value_comparisons(device: str) -> list[Comparison]:
    """clip_grad_value_ with foreach None/False/True bounds every element to [-v, v]."""
    import torch

    comps = []
    for foreach, v in itertools.product(FOREACH, (0.5, 2.0)):
        gs = grads(device, True, None)
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in gs]
        for q, g in zip(params, gs, strict=True):
            q.grad = g.clone()
        torch.nn.utils.clip_grad_value_(params, v, foreach=foreach)
        for i, (q, g) in enumerate(zip(params, gs, strict=True)):
            comps.append(
                compare(
                    q.grad,
                    g.double().cpu().clamp(-v, v),
                    op=f"clip_grad_value_({v}, foreach={foreach}) gradient {i}",
                    device=device,
                    dtype=str(g.dtype)[6:],
                    atol=0.0,
                    rtol=0.0,
                )
            )
    return comps


def train_clip_options(ctx: Context) -> Result:
    """Gradient clipping across norm types, foreach, dtypes and non-finite handling matches its closed form."""
    comparisons: list[Comparison] = []
    problems: list[str] = []
    with numerics_mode():
        for device in check_devices():
            found, bad = clip_comparisons(device)
            comparisons += found + value_comparisons(device)
            problems += bad + nonfinite_problems(device)
    extra: dict[str, Any] = {"norm_types": [str(p) for p in NORMS]}
    return comparisons_result(
        "gradient clipping options vs closed forms",
        comparisons,
        problems=problems,
        extra=extra,
        tolerances={"norm": "(n+8)·u·total (+u_bf16·total with bfloat16)", "value": "exact"},
        remediation="gradient clipping computes a wrong norm or scale for these options; "
        "clip with foreach=False and norm_type=2, and reinstall torch",
    )
