"""What a burn measured, as plain JSON for the report, the plots and `envcheck fleet`: each device's label, its
throughput per workload as figures (kind `burn.<workload>`, scope gpu or device: what the fleet learns baselines
from), what each workload cost, the throughput and clocks over time, and the facts."""

from __future__ import annotations

import os
import socket
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from envcheck.burn.coordinator import BurnRun
from envcheck.burn.records import Tally
from envcheck.perf.figures import figure
from envcheck.perf.peaks import lookup

SCALE = {"TFLOP/s": 1e-12, "GFLOP/s": 1e-9, "GB/s": 1e-9}  # from work per second to the unit
PEAK_DTYPES = {"float32", "tf32", "bfloat16", "float16"}  # the peak table's dtypes


def label(tally: Tally, worker: int, short: bool = False) -> str:
    """'GPU 3 (NVIDIA H100 80GB HBM3, GPU-..., PCI 0000:18:00)' or 'CPU worker 1 (core 1, AMD EPYC)'; `short`: the
    first two words."""
    hello = tally.workers[worker].hello if worker in tally.workers else {}
    if hello.get("kind") == "cuda":
        head = f"GPU {hello.get('index', worker)}"
        parts = [str(hello[k]) for k in ("name", "uuid") if hello.get(k)]
        parts += [f"PCI {hello['pci']}"] if hello.get("pci") else []
    else:
        head = f"CPU worker {worker}"
        parts = [f"core {hello['core']}"] if hello.get("core") is not None else []
        parts += [str(hello["name"])] if hello.get("name") else []
    return head if short or not parts else f"{head} ({', '.join(parts)})"


def units(tally: Tally) -> dict[str, str]:
    """Each workload's unit, from the catalogue; FLOP/s in GFLOP/s on CPU workers (a CPU core's are thousandths of a
    TFLOP/s)."""
    from envcheck.burn.catalogue import every_workload

    cpu = any(w.hello.get("kind") == "cpu" for w in tally.workers.values())
    known = {w.name: w.unit for w in every_workload()}
    return {
        name: "GFLOP/s" if cpu and known.get(name) == "TFLOP/s" else known.get(name, "")
        for name in tally.workload_names()
    }


def figures(tally: Tally) -> list[dict[str, Any]]:
    """Each device's throughput per workload over the whole burn (a GPU's matmul against its datasheet peak)."""
    out = []
    unit_of = units(tally)
    for i, worker in sorted(tally.workers.items()):
        gpu = worker.hello.get("kind") == "cuda"
        peak = lookup(str(worker.hello.get("name", ""))) if gpu else None
        for name in worker.workloads:
            rate = worker.throughput(name)
            if rate is None:
                continue
            unit = unit_of.get(name, "")
            dtype = name.split(".", 1)[1] if "." in name else ""
            top = (
                peak.tflops.get(dtype)
                if peak and name.startswith("matmul.") and dtype in PEAK_DTYPES
                else None
            )
            fig = figure(
                f"burn.{name}.{i}",
                rate * SCALE.get(unit, 1.0),
                unit,
                label=f"{name} on {label(tally, i, True)}",
                peak=top,
            )
            fig.update(
                kind=f"burn.{name}",
                scope="gpu" if gpu else "device",
                subject=str(worker.hello.get("index", i)),
                device_label=label(tally, i, True),
            )
            out.append(fig)
    return out


def sampled(tally: Tally, samples: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per device: min, median and max of each sampled metric (clocks, temperature, power, CPU share), and the share
    of samples in which each NVML clock-event reason was set."""
    from envcheck.probe.nvml_fields import CLOCK_EVENTS

    by_worker: dict[int, list[Mapping[str, Any]]] = {}
    for row in samples:
        by_worker.setdefault(int(row["worker"]), []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for worker, rows in sorted(by_worker.items()):
        keys = sorted({k for r in rows for k in r if k not in ("at", "worker", "clock_events", "quota_cpus")})
        entry: dict[str, Any] = {"samples": len(rows)}
        for key in keys:
            values = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if values:
                entry[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
        events = [int(r["clock_events"]) for r in rows if isinstance(r.get("clock_events"), (int, float))]
        if events:
            entry["clock_events"] = {
                name: round(sum(1 for e in events if e & bit) / len(events), 3)
                for bit, name in CLOCK_EVENTS.items()
                if any(e & bit for e in events)
            }
        out[label(tally, worker, True)] = entry
    return out


def cost(tally: Tally) -> dict[str, dict[str, float]]:
    """Per workload: the median seconds of one call over the devices, and its share of the burn's compute time."""
    total = sum(sum(w.seconds.values()) for w in tally.workers.values()) or 1.0
    out = {}
    for name in tally.workload_names():
        per_call = [w.seconds[name] / w.calls[name] for w in tally.workers.values() if w.calls[name]]
        if per_call:
            spent = sum(w.seconds[name] for w in tally.workers.values())
            out[name] = {
                "seconds_per_call": round(statistics.median(per_call), 6),
                "share_pct": round(100.0 * spent / total, 1),
                "calls": sum(w.calls[name] for w in tally.workers.values()),
            }
    return out


def headline(tally: Tally) -> str | None:
    """The workload the plots follow over time: the first matmul that ran (bfloat16 before float32), else any."""
    names = tally.workload_names()
    for name in ("matmul.bfloat16", "matmul.float32", *names):
        if name in names and not name.startswith("all_reduce"):
            return name
    return None


def timeline(run: BurnRun) -> dict[str, Any]:
    """Throughput of the headline workload per device and bucket, and each device's clock (or CPU share) samples."""
    tally, name = run.tally, headline(run.tally)
    unit = units(tally).get(name or "", "")
    series: dict[str, list[tuple[float, float]]] = {}
    for i, worker in sorted(tally.workers.items()):
        points = sorted(
            ((bucket + 0.5) * tally.bucket_s, w / s * SCALE.get(unit, 1.0))
            for (n, bucket), (w, s) in worker.timeline.items()
            if n == name and s > 0
        )
        series[label(tally, i, True)] = points
    clocks: dict[str, list[tuple[float, float]]] = {}
    key = "sm_clock_mhz" if any("sm_clock_mhz" in r for r in run.samples) else "cpu_share"
    for row in run.samples:
        if key in row:
            value = float(row[key]) * (100.0 if key == "cpu_share" else 1.0)
            clocks.setdefault(label(tally, int(row["worker"]), True), []).append((float(row["at"]), value))
    return {
        "workload": name,
        "unit": unit,
        "throughput": series,
        "clock_key": key,
        "clock_unit": "MHz" if key == "sm_clock_mhz" else "% of a core",
        "clocks": clocks,
    }


def facts(run: BurnRun, skipped: Mapping[str, str]) -> dict[str, Any]:
    """The burn's facts: how it ran and on what (a GPU list in the shape `envcheck fleet` reads)."""
    tally = run.tally
    hellos = [w.hello for _, w in sorted(tally.workers.items()) if w.hello]
    ready = [w.ready_at for w in tally.workers.values() if w.ready_at is not None]
    out: dict[str, Any] = {
        "burn": {
            "budget_s": run.plan.budget_s,
            "elapsed_s": run.elapsed_s,
            "stopped_by": run.stopped_by,
            "workers": len(run.plan.slots),
            "started_after_s": round(max(ready), 3) if ready else None,
            "rounds": {label(tally, i, True): w.rounds for i, w in sorted(tally.workers.items())},
            "workloads": tally.workload_names(),
            "skipped": dict(skipped),
            "cost": cost(tally),
            "samples": len(run.samples),
            **({"gpu_samples_absent": run.gpu_samples_absent} if run.gpu_samples_absent else {}),
        },
        "platform": {"host": socket.gethostname(), "cpu_count": os.cpu_count()},
    }
    if hellos:
        first = hellos[0]
        out["torch"] = {
            "version": first.get("torch"),
            "cuda_compiled": first.get("cuda"),
            "cudnn_loaded": first.get("cudnn"),
        }
    gpus = [h for h in hellos if h.get("kind") == "cuda"]
    if gpus:
        out["gpu"] = {"gpus": [{k: g.get(k) for k in ("index", "name", "uuid", "pci")} for g in gpus]}
    return out
