"""amp.grad_scaler: the GradScaler contract: skip non-finite steps, back off, grow, and unscale real steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed
from envcheck.reference.compare import compare
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.suspects import wrong_math_fix

INIT_SCALE, BACKOFF, GROWTH, INTERVAL, LR = 2.0**10, 0.5, 2.0, 3, 0.1
STEP_TOL = {"atol": 1e-6, "rtol": 1e-6}  # float32 parameters after one unscaled SGD step
MakeScaler = Callable[..., Any]


def real_grad_scaler(device_type: str, **kw: Any) -> Any:
    """torch.amp.GradScaler for this device type (torch.amp.GradScaler("cpu") exists in torch >= 2.3)."""
    import torch

    return torch.amp.GradScaler(device_type, **kw)


class PlainSGD:
    """A bare SGD with the two things GradScaler uses from an optimizer: `param_groups` and `step()`.

    Any torch.optim.Optimizer imports torch._dynamo on construction and on step (~2 s on first use),
    which would dominate the quick level; the scaler's contract does not depend on the optimizer class.
    Real torch.optim steps under a scaler are checked at full level (amp.clip_after_unscale,
    amp.training_convergence).
    """

    def __init__(self, params: list[Any], lr: float) -> None:
        self.param_groups: list[dict[str, Any]] = [{"params": list(params), "lr": lr}]

    def step(self) -> None:
        """p -= lr * grad for every parameter with a gradient."""
        import torch

        with torch.no_grad():
            for group in self.param_groups:
                for q in group["params"]:
                    if q.grad is not None:
                        q.add_(q.grad, alpha=-group["lr"])

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient."""
        for group in self.param_groups:
            for q in group["params"]:
                q.grad = None


def grad_scaler_problems(
    device: str, make_scaler: MakeScaler = real_grad_scaler
) -> tuple[dict[str, Any], list[str]]:
    """Drive a scaler through inf, NaN, finite and growth steps; return what happened and what went wrong."""
    import torch

    scaler = make_scaler(
        device.split(":")[0],
        init_scale=INIT_SCALE,
        backoff_factor=BACKOFF,
        growth_factor=GROWTH,
        growth_interval=INTERVAL,
    )
    p = torch.nn.Parameter(torch.ones(4, device=device))
    opt = PlainSGD([p], LR)
    measured: dict[str, Any] = {}
    problems: list[str] = []

    def step(poison: float | None) -> tuple[Any, float, float]:
        opt.zero_grad(set_to_none=True)
        weights = torch.tensor([1.0, -2.0, 3.0, 0.5], device=device)
        if poison is not None:
            weights[1] = poison
        before, scale = p.detach().clone(), float(scaler.get_scale())
        scaler.scale((p * p * weights).sum()).backward()
        scaler.step(opt)
        scaler.update()
        return before, scale, float(scaler.get_scale())

    for label, poison in (("inf", float("inf")), ("nan", float("nan"))):
        before, scale, after = step(poison)
        changed = not torch.equal(p.detach(), before)
        measured[f"{label}_step"] = {"params_changed": changed, "scale_before": scale, "scale_after": after}
        if changed:
            problems.append(
                f"step() updated parameters after an injected {label} gradient on {device} "
                f"(params now {p.detach().tolist()})"
            )
        if after != scale * BACKOFF:
            problems.append(
                f"update() after an {label} step moved the scale {scale:g} -> {after:g} on {device}, "
                f"expected x{BACKOFF:g} = {scale * BACKOFF:g}"
            )
        if changed:  # keep probing from a sane state
            with torch.no_grad():
                p.copy_(torch.ones(4))
    scales = []
    for i in range(INTERVAL):
        before, scale, after = step(None)
        scales.append(after)
        if i == 0:
            weights = torch.tensor([1.0, -2.0, 3.0, 0.5], device=device)
            ok = compare(
                p.detach(),
                before - LR * 2 * before * weights,
                op="SGD step on unscaled grads",
                device=device,
                dtype="float32",
                **STEP_TOL,
            )
            measured["finite_step"] = ok.measured()
            if not ok.ok:
                problems.append(f"finite step: {ok.describe()}")
    measured["scales_over_clean_steps"] = scales
    start = INIT_SCALE * BACKOFF * BACKOFF  # the inf and the NaN step each backed off once
    if scales[:-1] != [start] * (INTERVAL - 1) or scales[-1] != start * GROWTH:
        problems.append(
            f"scale over {INTERVAL} clean steps on {device} was {scales}, expected "
            f"{[start] * (INTERVAL - 1) + [start * GROWTH]} (growth x{GROWTH:g} after growth_interval)"
        )
    return measured, problems


def amp_grad_scaler(ctx: Context, make_scaler: MakeScaler = real_grad_scaler) -> Result:
    """GradScaler skips inf/NaN steps, backs off, grows after growth_interval, and unscales real steps."""
    measured: dict[str, Any] = {}
    problems: list[str] = []
    with numerics_mode():
        for device in check_devices():
            found, bad = grad_scaler_problems(device, make_scaler)
            measured[device] = found
            problems += bad
    expected = {
        "init_scale": INIT_SCALE,
        "backoff_factor": BACKOFF,
        "growth_factor": GROWTH,
        "growth_interval": INTERVAL,
        "non_finite_step": "skipped",
        "finite_step_tolerance": STEP_TOL,
    }
    if problems:
        fix, fault, _ = wrong_math_fix(
            "GradScaler is broken or replaced in this environment; reinstall torch "
            "and use torch.amp.GradScaler(device_type)"
        )
        return failed(
            f"GradScaler contract: {first_of(problems)}",
            fix,
            measured=measured,
            expected=expected,
            details="\n".join(problems),
            fault_class=fault,
        )
    return passed(
        f"GradScaler contract holds on {', '.join(measured)}: inf/NaN steps skipped, "
        f"backoff x{BACKOFF:g}, growth x{GROWTH:g} after {INTERVAL} clean steps",
        measured=measured,
        expected=expected,
    )
