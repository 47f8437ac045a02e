"""lowp.reductions: bfloat16/float16 sums and means over long dimensions and softmax/log_softmax at large logits,
within error bounds derived from the dtype, against float64 evaluated on the same (already rounded) inputs.

Bounds. torch reduces half and bfloat16 in float32 ("opmath" accumulation) and rounds once to the output dtype.
Summation in any order satisfies |ŝ - s| <= γ_{n-1}·Σ|x_i|, γ_k = k·u/(1 - k·u) (Higham, Accuracy and Stability
of Numerical Algorithms, 2nd ed., 2002, eq. 4.4), with u the accumulator's unit roundoff; the final rounding adds
u_out·|s|. Softmax y_i = exp(x_i - m)/Σ exp(x_j - m): x_i - m is exact when both lie within a factor 2 (Sterbenz),
exp costs <= 4u (a few ulps), the sum γ_{C-1}, the division u, the output rounding u_out, so
|ŷ_i - y_i| <= (u_out + (C + 5)·u)·y_i + tiny; log_softmax = (x - m) - log Σ, where a kernel may hold log Σ in
the output dtype (torch's CPU half kernel does), adds (C + 6)·u + u_out·log Σ absolute.
"""

from __future__ import annotations

from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

LENGTH = {"bfloat16": 1 << 16, "float16": 1 << 15}  # the float16 sum (~n/2) stays below its max, 65504
SMALL = (
    2.0**-10
)  # below half an ulp of 1.0 in both dtypes: a running low-precision sum starting at 1 never moves
ROWS, CLASSES, OFFSET = 4, 1000, 1.0e4


def _gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u)


def vectors(dtype_name: str, gen: Any) -> list[tuple[str, Any]]:
    """Long uniform vector; one 1.0 then many values below its half-ulp; a mean whose sum exceeds float16's max."""
    import torch

    dtype = getattr(torch, dtype_name)
    n = LENGTH[dtype_name]
    head = torch.full((4096,), SMALL)
    head[0] = 1.0
    return [
        (f"{n} uniform [0,1)", torch.rand(n, generator=gen).to(dtype)),
        ("1.0 then 4095 x 2^-10", head.to(dtype)),
        ("64 values near 3e4 (sum beyond float16 max)", (3e4 + torch.rand(64, generator=gen)).to(dtype)),
    ]


def reduction_comparisons(device: str, dtype_name: str) -> list[Comparison]:
    """sum, mean over a long positive vector; softmax and log_softmax of logits near OFFSET."""
    import torch

    dtype = getattr(torch, dtype_name)
    u_out, u = torch.finfo(dtype).eps / 2, torch.finfo(torch.float32).eps / 2
    gen = torch.Generator().manual_seed(0)
    out: list[Comparison] = []
    for label, x in vectors(dtype_name, gen):
        x64 = x.double()
        n, s = x.numel(), x64.sum()
        bound = _gamma(n - 1, u) * float(x64.abs().sum()) * (1 + u_out)
        if abs(float(s)) < float(
            torch.finfo(dtype).max
        ):  # a sum beyond the dtype's range is inf by definition
            out.append(
                compare(
                    torch.sum(x.to(device)),
                    s,
                    op=f"sum of {label}",
                    device=device,
                    dtype=dtype_name,
                    atol=bound + u_out * abs(float(s)),
                    rtol=0.0,
                )
            )
        out.append(
            compare(
                torch.mean(x.to(device)),
                s / n,
                op=f"mean of {label}",
                device=device,
                dtype=dtype_name,
                atol=bound / n * (1 + u) + 2 * u_out * abs(float(s)) / n,
                rtol=0.0,
            )
        )
    logits = (OFFSET + 20 * torch.randn(ROWS, CLASSES, generator=gen)).to(dtype)
    l64 = logits.double()
    ref = torch.softmax(l64, dim=1)
    rel = u_out + (CLASSES + 5) * u
    tiny = float(torch.finfo(dtype).tiny)
    out.append(
        compare(
            torch.softmax(logits.to(device), dim=1),
            ref,
            op=f"softmax at logits ~{OFFSET:g}",
            device=device,
            dtype=dtype_name,
            atol=tiny,
            rtol=rel,
        )
    )
    lref = torch.log_softmax(l64, dim=1)
    log_sum = float((l64 - l64.max(dim=1, keepdim=True).values).exp().sum(dim=1).log().max())
    out.append(
        compare(
            torch.log_softmax(logits.to(device), dim=1),
            lref,
            op=f"log_softmax at logits ~{OFFSET:g}",
            device=device,
            dtype=dtype_name,
            atol=(CLASSES + 6) * u + u_out * log_sum,
            rtol=u_out + u,
        )
    )
    return out


def lowp_reductions(ctx: Context) -> Result:
    """Low-precision reductions and softmax stay within their dtype's derived bound, on every device."""
    comparisons: list[Comparison] = []
    extra: dict[str, Any] = {}
    with numerics_mode():
        for device in check_devices():
            for name in ("bfloat16", "float16"):
                comparisons += reduction_comparisons(device, name)
    tolerances = {
        "sum": "γ_{n-1}(u_fp32)·Σ|x| + u_out·|s| (Higham 2002 eq. 4.4)",
        "softmax": "(u_out + (C+5)·u_fp32)·y",
        "log_softmax": "(C+6)·u_fp32 + (u_out+u)·|y|",
    }
    return comparisons_result(
        "low-precision reductions and softmax",
        comparisons,
        tolerances=tolerances,
        extra=extra,
        remediation="half/bfloat16 reductions lose accuracy beyond their dtype's "
        "bound (accumulating in the low dtype?); reinstall torch",
    )
