"""Training-mechanics checks fail, naming the finding, when clipping, accumulation, checkpointing or resume is wrong."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from envcheck.core.check import CheckSpec
from envcheck.core.result import Result, Status
from envcheck.numerics.checkpointing import train_checkpointing
from envcheck.numerics.clipping import train_clip_grad_norm, train_clip_grad_value
from envcheck.numerics.grad_accumulation import train_grad_accumulation
from envcheck.numerics.resume import load_model_only, train_resume
from tests.helpers import run_spec


def _run(func: Any, **kw: Any) -> Result:
    return run_spec(CheckSpec("train.probe", functools.partial(func, **kw), "probe"))


def test_clip_norm_counting_a_tied_weight_twice_is_caught() -> None:
    """The real bug: list(encoder.parameters()) + list(decoder.parameters()) with a shared embedding."""
    result = _run(train_clip_grad_norm, clip=lambda ps, m: torch.nn.utils.clip_grad_norm_([*ps, ps[0]], m))
    assert result.status is Status.FAIL
    assert "returned pre-clip norm (above max_norm, tied weight once) on cpu float32" in result.summary


def test_per_tensor_clipping_changes_direction_and_is_caught() -> None:
    def per_tensor(params: list[Any], max_norm: float) -> Any:
        return max(torch.nn.utils.clip_grad_norm_([p], max_norm) for p in params)

    result = _run(train_clip_grad_norm, clip=per_tensor)
    assert result.status is Status.FAIL and "clipped grads keep their direction on cpu" in result.details


def test_clip_norm_that_always_rescales_touches_small_grads_and_is_caught() -> None:
    def always(params: list[Any], max_norm: float) -> Any:
        norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        for p in params:
            p.grad.mul_(max_norm / norm)
        return norm

    result = _run(train_clip_grad_norm, clip=always)
    assert result.status is Status.FAIL and "grads below max_norm untouched on cpu" in result.summary


def test_clip_value_that_only_bounds_one_side_is_caught() -> None:
    def upper_only(params: list[Any], value: float) -> None:
        for p in params:
            p.grad.clamp_(max=value)

    result = _run(train_clip_grad_value, clip=upper_only)
    assert (
        result.status is Status.FAIL and "clip_grad_value_(1) on cpu float32: worst element" in result.summary
    )


def test_accumulation_without_dividing_by_k_is_caught() -> None:
    result = _run(train_grad_accumulation, micro_loss=lambda loss, k: loss)
    assert result.status is Status.FAIL
    assert "weight.grad after 4 micro-batches on cpu float32" in result.summary


def test_checkpoint_that_does_not_replay_dropout_rng_is_caught() -> None:
    result = _run(
        train_checkpointing,
        wrap=lambda block, x: checkpoint(block, x, use_reentrant=False, preserve_rng_state=False),
    )
    assert result.status is Status.FAIL and "checkpointed input.grad on cpu float32" in result.summary


def test_resume_that_drops_optimizer_state_is_caught() -> None:
    result = _run(train_resume, resume=load_model_only)
    assert result.status is Status.FAIL
    assert "params after resumed step (sgd_momentum) on cpu float32" in result.summary
    assert "(adam)" in result.details
    assert result.measured["dropped_optimizer_state_diff@cpu/sgd_momentum"] > 1e-4
