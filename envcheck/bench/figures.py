"""One measured figure, as plain JSON: what every bench unit returns in `measured["figures"]`.

A figure has a unique `key` (what `--baseline` compares), a value with a unit and a direction
(`better`), optionally a peak and % of peak, the timing spread, a point of a sweep (`series`, `x`)
for the plots, and a seed `claim` it confirms or refutes.
"""

from __future__ import annotations

from typing import Any

from envcheck.bench.peaks import pct_of_peak
from envcheck.bench.timing import Timing


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


def claim(source: str, text: str, low: float | None, high: float | None, value: float) -> dict[str, Any]:
    """A seed's claim (`low` <= value <= `high`, either bound optional) and whether it held here."""
    holds = (low is None or value >= low) and (high is None or value <= high)
    return {"source": source, "text": text, "low": low, "high": high, "holds": holds}
