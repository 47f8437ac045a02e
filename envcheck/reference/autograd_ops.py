"""The representative op set autograd is checked on, and a numerical-vs-analytical Jacobian comparison."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck.reference.compare import Comparison, Tensor, compare


@dataclass(frozen=True)
class OpCase:
    """A named differentiable function and the shapes of its (all differentiable) inputs."""

    name: str
    fn: Callable[..., Tensor]
    shapes: tuple[tuple[int, ...], ...]

    def inputs(self, device: str, dtype: Any, seed: int = 0) -> tuple[Tensor, ...]:
        """Fresh leaf inputs, drawn on CPU from `seed` so every device sees the same values."""
        import torch

        gen = torch.Generator().manual_seed(seed)
        return tuple(
            torch.randn(s, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_(True)
            for s in self.shapes
        )


def _linear(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    import torch.nn.functional as F

    return F.linear(x, w, b)


def _conv2d(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    import torch.nn.functional as F

    return F.conv2d(x, w, b, padding=1)


def _softmax(x: Tensor) -> Tensor:
    return x.softmax(-1)


def _log_softmax(x: Tensor) -> Tensor:
    return x.log_softmax(-1)


def _layer_norm(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    import torch.nn.functional as F

    return F.layer_norm(x, (x.shape[-1],), w, b)


def _reductions(x: Tensor) -> Tensor:
    import torch

    return torch.cat([x.sum(1), x.mean(0), x.norm(dim=1)])


def _index_gather(x: Tensor) -> Tensor:
    import torch

    rows = torch.tensor([0, 2, 2, 4], device=x.device)  # a repeated row must accumulate in backward
    return torch.cat(
        [
            x[rows].reshape(-1),
            x.gather(1, torch.tensor([[1], [0], [2], [2], [1]], device=x.device)).reshape(-1),
        ]
    )


def _scatter_add(base: Tensor, src: Tensor) -> Tensor:
    import torch

    index = torch.tensor([[0, 1, 2], [2, 1, 0], [0, 0, 1]], device=base.device)
    return base.scatter_add(0, index, src)


def _broadcast(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    return a * b + c


def _batched_matmul(x: Tensor, w: Tensor) -> Tensor:
    return x @ w


OP_SET: tuple[OpCase, ...] = (
    OpCase("addmm(linear)", _linear, ((3, 4), (5, 4), (5,))),
    OpCase("matmul(batched, broadcast)", _batched_matmul, ((2, 3, 4), (4, 2))),
    OpCase("conv2d", _conv2d, ((1, 2, 4, 4), (3, 2, 3, 3), (3,))),
    OpCase("softmax", _softmax, ((3, 5),)),
    OpCase("log_softmax", _log_softmax, ((3, 5),)),
    OpCase("layer_norm", _layer_norm, ((3, 6), (6,), (6,))),
    OpCase("sum/mean/norm", _reductions, ((4, 3),)),
    OpCase("index/gather", _index_gather, ((5, 3),)),
    OpCase("scatter_add", _scatter_add, ((3, 3), (3, 3))),
    OpCase("broadcast mul+add", _broadcast, ((3, 1, 4), (1, 2, 4), (4,))),
)


def numerical_jacobian(fn: Callable[..., Tensor], inputs: tuple[Tensor, ...], eps: float) -> Tensor:
    """d out / d (all inputs), by central differences; rows are inputs' elements, columns outputs'."""
    import torch

    rows = []
    with torch.no_grad():
        for x in inputs:
            flat = x.view(-1)
            for i in range(flat.numel()):
                keep = flat[i].item()
                flat[i] = keep + eps
                plus = fn(*inputs).reshape(-1).clone()
                flat[i] = keep - eps
                minus = fn(*inputs).reshape(-1).clone()
                flat[i] = keep
                rows.append((plus - minus) / (2 * eps))
    return torch.stack(rows)


def analytical_jacobian(fn: Callable[..., Tensor], inputs: tuple[Tensor, ...]) -> Tensor:
    """The same Jacobian from autograd: one vector-Jacobian product per output element."""
    import torch

    out = fn(*inputs).reshape(-1)
    cols = []
    for j in range(out.numel()):
        grads = torch.autograd.grad(out[j], inputs, retain_graph=True, allow_unused=True)
        cols.append(
            torch.cat(
                [
                    (g if g is not None else torch.zeros_like(x)).reshape(-1)
                    for g, x in zip(grads, inputs, strict=True)
                ]
            )
        )
    return torch.stack(cols, dim=1)


def jacobian_comparison(
    case: OpCase, device: str, *, atol: float, rtol: float, eps: float = 1e-6
) -> Comparison:
    """gradcheck's comparison done explicitly (float64), keeping the worst Jacobian element."""
    import torch

    inputs = case.inputs(device, torch.float64)
    analytical = analytical_jacobian(case.fn, inputs)
    numerical = numerical_jacobian(case.fn, inputs, eps)
    return compare(
        analytical,
        numerical,
        op=f"{case.name} jacobian",
        device=device,
        dtype="float64",
        atol=atol,
        rtol=rtol,
    )
