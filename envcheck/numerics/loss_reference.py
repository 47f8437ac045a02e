"""losses.reference: torch.nn.functional losses with their options vs float64 formulas built from elementary ops.

The references follow the formulas on the torch.nn loss documentation pages (CrossEntropyLoss with weight,
ignore_index, label_smoothing and probability targets; NLLLoss; BCEWithLogitsLoss with weight and pos_weight;
MSE/L1/SmoothL1/Huber; KLDiv), evaluated in float64 from exp/log/sum only, so they share no code with the losses.
Loss values and input gradients are compared. Tolerance: a loss over N samples and C classes is at most
N·C + 16 float32 operations deep on values of order max|loss|, so |err| <= (N·C + 16)·u·(1 + |ref|), u = eps/2.
"""

from __future__ import annotations

from collections.abc import Callable

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, Tensor, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.losses import (
    log_softmax,
    reduce_loss,
    ref_bce_logits,
    ref_cross_entropy,
    ref_nll,
    smooth_kernel,
)

N, C, IGNORE = 6, 5, 2
Case = tuple[str, Callable[..., Tensor], Callable[..., Tensor]]


def cases(device: str) -> list[Case]:
    """(label, torch loss of inputs, float64 reference of inputs) for every option combination."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, C, (N,), generator=g)
    y[1] = y[4] = IGNORE if IGNORE not in y.tolist() else y[1]
    y_ign = y.clone()
    y_ign[[0, 3]] = -100
    w = torch.rand(C, generator=g) + 0.5
    probs = torch.softmax(torch.randn(N, C, generator=g), dim=1)
    t = torch.rand(N, C, generator=g)
    target = torch.randn(N, C, generator=g)

    def on(v: Tensor, x: Tensor) -> Tensor:
        return v.to(x.device, x.dtype) if v.dtype.is_floating_point else v.to(x.device)

    out: list[Case] = []
    for red in ("mean", "sum", "none"):
        for name, kw in (
            ("plain", {}),
            ("weight", {"weight": w}),
            ("label_smoothing=0.2", {"label_smoothing": 0.2}),
            ("ignore_index=-100", {"y": y_ign}),
            ("ignore_index=2", {"ignore_index": IGNORE}),
            ("weight+smoothing+ignore", {"weight": w, "label_smoothing": 0.2, "y": y_ign}),
        ):
            tgt = kw.get("y", y)
            opts = {k: v for k, v in kw.items() if k != "y"}
            out.append(
                (
                    f"cross_entropy({name}, {red})",
                    lambda x, tgt=tgt, o=opts, r=red: F.cross_entropy(
                        x,
                        on(tgt, x),
                        reduction=r,
                        **{k: on(v, x) if k == "weight" else v for k, v in o.items()},
                    ),
                    lambda x, tgt=tgt, o=opts, r=red: ref_cross_entropy(x, tgt, reduction=r, **o),
                )
            )
        out.append(
            (
                f"cross_entropy(probability targets+smoothing, {red})",
                lambda x, r=red: F.cross_entropy(
                    x, on(probs, x), reduction=r, label_smoothing=0.1, weight=on(w, x)
                ),
                lambda x, r=red: ref_cross_entropy(
                    x, probs.double(), weight=w.double(), reduction=r, label_smoothing=0.1
                ),
            )
        )
        out.append(
            (
                f"nll_loss(weight, ignore_index, {red})",
                lambda x, r=red: F.nll_loss(F.log_softmax(x, 1), on(y_ign, x), weight=on(w, x), reduction=r),
                lambda x, r=red: ref_nll(log_softmax(x), y_ign, weight=w.double(), reduction=r),
            )
        )
        out.append(
            (
                f"binary_cross_entropy_with_logits(weight, pos_weight, {red})",
                lambda x, r=red: F.binary_cross_entropy_with_logits(
                    x, on(t, x), weight=on(w, x), pos_weight=on(w.flip(0), x), reduction=r
                ),
                lambda x, r=red: ref_bce_logits(x, t.double(), w.double(), w.flip(0).double(), r),
            )
        )
        out.append(
            (
                f"mse_loss({red})",
                lambda x, r=red: F.mse_loss(x, on(target, x), reduction=r),
                lambda x, r=red: reduce_loss((x - target.double()) ** 2, r, x.numel()),
            )
        )
        out.append(
            (
                f"l1_loss({red})",
                lambda x, r=red: F.l1_loss(x, on(target, x), reduction=r),
                lambda x, r=red: reduce_loss((x - target.double()).abs(), r, x.numel()),
            )
        )
        out.append(
            (
                f"smooth_l1_loss(beta=0.5, {red})",
                lambda x, r=red: F.smooth_l1_loss(x, on(target, x), reduction=r, beta=0.5),
                lambda x, r=red: reduce_loss(smooth_kernel(x - target.double(), 0.5, False), r, x.numel()),
            )
        )
        out.append(
            (
                f"huber_loss(delta=0.5, {red})",
                lambda x, r=red: F.huber_loss(x, on(target, x), reduction=r, delta=0.5),
                lambda x, r=red: reduce_loss(smooth_kernel(x - target.double(), 0.5, True), r, x.numel()),
            )
        )
    out.append(
        (
            "cross_entropy(logits offset +200: exp overflows float32 unless shifted)",
            lambda x: F.cross_entropy(x + 200, y.to(x.device)),
            lambda x: ref_cross_entropy(x + 200, y),
        )
    )
    out.append(
        (
            "kl_div(batchmean)",
            lambda x: F.kl_div(F.log_softmax(x, 1), on(probs, x), reduction="batchmean"),
            lambda x: (probs.double() * (probs.double().log() - log_softmax(x))).sum() / N,
        )
    )
    return out


def loss_comparisons(device: str) -> list[Comparison]:
    """Loss value and input gradient, float32 on `device` vs the float64 reference on CPU."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    x64 = torch.randn(N, C, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 3
    out: list[Comparison] = []
    for label, fn, ref in cases(device):
        x = x64.float().to(device).requires_grad_(True)
        xr = x.detach().double().cpu().requires_grad_(True)
        got, want = fn(x), ref(xr)
        weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        (got * weights.to(device, got.dtype)).sum().backward()
        (want * weights).sum().backward()
        bound = (N * C + 16) * u
        scale = 1 + float(want.detach().abs().max())
        out.append(
            compare(got, want, op=label, device=device, dtype="float32", atol=bound * scale, rtol=bound)
        )
        out.append(
            compare(
                x.grad,
                xr.grad,
                op=f"d/dinput {label}",
                device=device,
                dtype="float32",
                atol=bound * (1 + float(xr.grad.abs().max())),
                rtol=bound,
            )
        )
    return out


def losses_reference(ctx: Context) -> Result:
    """Every loss option combination matches its float64 formula, value and gradient, on every device."""
    with numerics_mode():
        comparisons = [c for device in check_devices() for c in loss_comparisons(device)]
    return comparisons_result(
        "losses vs float64 formulas",
        comparisons,
        tolerances={"atol": f"({N}·{C}+16)·u·(1+|ref|)", "rtol": f"({N}·{C}+16)·u"},
        remediation="a loss function computes a wrong value or gradient for these options; "
        "reinstall torch or avoid the failing option",
    )
