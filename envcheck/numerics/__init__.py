"""Numerical correctness: autograd, AMP and training mechanics, on CPU and on every CUDA device.

Each module holds one property; its core takes the part under test (op, scaler, clip, resume...) as a
parameter whose default is the real torch thing, so tests can inject a faulty stand-in.
"""

from __future__ import annotations

import dataclasses

from envcheck.core.check import CheckSpec, Level, Needs
from envcheck.numerics.activation_grads import autograd_activations
from envcheck.numerics.amp_dynamics import amp_dynamics
from envcheck.numerics.amp_training import amp_training_convergence
from envcheck.numerics.attention_backends import attention_reference
from envcheck.numerics.autocast_dtypes import amp_autocast_dtypes
from envcheck.numerics.autograd import autograd_device_agreement, autograd_gradcheck
from envcheck.numerics.autograd_mechanics import autograd_mechanics
from envcheck.numerics.averaging import swa_averaging
from envcheck.numerics.checkpointing import train_checkpointing
from envcheck.numerics.clip_options import train_clip_options
from envcheck.numerics.clipping import train_clip_grad_norm, train_clip_grad_value
from envcheck.numerics.dropout_structure import dropout_structure
from envcheck.numerics.embedding_options import embedding_reference
from envcheck.numerics.grad_accumulation import train_grad_accumulation
from envcheck.numerics.grad_scaler import amp_grad_scaler
from envcheck.numerics.inplace_detection import autograd_inplace_detection
from envcheck.numerics.linear_vjp import autograd_linear_vjp
from envcheck.numerics.loss_reference import losses_reference
from envcheck.numerics.low_precision import lowp_reductions
from envcheck.numerics.lr_schedules import sched_closed_form
from envcheck.numerics.modes import modules_train_eval
from envcheck.numerics.opdb import ops_opdb
from envcheck.numerics.optim_differential import optim_differential
from envcheck.numerics.resume import train_resume
from envcheck.numerics.scaled_clipping import amp_clip_after_unscale
from envcheck.numerics.second_order import autograd_second_order
from envcheck.numerics.state_roundtrip import train_state_roundtrip

TORCH = Needs(torch=True)

_SPECS: tuple[CheckSpec, ...] = (
    CheckSpec(
        "autograd.linear_vjp",
        autograd_linear_vjp,
        "Linear layer gradients equal the hand-derived VJP (dX=G·Wᵀ, dW=Xᵀ·G, db=ΣG)",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "autograd.mechanics",
        autograd_mechanics,
        "grad accumulation, zero_grad, retain_graph, hooks, no_grad/inference_mode, detach, version counter",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "autograd.gradcheck",
        autograd_gradcheck,
        "gradcheck (float64) on matmul/addmm, conv2d, softmax, layer_norm, reductions, index, scatter, broadcast",
        Level.FULL,
        TORCH,
        timeout_s=180,
    ),
    CheckSpec(
        "autograd.device_agreement",
        autograd_device_agreement,
        "CUDA gradients equal CPU gradients in float32 (TF32 off) and float64",
        Level.FULL,
        Needs(torch=True, cuda=True),
        timeout_s=180,
    ),
    CheckSpec(
        "autograd.second_order",
        autograd_second_order,
        "create_graph=True Hessian-vector products and gradgradcheck",
        Level.FULL,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "amp.autocast_dtypes",
        amp_autocast_dtypes,
        "autocast: matmul/linear/conv low precision; softmax, losses, reductions float32",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "amp.grad_scaler",
        amp_grad_scaler,
        "GradScaler skips inf/NaN steps, backs off, grows after growth_interval",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "amp.clip_after_unscale",
        amp_clip_after_unscale,
        "unscale_ then clip_grad_norm_ matches the float32 reference norm and step",
        Level.FULL,
        TORCH,
    ),
    CheckSpec(
        "amp.training_convergence",
        amp_training_convergence,
        "a small model trained under AMP ends near its float32 twin, without NaN",
        Level.FULL,
        TORCH,
        timeout_s=240,
    ),
    CheckSpec(
        "train.clip_grad_norm",
        train_clip_grad_norm,
        "clip_grad_norm_: pre-clip norm returned, rescale above max_norm only, direction kept, tied once",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "train.clip_grad_value",
        train_clip_grad_value,
        "clip_grad_value_ bounds every element",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "train.grad_accumulation",
        train_grad_accumulation,
        "k micro-batches with loss/k equal one k-times-larger batch",
        Level.FULL,
        TORCH,
    ),
    CheckSpec(
        "train.checkpointing",
        train_checkpointing,
        "torch.utils.checkpoint (use_reentrant=False) keeps gradients; lowers CUDA peak memory",
        Level.FULL,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "train.resume",
        train_resume,
        "model+optimizer state_dict round trip through a file resumes with an identical next step",
        Level.FULL,
        TORCH,
    ),
    # Differential checks: each compares with an independent implementation.
    CheckSpec(
        "optim.differential",
        optim_differential,
        "torch.optim single-tensor/foreach/fused across options vs float64 references (quick: SGD/Adam/AdamW "
        "kernels; full: every optimizer class)",
        Level.QUICK,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "losses.reference",
        losses_reference,
        "every loss over the product of its interacting options (cross_entropy/nll weight x ignore_index x "
        "label_smoothing x reduction x shape, BCE weights, smooth L1/Huber, KL; full: CTC, margin and likelihood "
        "losses) vs float64 formulas",
        Level.QUICK,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "lowp.reductions",
        lowp_reductions,
        "bf16/fp16 sum, mean and softmax at large logits within Higham's dtype-derived bounds",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "amp.dynamics",
        amp_dynamics,
        "autocast cast cache across no_grad; GradScaler over 300 steps vs the documented rule; unscale, clip, "
        "step",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "autograd.inplace_detection",
        autograd_inplace_detection,
        "every in-place path (methods, out=, foreach, embedding renorm) bumps the version counter",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "autograd.activations",
        autograd_activations,
        "activation backward and double backward vs float64 finite differences",
        Level.QUICK,
        TORCH,
    ),
    CheckSpec(
        "ops.opdb",
        ops_opdb,
        "training-step ops from torch's op_db: float32 vs float64, gradcheck, gradgradcheck, autocast dtype",
        Level.FULL,
        TORCH,
        timeout_s=180,
    ),
    # The whole training step: each class against an independent reference, options as a product.
    CheckSpec(
        "attention.reference",
        attention_reference,
        "scaled_dot_product_attention on every backend and nn.MultiheadAttention, with boolean, float, "
        "causal and padding masks, vs float64 math (quick: float32 masks; full: scale, GQA, dtypes, MHA "
        "options)",
        Level.QUICK,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "modules.train_eval",
        modules_train_eval,
        "BatchNorm/InstanceNorm running stats and dropout variants in train() and eval() vs closed forms, and "
        "options set on the live module (statistics frozen and resumed, momentum, eps, partial loads) vs a float64 "
        "layer stepped alike (full: torch's ModuleInfos whose train and eval differ, float32 vs float64; attributes "
        "set live vs a twin built with them)",
        Level.QUICK,
        TORCH,
        timeout_s=180,
    ),
    CheckSpec(
        "dropout.structure",
        dropout_structure,
        "which elements share one random draw: every dropout variant on every documented shape, SDPA, "
        "MultiheadAttention and RNN dropout, binomial tests with a stated false-failure rate (quick: the modules' "
        "documented shapes)",
        Level.QUICK,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "sched.closed_form",
        sched_closed_form,
        "every LR scheduler, alone, composed (SequentialLR, ChainedScheduler) and restored mid-run, vs its "
        "documented closed form",
        Level.FULL,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "train.state_roundtrip",
        train_state_roundtrip,
        "optimizer (every optim_db configuration), param-group and scheduler state saved mid-training and "
        "restored, float32/float64/bfloat16, CPU and each GPU model both ways (float32 GPU to GPU), equals the "
        "uninterrupted run bitwise",
        Level.FULL,
        TORCH,
        timeout_s=180,
    ),
    CheckSpec(
        "embedding.reference",
        embedding_reference,
        "F.embedding (padding_idx, max_norm/norm_type, scale_grad_by_freq, sparse) and F.embedding_bag (modes, "
        "per_sample_weights, offsets, padding_idx) vs float64 references (quick: four option sets)",
        Level.QUICK,
        TORCH,
        timeout_s=120,
    ),
    CheckSpec(
        "train.clip_options",
        train_clip_options,
        "clip_grad_norm_ across norm types (1, 2, 3.5, inf, -inf, 0), foreach, mixed dtypes, "
        "get_total_norm/clip_grads_with_norm_ and error_if_nonfinite; clip_grad_value_ with foreach; vs "
        "closed forms",
        Level.FULL,
        TORCH,
    ),
    CheckSpec(
        "swa.averaging",
        swa_averaging,
        "AveragedModel (SWA, EMA, multi_avg_fn, use_buffers) and update_bn vs hand-computed averages "
        "(full: SWALR annealing vs its closed form)",
        Level.QUICK,
        TORCH,
    ),
)

# Numerics share one worker of their own ("numerics"), which the engine runs concurrently with the
# "torch" group: its first optimizer step imports torch._dynamo (~2 s), which then overlaps with the
# CUDA, vision, container and distributed checks instead of adding to them.
CHECKS: tuple[CheckSpec, ...] = tuple(dataclasses.replace(spec, group="numerics") for spec in _SPECS)
