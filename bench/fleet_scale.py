"""How long `envcheck fleet` takes on a 1,000-node fleet (generated 8x H100 run reports, tests/cluster/fleet_reports.py:
real perf.relative verdicts and real JSON reports over staged figures; three nodes made slow).

    PYTHONPATH=. python bench/fleet_scale.py [--nodes 1000] [--keep DIR]

Prints the reports' size, the whole CLI's wall time (`envcheck fleet DIR --json --html --write-baseline`, a fresh
process: start, reading, judging, writing) and the in-process time of each phase. Never asserted in the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envcheck.cluster.fleet.baseline_file import render as render_baseline  # noqa: E402
from envcheck.cluster.fleet.learn import Rule  # noqa: E402
from envcheck.cluster.fleet.page import render_html  # noqa: E402
from envcheck.cluster.fleet.sources import load  # noqa: E402
from envcheck.cluster.fleet.survey import survey, to_dict  # noqa: E402
from tests.cluster.fleet_reports import Faults, write_fleet  # noqa: E402


def main() -> int:
    """Generate the fleet, time the CLI and the phases, print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="write the reports and outputs here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="envcheck-fleet-bench-"))
    reports = work / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    faults = Faults(
        gpu={("node0101", "6", "matmul.bfloat16"): 0.82, ("node0502", "2", "peer"): 0.6},
        node={"node0777": 0.88},
    )
    began = time.perf_counter()
    write_fleet(reports, args.nodes, faults, seed=11)
    generated = time.perf_counter() - began
    size = sum(p.stat().st_size for p in reports.iterdir())
    print(f"generated {args.nodes} reports ({size / 2**20:.1f} MiB) in {generated:.1f} s")
    try:
        cmd = [
            sys.executable,
            "-m",
            "envcheck",
            "fleet",
            str(reports),
            "--json",
            str(work / "fleet.json"),
            "--html",
            str(work / "fleet.html"),
            "--write-baseline",
            str(work / "baseline.toml"),
        ]
        began = time.perf_counter()
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        wall = time.perf_counter() - began
        doc = json.loads((work / "fleet.json").read_text())
        print(
            f"envcheck fleet CLI on {args.nodes} nodes: {wall:.2f} s wall, exit {done.returncode}; outliers: "
            + ", ".join(o["node"] for o in doc["outlier_nodes"])
        )
        print(
            f"outputs: JSON {(work / 'fleet.json').stat().st_size / 1024:.0f} KiB, HTML "
            f"{(work / 'fleet.html').stat().st_size / 1024:.0f} KiB, baseline "
            f"{(work / 'baseline.toml').stat().st_size / 1024:.1f} KiB"
        )
        phases = {}
        t = time.perf_counter()
        loaded = load([str(reports)])
        phases["read+parse"] = time.perf_counter() - t
        t = time.perf_counter()
        result = survey(loaded, Rule())
        phases["nodes+baselines+outliers"] = time.perf_counter() - t
        t = time.perf_counter()
        to_dict(result)
        render_html(result)
        render_baseline(result.groups, Rule(), len(result.nodes))
        phases["json+html+baseline render"] = time.perf_counter() - t
        print("in-process phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
