"""losses.reference: torch.nn.functional losses over the product of their interacting options vs float64 formulas built
from elementary ops.

The option products are listed in loss_options.py (quick and full level) and loss_options_full.py (full level); the
references follow the formulas on the torch.nn loss documentation pages, evaluated in float64 from exp/log/sum only, so
they share no code with the losses. Loss values and input gradients are compared; where the formula's value is not
finite (a mean over targets that are all ignored is 0/0: NaN) torch must give the same non-finite value, and the
gradient, which the formula leaves undefined there, is not judged. Tolerance: a loss over an input of K elements is at
most K + 16 float32 operations deep on values of order max|loss|, so |err| <= (K + 16)·u·(1 + |ref|), u = eps/2.
"""

from __future__ import annotations

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.numerics.loss_options import LossCase, cross_entropy_cases, elementwise_cases
from envcheck.reference.compare import Check, Comparison, comparisons_result, judged
from envcheck.reference.devices import check_devices, numerics_mode


def cases(quick: bool) -> list[LossCase]:
    """Every option combination of the level."""
    out = cross_entropy_cases(quick) + elementwise_cases(quick)
    if not quick:
        from envcheck.numerics.loss_options_full import ctc_cases, likelihood_cases, margin_cases

        out += ctc_cases() + margin_cases() + likelihood_cases()
    return out


def loss_comparisons(device: str, quick: bool = False) -> tuple[list[Comparison], list[str]]:
    """Loss value and input gradient, float32 on `device` vs the float64 reference on CPU; and the combinations torch
    refused (a documented combination that raises is a finding)."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    checks: list[Check] = []
    problems: list[str] = []
    pending = []
    totals = [torch.zeros((), device=device), torch.zeros((), dtype=torch.float64)]
    for case in cases(quick):
        x = case.x.float().to(device).requires_grad_(True)
        xr = x.detach().double().cpu().requires_grad_(True)
        want = case.ref(xr)
        try:
            got = case.fn(x)
        except (RuntimeError, IndexError, ValueError) as exc:
            problems.append(f"{case.label} on {device}: torch raised {type(exc).__name__}: {exc}"[:300])
            continue
        bound = (case.x.numel() + 16) * u
        finite = torch.isfinite(want.detach())
        scale = 1 + float(want.detach()[finite].abs().max()) if bool(finite.any()) else 1.0
        checks.append((case.label, got.detach(), want.detach(), bound * scale, bound))
        if not bool(finite.all()):
            continue  # the gradient of a non-finite value: undefined by the formula
        weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        totals[0] = totals[0] + (got * weights.to(device, got.dtype)).sum()
        totals[1] = totals[1] + (want * weights).sum()
        pending.append((case.label, x, xr, bound))
    # one backward per side: each case's input is its own leaf, so the sum gives each its own gradient
    torch.autograd.backward(totals)
    for label, x, xr, bound in pending:
        checks.append((f"d/dinput {label}", x.grad, xr.grad, bound * (1 + float(xr.grad.abs().max())), bound))
    return judged(checks, device=device, dtype="float32"), problems


def losses_reference(ctx: Context) -> Result:
    """Every loss option combination matches its float64 formula, value and gradient, on every device."""
    quick = ctx.level is Level.QUICK
    import warnings

    comparisons: list[Comparison] = []
    problems: list[str] = []
    with numerics_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's reduction="mean" warns by design that it is not batchmean
        for device in check_devices():
            found, bad = loss_comparisons(device, quick)
            comparisons += found
            problems += bad
    return comparisons_result(
        "losses vs float64 formulas",
        comparisons,
        tolerances={
            "atol": "(K+16)·u·(1+|ref|), K = input elements",
            "rtol": "(K+16)·u",
            "options": "every combination of the interacting options (loss_options.py)",
        },  # fmt: skip
        problems=problems,
        remediation="a loss function computes a wrong value or gradient for these options; "
        "reinstall torch or avoid the failing option",
    )
