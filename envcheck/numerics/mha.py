"""nn.MultiheadAttention across its options vs float64 math (part of attention.reference).

Axes: bias, add_bias_kv, add_zero_attn, kdim/vdim != embed_dim (cross-attention), key_padding_mask (none, boolean,
float), attn_mask (none, boolean, float, per-head float), need_weights/average_attn_weights, batch_first; all in
train() mode; and in eval() under no_grad (where torch takes its fused "fast path", torch._native_multi_head_attention,
for self-attention), with dropout 0 and 0.5 (eval must not drop). Output and attention weights are compared.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from typing import Any

from envcheck.reference.attention import mha_reference
from envcheck.reference.compare import Comparison, Tensor, compare

EMBED, HEADS, KDIM, BATCH = 8, 2, 6, 2
KPM = ("none", "bool", "float")
ATTN = ("none", "bool", "float", "float_per_head")
WEIGHTS = ("none", "average", "per_head")


@dataclass(frozen=True)
class MhaCase:
    """One point of nn.MultiheadAttention's option space."""

    bias: bool
    bias_kv: bool
    zero_attn: bool
    cross: bool  # kdim = vdim = KDIM, a key sequence of its own length
    kpm: str
    attn: str
    weights: str
    batch_first: bool
    mode: str  # "train" or "eval_no_grad"
    dropout: float = 0.0

    @property
    def label(self) -> str:
        """Every option, for the comparison's name."""
        return (
            f"MultiheadAttention(bias={self.bias}, add_bias_kv={self.bias_kv}, add_zero_attn={self.zero_attn}, "
            f"kdim={'6' if self.cross else 'embed'}, key_padding_mask={self.kpm}, attn_mask={self.attn}, "
            f"weights={self.weights}, batch_first={self.batch_first}, dropout={self.dropout}, {self.mode})"
        )


def mha_cases(quick: bool) -> list[MhaCase]:
    """Train mode: the product of every axis (batch_first alternating); eval under no_grad: self-attention with
    every mask pair, batch_first both ways, dropout 0 and 0.5. Quick level: three cases without key_padding_mask,
    whose shape check (torch._check_with) imports sympy, 1-3 s cold: more than the quick level's budget."""
    if quick:
        return [
            MhaCase(True, False, False, False, "none", "float", "none", True, "train"),
            MhaCase(True, False, False, False, "none", "bool", "average", True, "train"),
            MhaCase(True, False, False, False, "none", "bool", "none", True, "eval_no_grad", 0.5),
        ]
    train = [
        MhaCase(b, kv, z, c, kpm, am, w, i % 2 == 0, "train")
        for i, (b, kv, z, c, kpm, am, w) in enumerate(
            itertools.product((True, False), (False, True), (False, True), (False, True), KPM, ATTN, WEIGHTS)
        )
    ]
    fast = [
        MhaCase(b, False, False, False, kpm, am, "none", bf, "eval_no_grad", p)
        for b, kpm, am, bf, p in itertools.product((True, False), KPM, ATTN, (True, False), (0.0, 0.5))
    ]
    return train + fast


def _masks(case: MhaCase, length: int, keys: int, gen: Any) -> tuple[Tensor | None, Tensor | None]:
    import torch

    kpm = attn = None
    if case.kpm != "none":
        masked = torch.rand(BATCH, keys, generator=gen) > 0.6
        masked[:, 0] = False  # every row keeps a key
        kpm = masked if case.kpm == "bool" else torch.randn(BATCH, keys, generator=gen)
    if case.attn != "none":
        masked = torch.rand(length, keys, generator=gen) > 0.6
        masked[:, 0] = False
        attn = {
            "bool": masked,
            "float": torch.randn(length, keys, generator=gen),
            "float_per_head": torch.randn(BATCH * HEADS, length, keys, generator=gen),
        }[case.attn]
    return kpm, attn


def run_case(
    case: MhaCase, device: str, seed: int
) -> tuple[Tensor, Tensor | None, Tensor, Tensor | None, dict[str, Any]]:
    """(torch output, torch weights, reference output, reference weights, reference magnitudes)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    kdim = KDIM if case.cross else None
    m = torch.nn.MultiheadAttention(
        EMBED,
        HEADS,
        dropout=case.dropout,
        bias=case.bias,
        add_bias_kv=case.bias_kv,
        add_zero_attn=case.zero_attn,
        kdim=kdim,
        vdim=kdim,
        batch_first=case.batch_first,
    ).to(device)
    length, keys = (5, 7) if case.cross else (6, 6)
    query = torch.randn(BATCH, length, EMBED, generator=gen)
    key = torch.randn(BATCH, keys, KDIM, generator=gen) if case.cross else query
    value = torch.randn(BATCH, keys, KDIM, generator=gen) if case.cross else query
    kpm, attn = _masks(case, length, keys, gen)

    def layout(t: Tensor) -> Tensor:
        return (t if case.batch_first else t.transpose(0, 1)).to(device)

    args = [layout(query)] + ([layout(key), layout(value)] if case.cross else [layout(query)] * 2)
    kw = {
        "key_padding_mask": None if kpm is None else kpm.to(device),
        "attn_mask": None if attn is None else attn.to(device),
        "need_weights": case.weights != "none",
        "average_attn_weights": case.weights != "per_head",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mixed mask types are deprecated, still supported
        if case.mode == "train":
            out, weights = m(*args, **kw)
        else:
            m.eval()
            with torch.no_grad():
                out, weights = m(*args, **kw)
    out = out if case.batch_first else out.transpose(0, 1)
    ref, ref_w, mags = mha_reference(
        m, query.double(), key.double(), value.double(), kpm, attn, case.weights != "per_head"
    )
    return (
        out.detach(),
        None if weights is None else weights.detach(),
        ref,
        ref_w if case.weights != "none" else None,
        mags,
    )


def mha_comparisons(device: str, quick: bool) -> tuple[list[Comparison], dict[str, Any]]:
    """Output (and weights when asked for) of every case vs the float64 reference; bounds in reference.attention."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    hd = EMBED // HEADS
    comps: list[Comparison] = []
    cases = mha_cases(quick)
    for i, case in enumerate(cases):
        out, weights, ref, ref_w, mags = run_case(case, device, seed=100 + i)
        keys = 9  # the longest key sequence: 7 keys + bias_k + a zero key
        ds = (2 * (EMBED + 2) + hd + 4) * u * float(mags["logits"]) + u * float(mags["mask"])
        atol = (2 * ds + (keys + 2 * EMBED + 12) * u) * float(mags["out"]) + u * float(ref.abs().max())
        comps.append(
            compare(out, ref, op=f"{case.label} output", device=device, dtype="float32", atol=atol, rtol=0.0)
        )
        if ref_w is not None and weights is not None:
            comps.append(
                compare(
                    weights,
                    ref_w,
                    op=f"{case.label} weights",
                    device=device,
                    dtype="float32",
                    atol=2 * ds + (keys + 8) * u,
                    rtol=0.0,
                )
            )
    return comps, {f"mha_cases@{device}": len(cases)}
