"""Options set on a live module (modules.train_eval): faults where a module keeps the value it was built with are
named; the healthy twins (the same sequences on this machine's real torch) pass. Faults re-created by
monkeypatching the real torch modules."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from envcheck.numerics.live_norms import live_norm_comparisons
from envcheck.numerics.live_twins import twin_comparisons
from envcheck.reference.devices import numerics_mode


@pytest.fixture(autouse=True)
def _as_the_check_runs() -> Iterator[None]:
    """The seed and the one CPU thread the check runs with (a second thread only waits under load)."""
    with numerics_mode():
        yield


def test_healthy_live_norm_sequences_pass_and_instance_buffers_are_named() -> None:
    comps, not_judged, problems = live_norm_comparisons("cpu", quick=False)
    assert not problems
    assert all(c.ok for c in comps), [c.describe() for c in comps if not c.ok]
    # InstanceNorm keeps moving its buffers with the flag turned off (torch 2.13): named, not judged
    assert any(line.startswith("InstanceNorm1d(affine=True) [freeze statistics]") for line in not_judged)


def test_healthy_live_attributes_equal_their_twins() -> None:
    comps, problems = twin_comparisons("cpu")
    assert not problems
    assert comps and all(c.ok for c in comps), [c.describe() for c in comps if not c.ok]


def test_batchnorm_keeping_its_built_eps_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.nn.modules.batchnorm import _BatchNorm

    built = _BatchNorm.__init__
    forward = _BatchNorm.forward

    def init(self: Any, *a: Any, **kw: Any) -> None:
        built(self, *a, **kw)
        object.__setattr__(self, "_eps_at_build", self.eps)

    def stale_eps(self: Any, x: Any) -> Any:
        live, self.eps = self.eps, self._eps_at_build
        try:
            return forward(self, x)
        finally:
            self.eps = live

    monkeypatch.setattr(_BatchNorm, "__init__", init)
    monkeypatch.setattr(_BatchNorm, "forward", stale_eps)
    comps, _, _ = live_norm_comparisons("cpu", quick=False)
    bad = [c.op for c in comps if not c.ok]
    assert any("[eps changed] step 2 train output" in op for op in bad), bad


def test_dropout_keeping_its_built_p_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    built = torch.nn.Dropout.__init__

    def init(self: Any, p: float = 0.5, inplace: bool = False) -> None:
        built(self, p, inplace)
        object.__setattr__(self, "_p_at_build", p)

    monkeypatch.setattr(torch.nn.Dropout, "__init__", init)
    monkeypatch.setattr(
        torch.nn.Dropout, "forward", lambda self, x: F.dropout(x, self._p_at_build, self.training)
    )
    comps, _ = twin_comparisons("cpu")
    bad = [c.op for c in comps if not c.ok]
    assert "Dropout.p = 0.6 on a module built with 0.2: train output equals the twin's" in bad, bad
    assert not any(op.startswith("Dropout2d") for op in bad)  # only the faulty module is named


def test_a_step_torch_refuses_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A documented step that raises (here: eval after tracking is turned on for a module built without it, which
    torch 1.5's forward refused with "running_mean must be defined") stops its sequence and is named."""
    from torch.nn.modules.batchnorm import _BatchNorm

    forward = _BatchNorm.forward

    @functools.wraps(forward)
    def refusing(self: Any, x: Any) -> Any:
        if not self.training and self.track_running_stats and self.running_mean is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        return forward(self, x)

    monkeypatch.setattr(_BatchNorm, "forward", refusing)
    _, _, problems = live_norm_comparisons("cpu", quick=False)
    assert any(
        "[tracking turned on, built without]" in p and "running_mean must be defined" in p for p in problems
    )
