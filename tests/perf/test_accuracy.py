"""Accuracy of the instrument, without wall-clock noise: a scripted clock drives `measure`.

Each call of the timed function advances a fake `perf_counter` by a known amount, so the
figure envcheck reports must be exactly 2n³ / that amount. The test fails if the flop count is
wrong, if warm-up or the probe leaks into the samples, or if `before` (an L2 flush, say) is
counted inside the timed region. How close the figure comes to a bare hand-written loop on real
hardware is a measurement, not a test: `python bench/instrument_accuracy.py` prints it.
"""

from __future__ import annotations

import pytest

from envcheck.perf import unit_timing as timing
from envcheck.perf.matmul import matmul_rate


class ScriptedClock:
    """A perf_counter that moves only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ScriptedClock:
    fake = ScriptedClock()
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_measure_reports_the_timed_region_only(clock: ScriptedClock) -> None:
    durations = iter([9.0, 9.0, 0.5] + [0.01 * (i + 1) for i in range(5)])  # warm-up ×2, probe, 5 reps

    def fn() -> None:
        clock.advance(next(durations))

    def flush() -> None:
        clock.advance(100.0)  # outside the timed region: must not show up

    t = timing.measure(fn, warmup=2, min_reps=5, max_reps=5, budget_s=0.0, before=flush)
    assert t.reps == 5
    assert t.median_s == pytest.approx(0.03)
    assert (t.min_s, t.max_s) == (pytest.approx(0.01), pytest.approx(0.05))


def test_matmul_rate_counts_two_n_cubed_flops(clock: ScriptedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    n, per_call = 64, 0.002
    real = torch.matmul

    def matmul(*args: object, **kwargs: object) -> object:
        clock.advance(per_call)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "matmul", matmul)
    rate, t = matmul_rate(n, "float32", "cpu", budget_s=0.02, min_reps=3, max_reps=40)
    assert t.reps == 10  # budget / probe
    assert t.median_s == pytest.approx(per_call)
    assert rate == pytest.approx(2 * n**3 / per_call)
