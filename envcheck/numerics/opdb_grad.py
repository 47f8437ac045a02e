"""ops.opdb's derivatives: gradcheck and gradgradcheck of one OpInfo sample, called as PyTorch's own tests call them
(torch.testing._internal.common_utils.TestGradients._check_helper, used by test_ops_gradients.py).

Followed: every tensor of the sample that requires grad is a gradcheck input (the sample rebuilt around them), the
op is called through the OpInfo's `gradcheck_wrapper` and its output through the sample's
`output_process_fn_grad`; `nondet_tol` is the OpInfo's `gradcheck_nondet_tol` (conv1d/2d/3d set it: cuDNN's backward
is not deterministic), at least autograd.gradcheck's CUDA tolerance (one rule for both checks, `nondet_tol_for`);
fast mode as the OpInfo says. Left out: vmap (`check_batched_grad`) and the undefined-grad and dtype checks, which
test autograd's features rather than this install's kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.numerics.autograd import nondet_tol_for
from envcheck.numerics.opinfo_settings import fast_mode


def _tensors_of(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad else []
    if isinstance(value, (list, tuple)):
        return [t for t in value if isinstance(t, torch.Tensor) and t.requires_grad]
    return []


def _rebuild(value: Any, inputs: list[Any]) -> Any:
    """`value` with each requires-grad tensor replaced by the next of `inputs` (consumed in order)."""
    import torch

    if isinstance(value, torch.Tensor):
        return inputs.pop(0) if value.requires_grad else value
    if isinstance(value, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in value):
        return type(value)(
            inputs.pop(0) if isinstance(t, torch.Tensor) and t.requires_grad else t for t in value
        )
    return value


def gradcheck_call(
    info: Any, variant: Callable[..., Any], sample: Any
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """(fn, inputs) for torch.autograd.gradcheck: fn takes the sample's requires-grad tensors and calls the op."""
    leaves = [
        *_tensors_of(sample.input),
        *(t for a in sample.args for t in _tensors_of(a)),
        *(t for v in sample.kwargs.values() for t in _tensors_of(v)),
    ]

    def fn(*inputs: Any) -> Any:
        rest = list(inputs)
        first = _rebuild(sample.input, rest)
        args = [_rebuild(a, rest) for a in sample.args]
        kwargs = {k: _rebuild(v, rest) for k, v in sample.kwargs.items()}
        output = info.gradcheck_wrapper(variant, first, *args, **kwargs)
        process = getattr(sample, "output_process_fn_grad", None)
        return output if process is None else process(output)

    return fn, tuple(leaves)


def derivative_problem(
    info: Any, variant: Callable[..., Any], sample: Any, device: str, double: bool, label: str
) -> str | None:
    """gradcheck (or gradgradcheck) of one sample on `device`: None when it holds, else gradcheck's own first line."""
    from torch.autograd import gradcheck, gradgradcheck

    fn, inputs = gradcheck_call(info, variant, sample)
    if not inputs:
        return None  # nothing in this sample requires grad
    settings = {
        "nondet_tol": nondet_tol_for(device, float(getattr(info, "gradcheck_nondet_tol", 0.0) or 0.0)),
        "fast_mode": fast_mode(info),
        "raise_exception": True,
    }
    check = gradgradcheck if double else gradcheck
    try:
        check(fn, inputs, **settings)
    except Exception as exc:  # GradcheckError, or what the op raised
        text = str(exc).strip()
        if "does not require grad" in text:
            return None  # a sample whose output ignores its inputs
        why = (text.splitlines() or [type(exc).__name__])[0]
        what = "double backward" if double else "backward"
        return f"torch.autograd.{check.__name__} rejects {label} {what} on {device} float64: {why}"[:400]
    return None
