"""dropout.structure names a dropout whose mask is drawn over the wrong elements; its healthy twin (the same op and
shape on this machine's real torch) passes. Faults re-created by monkeypatching the real functional op."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from envcheck.core.check import Context, Level
from envcheck.core.result import Status
from envcheck.numerics.dropout_structure import caller, cases, dropout_structure
from envcheck.reference.devices import numerics_mode
from envcheck.reference.draw_stats import ALPHA, between_calls, independence, unit_mask


@pytest.fixture(autouse=True)
def _as_the_check_runs() -> Iterator[None]:
    """The seed and the one CPU thread the check runs with (a second thread only waits under load)."""
    with numerics_mode():
        yield


@pytest.fixture
def dropout_shared_over_batch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """F.dropout drawing one mask for the first sample and reusing it for every other (a mask broadcast over the
    batch): each element alone is still zero or x/(1 - p), and the dropped fraction is p."""
    original = F.dropout

    @functools.wraps(original)
    def dropout(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        if not training or x.dim() < 2:
            return original(x, p, training, inplace)
        keep = (torch.rand(x.shape[1:], device=x.device) >= p).expand_as(x)
        return x * keep / (1 - p)

    monkeypatch.setattr(F, "dropout", dropout)
    yield


def test_healthy_dropout_structure_passes_at_quick() -> None:
    result = dropout_structure(Context(level=Level.QUICK, allow_cpu=True))
    assert result.status is Status.PASS, result.details
    assert result.measured["false_failure_bound"] == result.measured["statistics"] * ALPHA


def test_mask_shared_over_the_batch_is_caught(dropout_shared_over_batch: None) -> None:
    result = dropout_structure(Context(level=Level.QUICK, allow_cpu=True))
    assert result.status is Status.FAIL
    assert "nn.Dropout (N, C, H, W) p=0.3 on cpu: units 1 apart along N agree" in result.summary
    assert "1.000" in result.summary


def test_every_tested_axis_would_fail_if_its_mask_were_shared() -> None:
    """Power, per case of the full level: replacing the kept units by ones constant along any tested axis fails a
    statistic naming that axis, and two identical calls fail the between-calls statistic."""
    for case in cases(quick=False):
        if case.op.startswith("sdpa[") and case.op != "sdpa[MATH]":
            continue  # GPU-only backends: their shapes are the MATH case's
        mask = caller(case, 0.3, "cpu")()
        assert mask is not None, case.label
        _, units = unit_mask(mask, case.draw_dims)
        names = [case.names[d] for d in case.draw_dims]
        for dim, name in enumerate(names):
            if units.shape[dim] < 2:
                continue
            shared = units.narrow(dim, 0, 1).expand_as(units).contiguous()
            failed = [s.what for s in independence(shared, 0.3, case.label, names) if not s.ok]
            assert any(f"along {name} agree" in what for what in failed), (case.label, name)
        assert not between_calls(units, units, 0.3, case.label).ok, case.label


def test_a_channel_partly_dropped_is_named() -> None:
    kept = torch.ones(4, 3, 5, dtype=torch.bool)
    kept[1, 2, 3] = False
    wrong, units = unit_mask(kept, (0, 1))
    assert wrong is not None and wrong.tolist() == [1, 2, 3]  # the element that left its unit's draw
    assert units.shape == (4, 3)
