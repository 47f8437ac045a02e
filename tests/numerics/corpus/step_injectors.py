"""Fault injectors for the training-step classes of the corpus: each re-creates a historical PyTorch bug
where it lived (a DDP communication hook, F.dropout2d, BatchNorm's momentum handling, F.scaled_dot_product_attention,
F.multi_head_attention_forward, SequentialLR, Optimizer.load_state_dict's cast policy, F.embedding/embedding_bag,
clip_grad_norm_, torch._foreach_norm, AveragedModel, the EMA averaging function, Inductor's softmax-backward
decomposition), as a context manager that patches the real torch attribute and restores it. Test-only.

DDP's ranks are forked from the process that runs the check (envcheck.collectives.launch, CUDA untouched), so a patch
made here is what the ranks run."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from tests.numerics.corpus.injectors import patched


def fp16_hook_sums_first() -> contextlib.AbstractContextManager[None]:
    """fp16_compress_hook all-reducing in float16 before dividing by the world size (pytorch#57410 moved the
    division first: large gradients overflow float16 when summed)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def hook(process_group: Any, bucket: Any) -> Any:
            group = process_group if process_group is not None else dist.group.WORLD
            world = group.size()
            buffer = bucket.buffer()
            compressed = buffer.to(torch.float16)
            fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

            def decompress(f: Any) -> Any:
                buffer.copy_(f.value()[0].div_(world))
                return buffer

            return fut.then(decompress)

        return hook

    return patched(default_hooks, "fp16_compress_hook", make)


def allreduce_hook_without_division() -> contextlib.AbstractContextManager[None]:
    """A comm hook that sums gradients and forgets the division: since pytorch#42399 hooks receive undivided
    gradients, so such a hook trains with world-size-times larger steps."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def hook(process_group: Any, bucket: Any) -> Any:
            group = process_group if process_group is not None else dist.group.WORLD
            fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
            return fut.then(lambda f: f.value()[0])

        return hook

    return patched(default_hooks, "allreduce_hook", make)


def dropout2d_elementwise() -> contextlib.AbstractContextManager[None]:
    """F.dropout2d dropping single elements instead of whole channels (pytorch#69801)."""
    return patched(
        F,
        "dropout2d",
        lambda orig: functools.wraps(orig)(
            lambda x, p=0.5, training=True, inplace=False: F.dropout(x, p, training, inplace)
        ),
    )


def batchnorm_momentum_none_fixed() -> contextlib.AbstractContextManager[None]:
    """BatchNorm with momentum=None using a fixed momentum instead of the cumulative average (the mode of
    pytorch#5766 that SWA's update_bn relies on; pytorch#31498)."""
    from torch.nn.modules.batchnorm import _BatchNorm

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def forward(self: Any, x: Any) -> Any:
            if self.momentum is not None:
                return orig(self, x)
            self.momentum = 0.1
            try:
                return orig(self, x)
            finally:
                self.momentum = None

        return forward

    return patched(_BatchNorm, "forward", make)


def sdpa_ignores_bool_mask() -> contextlib.AbstractContextManager[None]:
    """scaled_dot_product_attention dropping a boolean attn_mask, as the documented reference implementation did
    (it filled the mask, not the bias: pytorch#117939, pytorch#109072)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, *a: Any, **kw: Any) -> Any:
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                attn_mask = None
            return orig(q, k, v, attn_mask, *a, **kw)

        return sdpa

    return patched(F, "scaled_dot_product_attention", make)


def mha_float_padding_mask_as_bool() -> contextlib.AbstractContextManager[None]:
    """MultiheadAttention treating a float key_padding_mask as a boolean one instead of adding it (pytorch#136816)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def mha(*a: Any, **kw: Any) -> Any:
            kpm = kw.get("key_padding_mask")
            if kpm is not None and kpm.dtype != torch.bool:
                kw["key_padding_mask"] = kpm != 0
            return orig(*a, **kw)

        return mha

    return patched(F, "multi_head_attention_forward", make)


def sequential_lr_keeps_children_factors() -> contextlib.AbstractContextManager[None]:
    """SequentialLR not resetting the learning rate its children's constructors already scaled, so their initial
    factors compound (pytorch#82684)."""
    from torch.optim.lr_scheduler import SequentialLR

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def init(self: Any, optimizer: Any, schedulers: Any, milestones: Any, last_epoch: int = -1) -> None:
            before = [g["lr"] for g in optimizer.param_groups]
            orig(self, optimizer, schedulers, milestones, last_epoch)
            for group, lr in zip(optimizer.param_groups, before, strict=True):
                group["lr"] = lr
            self._last_lr = before

        return init

    return patched(SequentialLR, "__init__", make)


def sequential_lr_forgets_children_state() -> contextlib.AbstractContextManager[None]:
    """SequentialLR restored from a state_dict without its children's state, so a resumed schedule restarts the
    active child (pytorch#171515, resuming SequentialLR)."""
    from torch.optim.lr_scheduler import SequentialLR

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def load(self: Any, state_dict: dict[str, Any]) -> None:
            state = {k: v for k, v in state_dict.items() if k != "_schedulers"}
            self.__dict__.update(state)

        return load

    return patched(SequentialLR, "load_state_dict", make)


def step_cast_to_param_dtype() -> contextlib.AbstractContextManager[None]:
    """Optimizer.load_state_dict casting state['step'] to the parameter's dtype like the other state
    (pytorch#75224): a bfloat16 step counter stops counting past 256."""

    def make(orig: Any) -> Any:
        def policy(param: Any, value: Any, param_id: int, param_groups: Any, key: Any = None) -> Any:
            if key == "step" and param.is_floating_point() and isinstance(value, torch.Tensor):
                return value.to(dtype=param.dtype, device=param.device)
            return orig(param, value, param_id, param_groups, key)

        return staticmethod(policy)

    return patched(torch.optim.Optimizer, "_process_value_according_to_param_policy", make)


def sparse_embedding_ignores_padding() -> contextlib.AbstractContextManager[None]:
    """F.embedding(sparse=True) ignoring padding_idx in the backward, so the padding row trains (pytorch#3506)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def embedding(
            idx: Any,
            weight: Any,
            padding_idx: Any = None,
            max_norm: Any = None,
            norm_type: float = 2.0,
            scale_grad_by_freq: bool = False,
            sparse: bool = False,
        ) -> Any:
            if sparse and padding_idx is not None:
                padding_idx = None
            return orig(idx, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)

        return embedding

    return patched(F, "embedding", make)


def embedding_bag_mean_counts_padding() -> contextlib.AbstractContextManager[None]:
    """F.embedding_bag(mode='mean', padding_idx=...) dividing by the whole bag, padding entries included (the
    semantics pytorch#49237 defined: padding is left out of the reduction and of the count)."""
    import inspect

    def make(orig: Any) -> Any:
        signature = inspect.signature(orig)

        @functools.wraps(orig)
        def bag(*a: Any, **kw: Any) -> Any:
            bound = signature.bind(*a, **kw)  # nn.EmbeddingBag passes everything by position
            bound.apply_defaults()
            kw = dict(bound.arguments)
            inp, offsets = kw["input"], kw["offsets"]
            if kw["mode"] != "mean" or kw["padding_idx"] is None:
                return orig(**kw)
            out = orig(**{**kw, "mode": "sum"})
            if inp.dim() == 2:
                sizes = torch.full((inp.shape[0],), inp.shape[1], device=out.device)
            else:
                bounds = offsets.tolist() + ([] if kw.get("include_last_offset") else [inp.numel()])
                sizes = torch.tensor(
                    [b - a for a, b in zip(bounds, bounds[1:], strict=False)], device=out.device
                )
            return out / sizes.clamp_min(1)[:, None].to(out.dtype)

        return bag

    return patched(F, "embedding_bag", make)


def clip_ignores_error_if_nonfinite() -> contextlib.AbstractContextManager[None]:
    """clip_grad_norm_ with non-finite gradients passing silently whatever error_if_nonfinite says
    (pytorch#46849, fixed by pytorch#53843)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def clip(*a: Any, **kw: Any) -> Any:
            kw["error_if_nonfinite"] = False
            return orig(*a, **kw)

        return clip

    return patched(torch.nn.utils, "clip_grad_norm_", make)


def foreach_inf_norm_as_two_norm() -> contextlib.AbstractContextManager[None]:
    """torch._foreach_norm computing a 2-norm when asked for inf, the path pytorch#120623 added to clip_grad_norm_."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def norm(tensors: Any, ord: Any = 2, *a: Any, **kw: Any) -> Any:
            return orig(tensors, 2 if ord == float("inf") else ord, *a, **kw)

        return norm

    return patched(torch, "_foreach_norm", make)


def averaged_model_buffers_not_synced() -> contextlib.AbstractContextManager[None]:
    """AveragedModel(use_buffers=False) keeping the buffers it copied at construction (pytorch#84053)."""
    from torch.optim.swa_utils import AveragedModel

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def update(self: Any, model: Any) -> None:
            if self.use_buffers:
                return orig(self, model)
            saved = [b.clone() for b in self.module.buffers()]
            orig(self, model)
            with torch.no_grad():
                for b, s in zip(self.module.buffers(), saved, strict=True):
                    b.copy_(s)
            return None

        return update

    return patched(AveragedModel, "update_parameters", make)


def ema_decay_swapped() -> contextlib.AbstractContextManager[None]:
    """get_ema_multi_avg_fn weighting the new weights by decay instead of 1 - decay (the foreach EMA of
    pytorch#94820)."""
    from torch.optim import swa_utils

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def get(decay: float = 0.999) -> Any:
            return orig(1 - decay)

        return get

    return patched(swa_utils, "get_ema_multi_avg_fn", make)


@contextlib.contextmanager
def softmax_backward_decomposition_wrong() -> Iterator[None]:
    """Inductor's decomposition of softmax's backward dropping the -y·Σ(g·y) term (pytorch#152309: the softmax
    decomposition gave torch.compile wrong gradients)."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor import decomposition as inductor_decomp

    op = torch.ops.aten._softmax_backward_data.default
    # Inductor's table, and the cached copy of it its default config hands out (fast_random_decomps, functools.cache)
    tables = [inductor_decomp.decompositions, inductor_decomp.fast_random_decomps()]
    originals = [t.get(op) for t in tables]

    def wrong(grad_output: Any, output: Any, dim: int, input_dtype: Any) -> Any:
        return (grad_output * output).to(input_dtype)

    for table in tables:
        table[op] = wrong
    torch._dynamo.reset()
    # Compiled graphs are cached on disk (AOTAutograd and FX graph caches) under keys that do not cover a changed
    # decomposition table: without this, a graph compiled before the injection would be reused.
    with functorch_config.patch(enable_autograd_cache=False), inductor_config.patch(fx_graph_cache=False):
        try:
            yield
        finally:
            for table, original in zip(tables, originals, strict=True):
                if original is None:
                    table.pop(op, None)
                else:
                    table[op] = original
            torch._dynamo.reset()
