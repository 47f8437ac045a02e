"""The full-level option products of losses.reference (loss_options.py lists every axis): ctc_loss, the margin losses,
poisson_nll_loss and gaussian_nll_loss, each against its float64 formula (envcheck.reference.loss_formulas)."""

from __future__ import annotations

import itertools
from typing import Any

from envcheck.numerics.loss_options import REDUCTIONS, LossCase, _gen, _on
from envcheck.reference import loss_formulas as lf

Tensor = Any
T, BATCH, CLASSES, DIM = 12, 4, 5, 6
# per sample: a target with a repeated label, a short one, an empty one, and one that no alignment of 12 frames fits
# (7 labels with 6 repeats need 13 frames)
TARGETS, FRAMES = ((1, 2, 2), (3, 1), (), (4, 4, 4, 4, 4, 4, 4)), (12, 10, 9, 12)


def _log_softmax2(x: Tensor) -> Tensor:
    m = x.max(dim=2, keepdim=True).values.detach()
    return x - m - (x - m).exp().sum(dim=2, keepdim=True).log()


def ctc_cases() -> list[LossCase]:
    """reduction x zero_infinity x target layout x blank; the unalignable sample only where zero_infinity zeroes it
    (its inf loss and NaN gradient are what zero_infinity exists to remove)."""
    import torch
    import torch.nn.functional as F

    x = (torch.randn(T, BATCH, CLASSES, generator=_gen(31)) * 2).double()
    out = []
    for red, zero_inf, layout, blank in itertools.product(REDUCTIONS, (False, True), ("padded", "concatenated"),
                                                          (0, CLASSES - 1)):  # fmt: skip
        keep = BATCH if zero_inf else BATCH - 1
        labels = [[c if blank == 0 else c - 1 for c in t] for t in TARGETS[:keep]]
        lengths = torch.tensor([len(t) for t in labels])
        if layout == "padded":
            targets = torch.zeros(keep, max(lengths), dtype=torch.long)
            for n, t in enumerate(labels):
                targets[n, : len(t)] = torch.tensor(t, dtype=torch.long)
        else:
            targets = torch.tensor([c for t in labels for c in t], dtype=torch.long)
        frames = torch.tensor(FRAMES[:keep])
        xs = x[:, :keep].contiguous()
        out.append(LossCase(f"ctc_loss(reduction={red}, zero_infinity={zero_inf}, {layout} targets, blank={blank}, "
                            "an empty target" + (", an unalignable sample" if zero_inf else ""), xs,
                            lambda x, tg=targets, ln=lengths, fr=frames, r=red, z=zero_inf, b=blank: F.ctc_loss(
                                F.log_softmax(x, 2), tg.to(x.device), fr.to(x.device), ln.to(x.device), blank=b,
                                reduction=r, zero_infinity=z),
                            lambda x, lb=labels, fr=frames, r=red, z=zero_inf, b=blank: lf.ref_ctc(
                                _log_softmax2(x), lb, fr.tolist(), b, r, z)))  # fmt: skip
    return out


def margin_cases() -> list[LossCase]:
    """Every margin loss over its options x reduction."""
    import torch
    import torch.nn.functional as F

    g = _gen(41)
    x = (torch.randn(BATCH, CLASSES, generator=g) * 2).double()
    pair, triple = (
        (torch.randn(2, BATCH, DIM, generator=g)).double(),
        torch.randn(3, BATCH, DIM, generator=g).double(),
    )
    sign = torch.tensor([1.0, -1.0, -1.0, 1.0]).double()
    signs = torch.where(torch.rand(BATCH, CLASSES, generator=g) > 0.5, 1.0, -1.0).double()
    classes = torch.tensor([0, 3, 1, 4])
    multilabel = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [0, 1, 2, 3, 4], [2, 4, -1, 0, 0]])
    bits = (torch.rand(BATCH, CLASSES, generator=g) > 0.5).double()
    w = torch.rand(CLASSES, generator=g).double() + 0.5
    out = []
    for red in REDUCTIONS:
        for m in (0.0, 0.5):
            out.append(LossCase(f"margin_ranking_loss(margin={m}, {red})", pair[:, :, 0].contiguous(),
                                lambda x, m=m, r=red: F.margin_ranking_loss(x[0], x[1], _on(sign, x), margin=m,
                                                                            reduction=r),
                                lambda x, m=m, r=red: lf.ref_margin_ranking(x[0], x[1], sign, m, r)))  # fmt: skip
            out.append(LossCase(f"cosine_embedding_loss(margin={m}, {red})", pair,
                                lambda x, m=m, r=red: F.cosine_embedding_loss(x[0], x[1], _on(sign, x), margin=m,
                                                                              reduction=r),
                                lambda x, m=m, r=red: lf.ref_cosine_embedding(x[0], x[1], sign, m, r)))  # fmt: skip
        for m in (0.5, 1.0):
            out.append(LossCase(f"hinge_embedding_loss(margin={m}, {red})", x,
                                lambda x, m=m, r=red: F.hinge_embedding_loss(x, _on(signs, x), margin=m, reduction=r),
                                lambda x, m=m, r=red: lf.ref_hinge_embedding(x, signs, m, r)))  # fmt: skip
        for p, m, weight in itertools.product((1, 2), (1.0, 0.5), (None, w)):
            out.append(LossCase(f"multi_margin_loss(p={p}, margin={m}, weight={weight is not None}, {red})", x,
                                lambda x, p=p, m=m, wt=weight, r=red: F.multi_margin_loss(
                                    x, classes.to(x.device), p=p, margin=m,
                                    weight=None if wt is None else _on(wt, x), reduction=r),
                                lambda x, p=p, m=m, wt=weight, r=red: lf.ref_multi_margin(x, classes, p, m, wt, r)))  # fmt: skip
        for weight in (None, w):
            out.append(LossCase(f"multilabel_soft_margin_loss(weight={weight is not None}, {red})", x,
                                lambda x, wt=weight, r=red: F.multilabel_soft_margin_loss(
                                    x, _on(bits, x), weight=None if wt is None else _on(wt, x), reduction=r),
                                lambda x, wt=weight, r=red: lf.ref_multilabel_soft_margin(x, bits, wt, r)))  # fmt: skip
        out.append(LossCase(f"multilabel_margin_loss({red})", x,
                            lambda x, r=red: F.multilabel_margin_loss(x, multilabel.to(x.device), reduction=r),
                            lambda x, r=red: lf.ref_multilabel_margin(x, multilabel, r)))  # fmt: skip
        out.append(LossCase(f"soft_margin_loss({red})", x,
                            lambda x, r=red: F.soft_margin_loss(x, _on(signs, x), reduction=r),
                            lambda x, r=red: lf.ref_soft_margin(x, signs, r)))  # fmt: skip
        for m, norm, swap in itertools.product((1.0, 0.5), (1.0, 2.0), (False, True)):
            out.append(LossCase(f"triplet_margin_loss(margin={m}, p={norm}, swap={swap}, {red})", triple,
                                lambda x, m=m, n=norm, s=swap, r=red: F.triplet_margin_loss(
                                    x[0], x[1], x[2], margin=m, p=n, swap=s, reduction=r),
                                lambda x, m=m, n=norm, s=swap, r=red: lf.ref_triplet(x[0], x[1], x[2], m, n, s, r)))  # fmt: skip
    return out


def likelihood_cases() -> list[LossCase]:
    """poisson_nll_loss (log_input x full) and gaussian_nll_loss (full x var shape), x reduction."""
    import torch
    import torch.nn.functional as F

    g = _gen(51)
    x = torch.randn(BATCH, CLASSES, generator=g).double()
    counts = torch.randint(0, 5, (BATCH, CLASSES), generator=g).double()  # some above 1: Stirling's term
    target = torch.randn(BATCH, CLASSES, generator=g).double()
    variances = {"same shape": torch.rand(BATCH, CLASSES, generator=g).double() + 0.5,
                 "one dimension fewer": torch.rand(BATCH, generator=g).double() + 0.5,
                 "last dimension 1": torch.rand(BATCH, 1, generator=g).double() + 0.5}  # fmt: skip
    out = []
    for red, full in itertools.product(REDUCTIONS, (False, True)):
        for log_input in (True, False):
            out.append(LossCase(f"poisson_nll_loss(log_input={log_input}, full={full}, {red})", x,
                                lambda x, li=log_input, f=full, r=red: F.poisson_nll_loss(
                                    x if li else x.abs() + 0.1, _on(counts, x), log_input=li, full=f, reduction=r),
                                lambda x, li=log_input, f=full, r=red: lf.ref_poisson_nll(
                                    x if li else x.abs() + 0.1, counts, li, f, r)))  # fmt: skip
        for shape, var in variances.items():
            out.append(LossCase(f"gaussian_nll_loss(full={full}, var {shape}, {red})", x,
                                lambda x, v=var, f=full, r=red: F.gaussian_nll_loss(
                                    x, _on(target, x), _on(v, x), full=f, reduction=r),
                                lambda x, v=var, f=full, r=red: lf.ref_gaussian_nll(x, target, v, f, r)))  # fmt: skip
    return out
