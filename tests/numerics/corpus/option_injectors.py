"""Injectors of the option-class part of the fault corpus: state changed on a live module, the structure of random
draws, and options that interact. Each re-creates a cited historical PyTorch bug where it lived (a module's forward or
state-dict hook, a functional op, an ATen binding) by monkeypatching the real torch attribute for the duration."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from tests.numerics.corpus.injectors import patched


def batchnorm_forward_of_torch_1_5() -> contextlib.AbstractContextManager[None]:
    """_BatchNorm.forward as torch 1.5 wrote it: the buffers go to F.batch_norm whenever they exist and training is
    `self.training or not self.track_running_stats`, so a live module whose flag is turned off (to freeze its
    statistics) still moves them in train() and eval() and normalizes eval() input with the batch's statistics
    (pytorch#37823, pytorch#20967; pytorch#38084 made the forward pass the buffers only when they are tracked)."""
    from torch.nn.modules.batchnorm import _BatchNorm

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def forward(self: Any, x: Any) -> Any:
            self._check_input_dim(x)
            factor = 0.0 if self.momentum is None else self.momentum
            if self.training and self.track_running_stats and self.num_batches_tracked is not None:
                self.num_batches_tracked.add_(1)
                factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                self.training or not self.track_running_stats, factor, self.eps)  # fmt: skip

        return forward

    return patched(_BatchNorm, "forward", make)


def norm_load_resets_count() -> contextlib.AbstractContextManager[None]:
    """_NormBase._load_from_state_dict before pytorch#110850: a state dict without version metadata and without
    num_batches_tracked (a plain dict of weights, strict=False) gets num_batches_tracked = 0 written into it, so the
    live module's count restarts and momentum=None's cumulative average forgets every earlier batch
    (pytorch#110361)."""
    from torch.nn.modules.batchnorm import _NormBase

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def load(self: Any, state_dict: Any, prefix: str, local_metadata: Any, *rest: Any) -> Any:
            version = local_metadata.get("version", None)
            key = prefix + "num_batches_tracked"
            if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
                state_dict[key] = torch.tensor(0, dtype=torch.long)
            return orig(self, state_dict, prefix, local_metadata, *rest)

        return load

    return patched(_NormBase, "_load_from_state_dict", make)


def dropout2d_3d_as_unbatched() -> contextlib.AbstractContextManager[None]:
    """F.dropout2d as pytorch#69885 wrote it (torch 1.11): a 3-D input is taken as unbatched (C, H, W), given a
    batch dimension and feature-dropped along its first dimension, so for the (N, C, L) input users passed every
    channel of a sample shares one draw (pytorch#77081; pytorch#79549 restored (N, C, L))."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def dropout2d(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
            if x.dim() != 3:
                return orig(x, p, training, inplace)
            return torch.feature_dropout(x.unsqueeze(0), p, training).squeeze(0)

        return dropout2d

    return patched(F, "dropout2d", make)


def sdpa_dropout_offsets_wrap(word_bits: int = 9) -> contextlib.AbstractContextManager[None]:
    """scaled_dot_product_attention whose dropout draws each (batch, head) slot's mask from the Philox offset
    (b·H + h)·L·S computed in a fixed-width word, as the memory-efficient kernel did in 32 bits until pytorch#188015:
    once the product wraps, distinct slots land on one offset and share a mask. The word is narrowed to `word_bits`
    so that it wraps at the sizes a test runs (2^32 needs L·S near 2^32); the arithmetic is the kernel's."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
                 scale: float | None = None, enable_gqa: bool = False) -> Any:  # fmt: skip
            if dropout_p == 0.0:
                return orig(
                    q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
                )
            weights = orig(q, k, torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*k.shape[:-1],
                           k.shape[-2]), attn_mask=attn_mask, is_causal=is_causal, scale=scale)  # fmt: skip
            slots = weights.reshape(-1, *weights.shape[-2:])
            base = int(
                torch.randint(0, 2**31, (1,))
            )  # the call's seed, from the default generator as torch's is
            length = slots.shape[-2] * slots.shape[-1]
            masks = []
            for slot in range(slots.shape[0]):
                offset = (slot * length) % (1 << word_bits)
                gen = torch.Generator(device=q.device).manual_seed(base + offset)
                masks.append(torch.rand(slots.shape[-2:], generator=gen, device=q.device) >= dropout_p)
            keep = torch.stack(masks).reshape(weights.shape)
            return (weights * keep / (1 - dropout_p)) @ v

        return sdpa

    return patched(F, "scaled_dot_product_attention", make)


@contextlib.contextmanager
def lstm_dropout_mask_repeated() -> Iterator[None]:
    """LSTM whose inter-layer dropout draws the same mask on every call, as on MPS until pytorch#185351 (three train()
    forwards of a two-layer LSTM with dropout=0.5 returned identical outputs): the kernel runs from one fixed
    generator state each call. Re-created at the ATen binding nn.LSTM calls."""
    from torch.nn.modules import rnn

    vf = rnn._VF
    original = vf.lstm

    @functools.wraps(original)
    def lstm(*a: Any, **kw: Any) -> Any:
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(1234)
            return original(*a, **kw)

    vf.lstm = lstm
    try:
        yield
    finally:
        del vf.lstm  # back to the binding's own attribute lookup


def cross_entropy_smoothing_denominator_counts_ignored() -> contextlib.AbstractContextManager[None]:
    """cross_entropy with weight, label_smoothing and reduction="mean" before pytorch#69511: the smoothing term is
    divided by the summed weights of every target, the ignored ones included (weight.gather(0, target)); an ignore_index
    outside the classes raised IndexError (pytorch#69339), one inside them gave a wrong mean silently."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def cross_entropy(x: Any, y: Any, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                          reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> Any:  # fmt: skip
            kw = {"weight": weight, "ignore_index": ignore_index, "reduction": reduction}
            if (weight is None or label_smoothing == 0.0 or reduction != "mean" or y.dtype.is_floating_point
                    or x.dim() < 2):  # fmt: skip
                return orig(x, y, label_smoothing=label_smoothing, **kw)
            logp = F.log_softmax(x, 1)
            nll = F.nll_loss(logp, y, **kw)
            shape = (1, -1, *[1] * (x.dim() - 2))
            smooth = (-(logp * weight.view(shape)).sum(1)).masked_fill(y == ignore_index, 0.0)
            smooth = smooth.sum() / weight.gather(0, y.flatten()).sum()
            return (1 - label_smoothing) * nll + label_smoothing / x.shape[1] * smooth

        return cross_entropy

    return patched(F, "cross_entropy", make)


class _SmoothL1Beta0(torch.autograd.Function):
    """|d| forward; the CUDA kernel's backward before pytorch#97022: -1 below -beta, 1 above beta, else d/beta,
    which at beta = 0 and d = 0 is 0/0."""

    @staticmethod
    def forward(ctx: Any, d: Any) -> Any:
        ctx.save_for_backward(d)
        return d.abs()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        (d,) = ctx.saved_tensors
        beta = torch.zeros((), dtype=d.dtype, device=d.device)
        return grad * torch.where(d < -beta, -1.0, torch.where(d > beta, 1.0, d / beta))


def smooth_l1_beta0_nan_gradient() -> contextlib.AbstractContextManager[None]:
    """F.smooth_l1_loss with beta=0 whose gradient is NaN wherever input equals target (pytorch#96813, torch 1.13 on
    GPU; pytorch#97022 routes beta=0 to l1_loss)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def smooth_l1_loss(x: Any, target: Any, size_average: Any = None, reduce: Any = None,
                           reduction: str = "mean", beta: float = 1.0) -> Any:  # fmt: skip
            if beta != 0.0:
                return orig(x, target, reduction=reduction, beta=beta)
            per = _SmoothL1Beta0.apply(x - target)
            return per if reduction == "none" else per.sum() if reduction == "sum" else per.mean()

        return smooth_l1_loss

    return patched(F, "smooth_l1_loss", make)


def ctc_empty_target_unalignable() -> contextlib.AbstractContextManager[None]:
    """F.ctc_loss taking an empty target for one that no alignment fits, as the plain CUDA kernel did until
    pytorch#23298: its loss inf, or 0 with zero_infinity (measured in pytorch#18215: target lengths [0, 13] gave
    inf and, with zero_infinity, 0 for the empty one), where the documented loss is -log of the all-blank path."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
                     reduction: str = "mean", zero_infinity: bool = False) -> Any:  # fmt: skip
            per = orig(log_probs, targets, input_lengths, target_lengths, blank=blank, reduction="none",
                       zero_infinity=zero_infinity)  # fmt: skip
            lengths = torch.as_tensor(target_lengths, device=per.device)
            empty = lengths == 0
            per = torch.where(empty, per.detach() * 0 + (0.0 if zero_infinity else float("inf")), per)
            if reduction == "mean":
                return (per / lengths.clamp_min(1).to(per.dtype)).mean()
            return per.sum() if reduction == "sum" else per

        return ctc_loss

    return patched(F, "ctc_loss", make)
