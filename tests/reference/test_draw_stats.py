"""The binomial rule of dropout.structure keeps its stated false-failure rate: checked against exact binomial tails,
not against the bound it is derived from."""

from __future__ import annotations

import math

import pytest

from envcheck.reference.draw_stats import ALPHA, Statistic, shifts


def _log_pmf(k: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def _tail(counts: range, n: int, p: float) -> float:
    logs = [_log_pmf(k, n, p) for k in counts]
    top = max(logs, default=-math.inf)
    return 0.0 if top == -math.inf else math.exp(top) * sum(math.exp(v - top) for v in logs)


@pytest.mark.parametrize(
    ("trials", "prob"), [(40, 0.58), (256, 0.58), (2048, 0.58), (1024, 0.5), (4096, 0.3)]
)
def test_each_rejected_tail_has_exact_probability_below_half_alpha(trials: int, prob: float) -> None:
    """Under independent draws the counts a statistic rejects have exact binomial probability <= ALPHA/2 per side,
    so the per-statistic false-failure rate is at most ALPHA whatever the seed."""
    rejected = [k for k in range(trials + 1) if not Statistic("s", k, trials, prob).ok]
    high = [k for k in rejected if k > trials * prob]
    low = [k for k in rejected if k < trials * prob]
    assert _tail(range(min(high, default=trials + 1), trials + 1), trials, prob) <= ALPHA / 2
    assert _tail(range(0, max(low, default=-1) + 1), trials, prob) <= ALPHA / 2
    assert Statistic("s", round(trials * prob), trials, prob).ok  # the expected count passes


def test_a_fully_shared_axis_fails_from_the_documented_pair_count() -> None:
    """All K pairs agreeing fails once K > ln(2/ALPHA)/ln(1/pi): 40 pairs at p = 0.3 (pi = 0.58)."""
    pi = 0.3**2 + 0.7**2
    need = math.ceil(math.log(2 / ALPHA) / math.log(1 / pi))
    assert need <= 40
    assert not Statistic("s", need, need, pi).ok
    assert Statistic("s", need - 2, need - 2, pi).ok


def test_pair_distances_are_powers_of_two_that_fit() -> None:
    assert shifts(16) == [1, 2, 4, 8]
    assert shifts(3) == [1]
    assert shifts(1) == []
