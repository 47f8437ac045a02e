"""Independent float64 references for torch.nn.functional losses, built from exp/log/sum only (they share no code
with the losses under test), as the torch.nn loss documentation pages define them: CrossEntropyLoss with weight,
ignore_index, label_smoothing and probability targets; NLLLoss; BCEWithLogitsLoss with weight and pos_weight; the
smooth L1 / Huber kernel. Used by losses.reference (envcheck.numerics.loss_reference)."""

from __future__ import annotations

from envcheck.reference.compare import Tensor


def log_softmax(x: Tensor) -> Tensor:
    """log_softmax over dim 1, shifted by the row max (detached), from exp/log/sum only."""
    m = x.max(dim=1, keepdim=True).values.detach()
    return x - m - (x - m).exp().sum(dim=1, keepdim=True).log()


def reduce_loss(per: Tensor, reduction: str, denom: Tensor | float) -> Tensor:
    """A per-sample loss reduced as `reduction` says: none, sum, or mean over `denom`."""
    return per if reduction == "none" else per.sum() if reduction == "sum" else per.sum() / denom


def ref_cross_entropy(
    x: Tensor,
    y: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """CrossEntropyLoss as documented, for class-index or class-probability targets."""
    import torch

    logp = log_softmax(x)
    w = weight if weight is not None else torch.ones(x.shape[1], dtype=x.dtype)
    if y.dtype.is_floating_point:
        q = (1 - label_smoothing) * y + label_smoothing / x.shape[1]
        return reduce_loss(-(w * q * logp).sum(dim=1), reduction, x.shape[0])
    keep = (y != ignore_index).to(x.dtype)
    safe = y.clamp_min(0) * (y != ignore_index)
    nll = -w[safe] * logp.gather(1, safe[:, None])[:, 0]
    smooth = -(w * logp).sum(dim=1) / x.shape[1]
    per = ((1 - label_smoothing) * nll + label_smoothing * smooth) * keep
    return reduce_loss(per, reduction, (w[safe] * keep).sum())


def ref_nll(
    logp: Tensor, y: Tensor, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean"
) -> Tensor:
    """NLLLoss: -w[y]·logp[y], mean divided by the sum of the kept weights."""
    import torch

    w = weight if weight is not None else torch.ones(logp.shape[1], dtype=logp.dtype)
    keep = (y != ignore_index).to(logp.dtype)
    safe = y.clamp_min(0) * (y != ignore_index)
    per = -w[safe] * logp.gather(1, safe[:, None])[:, 0] * keep
    return reduce_loss(per, reduction, (w[safe] * keep).sum())


def ref_bce_logits(
    x: Tensor,
    t: Tensor,
    weight: Tensor | None = None,
    pos_weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    """BCEWithLogitsLoss: -w·[pw·t·log σ(x) + (1-t)·log(1-σ(x))]."""
    log_sig = -(1 + (-x).exp()).log()
    log_one_minus = -(1 + x.exp()).log()
    pw = pos_weight if pos_weight is not None else 1.0
    per = -(pw * t * log_sig + (1 - t) * log_one_minus) * (weight if weight is not None else 1.0)
    return reduce_loss(per, reduction, per.numel())


def smooth_kernel(d: Tensor, beta: float, huber: bool) -> Tensor:
    """SmoothL1 (huber=False) or Huber (huber=True) of the differences `d` with threshold `beta`."""
    a = d.abs()
    quad = 0.5 * a * a / (1.0 if huber else beta)
    lin = beta * (a - 0.5 * beta) if huber else a - 0.5 * beta
    return (a < beta) * quad + (a >= beta) * lin
