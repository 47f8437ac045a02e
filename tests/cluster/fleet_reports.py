"""Generated `envcheck run --level full --json` reports of 8x H100 nodes, for the fleet tests and bench/fleet_scale.py.

Staged: the figures (shaped like the H100 of tests/perf/data/h100_bench_quick.json, with a healthy spread of about 1%
per GPU and per node) and the facts (NVML's GPU list). Real: perf.relative's Result, judged by the real verdict
(envcheck.perf.relative.judge) over those figures, dist.busbw's, and the report, rendered by the real JSON writer.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import passed
from envcheck.core.run_report import RunReport
from envcheck.perf.figures import figure
from envcheck.perf.relative import judge
from envcheck.report.json_report import to_json_dict

GPU_NAME = "NVIDIA H100 80GB HBM3"
NORMAL = {
    "matmul.bfloat16": (790.0, "TFLOP/s"),
    "matmul.tf32": (400.0, "TFLOP/s"),
    "hbm": (3000.0, "GB/s"),
    "h2d": (53.0, "GB/s"),
    "d2h": (55.0, "GB/s"),
}
# What a rolled-out node reports (facts.gpu.driver_version, facts.torch); Faults.versions overrides per node.
VERSIONS = {
    "driver_version": "580.95.05",
    "version": "2.14.1+cu130",
    "cuda_compiled": "13.0",
    "nccl_loaded": "2.27.7",
    "cudnn_loaded": "9.24.0",
}
PEER_GBPS = 380.0
BUSBW_GBPS = 480.0


@dataclass
class Faults:
    """What is wrong where: (node, gpu, kind) -> factor; node -> factor on every GPU figure; node -> busbw factor."""

    gpu: dict[tuple[str, str, str], float] = field(default_factory=dict)
    node: dict[str, float] = field(default_factory=dict)
    versions: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # node -> VERSIONS keys it reports otherwise
    busbw: dict[str, float] = field(default_factory=dict)


def _fig(kind: str, scope: str, subject: str, label: str, value: float, unit: str) -> dict[str, Any]:
    fig = figure(f"{kind}.gpu{subject}", value, unit, label=f"{label} {kind}", series=kind)
    fig.update(kind=kind, scope=scope, subject=subject, device_label=label, rounds=[round(value, 4)] * 3)
    return fig


def node_figures(name: str, rng: random.Random, faults: Faults, gpus: int = 8) -> list[dict[str, Any]]:
    """perf.relative's figures of one node."""
    node_factor = faults.node.get(name, 1.0) * rng.gauss(1.0, 0.008)
    out = []
    for i in range(gpus):
        for kind, (value, unit) in NORMAL.items():
            v = value * node_factor * rng.gauss(1.0, 0.008) * faults.gpu.get((name, str(i), kind), 1.0)
            out.append(_fig(kind, "gpu", str(i), f"GPU {i}", v, unit))
    for i in range(gpus):
        for j in range(i + 1, gpus):
            f = faults.gpu.get((name, str(i), "peer"), 1.0) * faults.gpu.get((name, str(j), "peer"), 1.0)
            out.append(
                _fig(
                    "peer",
                    "pair",
                    f"{i}-{j}",
                    f"GPU {i} -> GPU {j}",
                    PEER_GBPS * node_factor * rng.gauss(1.0, 0.008) * f,
                    "GB/s",
                )
            )
    return out


def node_report(name: str, rng: random.Random, faults: Faults, gpus: int = 8) -> dict[str, Any]:
    """One node's run report (perf.relative and dist.busbw), as `envcheck run --level full --json` writes it."""
    relative = judge(
        node_figures(name, rng, faults, gpus), extra={"host": name, "gpu_names": [GPU_NAME] * gpus}
    ).named("perf.relative", 31.2)
    peak = round(BUSBW_GBPS * rng.gauss(1.0, 0.01) * faults.busbw.get(name, 1.0), 3)
    busbw = passed(
        f"all_reduce busbw peak {peak} GB/s",
        measured={
            "backend": "nccl",
            "world_size": gpus,
            "peak_busbw_gbps": peak,
            "peak_at_bytes": 1 << 30,
            "rows": [],
        },
    ).named("dist.busbw", 9.8)
    v = {**VERSIONS, **faults.versions.get(name, {})}
    facts = {
        "gpu": {
            "source": "nvml",
            "driver_version": v["driver_version"],
            "gpus": [{"index": i, "name": GPU_NAME} for i in range(gpus)],
        },
        "torch": {k: v[k] for k in ("version", "cuda_compiled", "nccl_loaded", "cudnn_loaded")},
        "platform": {"cpu_count": 192},
    }
    return to_json_dict(RunReport([relative, busbw], facts, Context(level=Level.FULL)))


def write_fleet(folder: Path, nodes: int, faults: Faults, seed: int = 0) -> list[Path]:
    """`nodes` reports named node0000.json ... into `folder`."""
    rng = random.Random(seed)
    paths = []
    for k in range(nodes):
        path = folder / f"node{k:04d}.json"
        path.write_text(json.dumps(node_report(f"node{k:04d}", rng, faults)))
        paths.append(path)
    return paths
