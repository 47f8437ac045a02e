"""Print how long the numerics checks take at --level quick and --level full (in-process, after torch import).

Usage: PYTHONPATH=$PWD python bench/numerics_suite.py [--level quick|full|both] [--repeat N] [--engine]
The first run in a process is "cold" (one-time lazy kernel/module setup); later runs are warm.
--engine instead times the real path: a spawned worker (torch import included) running the selected checks.
"""

from __future__ import annotations

import argparse
import os
import time

from envcheck import numerics
from envcheck.core.check import Context, Level
from envcheck.core.execute import execute
from envcheck.core.runner import Runner


def run_level(level: Level) -> float:
    """Run every numerics check selected at `level`; print one line each; return the total seconds."""
    ctx = Context(level=level, allow_cpu=True)
    total = 0.0
    for spec in numerics.CHECKS:
        if level is Level.QUICK and spec.level is not Level.QUICK:
            continue
        start = time.perf_counter()
        result = execute(spec, ctx)
        took = time.perf_counter() - start
        total += took
        print(f"  {spec.name:28s} {spec.level.value:5s} {result.status.value:5s} {took:7.3f} s")
    print(f"  {'TOTAL ' + level.value:40s} {total:7.3f} s")
    return total


def run_engine(level: Level) -> None:
    """Time the selected checks through the engine: worker spawn + torch import + checks."""
    ctx = Context(level=level, allow_cpu=True)
    specs = [s for s in numerics.CHECKS if level is Level.FULL or s.level is Level.QUICK]
    start = time.perf_counter()
    with Runner(ctx) as runner:
        results = runner.run(specs)
    statuses = sorted({r.status.value for r in results})
    print(
        f"engine --level {level.value}: {len(results)} checks ({', '.join(statuses)}) "
        f"in {time.perf_counter() - start:.3f} s wall, worker start and torch import included"
    )


def main() -> None:
    """Time torch import, then each level (a warm-up pass first so one-time kernel setup is not counted twice)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--level", choices=["quick", "full", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--engine", action="store_true")
    args = parser.parse_args()
    levels = [Level.QUICK, Level.FULL] if args.level == "both" else [Level(args.level)]
    if args.engine:
        print(f"cpus: {os.cpu_count()}, load avg: {os.getloadavg()[0]:.2f}")
        for level in levels:
            run_engine(level)
        return
    start = time.perf_counter()
    import torch

    print(
        f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}, cpus: {os.cpu_count()}, "
        f"load avg: {os.getloadavg()[0]:.2f}"
    )
    print(f"import torch: {time.perf_counter() - start:.3f} s")
    for i in range(args.repeat):
        for level in levels:
            print(f"run {i + 1} --level {level.value}:")
            run_level(level)


if __name__ == "__main__":
    main()
