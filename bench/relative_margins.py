"""How far apart two identical devices measure, and how far a throttled one falls: the margins the relative verdict
(perf.relative, --perf-margin, default 10%) must sit between, measured on this machine's CPU (no GPU here).

    PYTHONPATH=. python bench/relative_margins.py [--trials 20] [--rounds 3] [--quota 25]

Each trial measures two CPU "devices" (one torch thread each, the same core pool) with the bench's own unit
(per_device.device_figures: matmul float32 1024x1024, interleaved rounds, median of repetitions) and prints the
deficit of the slower one against the faster, the number the verdict compares with its margin. With root and a
cgroup cpu controller, it also measures one device from inside a CFS quota (the thread moves into the cgroup while it
measures that device). Prints figures only; never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envcheck.perf import per_device  # noqa: E402
from envcheck.perf.per_device import Device, device_figures  # noqa: E402
from tests.helpers.cpu_throttle import WHY_NOT, can_throttle, measured_inside, quota_group  # noqa: E402

DEVICES = [Device("0", "cpu A", "cpu", threads=1), Device("1", "cpu B", "cpu", threads=1)]


def deficit(figures: list[dict[str, Any]]) -> float:
    """The slower device's deficit against the faster, in %."""
    values = sorted(f["value"] for f in figures)
    return 100.0 * (values[-1] - values[0]) / values[-1]


def quota_trials(trials: int, rounds: int, quota_pct: int) -> list[float] | str:
    """Deficits with device 1 measured under a CFS quota, or why it could not run."""
    if not can_throttle():
        return f"skipped: {WHY_NOT}"
    real = per_device.measure_one
    with quota_group("envcheck-margins", quota_pct) as group:
        per_device.measure_one = measured_inside(group, "1", real)  # type: ignore[assignment]
        try:
            return [deficit(device_figures(DEVICES, ("matmul.float32",), rounds)) for _ in range(trials)]
        finally:
            per_device.measure_one = real  # type: ignore[assignment]


def show(label: str, values: list[float]) -> None:
    """One line: median, 95th percentile and maximum deficit."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    print(
        f"{label}: {len(values)} trials, deficit median {statistics.median(values):.1f}%, p95 {p95:.1f}%, "
        f"max {ordered[-1]:.1f}%"
    )


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quota", type=int, default=25, help="CPU quota in % for the throttled device")
    args = parser.parse_args()
    print(
        f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; unit: matmul float32 1024x1024, "
        f"1 thread, {args.rounds} interleaved rounds, median of repetitions"
    )
    show(
        "two identical CPU devices",
        [deficit(device_figures(DEVICES, ("matmul.float32",), args.rounds)) for _ in range(args.trials)],
    )
    throttled = quota_trials(max(3, args.trials // 4), args.rounds, args.quota)
    if isinstance(throttled, str):
        print(f"one device under a {args.quota}% CFS quota: {throttled}")
    else:
        show(f"one device under a {args.quota}% CFS quota", throttled)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
