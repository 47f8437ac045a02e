"""The kept-masks of dropout inside attention and recurrent layers, read from their outputs with no private API.

- scaled_dot_product_attention with dropout_p: queries of zeros give every key the weight 1/S, and values that are
  the identity make the output the dropped weight matrix itself, mask/(S·(1 - p)), so kept = output > 0. On a GPU each
  backend (math, flash, memory-efficient, cuDNN) draws its own mask, so each is read separately (half precision where
  a backend needs it; a backend that does not take the case is skipped).
- nn.MultiheadAttention(dropout=p) in train(): with zero query projections the attention weights it returns
  (need_weights=True, average_attn_weights=False) are the dropped uniform weights, after dropout (torch's
  multi_head_attention_forward applies dropout to the weights it returns).
- RNN/GRU/LSTM(num_layers=2, dropout=p): the documented dropout is on the outputs of each layer but the last. With
  every weight zero, layer 0's biases make its output a nonzero constant; layer 1 reads its input through an identity
  (bias-saturated gates keep the others at 0 or 1), so its output is nonzero exactly where the dropout kept the input:
  |h| > 1e-6 (a dropped unit leaves at most e^-30 from a saturated gate).
"""

from __future__ import annotations

import warnings
from typing import Any

Tensor = Any
SEQ, KEYS = 16, 16  # a power of two: 1/KEYS is exact
SDPA_BACKENDS = (("MATH", "float32"), ("FLASH_ATTENTION", "float16"), ("EFFICIENT_ATTENTION", "float32"),
                 ("CUDNN_ATTENTION", "float16"))  # fmt: skip
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def sdpa_kept(batch_shape: tuple[int, ...], p: float, device: str, backend: str, dtype: str) -> Tensor | None:
    """The kept-mask (batch..., L, S) of one SDPA call on one backend; None where the backend does not run."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dt = getattr(torch, dtype)
    q = torch.zeros(*batch_shape, SEQ, 8, device=device, dtype=dt)
    k = torch.randn(*batch_shape, KEYS, 8, generator=torch.Generator().manual_seed(5)).to(device, dt)
    v = torch.eye(KEYS, device=device, dtype=dt).expand(*batch_shape, KEYS, KEYS).contiguous()
    try:
        with warnings.catch_warnings(), sdpa_kernel(getattr(SDPBackend, backend)):
            warnings.simplefilter("ignore")
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    except RuntimeError as exc:
        if "kernel" in str(exc) or "backend" in str(exc):
            return None
        raise
    return out > 0


def mha_kept(batched: bool, p: float, device: str) -> Tensor:
    """The kept-mask of nn.MultiheadAttention's attention weights in train(): (N, heads, L, S) or (heads, L, S)."""
    import torch

    mha = torch.nn.MultiheadAttention(16, 4, dropout=p, batch_first=True).to(device).train()
    with torch.no_grad():
        mha.in_proj_weight.zero_()
        mha.in_proj_bias.zero_()
    shape = (4, SEQ, 16) if batched else (SEQ, 16)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(6)).to(device)
    with torch.no_grad():
        _, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)
    return weights > 0


def recurrent(kind: str, p: float, device: str, *, bidirectional: bool, batch_first: bool) -> Any:
    """A two-layer RNN/GRU/LSTM whose layer-1 output shows where the inter-layer dropout kept its input."""
    import torch

    h = 16
    rnn = getattr(torch.nn, kind)(
        h, h, num_layers=2, dropout=p, bidirectional=bidirectional, batch_first=batch_first
    )
    eye = torch.eye(h)
    with torch.no_grad():
        for param in rnn.parameters():
            param.zero_()
        for d in range(2 if bidirectional else 1):
            sfx = "_reverse" if d else ""
            b0, b1 = getattr(rnn, f"bias_ih_l0{sfx}"), getattr(rnn, f"bias_ih_l1{sfx}")
            w1 = getattr(rnn, f"weight_ih_l1{sfx}")
            cols = slice(d * h, (d + 1) * h)  # a bidirectional layer 1 reads both directions' outputs
            if kind == "RNN":
                b0.fill_(0.5)
                w1[:, cols] = eye
            elif kind == "GRU":  # gates r, z, n: z = 0 so h = n = tanh(W_in x + b_in)
                b0[h : 2 * h], b0[2 * h :] = -30.0, 0.5
                b1[h : 2 * h] = -30.0
                w1[2 * h :, cols] = eye
            else:  # LSTM gates i, f, g, o: i = o = 1, f = 0 so h = tanh(tanh(W_ig x + b_ig))
                b0[:h], b0[h : 2 * h], b0[2 * h : 3 * h], b0[3 * h :] = 30.0, -30.0, 0.5, 30.0
                b1[:h], b1[h : 2 * h], b1[3 * h :] = 30.0, -30.0, 30.0
                w1[2 * h : 3 * h, cols] = eye
    return rnn.to(device).train()


def rnn_kept(rnn: Any, shape: tuple[int, ...], device: str) -> Tensor:
    """The kept-mask of the inter-layer dropout, shaped as the module's output."""
    import torch

    with torch.no_grad():
        out = rnn(torch.zeros(*shape, rnn.input_size, device=device))[0]
    return out.abs() > 1e-6
