"""Attention in float64 from elementary ops (matmul, exp, sum), sharing no code with torch's attention kernels,
and the first-order forward-error bounds the numerics checks judge torch's kernels by.

SDPA, as documented: softmax(Q·Kᵀ·scale + bias)·V, where `bias` is -inf where a boolean mask is False (or above the
diagonal with is_causal, top-left aligned), the mask itself when it is a float, and a row whose every key is masked
gives zeros (torch >= 2.5, `_safe_softmax`). nn.MultiheadAttention, as documented: in-projection, heads, an additive
merge of key_padding_mask (True or a float: added to the key's column) and attn_mask, out-projection.

Bounds (u = unit roundoff of the dtype the kernel computes in; Higham 2002 §3.1, γ_n ≈ n·u): a logit is an E-term
dot product, so its error is ds <= (E+2)·u·scale·(|q|·|k|ᵀ) + u·|mask|; softmax turns a logit error ds into at most
2·ds·p (dp_i = p_i(ds_i - Σ p_j ds_j)) and rounds within (S+6)·u·p (lowp.reductions); an output is an S-term sum
over p·v. Gradients (dV = Pᵀ·dO, dS = P∘(dO·Vᵀ - rowsum(dO∘O)), dQ = scale·dS·K, dK = scale·dSᵀ·Q) are at most
E+S+L+16 operations deep on the magnitudes |…| of their terms. Every bound is evaluated on float64 magnitudes of the
actual inputs; nothing in it is measured from torch.
"""

from __future__ import annotations

import math
from typing import Any

Tensor = Any


def expand_kv(k: Tensor, heads: int) -> Tensor:
    """GQA: repeat each key/value head so that `heads` query heads share it."""
    return k.repeat_interleave(heads // k.shape[-3], dim=-3) if k.shape[-3] != heads else k


def attention_bias(mask: Tensor | None, is_causal: bool, length: int, keys: int, like: Tensor) -> Tensor:
    """The additive bias SDPA applies: 0 where attending, -inf where masked, or the float mask itself."""
    import torch

    bias = torch.zeros(length, keys, dtype=like.dtype)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(length, keys, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        mask = mask.cpu()
        bias = (
            bias.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else bias + mask.to(like.dtype)
        )
    return bias


def safe_softmax(s: Tensor) -> Tensor:
    """Softmax over the last dim; a row that is all -inf gives zeros (and zero gradients), as torch documents."""
    import torch

    finite = torch.isfinite(s)
    m = torch.where(finite, s, torch.full_like(s, -1e300)).amax(dim=-1, keepdim=True).detach()
    m = torch.where(m > -1e299, m, torch.zeros_like(m))
    e = torch.where(finite, (s.masked_fill(~finite, 0.0) - m).exp(), torch.zeros_like(s))
    denom = e.sum(dim=-1, keepdim=True)
    return e / torch.where(denom > 0, denom, torch.ones_like(denom))


def sdpa_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """(output, probabilities) of scaled dot-product attention in float64 (q, k, v may need grad)."""
    heads, length, keys = q.shape[-3], q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    kk, vv = expand_kv(k, heads), expand_kv(v, heads)
    s = q @ kk.transpose(-2, -1) * scale + attention_bias(attn_mask, is_causal, length, keys, q)
    p = safe_softmax(s)
    return p @ vv, p


def sdpa_bounds(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    probs: Tensor,
    out: Tensor,
    dout: Tensor,
    grads: dict[str, Tensor],
    attn_mask: Tensor | None,
    scale: float | None,
    u: float,
) -> dict[str, float]:
    """Absolute tolerances for out, dq, dk, dv of a kernel computing in unit roundoff u (see the module doc)."""
    import torch

    heads, length, keys, dim = q.shape[-3], q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(dim) if scale is None else scale
    with torch.no_grad():
        aq, ak, av, ado = q.abs(), expand_kv(k, heads).abs(), expand_kv(v, heads).abs(), dout.abs()
        ds = (dim + 2) * u * float((aq @ ak.transpose(-2, -1)).max()) * scale
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            ds += u * float(attn_mask.abs().max())
        pv = probs @ av
        mag = {"out": float(pv.max())}
        t = ado @ av.transpose(-2, -1) + (ado * pv).sum(dim=-1, keepdim=True)
        m_ds = probs * t
        mag["dv"] = float((probs.transpose(-2, -1) @ ado).max())
        mag["dq"] = scale * float((m_ds @ ak).max())
        mag["dk"] = scale * float((m_ds.transpose(-2, -1) @ aq).max())
        depth = {
            "out": keys + 6,
            "dq": dim + keys + length + 16,
            "dk": dim + keys + length + 16,
            "dv": dim + keys + length + 16,
        }
        kv_groups = heads // k.shape[-3]  # GQA: a key/value gradient sums its group's heads
        refs = {"out": out, **grads}
        return {
            n: (2 * ds + depth[n] * u) * mag[n] * (kv_groups if n in ("dk", "dv") else 1)
            + u * float(refs[n].abs().max())
            for n in mag
        }


def additive(mask: Tensor) -> Tensor:
    """nn.MultiheadAttention's mask convention as a float64 bias: True (masked) is -inf, a float is added."""
    import torch

    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(mask, float("-inf"))
    return mask.to(torch.float64)


def mha_reference(
    m: Any,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    average: bool,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """(output, attention weights, magnitudes for the bounds) of nn.MultiheadAttention `m` in float64 on CPU,
    from its parameters; inputs batch-first (batch, length, embed)."""
    import torch

    def p64(name: str) -> Tensor:  # None when the module has no such parameter
        t = getattr(m, name, None)
        return None if t is None else t.detach().to("cpu", torch.float64)

    e, h = m.embed_dim, m.num_heads
    if m._qkv_same_embed_dim:
        wq, wk, wv = p64("in_proj_weight").chunk(3)
    else:
        wq, wk, wv = p64("q_proj_weight"), p64("k_proj_weight"), p64("v_proj_weight")
    bias = p64("in_proj_bias")
    bq, bk, bv = bias.chunk(3) if bias is not None else (None, None, None)
    wo = m.out_proj.weight.detach().to("cpu", torch.float64)
    bo = None if m.out_proj.bias is None else m.out_proj.bias.detach().to("cpu", torch.float64)

    def lin(x: Tensor, w: Tensor, b: Tensor | None) -> tuple[Tensor, Tensor]:
        y = x @ w.T + (b if b is not None else 0.0)
        return y, x.abs() @ w.abs().T + (b.abs() if b is not None else 0.0)

    (qp, mq), (kp, mk), (vp, mv) = lin(query, wq, bq), lin(key, wk, bk), lin(value, wv, bv)
    batch, length = query.shape[0], query.shape[1]
    kpm = None if key_padding_mask is None else key_padding_mask.cpu()
    am = None if attn_mask is None else attn_mask.cpu()
    if m.bias_k is not None:
        bk_, bv_ = p64("bias_k"), p64("bias_v")
        kp, mk = (
            torch.cat([kp, bk_.expand(batch, 1, e)], 1),
            torch.cat([mk, bk_.abs().expand(batch, 1, e)], 1),
        )
        vp, mv = (
            torch.cat([vp, bv_.expand(batch, 1, e)], 1),
            torch.cat([mv, bv_.abs().expand(batch, 1, e)], 1),
        )
        kpm = None if kpm is None else torch.nn.functional.pad(kpm, (0, 1))
        am = None if am is None else torch.nn.functional.pad(am, (0, 1))
    if m.add_zero_attn:
        zeros = torch.zeros(batch, 1, e, dtype=torch.float64)
        kp, mk, vp, mv = (torch.cat([t, zeros], 1) for t in (kp, mk, vp, mv))
        kpm = None if kpm is None else torch.nn.functional.pad(kpm, (0, 1))
        am = None if am is None else torch.nn.functional.pad(am, (0, 1))
    keys = kp.shape[1]

    def heads(x: Tensor) -> Tensor:
        return x.reshape(batch, -1, h, e // h).transpose(1, 2)

    bias_t = torch.zeros(batch, 1, length, keys, dtype=torch.float64)
    if am is not None:
        bias_am = additive(am)
        bias_t = bias_t + (bias_am.reshape(batch, h, length, keys) if bias_am.dim() == 3 else bias_am)
    if kpm is not None:
        bias_t = bias_t + additive(kpm)[:, None, None, :]
    scale = 1 / math.sqrt(e // h)
    s = heads(qp) @ heads(kp).transpose(-2, -1) * scale + bias_t
    p = safe_softmax(s)
    o = (p @ heads(vp)).transpose(1, 2).reshape(batch, length, e)
    out = o @ wo.T + (bo if bo is not None else 0.0)
    weights = p.mean(dim=1) if average else p
    mag_o = (p @ heads(mv)).transpose(1, 2).reshape(batch, length, e)
    mags = {
        "logits": (heads(mq) @ heads(mk).transpose(-2, -1) * scale).max(),
        "out": (mag_o @ wo.abs().T + (bo.abs() if bo is not None else 0.0)).max(),
        "mask": bias_t[torch.isfinite(bias_t)].abs().max()
        if torch.isfinite(bias_t).any()
        else bias_t.new_zeros(()),
    }
    return out, weights, mags
