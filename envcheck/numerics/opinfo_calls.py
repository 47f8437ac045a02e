"""How ops.opdb calls an OpInfo's op: looked up by its public name when called (so a replaced function is what gets
checked), and its first floating output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def resolve(name: str, fallback: Callable[..., Any]) -> Callable[..., Any]:
    """The op by its public name, looked up now (so a replaced function is what gets checked)."""
    import torch

    obj: Any = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return fallback
    return obj  # type: ignore[no-any-return]


def op_function(info: Any) -> Callable[..., Any]:
    """OpInfo wrappers (lambdas) call the public op by name themselves; bare ops are looked up by name now."""
    return info.op if getattr(info.op, "__name__", "") == "<lambda>" else resolve(info.name, info.op)


def first_float(out: Any) -> Any:
    import torch

    if isinstance(out, (tuple, list)):
        return next((o for o in out if isinstance(o, torch.Tensor) and o.is_floating_point()), None)
    return out if isinstance(out, torch.Tensor) and out.is_floating_point() else None
