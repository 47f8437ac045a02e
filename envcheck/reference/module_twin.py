"""A module's float64 twin, the reference of the ModuleInfo sweep: helpers to walk a module's arguments, cast them to
another dtype with their requires_grad, and switch dropout off so that two dtypes (or two devices' RNGs) compute the
same function."""

from __future__ import annotations

from typing import Any

Tensor = Any


def floats(value: Any) -> list[Tensor]:
    """Every floating tensor in a (nested) argument structure, in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in floats(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in floats(v)]
    return []


def cast(value: Any, dtype: Any) -> Any:
    """The structure with its floating tensors detached, cast to `dtype`, requires_grad kept."""
    import torch

    if isinstance(value, torch.Tensor):
        return (
            value.detach().to(dtype).requires_grad_(value.requires_grad)
            if value.is_floating_point()
            else value
        )
    if isinstance(value, (tuple, list)):
        return type(value)(cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: cast(v, dtype) for k, v in value.items()}
    return value


def without_dropout(module: Any) -> None:
    """Set every dropout probability in `module` to 0 (modules and float `dropout` attributes alike)."""
    import torch

    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd):
            sub.p = 0.0
        elif isinstance(getattr(sub, "dropout", None), float):
            sub.dropout = 0.0
