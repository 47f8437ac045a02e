"""embedding.reference: F.embedding and F.embedding_bag across their options vs float64 references written from
the torch.nn.Embedding / EmbeddingBag documentation.

Embedding axes: padding_idx (none, 2, -1), max_norm (none, or 1.0 with norm_type 2, 1, inf: the looked-up rows are
renormed in place to max_norm/(norm + 1e-7)), scale_grad_by_freq, sparse. EmbeddingBag axes: mode (sum, mean, max),
per_sample_weights (sum), 1-D input with offsets (an empty bag included, include_last_offset both ways) or 2-D,
padding_idx (excluded from the reduction and from mean's count), scale_grad_by_freq, sparse, max_norm. Compared: the
output, the weight gradient (dense or the densified sparse one), the per-sample-weight gradient, and the weight after
renorm. Indices repeat with different counts, so gradient scaling by frequency is visible. Tolerance: a value summed
from n terms, |err| <= (n + 8)·u·(1 + |ref|), u = float32 eps/2 (Higham 2002 eq. 4.4). Quick level: four cases.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, Tensor, compare
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.embeddings import bag_reference, lookup_reference, renorm
from envcheck.reference.known_bugs import judge_with_known_bugs

ROWS, DIM = 7, 4
INDICES = [[1, 2, 1, 4, 3], [2, 2, 5, 1, 1], [6, 1, 0, 2, 1]]  # repeats: 1 x6, 2 x4, others once
OFFSETS = [0, 3, 3, 8]  # bags [0,3), [3,3) empty, [3,8), [8,15)


def _weight(device: str) -> Tensor:
    import torch

    return (torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(0)) * 1.5).to(device)


def embedding_case(
    device: str, padding_idx: int | None, max_norm: float | None, norm_type: float, freq: bool, sparse: bool
) -> list[Comparison] | None:
    """One F.embedding option set: output, weight gradient, renormed weight."""
    import torch
    import torch.nn.functional as F

    flat = [i for row in INDICES for i in row]
    w = _weight(device).requires_grad_(True)
    w0 = w.detach().double().cpu()
    idx = torch.tensor(INDICES, device=device)
    g = torch.randn(3, 5, DIM, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    try:
        out = F.embedding(idx, w, padding_idx, max_norm, norm_type, freq, sparse)
        (out * g.float().to(device)).sum().backward()  # not out.backward(g): it imports sympy
    except RuntimeError as exc:
        if "not supported" in str(exc) or "sparse" in str(exc):
            return None  # a combination torch refuses (sparse + scale_grad_by_freq): nothing to compare
        raise
    pad = None if padding_idx is None else padding_idx % ROWS
    ref_w, ref_out, ref_g = lookup_reference(w0, INDICES, pad, max_norm, norm_type, freq, g)
    label = (
        f"embedding(padding_idx={padding_idx}, max_norm={max_norm}, norm_type={norm_type}, "
        f"scale_grad_by_freq={freq}, sparse={sparse})"
    )
    u = torch.finfo(torch.float32).eps / 2
    grad = w.grad.to_dense() if w.grad.is_sparse else w.grad
    return [
        compare(
            out,
            ref_out,
            op=f"{label} output",
            device=device,
            dtype="float32",
            atol=(DIM + 8) * u * (1 + float(ref_out.abs().max())),
            rtol=0.0,
        ),
        compare(
            grad,
            ref_g,
            op=f"{label} weight gradient",
            device=device,
            dtype="float32",
            atol=(len(flat) + 8) * u * (1 + float(ref_g.abs().max())),
            rtol=0.0,
        ),
        compare(
            w.detach(),
            ref_w,
            op=f"{label} weight after forward (renorm in place)",
            device=device,
            dtype="float32",
            atol=(DIM + 8) * u * (1 + float(ref_w.abs().max())),
            rtol=0.0,
        ),
    ]


def bag_case(
    device: str,
    mode: str,
    psw: bool,
    layout: str,
    pad: int | None,
    freq: bool,
    sparse: bool,
    max_norm: float | None,
) -> list[Comparison] | None:
    """One F.embedding_bag option set."""
    import torch
    import torch.nn.functional as F

    flat = [i for row in INDICES for i in row]
    if layout == "2d":
        bags, kw = INDICES, {}
        inp = torch.tensor(INDICES, device=device)
    else:
        last = layout == "offsets+last"
        bounds = OFFSETS + [len(flat)]
        bags = [flat[a:b] for a, b in itertools.pairwise(bounds)]
        offsets = OFFSETS + ([len(flat)] if last else [])
        inp, kw = (
            torch.tensor(flat, device=device),
            {"offsets": torch.tensor(offsets, device=device), "include_last_offset": last},
        )
    weights = [0.5 + 0.25 * (k % 4) for k in range(len(flat))] if psw else None
    w = _weight(device).requires_grad_(True)
    w0 = w.detach().double().cpu()
    p = (
        None
        if weights is None
        else torch.tensor(weights, device=device).reshape(inp.shape).requires_grad_(True)
    )
    try:
        out = F.embedding_bag(
            inp,
            w,
            max_norm=max_norm,
            scale_grad_by_freq=freq,
            mode=mode,
            sparse=sparse,
            per_sample_weights=p,
            padding_idx=pad,
            **kw,
        )
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        (out * g.float().to(device)).sum().backward()  # not out.backward(g): it imports sympy
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        if "not supported" in str(exc) or "only supported" in str(exc) or "support" in str(exc):
            return None
        raise
    ref_w = renorm(w0, flat, max_norm, 2.0)
    ref_out, ref_g, ref_gp = bag_reference(ref_w, bags, mode, weights, pad, g, freq, flat)
    label = (
        f"embedding_bag(mode={mode}, per_sample_weights={psw}, input={layout}, padding_idx={pad}, "
        f"scale_grad_by_freq={freq}, sparse={sparse}, max_norm={max_norm})"
    )
    u = torch.finfo(torch.float32).eps / 2
    n = max(len(b) for b in bags) + 8
    grad = w.grad.to_dense() if w.grad.is_sparse else w.grad
    comps = [
        compare(
            out,
            ref_out,
            op=f"{label} output",
            device=device,
            dtype="float32",
            atol=n * u * (1 + float(ref_out.abs().max())),
            rtol=0.0,
        ),
        compare(
            grad,
            ref_g,
            op=f"{label} weight gradient",
            device=device,
            dtype="float32",
            atol=(len(flat) + 8) * u * (1 + float(ref_g.abs().max())),
            rtol=0.0,
        ),
    ]
    if ref_gp is not None and p is not None and p.grad is not None:
        comps.append(
            compare(
                p.grad.reshape(-1),
                ref_gp,
                op=f"{label} per_sample_weights gradient",
                device=device,
                dtype="float32",
                atol=(DIM + 8) * u * (1 + float(ref_gp.abs().max())),
                rtol=0.0,
            )
        )
    return comps


def embedding_comparisons(device: str, quick: bool) -> tuple[list[Comparison], int]:
    """Every option set of both functions (the quick level: four); also how many torch refused."""
    refused = 0
    out: list[Comparison] = []
    emb: list[tuple[Any, ...]]
    bag: list[tuple[Any, ...]]
    if quick:
        emb = [(2, 1.0, 2.0, False, True), (None, None, 2.0, True, False)]
        bag = [
            ("mean", False, "offsets", 2, False, False, None),
            ("sum", True, "offsets+last", None, False, True, None),
        ]
    else:
        emb = [
            (p, m, n, f, s)
            for p, (m, n), f, s in itertools.product(
                (None, 2, -1),
                ((None, 2.0), (1.0, 2.0), (1.0, 1.0), (1.0, math.inf)),
                (False, True),
                (False, True),
            )
        ]
        bag = [
            c
            for c in itertools.product(
                ("sum", "mean", "max"),
                (False, True),
                ("offsets", "offsets+last", "2d"),
                (None, 2),
                (False, True),
                (False, True),
                (None, 1.0),
            )
            if not (c[1] and c[0] != "sum")
        ]
    for case in emb:
        found = embedding_case(device, *case)
        refused += found is None
        out += found or []
    for bcase in bag:
        found = bag_case(device, *bcase)
        refused += found is None
        out += found or []
    return out, refused


def embedding_reference(ctx: Context) -> Result:
    """Embedding and EmbeddingBag match float64 references across their options, on every device."""
    quick = ctx.level is Level.QUICK
    comparisons: list[Comparison] = []
    extra: dict[str, Any] = {}
    with numerics_mode():
        for device in check_devices():
            found, refused = embedding_comparisons(device, quick)
            comparisons += found
            extra[f"option_sets_refused_by_torch@{device}"] = refused
    return judge_with_known_bugs(
        "embeddings vs float64 references",
        comparisons,
        tolerances={"atol": "(n+8)·u·(1+|ref|), n = terms summed", "rtol": 0},
        extra=extra,
        remediation="an embedding kernel computes wrong values or gradients "
        "for these options; reinstall torch or avoid the option",
    )
