"""autograd.linear_vjp: the Linear layer's hand-derived VJP (dX = G·Wᵀ, dW = Xᵀ·G, db = ΣG) equals autograd."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

VJP_TOL = {"float32": {"atol": 1e-5, "rtol": 1e-5}, "float64": {"atol": 1e-10, "rtol": 1e-10}}
LinearOp = Callable[[Any, Any, Any], Any]


def linear_op(x: Any, w: Any, b: Any) -> Any:
    """Y = X·W + b through F.linear (the nn.Linear path; W is stored (in, out) here as in the seed)."""
    import torch.nn.functional as F

    return F.linear(x, w.t(), b)


def linear_vjp_comparisons(device: str, dtype_name: str, op: LinearOp = linear_op) -> list[Comparison]:
    """Autograd's gradients of sum(Y²) against the hand-written VJP, for X of shape (B, H, D)."""
    import torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(0)
    B, H, D, E = 2, 3, 4, 5
    x, w, b = (
        torch.randn(s, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_(True)
        for s in ((B, H, D), (D, E), (E,))
    )
    y = op(x, w, b)
    (y**2).sum().backward()
    g = 2 * y.detach()  # upstream gradient of sum(Y²)
    by_hand = {
        "dX = G·Wᵀ": g @ w.detach().t(),
        "dW = Xᵀ·G": x.detach().reshape(-1, D).t() @ g.reshape(-1, E),
        "db = ΣG": g.reshape(-1, E).sum(0),
    }
    autograd = {"dX = G·Wᵀ": x.grad, "dW = Xᵀ·G": w.grad, "db = ΣG": b.grad}
    return [
        compare(autograd[k], v, op=f"linear {k}", device=device, dtype=dtype_name, **VJP_TOL[dtype_name])
        for k, v in by_hand.items()
    ]


def _products(a: Any, b: Any) -> Any:
    """a·b by broadcasting and summing, without mm/matmul, so a broken mm cannot bend the reference too."""
    return (a.unsqueeze(-1) * b.unsqueeze(0)).sum(1)


def mm_vjp_comparisons(device: str, dtype_name: str) -> list[Comparison]:
    """Backward of plain torch.mm and torch.matmul (their own autograd kernels, not F.linear's addmm) against
    dA = G·Bᵀ and dB = Aᵀ·G computed by broadcasting."""
    import torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(1)
    out: list[Comparison] = []
    for name, op in (("mm", torch.mm), ("matmul", torch.matmul)):
        a, b = (
            torch.randn(s, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_(True)
            for s in ((3, 4), (4, 5))
        )
        y = op(a, b)
        (y**2).sum().backward()
        g = 2 * _products(a.detach(), b.detach())
        want = {"dA = G·Bᵀ": _products(g, b.detach().t()), "dB = Aᵀ·G": _products(a.detach().t(), g)}
        got = {"dA = G·Bᵀ": a.grad, "dB = Aᵀ·G": b.grad}
        out += [
            compare(got[k], v, op=f"torch.{name} {k}", device=device, dtype=dtype_name, **VJP_TOL[dtype_name])
            for k, v in want.items()
        ]
    return out


def autograd_linear_vjp(ctx: Context) -> Result:
    """The linear layer's gradients from autograd match the hand-derived VJP on every device."""
    with numerics_mode():
        comparisons = [
            c
            for device in check_devices()
            for dt in ("float32", "float64")
            for c in [*linear_vjp_comparisons(device, dt), *mm_vjp_comparisons(device, dt)]
        ]
    return comparisons_result(
        "linear VJP by hand vs autograd",
        comparisons,
        tolerances=VJP_TOL,
        remediation="the Linear/mm/matmul backward is wrong in this torch build; "
        "reinstall torch and rerun `envcheck run --only autograd.linear_vjp`",
    )
