"""One envcheck report as one fleet node: its name, its group (GPU model and count), its metrics and its findings.

Reads `envcheck run --json` and `envcheck burn --json` reports (schema 2) and `envcheck bench --json` documents. Metrics are the figures the
results carry (`measured.figures`: perf.relative's per GPU and per pair, bench's per unit) and dist.busbw's peak.
The node's name is what the report says (perf.relative's and bench's `host`), else the file's name.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envcheck.cluster.fleet.checksums import Checksum, report_checksums
from envcheck.cluster.fleet.drift import report_versions
from envcheck.core.result import Status

SCOPES = {
    "gpu": "gpu",
    "device": "gpu",
    "pair": "pair",
}  # a CPU "device" of the relative verdict counts as a GPU


@dataclass(frozen=True)
class Metric:
    """One figure of one node: `name` ('matmul.bfloat16', 'dist.busbw.peak'), `scope` ('node', 'gpu', 'pair'),
    `subject` ('' for the node, '3' for GPU 3, '0-3' for a pair)."""

    name: str
    scope: str
    subject: str
    value: float
    unit: str
    better: str


@dataclass(frozen=True)
class FleetNode:
    """What the fleet knows of one node (from one report)."""

    node: str
    group: str
    source: str
    metrics: tuple[Metric, ...]
    codes: tuple[str, ...]
    model: str = ""  # the GPU model (the most common one), "" without a GPU
    versions: tuple[tuple[str, str], ...] = ()  # (driver|cuda|torch|nccl|cudnn, version) from a run report
    checksums: tuple[Checksum, ...] = ()  # a burn report's checksums per model and workload


class NotAReport(ValueError):
    """The document is JSON but not an envcheck run or bench report (the message says what it lacks)."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any, limit: int = 120) -> str:
    return str(value)[:limit] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""


def figure_metrics(figures: Any) -> Iterable[Metric]:
    """Metrics from a list of bench-style figures (envcheck.perf.figures), skipping what is not a number."""
    for fig in figures if isinstance(figures, list) else []:
        if not isinstance(fig, dict) or fig.get("better") not in ("higher", "lower"):
            continue
        value = _number(fig.get("value"))
        name = _text(fig.get("kind")) or _text(fig.get("key"))
        if value is None or not name:
            continue
        scope = SCOPES.get(str(fig.get("scope")), "node")
        subject = _text(fig.get("subject"), 20) if scope != "node" else ""
        yield Metric(name, scope, subject, value, _text(fig.get("unit"), 20), str(fig["better"]))


def group_name(gpu_names: list[str], cpus: Any) -> str:
    """A node's group: '8x NVIDIA H100 80GB HBM3' (its GPUs' most common model and their count), or 'no GPU (N
    CPUs)'; a burn finds its stored baseline by it too."""
    if not gpu_names:
        count = _number(cpus)
        return f"no GPU ({int(count)} CPUs)" if count else "no GPU"
    name, _ = Counter(gpu_names).most_common(1)[0]
    mixed = "" if len(set(gpu_names)) == 1 else " (mixed models)"
    return f"{len(gpu_names)}x {name}{mixed}"


def _run_node(doc: Mapping[str, Any], source: str) -> FleetNode:
    results = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    facts = _dict(doc.get("facts"))
    gpu = _dict(facts.get("gpu"))
    names = [
        _text(g.get("name")) for g in gpu.get("gpus") or [] if isinstance(g, dict) and _text(g.get("name"))
    ]
    metrics: list[Metric] = []
    host = ""
    codes: list[str] = []
    sums: list[Checksum] = []
    for r in results:
        measured = _dict(r.get("measured"))
        sums += report_checksums(r)
        metrics += figure_metrics(measured.get("figures"))
        host = host or _text(measured.get("host"))
        if not names and isinstance(measured.get("gpu_names"), list):
            names = [_text(n) for n in measured["gpu_names"] if _text(n)]
        peak = _number(measured.get("peak_busbw_gbps"))
        if (
            r.get("name") == "dist.busbw"
            and r.get("status") in (Status.PASS, Status.WARN, Status.FAIL)
            and peak
            and (_number(measured.get("world_size")) or 0) > 1
        ):
            metrics.append(Metric("dist.busbw.peak", "node", "", peak, "GB/s", "higher"))
        if r.get("status") in (Status.WARN, Status.FAIL, Status.ERROR):
            found: list[Any] = measured["codes"] if isinstance(measured.get("codes"), list) else []
            codes += [_text(c) for c in [r.get("code"), *found] if _text(c)]
    platform = _dict(facts.get("platform"))
    return FleetNode(
        host or Path(source).stem,
        group_name(names, platform.get("cpu_count")),
        source,
        tuple(metrics),
        tuple(dict.fromkeys(codes)),
        Counter(names).most_common(1)[0][0] if names else "",
        report_versions(facts),
        tuple(sums),
    )


def _bench_node(doc: Mapping[str, Any], source: str) -> FleetNode:
    device = _dict(doc.get("device"))
    count = int(_number(device.get("gpus")) or 0) if device.get("cuda") else 0
    names = [_text(device.get("name"))] * count if _text(device.get("name")) else []
    units = [u for u in doc.get("units") or [] if isinstance(u, dict)]
    codes = [
        _text(u.get("code"))
        for u in units
        if u.get("status") in (Status.WARN, Status.FAIL, Status.ERROR) and _text(u.get("code"))
    ]
    host = _text(device.get("host")) or next(
        (_text(_dict(u.get("measured")).get("host")) for u in units if _dict(u.get("measured")).get("host")),
        "",
    )
    return FleetNode(
        host or Path(source).stem,
        group_name(names, device.get("cpu_count")),
        source,
        tuple(figure_metrics(doc.get("figures"))),
        tuple(dict.fromkeys(codes)),
    )


def to_node(doc: Any, source: str) -> FleetNode:
    """The node a report describes; NotAReport when `doc` is not an envcheck run or bench report."""
    if not isinstance(doc, dict):
        raise NotAReport(f"a JSON {type(doc).__name__}, not an envcheck report")
    if doc.get("kind") == "envcheck-bench" and isinstance(doc.get("figures"), list):
        return _bench_node(doc, source)
    if isinstance(doc.get("results"), list) and "schema_version" in doc:
        return _run_node(doc, source)
    raise NotAReport(
        "not an envcheck report (no results and no bench figures); give `envcheck run --json` or "
        "`envcheck bench --json` output"
    )
