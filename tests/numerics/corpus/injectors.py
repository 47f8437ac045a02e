"""Fault injectors for the numerics corpus: each re-creates a historical PyTorch silent-correctness bug where the
original bug lived (a torch.optim kernel, an F.* loss, a reduction, the GradScaler update kernel, autograd's version
counter...), as a context manager that monkeypatches the real torch attribute and restores it. Test-only."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F


@contextlib.contextmanager
def patched(owner: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """Replace owner.name by make(original) for the duration."""
    original = getattr(owner, name)
    setattr(owner, name, make(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def kernel_kwarg(module: str, fn: str, **forced: Any) -> contextlib.AbstractContextManager[None]:
    """torch.optim.<module>.<fn> called with some keyword arguments forced (an option the kernel ignores)."""
    import importlib

    mod = importlib.import_module(f"torch.optim.{module}")

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(*a: Any, **kw: Any) -> Any:
            return orig(*a, **{**kw, **forced})

        return wrapper

    return patched(mod, fn, make)


def kernel_state_lost(
    module: str, fn: str, arg: str, position: int
) -> contextlib.AbstractContextManager[None]:
    """torch.optim.<module>.<fn> updates copies of one state list, so the update is never persisted."""
    import importlib

    mod = importlib.import_module(f"torch.optim.{module}")

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(*a: Any, **kw: Any) -> Any:
            a = list(a)
            if arg in kw:
                kw[arg] = [t.clone() for t in kw[arg]]
            elif len(a) > position and a[position]:
                a[position] = [t.clone() for t in a[position]]
            return orig(*a, **kw)

        return wrapper

    return patched(mod, fn, make)


def nadam_extra_mu() -> contextlib.AbstractContextManager[None]:
    """pytorch#92699: single-tensor NAdam's mu_product carried an extra factor mu (here beta1/2 per step)."""
    import torch.optim.nadam as mod

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(
            params: Any, grads: Any, exp_avgs: Any, exp_avg_sqs: Any, mu_products: Any, *a: Any, **kw: Any
        ) -> Any:
            for t in mu_products:
                t.mul_(kw.get("beta1", 0.9) * 0.5)
            return orig(params, grads, exp_avgs, exp_avg_sqs, mu_products, *a, **kw)

        return wrapper

    return patched(mod, "_single_tensor_nadam", make)


def cross_entropy_fault(kind: str) -> contextlib.AbstractContextManager[None]:
    """F.cross_entropy with one historical formula error (kind picks which)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(
            x: Any,
            y: Any,
            weight: Any = None,
            size_average: Any = None,
            ignore_index: int = -100,
            reduce: Any = None,
            reduction: str = "mean",
            label_smoothing: float = 0.0,
        ) -> Any:
            if kind == "unshifted" and not y.dtype.is_floating_point:
                logp = (x.exp() / x.exp().sum(1, keepdim=True)).log()
                return F.nll_loss(logp, y, weight=weight, ignore_index=ignore_index, reduction=reduction)
            if kind == "smoothing_counts_ignored" and label_smoothing > 0 and not y.dtype.is_floating_point:
                logp = F.log_softmax(x, 1)
                w = weight if weight is not None else torch.ones(x.shape[1], dtype=x.dtype, device=x.device)
                nll = F.nll_loss(logp, y, weight=weight, ignore_index=ignore_index, reduction=reduction)
                smooth = -(w * logp).sum(1) / x.shape[1]  # every sample, the ignored ones too (pytorch#73205)
                smooth = (
                    smooth if reduction == "none" else smooth.sum() if reduction == "sum" else smooth.mean()
                )
                return (1 - label_smoothing) * nll + label_smoothing * smooth
            if (
                kind == "weighted_mean_over_n"
                and weight is not None
                and reduction == "mean"
                and not y.dtype.is_floating_point
            ):
                per = orig(
                    x,
                    y,
                    weight=weight,
                    ignore_index=ignore_index,
                    reduction="none",
                    label_smoothing=label_smoothing,
                )
                return per.sum() / (y != ignore_index).sum()
            if (
                kind == "smoothing_unweighted"
                and label_smoothing > 0
                and weight is not None
                and not y.dtype.is_floating_point
            ):
                nll = orig(x, y, weight=weight, ignore_index=ignore_index, reduction=reduction)
                smooth = orig(x, y, ignore_index=ignore_index, reduction=reduction, label_smoothing=1.0)
                return (1 - label_smoothing) * nll + label_smoothing * smooth
            return orig(
                x,
                y,
                weight=weight,
                ignore_index=ignore_index,
                reduction=reduction,
                label_smoothing=label_smoothing,
            )

        return wrapper

    return patched(F, "cross_entropy", make)


def nll_ignored_in_denominator() -> contextlib.AbstractContextManager[None]:
    """F.nll_loss mean divides by every sample, the ignored ones included."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(
            x: Any,
            y: Any,
            weight: Any = None,
            size_average: Any = None,
            ignore_index: int = -100,
            reduce: Any = None,
            reduction: str = "mean",
        ) -> Any:
            if reduction == "mean":
                per = orig(x, y, weight=weight, ignore_index=ignore_index, reduction="none")
                w = weight[y.clamp_min(0)] if weight is not None else torch.ones_like(per)
                return per.sum() / w.sum()
            return orig(x, y, weight=weight, ignore_index=ignore_index, reduction=reduction)

        return wrapper

    return patched(F, "nll_loss", make)


def bce_pos_weight_on_negatives() -> contextlib.AbstractContextManager[None]:
    """F.binary_cross_entropy_with_logits applies pos_weight to the whole loss, not the positive term."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(
            x: Any,
            t: Any,
            weight: Any = None,
            size_average: Any = None,
            reduce: Any = None,
            reduction: str = "mean",
            pos_weight: Any = None,
        ) -> Any:
            w = weight if pos_weight is None else (pos_weight if weight is None else weight * pos_weight)
            return orig(x, t, weight=w, reduction=reduction)

        return wrapper

    return patched(F, "binary_cross_entropy_with_logits", make)


def lane_sum(x: Any, lanes: int = 16) -> Any:
    """A SIMD-style reduction whose 16 lane accumulators are held in the input's low dtype (the old kernels)."""
    flat = x.reshape(-1)
    pad = (-flat.numel()) % lanes
    rows = torch.cat([flat, flat.new_zeros(pad)]).reshape(-1, lanes)
    acc = rows[0].clone()
    for row in rows[1:]:
        acc = acc + row  # rounded to the low dtype after every addition
    out = acc[0]
    for v in acc[1:]:
        out = out + v
    return out


def low_precision_accumulation(name: str) -> contextlib.AbstractContextManager[None]:
    """torch.sum/mean/softmax/log_softmax on half/bfloat16 computed in the low dtype itself (no float32 opmath)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(x: Any, *a: Any, **kw: Any) -> Any:
            if (
                not isinstance(x, torch.Tensor)
                or x.dtype not in (torch.float16, torch.bfloat16)
                or a
                or kw.get("dim")
            ):
                if name in ("sum", "mean"):
                    return orig(x, *a, **kw)
            if name == "sum" and not a and not kw:
                return lane_sum(x)
            if name == "mean" and not a and not kw:
                return lane_sum(x) / x.numel()
            if name in ("softmax", "log_softmax") and x.dtype in (torch.float16, torch.bfloat16):
                dim = kw.get("dim", a[0] if a else -1)
                e = x.exp()  # no max subtraction, low-precision exp and sum
                s = torch.cumsum(e, dim, dtype=x.dtype).narrow(dim, x.shape[dim] - 1, 1)
                return (e / s) if name == "softmax" else (x - s.log())
            return orig(x, *a, **kw)

        return wrapper

    return patched(torch, name, make)


class _DetachedBackward(torch.autograd.Function):
    """An activation whose backward is right once but not differentiable (computed under no_grad)."""

    @staticmethod
    def forward(ctx: Any, x: Any, fn: Any) -> Any:  # type: ignore[override]
        ctx.save_for_backward(x)
        ctx.fn = fn
        return fn(x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            xd = x.detach().requires_grad_(True)
            (dx,) = torch.autograd.grad(ctx.fn(xd), xd, g.detach())
        return dx.detach(), None


def activation_without_double_backward(name: str) -> contextlib.AbstractContextManager[None]:
    """F.<name> whose first derivative is correct and whose second derivative is silently zero."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(x: Any, *a: Any, **kw: Any) -> Any:
            return _DetachedBackward.apply(
                x, functools.partial(orig, *a, **kw) if not a and not kw else (lambda t: orig(t, *a, **kw))
            )

        return wrapper

    return patched(F, name, make)


def foreach_without_version_bump(name: str) -> contextlib.AbstractContextManager[None]:
    """torch._foreach_<op>_ mutating through .data: the version counter is not bumped (pytorch#53796)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(tensors: Any, *a: Any, **kw: Any) -> Any:
            return orig([t.data for t in tensors], *a, **kw)

        return wrapper

    return patched(torch, name, make)


def embedding_renorm_without_version_bump() -> contextlib.AbstractContextManager[None]:
    """F.embedding(max_norm=...) renorming weight through .data (pytorch#14571)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(
            idx: Any, weight: Any, padding_idx: Any = None, max_norm: Any = None, *a: Any, **kw: Any
        ) -> Any:
            if max_norm is not None:
                with torch.no_grad():
                    torch.embedding_renorm_(weight.data, idx, max_norm, kw.get("norm_type", 2.0))
            return orig(idx, weight, padding_idx, None, *a, **kw)

        return wrapper

    return patched(F, "embedding", make)


def checkpoint_without_rng() -> contextlib.AbstractContextManager[None]:
    """torch.utils.checkpoint recomputing with fresh RNG (preserve_rng_state=False forced; PR #14253)."""
    import torch.utils.checkpoint as ck

    return patched(
        ck,
        "checkpoint",
        lambda orig: functools.wraps(orig)(
            lambda fn, *a, **kw: orig(fn, *a, **{**kw, "preserve_rng_state": False})
        ),
    )


def amp_update_scale(bug: str) -> contextlib.AbstractContextManager[None]:
    """torch._amp_update_scale_ reimplemented with one bug in the growth/backoff rule."""

    def make(orig: Any) -> Any:
        def update(
            scale: Any, tracker: Any, found_inf: Any, growth: float, backoff: float, interval: int
        ) -> Any:
            if float(found_inf) > 0:
                scale.mul_(backoff)
                if bug != "tracker_not_reset":
                    tracker.zero_()
                return scale
            tracker.add_(1)
            limit = growth if bug == "growth_factor_as_interval" else interval
            if int(tracker) >= limit:
                grown = scale * growth
                if bug == "unbounded" or torch.isfinite(grown):
                    scale.copy_(grown)
                tracker.zero_()
            return scale

        return update

    return patched(torch, "_amp_update_scale_", make)


def found_inf_ignored() -> contextlib.AbstractContextManager[None]:
    """torch._amp_foreach_non_finite_check_and_unscale_ unscales but never reports inf/NaN."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(grads: Any, found_inf: Any, inv_scale: Any) -> Any:
            orig(grads, found_inf, inv_scale)
            found_inf.zero_()

        return wrapper

    return patched(torch, "_amp_foreach_non_finite_check_and_unscale_", make)


def scaler_unscales_twice() -> contextlib.AbstractContextManager[None]:
    """GradScaler.step unscaling again after an explicit unscale_ (the per-optimizer stage forgotten)."""
    from torch.amp.grad_scaler import GradScaler, OptState

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def step(self: Any, optimizer: Any, *a: Any, **kw: Any) -> Any:
            state = self._per_optimizer_states[id(optimizer)]
            if state["stage"] is OptState.UNSCALED:
                state["stage"] = OptState.READY
                state["found_inf_per_device"] = {}
            return orig(self, optimizer, *a, **kw)

        return step

    return patched(GradScaler, "step", make)


@contextlib.contextmanager
def autocast_cache_ignores_grad_mode() -> Iterator[None]:
    """F.linear under autocast reusing a weight cast made under no_grad (pytorch#65766, fixed by PR #113685);
    like the real cache, it is emptied when an autocast region exits."""
    cache: dict[tuple[int, int], Any] = {}

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def wrapper(x: Any, weight: Any, bias: Any = None) -> Any:
            kind = x.device.type
            if not torch.is_autocast_enabled(kind):
                return orig(x, weight, bias)
            low = torch.get_autocast_dtype(kind)
            w = cache.setdefault((id(weight), weight._version), weight.to(low))  # keyed like the real cache
            b = None if bias is None else bias.to(low)  # only weights were cached
            return orig(x.to(low), w, b)

        return wrapper

    def make_exit(orig: Any) -> Any:
        @functools.wraps(orig)
        def exit_(self: Any, *a: Any) -> Any:
            cache.clear()
            return orig(self, *a)

        return exit_

    from torch.amp.autocast_mode import autocast

    with patched(F, "linear", make), patched(autocast, "__exit__", make_exit):
        yield
