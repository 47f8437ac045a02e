"""Wall time of `envcheck run --for prolog` (the torch-free node path) against a bare `python -c "import torch"`,
in the same run on this machine: the median of several alternating runs of each, the ratio (goal <= 0.25), and
the load average before and after. Prints figures; asserts nothing.

    python bench/prolog_time.py [--runs 7] [--python PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, int]:
    """Seconds one run took, and its exit code."""
    began = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False
    )
    return time.perf_counter() - began, done.returncode


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="the interpreter with torch and envcheck")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}  # never drain anything from here
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    prolog = [
        args.python,
        "-m",
        "envcheck",
        "run",
        "--for",
        "prolog",
        "--json",
        "report.json",
    ]  # in the temp cwd
    torch = [args.python, "-c", "import torch"]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as cwd:
        timed(torch, env, cwd)  # warm the page cache for both before measuring
        timed(prolog, env, cwd)
        prolog_s, torch_s, codes = [], [], set()
        for _ in range(args.runs):  # alternate, so load changes hit both alike
            seconds, code = timed(prolog, env, cwd)
            prolog_s.append(seconds)
            codes.add(code)
            torch_s.append(timed(torch, env, cwd)[0])
    load_after = os.getloadavg()
    p, t = statistics.median(prolog_s), statistics.median(torch_s)
    print(f"runs: {args.runs} each, alternating; cores: {os.cpu_count()}")
    print(
        f"load average (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after: {' '.join(f'{x:.2f}' for x in load_after)}"
    )
    print(
        f"envcheck run --for prolog   median {p:.3f} s  (min {min(prolog_s):.3f}, max {max(prolog_s):.3f}; "
        f"exit codes {sorted(codes)})"
    )
    print(f"python -c 'import torch'    median {t:.3f} s  (min {min(torch_s):.3f}, max {max(torch_s):.3f})")
    print(f"ratio prolog / import torch: {p / t:.2f}  (goal <= 0.25)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
