"""autograd.inplace_detection: every way of modifying a tensor in place bumps its version counter, so a backward
that needs the old value raises instead of silently using the new one (autograd docs, "In-place correctness checks").

Each probe saves a plain tensor for backward (w * x saves x), modifies x through one in-place path, and asserts
that backward raises "modified by an inplace operation". The paths cover plain methods, indexing, out= variants,
functional inplace=True, the _foreach_* kernels optimizers use (pytorch/pytorch#53796), and ops whose inputs are
not differentiable (embedding's max_norm renorm, pytorch/pytorch#14571).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.known_bugs import known_bugs_warning, split_known
from envcheck.reference.suspects import wrong_math_fix

NEEDLE = "modified by an inplace operation"


def mutations() -> dict[str, Callable[[Any], object]]:
    """In-place paths, each applied to a float tensor of shape (4, 3) holding values in (0.5, 1.5)."""
    import torch
    import torch.nn.functional as F

    def renorm(x: Any) -> object:
        return F.embedding(torch.tensor([0, 1], device=x.device), x, max_norm=0.1)

    return {
        "add_": lambda x: x.add_(1),
        "mul_": lambda x: x.mul_(2),
        "copy_": lambda x: x.copy_(x * 3),
        "zero_": lambda x: x.zero_(),
        "clamp_": lambda x: x.clamp_(max=0.6),
        "index_put": lambda x: x.__setitem__(0, 7.0),
        "out=": lambda x: torch.add(x, 1, out=x),
        "relu(inplace=True)": lambda x: F.relu(x.sub_(1), inplace=True),
        "_foreach_add_": lambda x: torch._foreach_add_([x], 1.0),
        "_foreach_mul_": lambda x: torch._foreach_mul_([x], 2.0),
        "_foreach_addcmul_": lambda x: torch._foreach_addcmul_([x], [x.clone()], [x.clone()], value=0.5),
        "_foreach_lerp_": lambda x: torch._foreach_lerp_([x], [x * 0], 0.5),
        "embedding(max_norm) renorm": renorm,
    }


def missed_detections(device: str) -> list[str]:
    """In-place paths after which backward did not raise the version-counter error on `device`."""
    import torch

    missed = []
    for name, mutate in mutations().items():
        w = torch.ones(4, 3, device=device, requires_grad=True)
        x = torch.rand(4, 3, generator=torch.Generator().manual_seed(0)).add_(0.5).to(device)
        loss = (w * x).sum()  # saves x for d/dw
        mutate(x)
        try:
            loss.backward()
        except RuntimeError as exc:
            if NEEDLE in str(exc):
                continue
            missed.append(f"{name} on {device}: backward raised another error: {str(exc)[:120]}")
            continue
        missed.append(
            f"{name} on {device}: backward after modifying a saved tensor in place did not raise "
            f"(gradient silently used the new values)"
        )
    return missed


def autograd_inplace_detection(ctx: Context) -> Result:
    """Every in-place path bumps the version counter so autograd refuses a stale saved tensor."""
    with numerics_mode():
        devices = check_devices()
        missed = [m for device in devices for m in missed_detections(device)]
    measured = {"paths": sorted(mutations()), "devices": devices, "missed": missed}
    expected = {"every path": f"backward raises '{NEEDLE}'"}
    known, other = split_known(missed)  # a cited gap of this torch (envcheck.reference.known_bugs) is a WARN
    if other:
        fix, fault, _ = wrong_math_fix(
            "an in-place path does not bump the version counter in this torch build; reinstall torch"
        )
        return failed(
            f"in-place detection: {first_of(other)}",
            fix,
            measured=measured,
            expected=expected,
            details="\n".join(other),
            fault_class=fault,
        )
    if known:
        return known_bugs_warning("in-place detection", known, measured=measured, expected=expected)
    return passed(
        f"in-place detection: {len(measured['paths'])} in-place paths raise on {', '.join(devices)}",
        measured=measured,
        expected=expected,
    )
