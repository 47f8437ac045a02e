"""Float64 references, from elementary ops only, for the losses whose options combine, as the torch.nn loss pages
define them (envcheck.reference.losses holds cross_entropy, nll, BCE-with-logits and the smooth L1 kernel):
cross_entropy and nll_loss on K-dimensional and unbatched inputs, binary_cross_entropy, kl_div (log_target x
reduction, batchmean), ctc_loss (reduction x zero_infinity x blank x target layout), the margin losses, and the
Poisson and Gaussian NLL losses. Used by losses.reference (envcheck.numerics.loss_options)."""

from __future__ import annotations

import math

from envcheck.reference.compare import Tensor
from envcheck.reference.losses import reduce_loss, ref_cross_entropy, ref_nll


def ce_nd(x: Tensor, y: Tensor, unbatched: bool = False, **kw: object) -> Tensor:
    """CrossEntropyLoss on (N, C), (N, C, d1...) or unbatched (C,) input, class indices or probabilities."""
    if unbatched:
        x, y = x.unsqueeze(0), y.unsqueeze(0)
    rows, target, shape = _rows(x, y)
    reduction = str(kw.pop("reduction", "mean"))
    per = ref_cross_entropy(rows, target, reduction="none", **kw)  # type: ignore[arg-type]
    if reduction == "none":
        out = per.reshape(shape)
        return out.squeeze(0) if unbatched else out
    if y.dtype.is_floating_point or reduction == "sum":
        return reduce_loss(per, reduction, per.numel())
    return ref_cross_entropy(rows, target, reduction="mean", **kw)  # type: ignore[arg-type]


def nll_nd(logp: Tensor, y: Tensor, unbatched: bool = False, **kw: object) -> Tensor:
    """NLLLoss on (N, C), (N, C, d1...) or unbatched (C,) log-probabilities."""
    if unbatched:
        logp, y = logp.unsqueeze(0), y.unsqueeze(0)
    rows, target, shape = _rows(logp, y)
    reduction = str(kw.pop("reduction", "mean"))
    if reduction == "none":
        out = ref_nll(rows, target, reduction="none", **kw).reshape(shape)  # type: ignore[arg-type]
        return out.squeeze(0) if unbatched else out
    return ref_nll(rows, target, reduction=reduction, **kw)  # type: ignore[arg-type]


def _rows(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    """(N, C, d...) input as (M, C) rows with its target (indices (N, d...) or probabilities (N, C, d...))."""
    shape = (x.shape[0], *x.shape[2:])
    rows = x.movedim(1, -1).reshape(-1, x.shape[1])
    target = y.movedim(1, -1).reshape(-1, x.shape[1]) if y.dtype.is_floating_point else y.reshape(-1)
    return rows, target, shape


def ref_bce(p: Tensor, t: Tensor, weight: Tensor | None, reduction: str) -> Tensor:
    """BCELoss on probabilities: -w·[t·log p + (1 - t)·log(1 - p)] (torch clamps the logs at -100; not reached)."""
    per = -(t * p.log() + (1 - t) * (1 - p).log()) * (weight if weight is not None else 1.0)
    return reduce_loss(per, reduction, per.numel())


def ref_kl_div(logq: Tensor, t: Tensor, log_target: bool, reduction: str) -> Tensor:
    """KLDivLoss: exp(t)·(t - input) with a log target, else t·(log t - input) with 0·log 0 = 0; "batchmean" divides
    the sum by the batch size, "mean" by the element count."""
    import torch

    if log_target:
        per = t.exp() * (t - logq)
    else:
        per = torch.where(t > 0, t * t.clamp_min(1e-300).log(), torch.zeros_like(t)) - t * logq
    if reduction == "batchmean":
        return per.sum() / logq.shape[0]
    return reduce_loss(per, reduction, per.numel())


def ctc_sample(log_probs: Tensor, target: list[int], blank: int) -> Tensor:
    """-log p(target | input) for one sample (log_probs (T, C)), by the forward algorithm in probability space with
    per-step scaling (Graves et al. 2006; no log of zero, so unreachable states carry no NaN into the gradient)."""
    import torch

    probs = log_probs.exp()
    ext = [blank] + [c for label in target for c in (label, blank)]  # l': 2S + 1 states
    skip = torch.tensor([s >= 2 and ext[s] != blank and ext[s] != ext[s - 2] for s in range(len(ext))])
    first = [probs[0, blank]] + ([probs[0, ext[1]]] if target else [])
    alpha = torch.cat([torch.stack(first), probs.new_zeros(len(ext) - len(first))])
    log_scale = alpha.sum().log()
    alpha = alpha / alpha.sum()
    for t in range(1, probs.shape[0]):
        prev1 = torch.cat([alpha.new_zeros(1), alpha[:-1]])
        prev2 = torch.cat([alpha.new_zeros(min(2, len(ext))), alpha[:-2]]) * skip
        alpha = (alpha + prev1 + prev2) * probs[t, ext]
        total = alpha.sum()
        log_scale = log_scale + total.log()
        alpha = alpha / total
    end = alpha[-1] + (alpha[-2] if target else 0.0)
    return -(end.log() + log_scale)


def ref_ctc(log_probs: Tensor, targets: list[list[int]], input_lengths: list[int], blank: int, reduction: str,
            zero_infinity: bool) -> Tensor:  # fmt: skip
    """CTCLoss: per-sample -log p; an alignment that cannot exist (fewer frames than labels plus repeats) is inf, or 0
    with zero_infinity (and no gradient); "mean" divides each by its target length (at least 1, as torch does for an
    empty target) and averages over the batch."""
    import torch

    losses = []
    for n, (target, frames) in enumerate(zip(targets, input_lengths, strict=True)):
        repeats = sum(1 for a, b in zip(target, target[1:], strict=False) if a == b)
        if len(target) + repeats > frames:  # infeasible: kept out of the graph
            losses.append(log_probs.new_zeros(()) if zero_infinity else log_probs.new_full((), math.inf))
        else:
            losses.append(ctc_sample(log_probs[:frames, n], target, blank))
    per = torch.stack(losses)
    if reduction == "mean":
        lengths = torch.tensor([max(len(t), 1) for t in targets], dtype=per.dtype)
        return (per / lengths).mean()
    return reduce_loss(per, reduction, per.numel())


def ref_margin_ranking(x1: Tensor, x2: Tensor, y: Tensor, margin: float, reduction: str) -> Tensor:
    """max(0, -y·(x1 - x2) + margin)."""
    per = (-y * (x1 - x2) + margin).clamp_min(0)
    return reduce_loss(per, reduction, per.numel())


def ref_hinge_embedding(x: Tensor, y: Tensor, margin: float, reduction: str) -> Tensor:
    """x where y = 1, max(0, margin - x) where y = -1."""
    per = (y == 1) * x + (y == -1) * (margin - x).clamp_min(0)
    return reduce_loss(per, reduction, per.numel())


def ref_multi_margin(
    x: Tensor, y: Tensor, p: int, margin: float, weight: Tensor | None, reduction: str
) -> Tensor:
    """sum over i != y of w[y]·max(0, margin - x[y] + x[i])^p, over C (the weight outside the power: torch's kernel,
    and its documentation since pytorch#104844)."""
    import torch

    xy = x.gather(1, y[:, None])
    hinge = (margin - xy + x).clamp_min(0) ** p
    hinge = hinge * (torch.arange(x.shape[1])[None, :] != y[:, None])
    w = weight[y][:, None] if weight is not None else 1.0
    per = (w * hinge).sum(1) / x.shape[1]
    return reduce_loss(per, reduction, per.numel())


def ref_multilabel_margin(x: Tensor, y: Tensor, reduction: str) -> Tensor:
    """sum over targets j (y up to its first -1) and non-targets i of max(0, 1 - (x[j] - x[i])), over C."""
    import torch

    rows = []
    for n in range(x.shape[0]):
        labels = []
        for label in y[n].tolist():
            if label < 0:
                break
            labels.append(label)
        others = [i for i in range(x.shape[1]) if i not in labels]
        terms = [(1 - (x[n, j] - x[n, i])).clamp_min(0) for j in labels for i in others]
        rows.append(torch.stack(terms).sum() / x.shape[1] if terms else x[n].sum() * 0)
    per = torch.stack(rows)
    return reduce_loss(per, reduction, per.numel())


def ref_soft_margin(x: Tensor, y: Tensor, reduction: str) -> Tensor:
    """log(1 + exp(-y·x))."""
    per = (1 + (-y * x).exp()).log()
    return reduce_loss(per, reduction, per.numel())


def ref_multilabel_soft_margin(x: Tensor, y: Tensor, weight: Tensor | None, reduction: str) -> Tensor:
    """-(1/C)·sum_c w_c·[y·log sigmoid(x) + (1 - y)·log sigmoid(-x)], per sample."""
    log_sig, log_sig_neg = -(1 + (-x).exp()).log(), -(1 + x.exp()).log()
    terms = -(y * log_sig + (1 - y) * log_sig_neg) * (weight if weight is not None else 1.0)
    per = terms.sum(1) / x.shape[1]
    return reduce_loss(per, reduction, per.numel())


def ref_cosine_embedding(x1: Tensor, x2: Tensor, y: Tensor, margin: float, reduction: str) -> Tensor:
    """1 - cos where y = 1, max(0, cos - margin) where y = -1."""
    cos = (x1 * x2).sum(1) / ((x1 * x1).sum(1) * (x2 * x2).sum(1)).sqrt()
    per = (y == 1) * (1 - cos) + (y == -1) * (cos - margin).clamp_min(0)
    return reduce_loss(per, reduction, per.numel())


def ref_triplet(
    a: Tensor, p: Tensor, n: Tensor, margin: float, norm: float, swap: bool, reduction: str
) -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0), d(x, y) = ||x - y + eps||_norm (eps = 1e-6, as pairwise_distance); with
    swap, d(a, n) is replaced by min(d(a, n), d(p, n))."""

    def dist(u: Tensor, v: Tensor) -> Tensor:
        return ((u - v + 1e-6).abs() ** norm).sum(1) ** (1 / norm)

    negative = dist(a, n)
    if swap:
        negative = negative.minimum(dist(p, n))
    per = (dist(a, p) - negative + margin).clamp_min(0)
    return reduce_loss(per, reduction, per.numel())


def ref_poisson_nll(x: Tensor, t: Tensor, log_input: bool, full: bool, reduction: str) -> Tensor:
    """exp(x) - t·x (log_input) or x - t·log(x + 1e-8); full adds Stirling's t·log t - t + log(2·pi·t)/2 where t > 1."""
    import torch

    per = x.exp() - t * x if log_input else x - t * (x + 1e-8).log()
    if full:
        stirling = t * t.clamp_min(1).log() - t + 0.5 * (2 * math.pi * t.clamp_min(1)).log()
        per = per + torch.where(t > 1, stirling, torch.zeros_like(t))
    return reduce_loss(per, reduction, per.numel())


def ref_gaussian_nll(x: Tensor, t: Tensor, var: Tensor, full: bool, reduction: str) -> Tensor:
    """(log var + (x - t)^2 / var)/2, plus log(2·pi)/2 with full; a var with one dimension fewer than the input is
    broadcast over its last dimension (var values here stay above torch's eps clamp)."""
    if var.dim() == x.dim() - 1:
        var = var.unsqueeze(-1)
    per = 0.5 * (var.log() + (x - t) ** 2 / var)
    if full:
        per = per + 0.5 * math.log(2 * math.pi)
    return reduce_loss(per, reduction, per.numel())
