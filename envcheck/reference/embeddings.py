"""Embedding lookups in float64 from indexing and sums, as the torch.nn.Embedding / EmbeddingBag documentation states
them: max_norm renorms the looked-up rows in place to max_norm/(norm + 1e-7) first; padding_idx rows get no gradient
and leave a bag's reduction and its mean's count; scale_grad_by_freq divides each index's gradient by its count in
the batch; a max bag routes each gradient element to its arg-max row; an empty bag is zeros."""

from __future__ import annotations

import math
from typing import Any

Tensor = Any


def renorm(w: Tensor, idx: list[int], max_norm: float | None, norm_type: float) -> Tensor:
    """Rows looked up with a norm above max_norm, scaled to max_norm/(norm + 1e-7); as torch.embedding_renorm_."""
    w = w.clone()
    if max_norm is not None:
        for r in sorted(set(idx)):
            n = (
                float(w[r].abs().max())
                if math.isinf(norm_type)
                else float((w[r].abs() ** norm_type).sum()) ** (1 / norm_type)
            )
            if n > max_norm:
                w[r] = w[r] * (max_norm / (n + 1e-7))
    return w


def counts(idx: list[int]) -> dict[int, int]:
    return {r: idx.count(r) for r in set(idx)}


def lookup_reference(
    w: Tensor,
    indices: list[list[int]],
    pad: int | None,
    max_norm: float | None,
    norm_type: float,
    freq: bool,
    g: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """(weight after renorm, output, weight gradient for output gradient g) of F.embedding."""
    import torch

    flat = [i for row in indices for i in row]
    ref_w = renorm(w, flat, max_norm, norm_type)
    ref_g = torch.zeros_like(ref_w)
    count = counts(flat)
    for k, r in enumerate(flat):
        if r != pad:
            ref_g[r] += g.reshape(-1, w.shape[1])[k] / (count[r] if freq else 1)
    return ref_w, ref_w[torch.tensor(indices)], ref_g


def bag_reference(
    w: Tensor,
    bags: list[list[int]],
    mode: str,
    psw: list[float] | None,
    pad: int | None,
    g: Tensor,
    freq: bool,
    flat: list[int],
) -> tuple[Tensor, Tensor, Tensor | None]:
    """(output, weight gradient, per-sample-weight gradient) of embedding_bag in float64."""
    import torch

    rows, dim = w.shape
    out = torch.zeros(len(bags), dim, dtype=torch.float64)
    gw = torch.zeros(rows, dim, dtype=torch.float64)
    gpsw = None if psw is None else torch.zeros(len(psw), dtype=torch.float64)
    count = counts(flat)
    pos = 0
    for b, bag in enumerate(bags):
        kept = [(pos + j, r) for j, r in enumerate(bag) if r != pad]
        pos += len(bag)
        if not kept:
            continue
        if mode == "max":
            stacked = torch.stack([w[r] for _, r in kept])
            out[b], arg = stacked.max(0)
            for d in range(dim):
                gw[kept[int(arg[d])][1], d] += g[b, d]
            continue
        scale = 1.0 / len(kept) if mode == "mean" else 1.0
        for k, r in kept:
            weight = 1.0 if psw is None else psw[k]
            out[b] += w[r] * weight * scale
            gw[r] += g[b] * weight * scale / (count[r] if freq else 1)
            if gpsw is not None:
                gpsw[k] = float((g[b] * w[r]).sum())
    return out, gw, gpsw
