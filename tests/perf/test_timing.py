"""The timing summary: median and spread are computed right, repetitions respect the bounds."""

from __future__ import annotations

import pytest

from envcheck.perf.unit_timing import measure, summarize


def test_summary_median_and_iqr() -> None:
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.median_s, t.min_s, t.max_s, t.reps) == (3.0, 1.0, 5.0, 5)
    assert t.iqr_s == pytest.approx(3.0)  # exclusive quartiles 1.5 and 4.5


def test_measure_counts_warmup_apart_and_bounds_reps() -> None:
    calls = []
    t = measure(lambda: calls.append(1), warmup=3, min_reps=4, max_reps=7, budget_s=10.0)
    assert t.reps == 7
    assert len(calls) == 3 + 1 + 7  # warm-up, probe, timed


def test_empty_samples_rejected() -> None:
    with pytest.raises(ValueError):
        summarize([])
