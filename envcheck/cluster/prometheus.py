"""`--prometheus FILE`: a node_exporter textfile-collector file, written atomically.

node_exporter reads every `*.prom` file in its --collector.textfile.directory on each scrape; a file read
half-written would drop or corrupt every series, so envcheck.app.output (the one writer) puts the text in a temp
file in the same folder (same filesystem) and renames it over the target. Every label value passes through
envcheck.core.text.label_value (control characters escaped) before prometheus_client's own escaping.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from envcheck import __version__
from envcheck.core.result import FaultClass, Result, Status
from envcheck.core.text import label_value as lv

STATUSES = tuple(s.value for s in Status)


def _figure(results: Sequence[Result], check: str, key: str) -> float | None:
    for r in results:
        value = r.measured.get(key) if r.name == check else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _any_figure(results: Sequence[Result], key: str) -> float | None:
    """The first check that measured `key` (no `run` check measures matmul TFLOP/s yet; `bench` does)."""
    for r in results:
        value = _figure(results, r.name, key)
        if value is not None:
            return value
    return None


def gpus_seen(results: Sequence[Result], facts: Mapping[str, Any]) -> float | None:
    """GPUs this run saw: cuda.devices' count, else cuda.available's list, else the node path's: the GPUs NVML
    lists for gpu.health (this process's), else the driver API's count; none measured otherwise."""
    count = _figure(results, "cuda.devices", "gpus")
    if count is None:
        count = (
            _figure(results, "gpu.health", "gpus")
            if any(r.name == "gpu.health" and r.status is not Status.SKIP for r in results)
            else None
        )
    if count is None:
        count = _figure(results, "node.cuda_driver", "count")
    if count is not None:
        return count
    for r in results:
        if r.name == "cuda.available":
            names = r.measured.get("gpus")
            return float(len(names)) if isinstance(names, list) else 0.0
    return None


USAGE_ERROR_DOC = (
    "1 when envcheck's own command line for this mode is wrong (an unknown flag, a bad value): the "
    "node was not checked (docs/cluster.md, Usage errors in node modes)"
)


def _run_info(
    reg: Any, mode: str, exit_code: int, now: float | None, usage_errors: Mapping[str, int]
) -> None:
    """The series every file carries, a usage error's too: exit code, usage errors by mode, time, version."""
    from prometheus_client import Gauge

    usage = Gauge("envcheck_usage_error", USAGE_ERROR_DOC, ["mode"], registry=reg)
    for which, value in usage_errors.items():
        usage.labels(lv(which)).set(value)
    Gauge("envcheck_exit_code", "the exit code of this run", ["mode"], registry=reg).labels(lv(mode)).set(
        exit_code
    )
    Gauge("envcheck_last_run_timestamp_seconds", "when this run ended (Unix time)", registry=reg).set(
        time.time() if now is None else now
    )
    Gauge("envcheck_build_info", "envcheck's version", ["version"], registry=reg).labels(__version__).set(1)


def render_usage_error(mode: str, exit_code: int, now: float | None = None) -> bytes:
    """The textfile of a run that never started: its command line was wrong (no check ran, nothing judged)."""
    from prometheus_client import CollectorRegistry, generate_latest

    reg = CollectorRegistry()
    _run_info(reg, mode, exit_code, now, {mode: 1})
    return generate_latest(reg)


def render(
    results: Sequence[Result],
    facts: Mapping[str, Any],
    *,
    mode: str,
    exit_code: int,
    now: float | None = None,
    usage_errors: Sequence[str] = (),
) -> bytes:
    """The textfile's content, in Prometheus text format, from prometheus_client's own generator. `usage_errors`:
    other modes whose command was found wrong and not fixed since (the health check carries the prolog's)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    reg = CollectorRegistry()
    status = Gauge(
        "envcheck_check_status",
        "1 for the check's status (pass/warn/fail/skip/error), 0 for the others",
        ["check", "status"],
        registry=reg,
    )
    fault = Gauge(
        "envcheck_check_fault",
        "1 when the check failed, warned or errored with this fault class "
        "(node/image/config; 'none' for envcheck's own errors)",
        ["check", "fault_class"],
        registry=reg,
    )
    finding = Gauge(
        "envcheck_finding",
        "1 for each finding (warn/fail/error) by its stable code and fault class",
        ["check", "code", "fault_class"],
        registry=reg,
    )
    duration = Gauge("envcheck_check_duration_seconds", "wall time of the check", ["check"], registry=reg)
    for r in results:
        for s in STATUSES:
            status.labels(lv(r.name), s).set(1 if r.status.value == s else 0)
        if r.status in (Status.WARN, Status.FAIL, Status.ERROR):
            who = r.fault_class.value if r.fault_class is not None else "none"
            fault.labels(lv(r.name), who).set(1)
            finding.labels(lv(r.name), lv(r.code or f"{r.name}.{r.status.value}"), who).set(1)
        duration.labels(lv(r.name)).set(r.duration_s)
    figures = (
        ("envcheck_gpus", "GPUs this run saw", gpus_seen(results, facts)),
        (
            "envcheck_allreduce_busbw_gbps",
            "peak all-reduce bus bandwidth (GB/s), dist.busbw",
            _any_figure(results, "peak_busbw_gbps"),
        ),
        ("envcheck_matmul_tflops", "measured matmul TFLOP/s", _any_figure(results, "matmul_tflops")),
    )
    for name, doc, value in figures:
        if value is not None:
            Gauge(name, doc, registry=reg).set(value)
    Gauge("envcheck_node_fault", "1 when any check failed with fault class node", registry=reg).set(
        int(any(r.status.is_bad and r.fault_class is FaultClass.NODE for r in results))
    )
    _run_info(reg, mode, exit_code, now, {mode: 0, **{m: 1 for m in usage_errors}})
    return generate_latest(reg)
