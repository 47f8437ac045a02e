"""Which elements share one random draw, judged by binomial tests with a stated false-failure rate.

A dropout-style op draws one Bernoulli(1 - p) "keep" per unit (an element, or a channel of one sample) and repeats it
over the unit's elements. Given the kept-mask of one call, reduced to one value per unit (`units`, one axis per
dimension that indexes a unit), three things are tested:

- sharing: every element of a unit has the unit's value (exact; no statistics);
- independence: along each axis, units a distance s apart (s = 1, 2, 4, ... up to half the axis) agree with
  probability pi = p^2 + (1 - p)^2 when their draws are independent, and always when a mask is drawn over the wrong
  dimensions or repeated. Pairs are taken disjoint (i and i + s for i mod 2s < s), so their K agreements are K
  independent Bernoulli(pi) trials; between two calls, every unit is a pair;
- the marginal: the n units' dropped count is Binomial(n, p).

Each statistic is judged by the Chernoff-Hoeffding bound in its Kullback-Leibler form, which holds for every K: for
X ~ Binomial(K, q) and x > q, P(X >= Kx) <= exp(-K·D(x || q)), and the same below q, with D(x || q) = x·ln(x/q) +
(1 - x)·ln((1 - x)/(1 - q)). A statistic fails when K·D(observed || expected) > ln(2/ALPHA), so a healthy RNG fails
it with probability at most ALPHA (each tail at most ALPHA/2), whatever the seed, the device or K. With m statistics
in a run, the union bound makes the run's false-failure rate at most m·ALPHA; the check reports m. A mask shared
along an axis agrees on all K pairs, which fails once K > ln(2/ALPHA)/ln(1/pi) (K > 40 at p = 0.3): every tested
axis has more pairs than that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Tensor = Any
ALPHA = 1e-9  # per statistic; the run's rate is at most (number of statistics) x ALPHA


def kl_bernoulli(x: float, q: float) -> float:
    """D(x || q) for Bernoulli distributions, with 0·ln 0 = 0."""

    def term(a: float, b: float) -> float:
        return 0.0 if a <= 0 else (math.inf if b <= 0 else a * math.log(a / b))

    return term(x, q) + term(1 - x, 1 - q)


@dataclass(frozen=True)
class Statistic:
    """One binomial count against its expectation under independent draws."""

    what: str
    count: int
    trials: int
    prob: float

    @property
    def score(self) -> float:
        """K·D(observed || expected): the exponent of the Chernoff tail bound."""
        return self.trials * kl_bernoulli(self.count / self.trials, self.prob) if self.trials else 0.0

    @property
    def ok(self) -> bool:
        """Within the two-sided bound at ALPHA."""
        return self.score <= math.log(2 / ALPHA)

    def describe(self) -> str:
        """One line: what was counted, observed against expected, and the bound."""
        bound = math.exp(-self.score) * 2 if self.score < 700 else 0.0
        return (
            f"{self.what}: {self.count}/{self.trials} = {self.count / max(self.trials, 1):.3f}, expected "
            f"{self.prob:.3f} (two-sided Chernoff bound {bound:.2g}; below {ALPHA:g} fails)"
        )


def shifts(size: int) -> list[int]:
    """The pair distances tested along an axis of `size` units: 1, 2, 4, ... while a disjoint pair fits."""
    out, s = [], 1
    while 2 * s <= size:
        out.append(s)
        s *= 2
    return out


def pairs_along(units: Tensor, dim: int, s: int) -> tuple[Tensor, Tensor]:
    """Disjoint pairs (i, i + s), i mod 2s < s, of `units` along `dim`: the two halves, flattened."""
    import torch

    index = torch.arange(units.shape[dim] - s, device=units.device)
    first = index[index % (2 * s) < s]
    return units.index_select(dim, first).reshape(-1), units.index_select(dim, first + s).reshape(-1)


def independence(units: Tensor, p: float, label: str, dims: list[str]) -> list[Statistic]:
    """Agreement of units along each axis at each distance, and the dropped count, for one call's kept units."""
    pi = p * p + (1 - p) * (1 - p)
    stats = []
    for dim, name in enumerate(dims):
        for s in shifts(units.shape[dim]):
            a, b = pairs_along(units, dim, s)
            stats.append(
                Statistic(f"{label}: units {s} apart along {name} agree", int((a == b).sum()), a.numel(), pi)
            )
    stats.append(Statistic(f"{label}: units dropped", int((~units).sum()), units.numel(), p))
    return stats


def between_calls(first: Tensor, second: Tensor, p: float, label: str) -> Statistic:
    """Agreement of the same units in two calls (fresh draws each call)."""
    pi = p * p + (1 - p) * (1 - p)
    return Statistic(
        f"{label}: the same units in two calls agree", int((first == second).sum()), first.numel(), pi
    )


def unit_mask(kept: Tensor, draw_dims: tuple[int, ...]) -> tuple[Tensor | None, Tensor]:
    """(None, units) when every unit's elements share its value, else (the first unit's disagreeing index, units).
    `draw_dims` index the units; the other dimensions are shared by one draw."""
    import torch

    shared = [d for d in range(kept.dim()) if d not in draw_dims]
    units = kept
    for d in shared:
        units = units.narrow(d, 0, 1)
    spread = units.expand_as(kept)
    wrong = (kept != spread).nonzero()
    for d in sorted(shared, reverse=True):
        units = units.squeeze(d)
    return (wrong[0] if len(wrong) else None), units.to(torch.bool)
