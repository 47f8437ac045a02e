"""The autocast half of ops.opdb: each training-step op's output dtype under autocast against the torch.amp
documentation's "Autocast Op Reference" (ops that run in the lower precision, ops that autocast to float32)."""

from __future__ import annotations

from typing import Any

from envcheck.numerics.opinfo_calls import first_float, op_function

# torch.amp docs, "Autocast Op Reference": ops that run in the lower precision, and ops that autocast to float32.
LOWER = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "nn.functional.linear",
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.scaled_dot_product_attention",
}
FLOAT32 = {
    "cuda": {
        "softmax",
        "log_softmax",
        "nn.functional.layer_norm",
        "nn.functional.group_norm",
        "sum",
        "cumsum",
        "nn.functional.mse_loss",
        "nn.functional.nll_loss",
        "nn.functional.cross_entropy",
        "nn.functional.kl_div",
        "nn.functional.smooth_l1_loss",
        "nn.functional.huber_loss",
        "nn.functional.binary_cross_entropy_with_logits",
        "nn.functional.softplus",
    },
    "cpu": {
        "nn.functional.mse_loss",
        "nn.functional.nll_loss",
        "nn.functional.smooth_l1_loss",
        "nn.functional.huber_loss",
        "nn.functional.kl_div",
        "nn.functional.binary_cross_entropy_with_logits",
    },
}


def autocast_problems(info: Any, device: str) -> list[str]:
    """The op's output dtype under autocast vs the documented op list."""
    import torch

    kind = device.split(":")[0]
    low = torch.bfloat16 if kind == "cpu" else torch.float16
    want = low if info.name in LOWER else torch.float32 if info.name in FLOAT32.get(kind, set()) else None
    if want is None:
        return []
    fn = op_function(info)
    s = next(iter(info.sample_inputs(device, torch.float32)))
    with torch.autocast(kind, dtype=low):
        out = first_float(fn(s.input, *s.args, **s.kwargs))
    if out is not None and out.dtype != want:
        return [
            f"{info.name} under autocast({kind}, {low}) returned {out.dtype}, the autocast op reference says {want}"
        ]
    return []
