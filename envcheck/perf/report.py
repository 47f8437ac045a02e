"""The bench report: one JSON document (validated by bench_schema.json) and a rich table."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from envcheck.collectives.sweep import BUSBW_LOW
from envcheck.core.result import Result, Status
from envcheck.perf.relative import CODES as RELATIVE_CODES

BENCH_SCHEMA_VERSION = 1


def build_document(device: dict[str, Any], results: list[Result], quick: bool) -> dict[str, Any]:
    """The JSON document: device, every unit's result, and all figures flattened with their unit."""
    from envcheck import __version__

    figures = [{**fig, "unit_name": r.name} for r in results for fig in r.measured.get("figures", [])]
    return {
        "schema_version": BENCH_SCHEMA_VERSION,
        "kind": "envcheck-bench",
        "envcheck_version": __version__,
        "quick": quick,
        "device": device,
        "units": [r.to_dict() for r in results],
        "figures": figures,
        "skipped": [
            {"name": r.name, "reason": r.reason or r.summary}
            for r in results
            if r.status in (Status.SKIP, Status.ERROR)
        ],
        "regressions": [],
        "exit_code": 0,
    }


def schema() -> dict[str, Any]:
    """The JSON schema of the bench document."""
    text = resources.files("envcheck.perf").joinpath("bench_schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _bounds(claim: dict[str, Any]) -> str:
    low, high = claim.get("low"), claim.get("high")
    if low is not None and high is not None:
        return f"{low:g}-{high:g}"
    if high is not None:
        return f"<= {high:g}"
    return f">= {low:g}" if low is not None else "direction"


# What a measurement says of a published figure. A bench measures; it is not a verdict on the host, so a figure
# outside the published range "differs from the published figure", never "fails".
CLAIM_WORDS = {
    "holds": "matches the published figure",
    "fails": "differs from the published figure",
    "not comparable": "not comparable with the published figure",
    "exceeds": "better than the published figure (not a fault)",
}
CELL_WORDS = {"holds": "matches", "fails": "differs", "exceeds": "better", "not comparable": "not comparable"}
# A timing spread (interquartile range, % of the median) above this says the machine was busy, not how the
# figure varies: the cell says "noisy" instead of a number that means nothing (e.g. ±2713% on a shared CPU).
NOISY_SPREAD_PCT = 50.0


def verdict_text(claim: dict[str, Any]) -> str:
    """The table's published-figure cell: matches / differs / better / not comparable, with the published range."""
    verdict = claim.get("verdict") or ("holds" if claim.get("holds") else "fails")
    if verdict == "not comparable":
        return "not comparable (see notes)"
    return f"{CELL_WORDS[verdict]} ({_bounds(claim)})"


def claim_line(fig: dict[str, Any]) -> str:
    """One note line per published figure: what was measured, and whether it matches or differs."""
    claim = fig["claim"]
    verdict = claim.get("verdict") or ("holds" if claim.get("holds") else "fails")
    line = (
        f"{fig['label']}: measured {fig['value']:.3g} {fig['unit']}, {CLAIM_WORDS[verdict]}: "
        f"{claim['text']} ({claim['source']})"
    )
    return line + (f"; {claim['why']}" if claim.get("why") else "")


def spread_text(timing: dict[str, Any] | None) -> str:
    """The spread cell: ±N% (interquartile range over the median), 'noisy' when that says nothing, '' untimed."""
    if not timing:
        return ""
    pct = float(timing["spread_pct"])
    return "noisy" if pct > NOISY_SPREAD_PCT else f"±{pct:.0f}%"


def render_table(doc: dict[str, Any]) -> Any:
    """A rich Table of every figure: value, peak, % of peak, timing spread, and the claim verdict."""
    from rich.table import Table

    dev = doc["device"]
    title = f"envcheck bench on {dev.get('name') or 'CPU'}" + (" (quick)" if doc["quick"] else "")
    table = Table(title=title, show_lines=False)
    for col in ("figure", "value", "unit", "peak", "% peak", "spread", "published figure"):
        table.add_column(col, justify="right" if col not in ("figure", "published figure") else "left")
    for fig in doc["figures"]:
        claim = fig.get("claim")
        verdict = verdict_text(claim) if claim else ""
        table.add_row(
            fig["label"],
            _fmt(fig["value"]),
            fig["unit"],
            _fmt(fig.get("peak")),
            _fmt(fig.get("pct_of_peak")),
            spread_text(fig.get("timing")),
            verdict,
        )
    return table


# The performance findings a bench unit can carry (the relative verdict's, the busbw floor's), by their constants.
PERF_CODES = frozenset((*RELATIVE_CODES, BUSBW_LOW))


def render_notes(doc: dict[str, Any]) -> list[str]:
    """Lines under the table: skipped parts with reasons, GPU idle state, regressions."""
    claims = [f for f in doc["figures"] if f.get("claim")]
    lines = [claim_line(f) for f in claims]
    noisy = [f["label"] for f in doc["figures"] if spread_text(f.get("timing")) == "noisy"]
    if noisy:
        lines.append(
            f"noisy: {', '.join(noisy)}: repeated timings varied by more than {NOISY_SPREAD_PCT:.0f}% of the median "
            "(a busy machine does this); compare these medians only with a quiet run's"
        )
    lines += [f"skipped {s['name']}: {s['reason']}" for s in doc["skipped"]]
    lines += [
        f"{u['status'].upper()} {u['name']}: {u['summary']}"
        for u in doc.get("units", [])
        if u.get("status") in (Status.WARN, Status.FAIL) and u.get("code") in PERF_CODES
    ]
    state = doc["device"].get("gpu_state") or {}
    if state.get("idle") is False:
        lines.append(f"GPU was not idle: {state.get('why_not_idle')}")
    elif state.get("idle_unknown"):
        lines.append(f"GPU idle unknown: {state['idle_unknown']}")
    if state.get("seen"):
        lines.append(f"GPU state seen (not counted against idle): {state['seen']}")
    for reg in doc["regressions"]:
        lines.append(
            f"REGRESSION {reg['key']}: {reg['baseline']:g} -> {reg['value']:g} {reg['unit']} "
            f"({reg['change_pct']:+.1f}%, threshold {reg['threshold_pct']:g}%)"
        )
    return lines
