"""The fault corpus: historical PyTorch silent-correctness mechanisms, each with its source, its injector, the
ground-truth training script that shows its harm, and the check expected to catch it at the full level."""

from __future__ import annotations

import functools

import torch

from tests.numerics.corpus import injectors as inj
from tests.numerics.corpus import scripts as s
from tests.numerics.corpus.model import PT, Mechanism, _m
from tests.numerics.corpus.option_mechanisms import OPTION_CORPUS
from tests.numerics.corpus.state_mechanisms import STATE_CORPUS
from tests.numerics.corpus.step_mechanisms import STEP_CORPUS

P = functools.partial
OPT, LOSS, LOWP, AMP = "optim.differential", "losses.reference", "lowp.reductions", "amp.dynamics"
B = (0.9, 0.9)

CORPUS: tuple[Mechanism, ...] = (
    # optimizers: foreach/fused kernels diverging from the single-tensor algorithm
    _m(
        "Adam foreach amsgrad: max_exp_avg_sq never persisted",
        f"{PT}/issues/78807",
        P(inj.kernel_state_lost, "adam", "_multi_tensor_adam", "max_exp_avg_sqs", 4),
        P(s.train_optimizer, "Adam", lr=0.05, amsgrad=True, betas=B),
        OPT,
    ),
    _m(
        "Adam foreach ignores maximize",
        f"{PT}/pull/68164",
        P(inj.kernel_kwarg, "adam", "_multi_tensor_adam", maximize=False),
        P(s.train_optimizer, "Adam", lr=0.05, maximize=True),
        OPT,
    ),
    _m(
        "Adam single-tensor ignores amsgrad",
        f"{PT}/issues/78807",
        P(inj.kernel_kwarg, "adam", "_single_tensor_adam", amsgrad=False),
        P(s.train_optimizer, "Adam", foreach=False, lr=0.05, amsgrad=True, betas=B),
        OPT,
    ),
    _m(
        "AdamW foreach couples weight decay into the gradient (Adam+L2)",
        f"{PT}/pull/43562",
        P(inj.kernel_kwarg, "adam", "_multi_tensor_adam", decoupled_weight_decay=False),
        P(s.train_optimizer, "AdamW", lr=0.05, weight_decay=0.5),
        OPT,
    ),
    _m(
        "Adam foreach drops coupled weight_decay",
        f"{PT}/pull/43507",
        P(inj.kernel_kwarg, "adam", "_multi_tensor_adam", weight_decay=0.0),
        P(s.train_optimizer, "Adam", lr=0.05, weight_decay=0.5),
        OPT,
    ),
    _m(
        "SGD foreach ignores nesterov",
        f"{PT}/pull/43724",
        P(inj.kernel_kwarg, "sgd", "_multi_tensor_sgd", nesterov=False),
        P(s.train_optimizer, "SGD", lr=0.05, momentum=0.9, nesterov=True),
        OPT,
    ),
    _m(
        "SGD foreach ignores maximize",
        f"{PT}/issues/68052",
        P(inj.kernel_kwarg, "sgd", "_multi_tensor_sgd", maximize=False),
        P(s.train_optimizer, "SGD", lr=0.05, momentum=0.9, maximize=True),
        OPT,
    ),
    _m(
        "SGD foreach ignores dampening",
        f"{PT}/pull/43724",
        P(inj.kernel_kwarg, "sgd", "_multi_tensor_sgd", dampening=0.0),
        P(s.train_optimizer, "SGD", lr=0.05, momentum=0.9, dampening=0.5),
        OPT,
    ),
    _m(
        "Adagrad foreach ignores lr_decay",
        f"{PT}/pull/92716",
        P(inj.kernel_kwarg, "adagrad", "_multi_tensor_adagrad", lr_decay=0.0),
        P(s.train_optimizer, "Adagrad", lr=0.1, lr_decay=0.5),
        OPT,
    ),
    _m(
        "RMSprop foreach ignores centered",
        f"{PT}/pull/43725",
        P(inj.kernel_kwarg, "rmsprop", "_multi_tensor_rmsprop", centered=False),
        P(s.train_optimizer, "RMSprop", lr=0.01, centered=True),
        OPT,
    ),
    _m(
        "Rprop foreach ignores maximize",
        f"{PT}/pull/43726",
        P(inj.kernel_kwarg, "rprop", "_multi_tensor_rprop", maximize=False),
        P(s.train_optimizer, "Rprop", lr=0.01, maximize=True),
        OPT,
    ),
    _m(
        "Adamax foreach drops weight_decay",
        f"{PT}/pull/69982",
        P(inj.kernel_kwarg, "adamax", "_multi_tensor_adamax", weight_decay=0.0),
        P(s.train_optimizer, "Adamax", lr=0.05, weight_decay=0.5),
        OPT,
    ),
    _m(
        "Adadelta foreach ignores maximize",
        f"{PT}/pull/75330",
        P(inj.kernel_kwarg, "adadelta", "_multi_tensor_adadelta", maximize=False),
        P(s.train_optimizer, "Adadelta", lr=1.0, maximize=True),
        OPT,
    ),
    _m(
        "RAdam foreach leaves eps out of the rectified step",
        f"{PT}/pull/92551",
        P(inj.kernel_kwarg, "radam", "_multi_tensor_radam", eps=0.0),
        P(s.train_optimizer, "RAdam", lr=0.05, betas=B, eps=1e-1),
        OPT,
    ),
    _m(
        "NAdam single-tensor mu_product carries an extra mu factor",
        f"{PT}/pull/92699",
        inj.nadam_extra_mu,
        P(s.train_optimizer, "NAdam", foreach=False, lr=0.05),
        OPT,
    ),
    _m(
        "NAdam foreach ignores decoupled_weight_decay",
        f"{PT}/pull/70229",
        P(inj.kernel_kwarg, "nadam", "_multi_tensor_nadam", decoupled_weight_decay=False),
        P(s.train_optimizer, "NAdam", lr=0.05, weight_decay=0.5, decoupled_weight_decay=True),
        OPT,
    ),
    # AMP
    _m(
        "autocast cast cache reuses a weight cast made under no_grad",
        f"{PT}/pull/113685",
        inj.autocast_cache_ignores_grad_mode,
        s.train_autocast_eval_then_train,
        AMP,
    ),
    _m(
        "GradScaler growth tracker not reset on backoff",
        f"{PT}/pull/33366",
        P(inj.amp_update_scale, "tracker_not_reset"),
        s.train_amp,
        AMP,
    ),
    _m(
        "GradScaler grows after growth_factor steps instead of growth_interval",
        f"{PT}/issues/42226",
        P(inj.amp_update_scale, "growth_factor_as_interval"),
        s.train_amp,
        AMP,
    ),
    _m(
        "GradScaler scale grows past float32's range to inf",
        f"{PT}/pull/26512",
        P(inj.amp_update_scale, "unbounded"),
        P(s.train_amp, inf_every=10**6, init_scale=2.0**120),
        AMP,
    ),
    _m(
        "GradScaler never reports inf/NaN (found_inf dropped)",
        f"{PT}/pull/26512",
        inj.found_inf_ignored,
        s.train_amp,
        AMP,
    ),
    _m(
        "GradScaler.step unscales again after unscale_ (clip then double unscale)",
        f"{PT}/pull/26512",
        inj.scaler_unscales_twice,
        s.train_amp,
        AMP,
    ),
    # losses
    _m(
        "cross_entropy label smoothing counts ignored samples",
        f"{PT}/issues/73205",
        P(inj.cross_entropy_fault, "smoothing_counts_ignored"),
        P(s.train_classifier, label_smoothing=0.2),
        LOSS,
    ),
    _m(
        "cross_entropy label smoothing term not class-weighted",
        f"{PT}/issues/69339",
        P(inj.cross_entropy_fault, "smoothing_unweighted"),
        P(s.train_classifier, label_smoothing=0.3, weight=torch.tensor([1.0, 5.0, 1.0, 0.2, 2.0])),
        LOSS,
    ),
    _m(
        "cross_entropy weighted mean divided by N, not the weight sum",
        f"{PT}/issues/40560",
        P(inj.cross_entropy_fault, "weighted_mean_over_n"),
        P(s.train_classifier, weight=torch.tensor([1.0, 5.0, 1.0, 0.2, 2.0])),
        LOSS,
    ),
    _m(
        "cross_entropy without the max shift overflows at large logits",
        f"{PT}/issues/11752",
        P(inj.cross_entropy_fault, "unshifted"),
        P(s.train_classifier, big_logits=True),
        LOSS,
    ),
    _m(
        "nll_loss mean counts ignored targets in the denominator",
        f"{PT}/issues/8062",
        inj.nll_ignored_in_denominator,
        P(s.train_classifier, "nll_loss"),
        LOSS,
    ),
    _m(
        "BCE-with-logits pos_weight scales the negative term too",
        f"{PT}/pull/6856",
        inj.bce_pos_weight_on_negatives,
        P(s.train_classifier, "bce", pos_weight=torch.full((5,), 4.0)),
        LOSS,
    ),
    # low precision
    _m(
        "bfloat16 sum accumulated in bfloat16",
        f"{PT}/pull/61081",
        P(inj.low_precision_accumulation, "sum"),
        P(s.train_low_precision, "sum"),
        LOWP,
    ),
    _m(
        "float16 mean accumulated in float16 (overflows)",
        f"{PT}/pull/97351",
        P(inj.low_precision_accumulation, "mean"),
        P(s.train_low_precision, "mean"),
        LOWP,
    ),
    _m(
        "half/bfloat16 softmax without max shift, low-precision sum",
        f"{PT}/pull/103315",
        P(inj.low_precision_accumulation, "softmax"),
        P(s.train_low_precision, "softmax"),
        LOWP,
    ),
    _m(
        "log_softmax wrong at large inputs",
        f"{PT}/issues/38839",
        P(inj.low_precision_accumulation, "log_softmax"),
        P(s.train_low_precision, "log_softmax"),
        LOWP,
    ),
    # autograd
    _m(
        "silu double backward silently zero",
        f"{PT}/issues/195682",
        P(inj.activation_without_double_backward, "silu"),
        P(s.train_gradient_penalty, "silu"),
        "autograd.activations",
    ),
    _m(
        "gelu double backward silently zero",
        f"{PT}/pull/21237",
        P(inj.activation_without_double_backward, "gelu"),
        P(s.train_gradient_penalty, "gelu"),
        "autograd.activations",
    ),
    _m(
        "in-place _foreach_ ops do not bump the version counter",
        f"{PT}/issues/53796",
        P(inj.foreach_without_version_bump, "_foreach_mul_"),
        P(s.train_with_inplace, "foreach"),
        "autograd.inplace_detection",
    ),
    _m(
        "embedding max_norm renorm does not bump the version counter",
        f"{PT}/issues/14571",
        inj.embedding_renorm_without_version_bump,
        P(s.train_with_inplace, "embedding"),
        "autograd.inplace_detection",
    ),
    _m(
        "checkpoint recomputation draws fresh dropout masks",
        f"{PT}/pull/14253",
        inj.checkpoint_without_rng,
        s.train_checkpointed_dropout,
        "train.checkpointing",
    ),
)


# the training-step classes, module state, and the option classes (live state, draw structure, interacting options)
CORPUS = CORPUS + STEP_CORPUS + STATE_CORPUS + OPTION_CORPUS

__all__ = ["CORPUS", "PT", "Mechanism"]
