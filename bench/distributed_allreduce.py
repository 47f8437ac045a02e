"""Print timings for the dist.* checks on CPU (gloo): start-up cost, quick check, full sweep, busbw table.

Run: PYTHONPATH=$PWD python bench/distributed_allreduce.py [--ranks 2]. Figures only, no assertions.
Targets: quick dist.all_reduce <= 5 s including rank start-up; full sweep <= 30 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")


def _timed(label: str, fn: object) -> object:
    began = time.monotonic()
    value = fn()  # type: ignore[operator]
    print(f"{label:58} {time.monotonic() - began:7.2f} s")
    return value


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; gloo ranks: {args.ranks}")
    _timed(
        "fresh interpreter: import torch.distributed",
        lambda: subprocess.run([sys.executable, "-c", "import torch.distributed"], check=True, timeout=120),
    )

    from envcheck.collectives.launch import LaunchPlan, launch
    from envcheck.collectives.sweep import CPU_SIZES
    from envcheck.collectives.verdicts import format_table, sweep_rows
    from tests.helpers import run_check

    for start in ("spawn", "fork"):
        plan = LaunchPlan("gloo", args.ranks, ("all_reduce", "all_gather", "broadcast"), 60.0, start=start)
        outcome = _timed(f"correctness launch, ranks started by {start}", lambda p=plan: launch(p))
        assert outcome.ok  # type: ignore[attr-defined]
    from envcheck.checks.dist import launches
    from tests.helpers import make_context

    inline = _timed(
        "dist.all_reduce inline, torch already imported (marginal)",
        lambda: launches.nccl_all_reduce(make_context("quick", cpu_ranks=args.ranks)),
    )
    print(f"   status {inline.status.value}")  # type: ignore[attr-defined]
    result = _timed(
        "dist.all_reduce end to end (engine worker + torch import)",
        lambda: run_check("dist.all_reduce", level="quick", cpu_ranks=args.ranks),
    )
    print(f"   status {result.status.value}, check's own duration {result.duration_s:.2f} s")  # type: ignore[attr-defined]
    sweep = LaunchPlan("gloo", args.ranks, ("sweep",), 120.0, CPU_SIZES, start="fork")
    outcome = _timed("full sweep launch (fork), sizes 64 KiB..16 MiB", lambda: launch(sweep))
    result = _timed(
        "dist.busbw end to end (engine worker + torch import)",
        lambda: run_check("dist.busbw", cpu_ranks=args.ranks),
    )
    print(f"   status {result.status.value}, check's own duration {result.duration_s:.2f} s")  # type: ignore[attr-defined]
    print(format_table(sweep_rows([r.found or {} for r in outcome.ranks])))  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
