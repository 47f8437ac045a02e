"""`envcheck run --level quick --allow-cpu` against a bare `import torch`, in the same session.

The goal: the quick run costs at most 1.5x a bare `import torch`, in wall time and in CPU time.
Runs alternate (bare import, quick run) so that both see the same machine load; prints medians and the
ratios, and the per-check wall times of the quick run. CPU time is user + system of the process and every
descendant it waited for (os.wait4). Prints figures; asserts nothing.

Usage: python bench/quick_run.py [--repeat N] [--python PATH] [--without NAMES]
(`--python` measures another interpreter, e.g. a venv with PyPI's CUDA torch; envcheck comes from this tree.
`--without NAMES` adds a third series, the quick run with those checks skipped, alternating with the other two:
what those checks cost the quick run, measured under the same load.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys, the process and its reaped descendants) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--without", default="", metavar="NAMES", help="also time the quick run without these checks"
    )
    args = parser.parse_args()
    py = args.python
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    version = (
        subprocess.run(
            [py, "-c", "import torch; print(torch.__version__)"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "absent"
    )
    print(f"python {py}\ntorch {version}")
    bare: list[tuple[float, float]] = []
    quick: list[tuple[float, float]] = []
    without: list[tuple[float, float]] = []
    per_check: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        timed([py, "-c", "import torch"], env)  # warm the page cache for both
        for _ in range(args.repeat):
            bare.append(timed([py, "-c", "import torch"], env))
            quick.append(
                timed(
                    [py, "-m", "envcheck", "run", "--level", "quick", "--allow-cpu", "--json", str(out)], env
                )
            )
            for r in json.loads(out.read_text())["results"]:
                per_check.setdefault(r["name"], []).append(r["duration_s"])
            if args.without:
                without.append(
                    timed(
                        [
                            py,
                            "-m",
                            "envcheck",
                            "run",
                            "--level",
                            "quick",
                            "--allow-cpu",
                            "--skip",
                            args.without,
                            "--json",
                            str(out),
                        ],
                        env,
                    )
                )
    series = [("bare `import torch`", bare), ("envcheck run --level quick", quick)]
    if without:
        series.append(("  ... without " + args.without[:40], without))
    for label, runs in series:
        print(
            f"{label:28s} wall median {statistics.median(w for w, _ in runs):6.2f}s   "
            f"CPU median {statistics.median(c for _, c in runs):6.2f}s   (n={args.repeat})"
        )
    wall_ratio = statistics.median(q[0] / b[0] for q, b in zip(quick, bare, strict=True))
    cpu_ratio = statistics.median(q[1] / b[1] for q, b in zip(quick, bare, strict=True))
    print(
        f"ratio quick/bare (median of pairs): wall {wall_ratio:.2f}x   CPU {cpu_ratio:.2f}x   (goal <= 1.5x)"
    )
    if without:
        added = [(q[0] - w[0], q[1] - w[1]) for q, w in zip(quick, without, strict=True)]
        print(
            f"those checks add (median of pairs): wall {statistics.median(a for a, _ in added):+.2f}s   "
            f"CPU {statistics.median(c for _, c in added):+.2f}s"
        )
    for name, times in per_check.items():
        print(f"  {name:34s} median {statistics.median(times):6.3f}s")


if __name__ == "__main__":
    main()
