"""autograd.second_order: create_graph=True gives correct Hessian-vector products, and gradgradcheck passes."""

from __future__ import annotations

from collections.abc import Sequence

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.autograd_ops import OpCase
from envcheck.reference.compare import Comparison, Tensor, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

HVP_TOL = {"atol": 1e-6, "rtol": 1e-4}  # float64, central differences of gradients with eps 1e-6


def _cube(x: Tensor) -> Tensor:
    return x**3


def _tanh_linear(x: Tensor, w: Tensor) -> Tensor:
    return (x @ w).tanh()


def _softmax(x: Tensor) -> Tensor:
    return x.softmax(-1)


def _layer_norm(x: Tensor) -> Tensor:
    import torch.nn.functional as F

    return F.layer_norm(x, (x.shape[-1],))


SECOND_ORDER_OPS: tuple[OpCase, ...] = (
    OpCase("cube", _cube, ((6,),)),
    OpCase("tanh(linear)", _tanh_linear, ((3, 4), (4, 2))),
    OpCase("softmax", _softmax, ((2, 5),)),
    OpCase("layer_norm", _layer_norm, ((2, 5),)),
)


def _scalar(case: OpCase, inputs: tuple[Tensor, ...]) -> Tensor:
    import torch

    out = case.fn(*inputs)
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype, device=out.device).reshape(out.shape)
    return (out * weights).sum()


def hvp_comparison(case: OpCase, device: str, eps: float = 1e-6) -> Comparison:
    """Hessian-vector product via create_graph=True against central differences of first gradients."""
    import torch

    inputs = case.inputs(device, torch.float64)
    gen = torch.Generator().manual_seed(1)
    vs = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(device) for x in inputs]
    grads = torch.autograd.grad(_scalar(case, inputs), inputs, create_graph=True)
    directional = sum((g * v).sum() for g, v in zip(grads, vs, strict=True))
    hvp = (
        torch.autograd.grad(directional, inputs, allow_unused=True)
        if directional.requires_grad
        else [None] * len(inputs)
    )  # a backward autograd cannot see through has no second derivative
    analytical = torch.cat(
        [(h if h is not None else torch.zeros_like(x)).reshape(-1) for h, x in zip(hvp, inputs, strict=True)]
    )

    def first_grads(sign: float) -> Tensor:
        moved = tuple(
            (x.detach() + sign * eps * v).requires_grad_(True) for x, v in zip(inputs, vs, strict=True)
        )
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(_scalar(case, moved), moved)])

    numerical = (first_grads(1.0) - first_grads(-1.0)) / (2 * eps)
    return compare(
        analytical, numerical, op=f"{case.name} hessian-vector", device=device, dtype="float64", **HVP_TOL
    )


def second_order_findings(
    devices: Sequence[str], ops: Sequence[OpCase] = SECOND_ORDER_OPS
) -> tuple[list[Comparison], list[str]]:
    """HVP comparisons and gradgradcheck verdicts for every op on every device."""
    import torch

    comparisons, problems = [], []
    for device in devices:
        for case in ops:
            comparisons.append(hvp_comparison(case, device))
            why = f"torch.autograd.gradgradcheck rejects {case.name} on {device} float64"
            try:
                if not torch.autograd.gradgradcheck(
                    case.fn, case.inputs(device, torch.float64), raise_exception=False, fast_mode=True
                ):
                    problems.append(why)
            except RuntimeError as exc:  # e.g. first gradients that carry no graph
                problems.append(f"{why}: {str(exc).splitlines()[0]}")
    return comparisons, problems


def autograd_second_order(ctx: Context) -> Result:
    """Second-order gradients (create_graph=True, gradgradcheck) are right on every device."""
    with numerics_mode():
        comparisons, problems = second_order_findings(check_devices())
    return comparisons_result(
        "second-order gradients",
        comparisons,
        tolerances=HVP_TOL,
        problems=problems,
        remediation="double backward is broken in this torch build; reinstall torch",
    )
