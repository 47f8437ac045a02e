"""The timing method: warm-up, then N timed repetitions; report the median and the spread.

On a GPU every repetition is bracketed by CUDA events (device time, not launch time) and an
optional `before` (e.g. an L2 flush) runs outside the timed region. On a CPU we use
`time.perf_counter`. The repetition count adapts to a time budget within [min_reps, max_reps].
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Summary of the per-repetition times, in seconds."""

    median_s: float
    min_s: float
    max_s: float
    iqr_s: float
    reps: int

    @property
    def spread_pct(self) -> float:
        """Interquartile range as a percentage of the median."""
        return 100.0 * self.iqr_s / self.median_s if self.median_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the relative spread."""
        return {**asdict(self), "spread_pct": round(self.spread_pct, 2)}


def summarize(samples: list[float]) -> Timing:
    """Median, extremes and interquartile range of `samples`."""
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    if len(ordered) >= 4:
        q = statistics.quantiles(ordered, n=4)
        iqr = q[2] - q[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return Timing(statistics.median(ordered), ordered[0], ordered[-1], iqr, len(ordered))


def _cpu_once(fn: Callable[[], object], before: Callable[[], object] | None) -> float:
    if before is not None:
        before()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cuda_samples(fn: Callable[[], object], reps: int, before: Callable[[], object] | None) -> list[float]:
    import torch

    pairs = []
    for _ in range(reps):
        if before is not None:
            before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1000.0 for s, e in pairs]


def measure(
    fn: Callable[[], object],
    *,
    cuda: bool = False,
    warmup: int = 2,
    min_reps: int = 5,
    max_reps: int = 50,
    budget_s: float = 1.0,
    before: Callable[[], object] | None = None,
) -> Timing:
    """Time `fn` after `warmup` calls; repetitions fill `budget_s` within [min_reps, max_reps]."""
    for _ in range(max(1, warmup)):
        if before is not None:
            before()
        fn()
    if cuda:
        import torch

        torch.cuda.synchronize()
        probe = _cuda_samples(fn, 1, before)[0]
    else:
        probe = _cpu_once(fn, before)
    reps = int(min(max_reps, max(min_reps, budget_s / max(probe, 1e-9))))
    if cuda:
        return summarize(_cuda_samples(fn, reps, before))
    return summarize([_cpu_once(fn, before) for _ in range(reps)])


def interleaved(
    fns: Mapping[str, Callable[[], object]], *, cuda: bool = False, rounds: int = 5, **kw: Any
) -> dict[str, Timing]:
    """Time several variants in alternating rounds (so drift hits all alike); medians of round medians."""
    per: dict[str, list[float]] = {k: [] for k in fns}
    reps: dict[str, int] = {k: 0 for k in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            t = measure(fn, cuda=cuda, **kw)
            per[key].append(t.median_s)
            reps[key] += t.reps
    out = {}
    for key, medians in per.items():
        s = summarize(medians)
        out[key] = Timing(s.median_s, s.min_s, s.max_s, s.iqr_s, reps[key])
    return out
