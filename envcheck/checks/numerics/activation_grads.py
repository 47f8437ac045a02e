"""autograd.activations: first and second derivatives of the common activations against float64 finite
differences (torch.autograd.gradcheck / gradgradcheck, fast mode: a random directional derivative per check).

The finite-difference Jacobian is an independent implementation of the derivative; float64 with eps 1e-6 and the
default atol 1e-5/rtol 1e-3 of gradcheck keeps truncation (O(eps²)) and rounding (O(u/eps)) far below tolerance.
Inputs stay away from the kinks of piecewise activations (|x| >= 0.1) so the derivatives exist there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from envcheck.checks.numerics.devices import check_devices, numerics_mode
from envcheck.checks.numerics.suspects import wrong_math_fix
from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed

ACTIVATIONS: dict[str, dict[str, Any]] = {
    "gelu": {}, "gelu(tanh)": {"approximate": "tanh"}, "silu": {}, "mish": {}, "softplus": {"beta": 2.0},
    "elu": {}, "selu": {}, "celu": {}, "leaky_relu": {"negative_slope": 0.1}, "sigmoid": {}, "tanh": {},
    "logsigmoid": {}, "hardswish": {}, "relu": {}, "softsign": {},
}


def activation(name: str) -> Callable[[Any], Any]:
    """torch.nn.functional.<name> (looked up now, so a replaced function is what gets checked)."""
    import torch.nn.functional as F

    base = name.split("(")[0]
    return functools.partial(getattr(F, base), **ACTIVATIONS[name])


def failures(device: str) -> list[str]:
    """Activations whose first or second derivative disagrees with finite differences on `device`."""
    import torch
    from torch.autograd import gradcheck, gradgradcheck

    x = torch.linspace(-3, 3, 24, dtype=torch.float64)
    x = torch.where(x.abs() < 0.1, torch.sign(x) * 0.1 + (x == 0) * 0.1, x)
    x = x.reshape(4, 6)
    bad = []
    for name in ACTIVATIONS:
        fn = activation(name)
        scale = 1.5 if name == "hardswish" else 1.0  # hardswish has kinks at ±3, the ends of x
        inp = (x * scale).to(device).requires_grad_(True)
        for what, check in (("backward", gradcheck), ("double backward", gradgradcheck)):
            try:
                ok = check(fn, (inp,), fast_mode=True, raise_exception=False)
            except RuntimeError as exc:
                ok, why = False, str(exc).splitlines()[0][:100]
            else:
                why = "analytical and finite-difference derivatives differ"
            if not ok:
                bad.append(f"{name} {what} on {device}: {why}")
    return bad


def autograd_activations(ctx: Context) -> Result:
    """Activation first and second derivatives equal float64 finite differences on every device."""
    with numerics_mode():
        devices = check_devices()
        bad = [b for device in devices for b in failures(device)]
    measured = {"activations": sorted(ACTIVATIONS), "devices": devices, "failed": bad}
    expected = {"gradcheck": "fast mode, float64, atol 1e-5, rtol 1e-3", "gradgradcheck": "same"}
    if bad:
        fix, fault, _ = wrong_math_fix("an activation's derivative is wrong in this torch build; reinstall torch")
        return failed(f"activation derivatives: {first_of(bad)}", fix, measured=measured, expected=expected,
                      details="\n".join(bad), fault_class=fault)
    return passed(f"activation derivatives: {len(ACTIVATIONS)} activations, backward and double backward, match "
                  f"finite differences on {', '.join(devices)}", measured=measured, expected=expected)
