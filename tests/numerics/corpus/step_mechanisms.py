"""The training-step part of the fault corpus: DDP, modules with modes, attention, LR schedulers, state
round trips, embeddings, clipping, weight averaging and the compiled step; each mechanism cited, injected where the
original bug lived (step_injectors.py) and shown to harm a training run (step_scripts.py). Appended to CORPUS.

Not in the corpus, and why: SyncBatchNorm's count bugs (pytorch#22192, pytorch#36382) need CUDA ranks (no CPU
kernels); DDP static_graph + no_sync (pytorch#187732) is present, unfixed, in torch 2.13 and 2.14 themselves, and the
check reports it as a known bug."""

from __future__ import annotations

import functools

from tests.numerics.corpus import step_injectors as inj
from tests.numerics.corpus import step_scripts as s
from tests.numerics.corpus.model import PT, Mechanism

P = functools.partial
DDP, MODES, ATT, SCHED = "ddp.differential", "modules.train_eval", "attention.reference", "sched.closed_form"
STATE, EMB, CLIP, SWA, COMPILE = (
    "train.state_roundtrip",
    "embedding.reference",
    "train.clip_options",
    "swa.averaging",
    "compile.train_step",
)

STEP_CORPUS: tuple[Mechanism, ...] = (
    Mechanism(
        "DDP fp16 compression hook sums in float16 before dividing (overflow)",
        f"{PT}/pull/57410",
        inj.fp16_hook_sums_first,
        P(s.train_ddp, "fp16_compress", scale=1.1e5),
        DDP,
    ),
    Mechanism(
        "DDP comm hook sums gradients without dividing by the world size",
        f"{PT}/pull/42399",
        inj.allreduce_hook_without_division,
        P(s.train_ddp, "allreduce"),
        DDP,
    ),
    Mechanism(
        "Dropout2d drops elements instead of whole channels",
        f"{PT}/issues/69801",
        inj.dropout2d_elementwise,
        s.train_dropout2d,
        MODES,
    ),
    Mechanism(
        "BatchNorm momentum=None uses a fixed momentum, not the cumulative average",
        f"{PT}/issues/31498",
        inj.batchnorm_momentum_none_fixed,
        s.train_batchnorm_cumulative,
        MODES,
    ),
    Mechanism(
        "scaled_dot_product_attention ignores a boolean attn_mask",
        f"{PT}/issues/117939",
        inj.sdpa_ignores_bool_mask,
        s.train_sdpa_padding,
        ATT,
    ),
    Mechanism(
        "MultiheadAttention treats a float key_padding_mask as boolean",
        f"{PT}/issues/136816",
        inj.mha_float_padding_mask_as_bool,
        s.train_mha_float_padding,
        ATT,
    ),
    Mechanism(
        "SequentialLR compounds its children's initial factors",
        f"{PT}/issues/82684",
        inj.sequential_lr_keeps_children_factors,
        s.train_sequential_constants,
        SCHED,
    ),
    Mechanism(
        "SequentialLR resumed without its children's state",
        f"{PT}/pull/171515",
        inj.sequential_lr_forgets_children_state,
        s.train_sequential_resumed,
        SCHED,
    ),
    Mechanism(
        "Optimizer.load_state_dict casts step to the parameter dtype",
        f"{PT}/issues/75224",
        inj.step_cast_to_param_dtype,
        s.train_bf16_adam_resumed,
        STATE,
    ),
    Mechanism(
        "Embedding(sparse=True) trains the padding_idx row",
        f"{PT}/issues/3506",
        inj.sparse_embedding_ignores_padding,
        s.train_sparse_embedding,
        EMB,
    ),
    Mechanism(
        "EmbeddingBag mean counts padding_idx entries",
        f"{PT}/pull/49237",
        inj.embedding_bag_mean_counts_padding,
        s.train_embedding_bag_mean,
        EMB,
    ),
    Mechanism(
        "clip_grad_norm_ lets non-finite norms pass despite error_if_nonfinite",
        f"{PT}/issues/46849",
        inj.clip_ignores_error_if_nonfinite,
        s.train_clip_skip_nonfinite,
        CLIP,
    ),
    Mechanism(
        "foreach inf-norm clipping computes a 2-norm",
        f"{PT}/pull/120623",
        inj.foreach_inf_norm_as_two_norm,
        s.train_clip_inf_norm,
        CLIP,
    ),
    Mechanism(
        "AveragedModel without use_buffers keeps stale BatchNorm buffers",
        f"{PT}/issues/84053",
        inj.averaged_model_buffers_not_synced,
        s.train_ema_buffers,
        SWA,
    ),
    Mechanism(
        "EMA multi-avg function weights the new weights by decay",
        f"{PT}/pull/94820",
        inj.ema_decay_swapped,
        s.train_ema_weights,
        SWA,
    ),
    Mechanism(
        "softmax backward decomposition wrong under torch.compile",
        f"{PT}/issues/152309",
        inj.softmax_backward_decomposition_wrong,
        s.train_compiled_attention,
        COMPILE,
    ),
)
