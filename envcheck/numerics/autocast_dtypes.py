"""amp.autocast_dtypes: under autocast, matmul/linear/conv run low-precision; softmax, losses, reductions float32."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, first_of, passed
from envcheck.reference.devices import cuda_devices, native_bf16, numerics_mode
from envcheck.reference.suspects import wrong_math_fix

Autocast = Callable[[str, Any], contextlib.AbstractContextManager[Any]]

LOW_PRECISION_OPS = ("matmul", "linear", "conv2d")
# torch's documented autocast float32 lists differ: CUDA includes softmax and sum, CPU does not.
FLOAT32_OPS = {
    "cuda": (
        "softmax",
        "log_softmax",
        "cross_entropy",
        "mse_loss",
        "nll_loss",
        "bce_with_logits",
        "sum",
        "prod",
        "cumsum",
        "norm",
        "layer_norm",
    ),
    "cpu": ("cross_entropy", "mse_loss", "nll_loss", "bce_with_logits", "l1_loss", "prod"),
}
OBSERVED_ONLY = {"cpu": ("softmax", "sum"), "cuda": ()}  # reported, not judged


def _ops() -> dict[str, Callable[[Any, Any, Any, Any], Any]]:
    import torch
    import torch.nn.functional as F

    def target(x: Any) -> Any:
        return torch.tensor([0, 1, 2, 0], device=x.device)

    return {
        "matmul": lambda x, w, img, k: x @ w.t(),
        "linear": lambda x, w, img, k: F.linear(x, w),
        "conv2d": lambda x, w, img, k: F.conv2d(img, k),
        "softmax": lambda x, w, img, k: x.softmax(-1),
        "log_softmax": lambda x, w, img, k: x.log_softmax(-1),
        "cross_entropy": lambda x, w, img, k: F.cross_entropy(x, target(x)),
        "nll_loss": lambda x, w, img, k: F.nll_loss(x, target(x)),
        "mse_loss": lambda x, w, img, k: F.mse_loss(x, torch.zeros_like(x)),
        "l1_loss": lambda x, w, img, k: F.l1_loss(x, torch.zeros_like(x)),
        "bce_with_logits": lambda x, w, img, k: F.binary_cross_entropy_with_logits(x, torch.zeros_like(x)),
        "sum": lambda x, w, img, k: x.sum(),
        "prod": lambda x, w, img, k: x.prod(),
        "cumsum": lambda x, w, img, k: x.cumsum(0),
        "norm": lambda x, w, img, k: x.norm(),
        "layer_norm": lambda x, w, img, k: F.layer_norm(x, (x.shape[-1],)),
    }


def real_autocast(device_type: str, dtype: Any) -> contextlib.AbstractContextManager[Any]:
    """torch.autocast itself."""
    import torch

    manager: contextlib.AbstractContextManager[Any] = torch.autocast(device_type, dtype=dtype)
    return manager


def autocast_dtype_problems(
    device: str, dtype_name: str, autocast: Autocast = real_autocast
) -> tuple[dict[str, str], list[str]]:
    """Observed output dtype per op, and one line per op whose dtype is not the documented one."""
    import torch

    dtype = getattr(torch, dtype_name)
    kind = device.split(":")[0]
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 8, generator=gen).to(device), torch.randn(3, 8, generator=gen).to(device)
    img, k = (
        torch.randn(1, 2, 6, 6, generator=gen).to(device),
        torch.randn(3, 2, 3, 3, generator=gen).to(device),
    )
    low = (
        x.to(dtype),
        w.to(dtype),
        img.to(dtype),
        k.to(dtype),
    )  # low-precision inputs make the upcast visible
    observed, problems = {}, []
    with autocast(kind, dtype):
        for name, fn in _ops().items():
            if name in LOW_PRECISION_OPS:
                got, want = fn(x, w, img, k).dtype, dtype
            elif name in FLOAT32_OPS[kind] or name in OBSERVED_ONLY[kind]:
                got, want = fn(*low).dtype, torch.float32
            else:
                continue
            observed[name] = str(got).removeprefix("torch.")
            if got != want and name not in OBSERVED_ONLY[kind]:
                problems.append(
                    f"{name} on {device} under autocast({dtype_name}) gave {observed[name]}, "
                    f"expected {str(want).removeprefix('torch.')}"
                )
    return observed, problems


def autocast_targets() -> list[tuple[str, str]]:
    """(device, dtype) pairs: CPU bfloat16, and float16 + bfloat16 on every CUDA device."""

    pairs = [("cpu", "bfloat16")]
    for device in cuda_devices():
        pairs.append((device, "float16"))
        if native_bf16(device):
            pairs.append((device, "bfloat16"))
    return pairs


def amp_autocast_dtypes(ctx: Context, autocast: Autocast = real_autocast) -> Result:
    """Autocast picks the documented dtype for every listed op on CPU and each GPU model."""
    measured: dict[str, Any] = {}
    problems: list[str] = []
    with numerics_mode():
        for device, dtype_name in autocast_targets():
            observed, bad = autocast_dtype_problems(device, dtype_name, autocast)
            measured[f"{device}/{dtype_name}"] = observed
            problems += bad
    expected = {
        "low_precision": list(LOW_PRECISION_OPS),
        "float32": {k: list(v) for k, v in FLOAT32_OPS.items()},
        "not_judged": {k: list(v) for k, v in OBSERVED_ONLY.items()},
    }
    if problems:
        fix, fault, _ = wrong_math_fix(
            "autocast policy differs from torch's documented lists; check for a patched "
            "torch.autocast, then reinstall torch"
        )
        return failed(
            f"autocast dtypes: {first_of(problems)}",
            fix,
            measured=measured,
            expected=expected,
            details="\n".join(problems),
            fault_class=fault,
        )
    return passed(
        f"autocast dtypes as documented on {', '.join(measured)}", measured=measured, expected=expected
    )
