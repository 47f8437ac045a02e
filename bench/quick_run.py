"""Wall time of `envcheck run --level quick --allow-cpu`, broken down (import, spawn, each check).

Prints figures; asserts nothing. Usage: python bench/quick_run.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=600, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    py = sys.executable
    imports = {
        "python -c pass": [py, "-c", "pass"],
        "import envcheck.cli (no torch)": [py, "-c", "import envcheck.cli, envcheck.checks"],
        "import torch": [py, "-c", "import torch"],
        "envcheck list": [py, "-m", "envcheck", "list"],
    }
    for label, argv in imports.items():
        runs = [timed(argv) for _ in range(args.repeat)]
        print(f"{label:36s} median {statistics.median(runs):6.2f}s  (n={args.repeat})")
    walls, per_check = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        for _ in range(args.repeat):
            walls.append(timed([py, "-m", "envcheck", "run", "--level", "quick", "--allow-cpu", "--json", str(out)]))
            for r in json.loads(out.read_text())["results"]:
                per_check.setdefault(r["name"], []).append(r["duration_s"])
    print(f"{'envcheck run --level quick --allow-cpu':36s} median {statistics.median(walls):6.2f}s  "
          f"min {min(walls):.2f}s  max {max(walls):.2f}s  (goal <= 6 s)")
    for name, times in per_check.items():
        print(f"  {name:34s} median {statistics.median(times):6.3f}s")


if __name__ == "__main__":
    main()
