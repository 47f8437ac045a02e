"""Print how much a CPU quota below torch's intra-op thread count slows a matmul loop (container.runtime's figure).

Usage (root: it makes a cgroup): PYTHONPATH=. python bench/cpu_quota.py [--quota 50000] [--period 100000]
Runs the same float32 matmul loop in a child process with torch's default threads and with OMP_NUM_THREADS=1,
with and without the quota. cgroup v2 `cpu.max` where the v2 hierarchy has the cpu controller, else the v1 CFS
files (`cpu.cfs_quota_us`/`cpu.cfs_period_us`: the same CFS bandwidth control). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

LOOP = """
import json, time, torch
a = torch.randn(384, 384); b = torch.randn(384, 384)
for _ in range(20): a @ b
start = time.perf_counter()
for _ in range({reps}): a @ b
print(json.dumps({{"threads": torch.get_num_threads(), "s": time.perf_counter() - start}}))
"""


def make_cgroup(quota: int, period: int) -> tuple[Path, str]:
    """A fresh cgroup with the quota; its cgroup.procs path and which interface set it."""
    v2 = Path("/sys/fs/cgroup")
    for root in (v2, v2 / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.is_file() and "cpu" in controllers.read_text().split():
            group = root / "envcheck-quota-bench"
            group.mkdir(exist_ok=True)
            (group / "cpu.max").write_text(f"{quota} {period}")
            return group, "cgroup v2 cpu.max"
    group = v2 / "cpu" / "envcheck-quota-bench"
    group.mkdir(exist_ok=True)
    (group / "cpu.cfs_period_us").write_text(str(period))
    (group / "cpu.cfs_quota_us").write_text(str(quota))
    return group, "cgroup v1 cpu.cfs_quota_us (no cpu controller in cgroup v2 here)"


def timed(env: dict[str, str], group: Path | None, reps: int) -> dict[str, float]:
    """Run the loop once in a child (moved into `group` before it starts work)."""
    code = LOOP.format(reps=reps)
    prefix = (
        f"open({str(group / 'cgroup.procs')!r}, 'w').write(str(__import__('os').getpid()))\n" if group else ""
    )
    out = subprocess.run(
        [sys.executable, "-c", prefix + code],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> int:
    """Print the loop's time per setting and the slowdown of the default thread count under the quota."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quota", type=int, default=50000)
    parser.add_argument("--period", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args()
    group, how = make_cgroup(args.quota, args.period)
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    try:
        rows = {}
        for label, env, where in (
            ("default threads, no quota", base, None),
            ("OMP_NUM_THREADS=1, no quota", {**base, "OMP_NUM_THREADS": "1"}, None),
            ("default threads, quota", base, group),
            ("OMP_NUM_THREADS=1, quota", {**base, "OMP_NUM_THREADS": "1"}, group),
        ):
            rows[label] = timed(env, where, args.reps)
            print(f"{label:32s} threads {rows[label]['threads']:3.0f}  {rows[label]['s']:7.2f} s", flush=True)
    finally:
        time.sleep(0.2)
        group.rmdir()
    slow = rows["default threads, quota"]["s"] / rows["OMP_NUM_THREADS=1, quota"]["s"]
    print(
        f"{how}: quota {args.quota}/{args.period} = {args.quota / args.period:g} CPU on {os.cpu_count()} cores; "
        f"default threads take {slow:.2f}x the time of OMP_NUM_THREADS=1 under the quota; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
