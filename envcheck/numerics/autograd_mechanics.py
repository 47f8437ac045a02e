"""autograd.mechanics: accumulation, zero_grad, retain_graph, hooks, no_grad/inference_mode, detach, versions."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed
from envcheck.reference.compare import Comparison, Tensor, compare
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.suspects import wrong_math_fix

TOL = {"atol": 1e-6, "rtol": 1e-6}  # float32, the same arithmetic repeated: in practice exact


def _square(t: Tensor) -> Tensor:
    return t * t


def _sin(t: Tensor) -> Tensor:
    return t.sin()  # saves its input for backward


def _no_grad() -> contextlib.AbstractContextManager[Any]:
    import torch

    manager: contextlib.AbstractContextManager[Any] = torch.no_grad()
    return manager


def _inference_mode() -> contextlib.AbstractContextManager[Any]:
    import torch

    manager: contextlib.AbstractContextManager[Any] = torch.inference_mode()
    return manager


def _detach(t: Tensor) -> Tensor:
    return t.detach()


@dataclass(frozen=True)
class MechanicsParts:
    """The parts each probe exercises; tests swap one for a faulty stand-in."""

    square: Callable[[Tensor], Tensor] = _square
    saving_op: Callable[[Tensor], Tensor] = _sin
    no_grad: Callable[[], contextlib.AbstractContextManager[Any]] = _no_grad
    inference_mode: Callable[[], contextlib.AbstractContextManager[Any]] = _inference_mode
    detach: Callable[[Tensor], Tensor] = _detach


def _raises(fn: Callable[[], object], needle: str) -> bool:
    try:
        fn()
    except RuntimeError as exc:
        return needle in str(exc)
    return False


def mechanics_problems(
    device: str, parts: MechanicsParts = MechanicsParts(), compared: list[Comparison] | None = None
) -> dict[str, str | None]:
    """Each probe's name → None when it holds, else what went wrong (naming the device); the tensor comparisons
    made on the way are appended to `compared` (for their margins)."""
    import torch

    out: dict[str, str | None] = {}
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen).to(device)
    layer = torch.nn.Linear(3, 2).to(device)

    layer(x).sum().backward()
    once = layer.weight.grad.clone()
    layer(x).sum().backward()
    acc = compare(
        layer.weight.grad, 2 * once, op="weight.grad after 2 backward", device=device, dtype="float32", **TOL
    )
    layer.zero_grad(set_to_none=True)
    out["grad_accumulates"] = None if acc.ok else acc.describe()
    out["zero_grad_set_to_none"] = (
        None if layer.weight.grad is None else f"weight.grad is not None after zero_grad on {device}"
    )

    seen: list[Tensor] = []
    y = layer(x)
    y.register_hook(lambda g: seen.append(g.detach().clone()))
    parts.square(y).sum().backward()
    hook = compare(
        seen[0] if seen else torch.full_like(y, float("nan")),
        2 * y.detach(),
        op="register_hook upstream grad (2·y for sum(y²))",
        device=device,
        dtype="float32",
        **TOL,
    )
    out["hook_sees_upstream_grad"] = None if hook.ok else hook.describe()

    a = torch.randn(3, generator=gen).to(device).requires_grad_(True)
    loss = parts.saving_op(a * 2).sum()
    loss.backward()
    second = _raises(lambda: loss.backward(), "second time")
    out["second_backward_needs_retain_graph"] = (
        None
        if second
        else (
            f"a second backward without retain_graph did not raise 'backward through the graph a second time' on {device}"
        )
    )
    kept = parts.saving_op(a * 2).sum()
    kept.backward(retain_graph=True)
    out["retain_graph_allows_second_backward"] = (
        None
        if not _raises(kept.backward, "")
        else (f"second backward with retain_graph=True failed on {device}")
    )

    for name, ctx_factory in (("no_grad", parts.no_grad), ("inference_mode", parts.inference_mode)):
        with ctx_factory():
            z = a * 2
        builds = z.requires_grad or z.grad_fn is not None
        out[f"{name}_builds_no_graph"] = (
            f"{name} recorded grad_fn {z.grad_fn} on {device}" if builds else None
        )

    a.grad = None
    cut = parts.detach(a * 3)
    (cut * a).sum().backward()  # only the direct path counts: d/da = cut
    det = compare(a.grad, (a * 3).detach(), op="grad through detach()", device=device, dtype="float32", **TOL)
    out["detach_cuts_graph"] = None if det.ok and cut.grad_fn is None else det.describe() + " (graph not cut)"

    if compared is not None:
        compared += [acc, hook, det]
    b = a * 2
    c = parts.saving_op(b).sum()
    with torch.no_grad():
        b.add_(1)
    caught = _raises(c.backward, "modified by an inplace operation")
    out["inplace_on_saved_tensor_raises"] = (
        None
        if caught
        else (
            f"backward after an in-place change to a saved tensor did not raise the version-counter error on {device}"
        )
    )
    return out


def autograd_mechanics(ctx: Context, parts: MechanicsParts = MechanicsParts()) -> Result:
    """Autograd bookkeeping behaves as documented on every device."""
    compared: list[Comparison] = []
    with numerics_mode():
        probes = {
            f"{name}@{device}": why
            for device in check_devices()
            for name, why in mechanics_problems(device, parts, compared).items()
        }
    bad = {k: v for k, v in probes.items() if v}
    measured: dict[str, Any] = {k: ("ok" if v is None else v) for k, v in probes.items()}
    measured.update({c.label: c.measured() for c in compared})
    expected = {"all probes": "ok", "tolerance": TOL}
    if bad:
        lines = [f"{k}: {v}" for k, v in bad.items()]
        fix, fault, _ = wrong_math_fix("autograd bookkeeping is broken in this torch build; reinstall torch")
        return failed(
            f"autograd mechanics: {first_of(lines)}",
            fix,
            measured=measured,
            expected=expected,
            details="\n".join(lines),
            fault_class=fault,
        )
    return passed(f"autograd mechanics: {len(probes)} probes hold", measured=measured, expected=expected)
