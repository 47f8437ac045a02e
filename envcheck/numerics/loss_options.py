"""The option products of losses.reference: every combination of the options that interact, each against the float64
formula of the torch.nn loss page (envcheck.reference.losses, envcheck.reference.loss_formulas), never one option at a
time. A bug in how two options combine (cross_entropy's weighted mean with label smoothing and an ignored class; a
beta of 0 where input equals target) shows only where both are set, so the axes are multiplied out:

- cross_entropy, class indices: input (N, C), (N, C, d) and unbatched (C,) x weight x ignored targets (none; -100 on
  some; ignore_index = 2, a real class, on some; every target ignored: a mean of nothing, NaN) x label_smoothing (0,
  0.2) x reduction; probability targets: shape x weight x label_smoothing x reduction; logits offset by +200;
- nll_loss: shape x weight x ignored targets x reduction;
- binary_cross_entropy_with_logits: weight (none, per class, per element) x pos_weight x reduction;
  binary_cross_entropy: weight x reduction;
- smooth_l1_loss (beta 0, 0.5, 1) and huber_loss (delta 0.5, 1, 2) x reduction, with inputs equal to their targets at
  some elements (beta 0 is documented as L1, whose gradient there is 0); mse_loss and l1_loss x reduction;
- kl_div: log_target x reduction (none, sum, mean, batchmean), targets with zeros;
- ctc_loss (full): reduction x zero_infinity x target layout (padded, concatenated) x blank (0, C - 1), a batch with an
  empty target and, with zero_infinity, one that cannot be aligned;
- margin losses (full): margin_ranking, hinge_embedding, multi_margin (p x margin x weight), multilabel_margin,
  soft_margin, multilabel_soft_margin (weight), cosine_embedding (margin), triplet_margin (margin x p x swap), each
  x reduction; poisson_nll (log_input x full) and gaussian_nll (full x var shape) x reduction.

Quick level (a slice sized for its time budget that still multiplies the options that have interacted in real bugs):
cross_entropy on (N, C) with class weights x every ignored-target kind but "all" x label_smoothing x reduction, the
same nll_loss product, weighted smoothed probability targets, BCE-with-logits with both weights, smooth L1 (beta 0 and
0.5) and Huber with ties, MSE/L1 and kl_div (log_target x batchmean); full level: everything above.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck.reference import loss_formulas as lf
from envcheck.reference.losses import log_softmax, reduce_loss, ref_bce_logits, smooth_kernel

Tensor = Any
N, C, IGNORE = 6, 5, 2
REDUCTIONS = ("none", "sum", "mean")


@dataclass(frozen=True)
class LossCase:
    """One option combination: the float64 input, the torch loss of a device input, the reference of a CPU input."""

    label: str
    x: Tensor
    fn: Callable[..., Tensor]
    ref: Callable[..., Tensor]


def _gen(seed: int) -> Any:
    import torch

    return torch.Generator().manual_seed(seed)


def _on(v: Tensor, x: Tensor) -> Tensor:
    """A fixed tensor moved to the input's device (and float dtype)."""
    return v.to(x.device, x.dtype) if v.dtype.is_floating_point else v.to(x.device)


def _targets(shape: str, ignore: str) -> tuple[Tensor, int]:
    """Class-index targets of a shape and the ignore_index to pass."""
    import torch

    size = {"(N, C)": (N,), "(N, C, d)": (N, 3), "unbatched (C,)": ()}[shape]
    y = torch.randint(0, C, size, generator=_gen(11))
    y[y == IGNORE] = 0  # only the chosen entries carry the ignored class
    flat = y.reshape(-1)
    if ignore == "-100 on some":
        flat[[1, 4] if flat.numel() > 4 else [0]] = -100
    elif ignore == "ignore_index=2 on some":
        flat[[0, 3] if flat.numel() > 3 else [0]] = IGNORE
    elif ignore == "every target ignored":
        flat[:] = -100
    return flat.reshape(size), IGNORE if ignore.startswith("ignore_index") else -100


def cross_entropy_cases(quick: bool) -> list[LossCase]:
    """cross_entropy and nll_loss over their option products."""
    import torch
    import torch.nn.functional as F

    w = torch.rand(C, generator=_gen(12)) + 0.5
    out = []
    shapes = ("(N, C)",) if quick else ("(N, C)", "(N, C, d)", "unbatched (C,)")
    weights = (w,) if quick else (None, w)
    for shape in shapes:
        x = torch.randn(*{"(N, C)": (N, C), "(N, C, d)": (N, C, 3), "unbatched (C,)": (C,)}[shape],
                        generator=_gen(13)).double() * 4  # fmt: skip
        unbatched = shape.startswith("unbatched")
        ignores: tuple[str, ...] = ("none", "-100 on some")
        ignores += () if unbatched else ("ignore_index=2 on some",)
        ignores += ("every target ignored",) if shape == "(N, C)" and not quick else ()
        for weight, ignore, smoothing, red in itertools.product(weights, ignores, (0.0, 0.2), REDUCTIONS):
            y, ii = _targets(shape, ignore)
            opts = {"weight": weight, "ignore_index": ii, "label_smoothing": smoothing, "reduction": red}
            label = (
                f"cross_entropy({shape}, weight={weight is not None}, {ignore}, smoothing={smoothing}, {red})"
            )
            out.append(
                LossCase(label, x, _ce(y, opts, unbatched, F.cross_entropy), _ce_ref(y, opts, unbatched))
            )
            if smoothing == 0.0:
                nll_opts = {k: v for k, v in opts.items() if k != "label_smoothing"}
                out.append(LossCase(label.replace("cross_entropy(", "nll_loss(").replace(", smoothing=0.0", ""), x,
                                    _nll(y, nll_opts, unbatched), _nll_ref(y, nll_opts, unbatched)))  # fmt: skip
        dims = tuple(x.shape)
        probs = torch.softmax(
            torch.randn(*dims, generator=_gen(14), dtype=torch.float64), dim=0 if unbatched else 1
        )
        for weight, smoothing, red in itertools.product(weights, (0.2,) if quick else (0.0, 0.2), REDUCTIONS):
            opts = {"weight": weight, "label_smoothing": smoothing, "reduction": red}
            label = f"cross_entropy({shape}, probability targets, weight={weight is not None}, smoothing={smoothing}, {red})"
            out.append(
                LossCase(
                    label, x, _ce(probs, opts, unbatched, F.cross_entropy), _ce_ref(probs, opts, unbatched)
                )
            )
    y, _ = _targets("(N, C)", "none")
    big = torch.randn(N, C, generator=_gen(13)).double() * 4
    out.append(LossCase("cross_entropy(logits offset +200: exp overflows float32 unless shifted)", big,
                        lambda x: F.cross_entropy(x + 200, y.to(x.device)), lambda x: lf.ce_nd(x + 200, y)))  # fmt: skip
    return out


def _ce(
    y: Tensor, opts: dict[str, Any], unbatched: bool, loss: Callable[..., Tensor]
) -> Callable[[Tensor], Tensor]:
    def fn(x: Tensor) -> Tensor:
        kw = {k: _on(v, x) if k == "weight" and v is not None else v for k, v in opts.items()}
        return loss(x, _on(y, x), **kw)

    return fn


def _ce_ref(y: Tensor, opts: dict[str, Any], unbatched: bool) -> Callable[[Tensor], Tensor]:
    def ref(x: Tensor) -> Tensor:
        kw = {k: (v.double() if k == "weight" and v is not None else v) for k, v in opts.items()}
        return lf.ce_nd(x, y.double() if y.dtype.is_floating_point else y, unbatched, **kw)

    return ref


def _nll(y: Tensor, opts: dict[str, Any], unbatched: bool) -> Callable[[Tensor], Tensor]:
    import torch.nn.functional as F

    inner = _ce(y, opts, unbatched, F.nll_loss)
    return lambda x: inner(F.log_softmax(x, 0 if unbatched else 1))


def _nll_ref(y: Tensor, opts: dict[str, Any], unbatched: bool) -> Callable[[Tensor], Tensor]:
    def ref(x: Tensor) -> Tensor:
        kw = {k: (v.double() if k == "weight" and v is not None else v) for k, v in opts.items()}
        logp = log_softmax(x.unsqueeze(0)).squeeze(0) if unbatched else log_softmax(x)
        return lf.nll_nd(logp, y, unbatched, **kw)

    return ref


def elementwise_cases(quick: bool) -> list[LossCase]:
    """BCE (with logits), smooth L1/Huber with ties, MSE/L1 and kl_div over their option products."""
    import torch
    import torch.nn.functional as F

    # inputs hold float32 values (x4 is exact), so a target set equal to an input stays equal in float32
    x = torch.randn(N, C, generator=_gen(21)).double() * 4
    t = torch.rand(N, C, generator=_gen(22), dtype=torch.float64)
    w_class, w_elem = torch.rand(C, generator=_gen(23)) + 0.5, torch.rand(N, C, generator=_gen(24)) + 0.5
    pos = torch.rand(C, generator=_gen(25)) * 3 + 0.2
    target = x.clone() + torch.randn(N, C, generator=_gen(26), dtype=torch.float64)
    target[0, :3] = x[0, :3]  # ties: input equals target (float32-exact: x holds float32 values)
    out = []
    bce_weights = (
        (("per class", w_class),)
        if quick
        else (("none", None), ("per class", w_class), ("per element", w_elem))
    )
    for (wn, w), pw, red in itertools.product(bce_weights, (pos,) if quick else (None, pos), REDUCTIONS):
        out.append(LossCase(f"binary_cross_entropy_with_logits(weight {wn}, pos_weight={pw is not None}, {red})", x,
                            lambda x, w=w, pw=pw, r=red: F.binary_cross_entropy_with_logits(
                                x, _on(t, x), weight=None if w is None else _on(w, x),
                                pos_weight=None if pw is None else _on(pw, x), reduction=r),
                            lambda x, w=w, pw=pw, r=red: ref_bce_logits(
                                x, t, None if w is None else w.double(), None if pw is None else pw.double(), r)))  # fmt: skip
    kernels = (("smooth_l1_loss", "beta", (0.0, 0.5)), ("huber_loss", "delta", (1.0,))) if quick else (
        ("smooth_l1_loss", "beta", (0.0, 0.5, 1.0)), ("huber_loss", "delta", (0.5, 1.0, 2.0)))  # fmt: skip
    for name, param, values in kernels:
        for v, red in itertools.product(values, REDUCTIONS):
            out.append(LossCase(f"{name}({param}={v}, inputs equal to targets at 3 elements, {red})", x,
                                lambda x, n=name, v=v, r=red, pn=param: getattr(F, n)(x, _on(target, x), reduction=r,
                                                                                    **{pn: v}),
                                lambda x, v=v, r=red, h=name == "huber_loss": reduce_loss(
                                    x.sub(target).abs() if v == 0 else smooth_kernel(x - target, v, h), r, x.numel())))  # fmt: skip
    for red in ("mean",) if quick else REDUCTIONS:
        out.append(LossCase(f"mse_loss({red})", x, lambda x, r=red: F.mse_loss(x, _on(target, x), reduction=r),
                            lambda x, r=red: reduce_loss((x - target) ** 2, r, x.numel())))  # fmt: skip
        out.append(LossCase(f"l1_loss({red})", x, lambda x, r=red: F.l1_loss(x, _on(target, x), reduction=r),
                            lambda x, r=red: reduce_loss((x - target).abs(), r, x.numel())))  # fmt: skip
    probs = torch.softmax(torch.randn(N, C, generator=_gen(27), dtype=torch.float64), 1)
    probs[1, 2] = probs[3, 0] = 0.0  # 0·log 0 = 0
    for log_target, red in itertools.product(
        (False, True), ("batchmean",) if quick else ("none", "sum", "mean", "batchmean")
    ):
        tt = (probs + 1e-3).log() if log_target else probs
        out.append(LossCase(f"kl_div(log_target={log_target}, {red})", x,
                            lambda x, tt=tt, lt=log_target, r=red: F.kl_div(F.log_softmax(x, 1), _on(tt, x),
                                                                            reduction=r, log_target=lt),
                            lambda x, tt=tt, lt=log_target, r=red: lf.ref_kl_div(log_softmax(x), tt, lt, r)))  # fmt: skip
    if not quick:
        for w, red in itertools.product((None, w_elem), REDUCTIONS):
            out.append(LossCase(f"binary_cross_entropy(weight={w is not None}, {red})", x,
                                # probabilities kept away from 0 and 1 (x/4), where 1 - p in float32 is exact enough
                                lambda x, w=w, r=red: F.binary_cross_entropy(
                                    torch.sigmoid(x / 4), _on(t, x), weight=None if w is None else _on(w, x),
                                    reduction=r),
                                lambda x, w=w, r=red: lf.ref_bce(
                                    1 / (1 + (-x / 4).exp()), t, None if w is None else w.double(), r)))  # fmt: skip
    return out
