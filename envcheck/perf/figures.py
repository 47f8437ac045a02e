"""One measured figure, as plain JSON: what every bench unit returns in `measured["figures"]`.

A figure has a unique `key` (what `--baseline` compares), a value with a unit and a direction
(`better`), optionally a peak and % of peak, the timing spread, a point of a sweep (`series`, `x`)
for the plots, and a seed `claim` it confirms or refutes.
"""

from __future__ import annotations

from typing import Any

from envcheck.perf.peaks import pct_of_peak
from envcheck.perf.unit_timing import Timing


def figure(
    key: str,
    value: float,
    unit: str,
    *,
    better: str = "higher",
    label: str | None = None,
    peak: float | None = None,
    timing: Timing | None = None,
    series: str | None = None,
    x: float | None = None,
    claim: dict[str, Any] | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """Build one figure dict (see the module docstring)."""
    if better not in ("higher", "lower", "none"):
        raise ValueError(f"better must be higher, lower or none, not {better!r}")
    return {
        "key": key,
        "label": label or key,
        "value": round(float(value), 4),
        "unit": unit,
        "better": better,
        "peak": peak,
        "pct_of_peak": pct_of_peak(value, peak),
        "timing": timing.to_dict() if timing is not None else None,
        "series": series,
        "x": x,
        "claim": claim,
        "note": note,
    }


VERDICTS = ("holds", "exceeds", "fails", "not comparable")


def claim(
    source: str,
    text: str,
    low: float | None,
    high: float | None,
    value: float,
    *,
    better: str = "higher",
    not_comparable: str | None = None,
) -> dict[str, Any]:
    """A seed's claim (`low` <= value <= `high`, either bound optional) and what this measurement says of it.

    `verdict` is one of VERDICTS: `holds` (inside the range); `exceeds` (outside it on the good side,
    e.g. a speed-up above the claimed range: faster than claimed, never a fault of the environment);
    `fails` (outside it on the bad side, or outside a range with no direction); `not comparable`
    (the measured workload is not the claim's; `why` says how). `holds` is True for holds/exceeds
    (the environment does at least as well as claimed), False for fails, None when not comparable.
    """
    if better not in ("higher", "lower", "none"):
        raise ValueError(f"better must be higher, lower or none, not {better!r}")
    why = None
    if not_comparable:
        verdict, why = "not comparable", not_comparable
    elif (low is None or value >= low) and (high is None or value <= high):
        verdict = "holds"
    elif (better == "higher" and high is not None and value > high) or (
        better == "lower" and low is not None and value < low
    ):
        verdict = "exceeds"
    else:
        verdict = "fails"
    holds = None if verdict == "not comparable" else verdict in ("holds", "exceeds")
    return {
        "source": source,
        "text": text,
        "low": low,
        "high": high,
        "holds": holds,
        "verdict": verdict,
        "why": why,
    }


def direction_claim(source: str, text: str, holds: bool) -> dict[str, Any]:
    """A claim about a direction only (no bounds), e.g. "cuts memory at a time cost"."""
    return {
        "source": source,
        "text": text,
        "low": None,
        "high": None,
        "holds": holds,
        "verdict": "holds" if holds else "fails",
        "why": None,
    }
