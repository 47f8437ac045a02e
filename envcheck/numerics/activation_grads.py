"""autograd.activations: first and second derivatives of the common activations against float64 central finite
differences of a random directional derivative (what gradcheck's fast mode does, without importing
torch.autograd.gradcheck, whose import pulls sympy: ~2 s, more than the quick level's budget).

The finite difference is an independent implementation of the derivative.
Inputs stay away from the kinks of piecewise activations (|x| >= 0.1) so the derivatives exist there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed
from envcheck.reference.compare import scalar_measured
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.suspects import wrong_math_fix

ACTIVATIONS: dict[str, dict[str, Any]] = {
    "gelu": {},
    "gelu(tanh)": {"approximate": "tanh"},
    "silu": {},
    "mish": {},
    "softplus": {"beta": 2.0},
    "elu": {},
    "selu": {},
    "celu": {},
    "leaky_relu": {"negative_slope": 0.1},
    "sigmoid": {},
    "tanh": {},
    "logsigmoid": {},
    "hardswish": {},
    "relu": {},  # F.softsign left out: its first call imports sympy (~1 s)
}


def activation(name: str) -> Callable[[Any], Any]:
    """torch.nn.functional.<name> (looked up now, so a replaced function is what gets checked)."""
    import torch.nn.functional as F

    base = name.split("(")[0]
    return functools.partial(getattr(F, base), **ACTIVATIONS[name])


def directional(fn: Callable[[Any], Any], x: Any, order: int) -> tuple[float, float]:
    """(autograd, central finite difference) of a random directional derivative of the given order, float64.

    order 1: vᵀ·J·w; order 2: uᵀ·∂(Jᵀw)/∂x·v, i.e. the double backward. h = 1e-6: truncation O(h²), rounding
    O(u/h) ≈ 1e-10, both far below the tolerance (gradcheck's defaults, atol 1e-5, rtol 1e-3)."""
    import torch

    gen = torch.Generator().manual_seed(order)
    w, v, u = (torch.randn(x.shape, generator=gen, dtype=x.dtype).to(x.device) for _ in range(3))

    def first(t: Any, create: bool) -> Any:
        t = t.detach().requires_grad_(True)
        (g,) = torch.autograd.grad((fn(t) * w).sum(), t, create_graph=create)
        return t, g

    h = 1e-6
    if order == 1:
        t, g = first(x, False)
        numeric = float(((fn(x + h * v) - fn(x - h * v)) * w).sum() / (2 * h))
        return float((g * v).sum()), numeric
    t, g = first(x, True)
    (gg,) = torch.autograd.grad((g * u).sum(), t, allow_unused=True)
    analytic = 0.0 if gg is None else float((gg * v).sum())
    numeric = float(((first(x + h * v, False)[1] - first(x - h * v, False)[1]) * u).sum() / (2 * h))
    return analytic, numeric


def failures(device: str, margins: dict[str, Any] | None = None) -> list[str]:
    """Activations whose first or second derivative disagrees with finite differences on `device`; each
    comparison's error and margin go into `margins` (keyed `name what@device/float64`)."""
    import torch

    x = torch.linspace(-3, 3, 24, dtype=torch.float64)
    x = torch.where(x.abs() < 0.1, torch.sign(x) * 0.1 + (x == 0) * 0.1, x)
    x = x.reshape(4, 6)
    bad = []
    for name in ACTIVATIONS:
        fn = activation(name)
        scale = 1.5 if name == "hardswish" else 1.0  # hardswish has kinks at ±3, the ends of x
        inp = (x * scale).to(device)
        for order, what in ((1, "backward"), (2, "double backward")):
            try:
                analytic, numeric = directional(fn, inp, order)
            except RuntimeError as exc:
                bad.append(f"{name} {what} on {device}: {str(exc).splitlines()[0][:100]}")
                continue
            allowed = 1e-5 + 1e-3 * abs(numeric)
            if margins is not None:
                margins[f"{name} {what}@{device}/float64"] = scalar_measured(abs(analytic - numeric), allowed)
            if abs(analytic - numeric) > allowed:
                bad.append(
                    f"{name} {what} on {device}: autograd {analytic:.6g}, finite differences {numeric:.6g}"
                )
    return bad


def autograd_activations(ctx: Context) -> Result:
    """Activation first and second derivatives equal float64 finite differences on every device."""
    with numerics_mode():
        devices = check_devices()
        margins: dict[str, Any] = {}
        bad = [b for device in devices for b in failures(device, margins)]
    measured = {"activations": sorted(ACTIVATIONS), "devices": devices, "failed": bad, **margins}
    expected = {"directional derivative vs central difference": "float64, h 1e-6, atol 1e-5, rtol 1e-3"}
    if bad:
        fix, fault, _ = wrong_math_fix(
            "an activation's derivative is wrong in this torch build; reinstall torch"
        )
        return failed(
            f"activation derivatives: {first_of(bad)}",
            fix,
            measured=measured,
            expected=expected,
            details="\n".join(bad),
            fault_class=fault,
        )
    return passed(
        f"activation derivatives: {len(ACTIVATIONS)} activations, backward and double backward, match "
        f"finite differences on {', '.join(devices)}",
        measured=measured,
        expected=expected,
    )
