"""AMP checks fail, naming the finding, when autocast, the GradScaler or the clipping order is wrong."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import pytest
import torch

from envcheck.core.check import CheckSpec
from envcheck.core.result import Result, Status
from envcheck.numerics.amp_training import convergence_problems
from envcheck.numerics.autocast_dtypes import amp_autocast_dtypes
from envcheck.numerics.grad_scaler import amp_grad_scaler
from envcheck.numerics.scaled_clipping import MAX_NORM, amp_clip_after_unscale
from tests.helpers import run_spec


def _run(func: Any, **kw: Any) -> Result:
    return run_spec(CheckSpec("amp.probe", functools.partial(func, **kw), "probe"))


def test_autocast_stand_in_that_does_nothing_is_caught() -> None:
    result = _run(amp_autocast_dtypes, autocast=lambda kind, dtype: contextlib.nullcontext())
    assert result.status is Status.FAIL
    assert "matmul on cpu under autocast(bfloat16) gave float32, expected bfloat16" in result.summary
    assert "cross_entropy on cpu under autocast(bfloat16) gave bfloat16, expected float32" in result.details


class NeverSkipScaler(torch.amp.GradScaler):
    """A GradScaler stand-in whose step() always applies the update, even on inf/NaN gradients."""

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        self.unscale_(optimizer)
        return optimizer.step()


class NoBackoffScaler(torch.amp.GradScaler):
    """Skips bad steps correctly but never changes its scale."""

    def update(self, new_scale: Any = None) -> None:
        self._per_optimizer_states.clear()


def test_scaler_that_never_skips_is_caught() -> None:
    result = _run(amp_grad_scaler, make_scaler=NeverSkipScaler)
    assert result.status is Status.FAIL
    assert "step() updated parameters after an injected inf gradient on cpu" in result.summary
    assert "injected nan gradient" in result.details


def test_scaler_that_never_backs_off_or_grows_is_caught() -> None:
    result = _run(amp_grad_scaler, make_scaler=NoBackoffScaler)
    assert result.status is Status.FAIL
    assert (
        "update() after an inf step moved the scale 1024 -> 1024 on cpu, expected x0.5 = 512"
        in result.summary
    )
    assert "growth x2 after growth_interval" in result.details


def test_clipping_before_unscaling_is_caught() -> None:
    def clip_then_unscale(scaler: Any, optimizer: Any, params: Any) -> Any:
        return torch.nn.utils.clip_grad_norm_(params, MAX_NORM)  # scaler.step() unscales afterwards: too late

    result = _run(amp_clip_after_unscale, clip_step=clip_then_unscale)
    assert result.status is Status.FAIL
    assert result.summary.startswith(
        "clip after unscale_: total grad norm (scaled run vs fp32) on cpu float32"
    )
    assert "params after clipped step on cpu bfloat16" in result.details
    assert _run(amp_clip_after_unscale).status is Status.PASS


class ForgetsToUnscale:
    """A GradScaler stand-in that scales the loss by 2**16 but steps on the still-scaled gradients."""

    def __init__(self, device_type: str, **kwargs: Any) -> None:
        self.factor = 2.0**16

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.factor

    def step(self, optimizer: Any) -> None:
        optimizer.step()

    def update(self) -> None:
        pass


def test_amp_training_that_diverges_is_caught() -> None:
    measured, problems = convergence_problems("cpu", "bfloat16", True, ForgetsToUnscale, steps=15)
    assert problems and "AMP bfloat16 on cpu" in problems[0]
    assert measured["non_finite_steps"] > 0 or measured["abs_gap"] > measured["allowed_gap"]
    healthy, none = convergence_problems("cpu", "bfloat16", True, steps=15)
    assert none == [] and healthy["non_finite_steps"] == 0


@pytest.mark.parametrize(
    "capability, has_flag, bf16",
    [((7, 0), True, False), ((7, 5), False, False), ((8, 0), True, True), ((9, 0), False, True)],
)
def test_bf16_targets_only_gpus_with_native_bf16(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], has_flag: bool, bf16: bool
) -> None:
    """No GPU: one mocked cuda:0 whose torch.cuda.is_bf16_supported() says True through emulation (V100/T4 on
    recent torch) unless asked with including_emulation=False; older torch without that flag: capability."""
    from envcheck.numerics import amp_training, autocast_dtypes

    def with_flag(including_emulation: bool = True) -> bool:
        return including_emulation or capability >= (8, 0)

    def without_flag() -> bool:
        return True

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", with_flag if has_flag else without_flag)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: capability)
    monkeypatch.setattr(torch.cuda, "device", lambda i: contextlib.nullcontext())
    for module in (autocast_dtypes, amp_training):
        monkeypatch.setattr(module, "cuda_devices", lambda: ["cuda:0"])
    assert (("cuda:0", "bfloat16") in autocast_dtypes.autocast_targets()) is bf16
    assert (("cuda:0", "bfloat16", False) in amp_training.convergence_targets()) is bf16
