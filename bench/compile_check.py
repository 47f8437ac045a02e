"""Wall time of `envcheck run --only compile.inductor --level full`, with a cold and then a warm compile cache.

Cold: TMPDIR and TORCHINDUCTOR_CACHE_DIR are fresh empty dirs (so Inductor's precompiled header, which lives
under TMPDIR, is cold too; TRITON_CACHE_DIR also, on a GPU host). Warm: the same dirs, a second time.
Prints figures; asserts nothing. Usage: python bench/compile_check.py [--rounds N]
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


def run_once(env: dict[str, str], report: Path) -> tuple[float, dict[str, object]]:
    """One CLI run: its wall time and the check's result."""
    argv = [
        sys.executable,
        "-m",
        "envcheck",
        "run",
        "--only",
        "compile.inductor",
        "--allow-cpu",
        "--level",
        "full",
        "--json",
        str(report),
    ]
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=900, check=False)
    wall = time.perf_counter() - start
    (result,) = json.loads(report.read_text())["results"]
    return wall, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1, help="cold+warm pairs, each in fresh dirs")
    args = parser.parse_args()
    print(f"{'run':5s} {'wall s':>7s} {'check s':>8s}  status  per device: compile s, compiled/eager speed")
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="envcheck-compile-bench-") as tmp:
            env = {
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "TMPDIR": tmp,
                "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
                "TRITON_CACHE_DIR": os.path.join(tmp, "triton"),
            }
            for label in ("cold", "warm"):
                wall, result = run_once(env, Path(tmp) / "report.json")
                devices = result.get("measured", {}).get("devices", {})  # type: ignore[union-attr]
                figs = "; ".join(
                    f"{d}: {f.get('compile_s')} s, {f.get('compiled_vs_eager')}x" for d, f in devices.items()
                )
                print(f"{label:5s} {wall:7.1f} {result['duration_s']:8.1f}  {result['status']:6s}  {figs}")


if __name__ == "__main__":
    main()
