"""Print figures about `envcheck bench` itself: wall time of the quick CPU bench and its headline numbers.

Usage: PYTHONPATH=. python bench/envcheck_bench.py [--cpu-threads N]   (never asserted in tests)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    """Run the quick CPU bench as a user would and print its wall time and figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu-threads", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [sys.executable, "-m", "envcheck", "bench", "--quick", "--allow-cpu", "--json", str(out)]
        if args.cpu_threads:
            cmd += ["--cpu-threads", str(args.cpu_threads)]
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
        wall = time.monotonic() - start
        print(
            f"envcheck bench --quick --allow-cpu: exit {proc.returncode}, wall {wall:.1f} s, "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        if proc.returncode not in (0, 1):
            print(proc.stderr[-2000:])
            return 1
        doc = json.loads(out.read_text())
    for unit in doc["units"]:
        print(f"  {unit['name']:<22} {unit['status']:<5} {unit['duration_s']:6.1f} s  {unit['summary']}")
    for fig in doc["figures"]:
        spread = (fig.get("timing") or {}).get("spread_pct")
        print(
            f"  {fig['key']:<34} {fig['value']:>12.4g} {fig['unit']:<8}"
            + (f" ±{spread:.0f}%" if spread else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
