"""The burn-in's figures on CPU workers: false positives over healthy burns, the time to name a worker that flips a
bit now and then (per injected rate), whether a worker under a CPU quota is named as a straggler, and what each
workload costs.

    PYTHONPATH=. python bench/burn_detection.py [--healthy 20] [--budget 8] [--workers 2]
        [--rates 0.001,0.01,0.1] [--runs 5] [--fault-budget 12] [--quotas 10,25] [--quota-runs 3]

Every burn is the real machinery (envcheck.burn: forked single-thread workers pinned to cores, a gloo all-reduce)
started from this process, as tests/burn/test_cpu_burn.py does; faults come from the test-only hook
(tests/helpers/burn_faults.py). A rate is the probability that one output of worker 1 gets one random bit flipped.
"Detected at" is the time from the burn's start to the first wrong result the verdict names (the verdict is
computed from the whole burn; that result is its first evidence). The quota runs need root and a cgroup v1 cpu
controller. Prints figures only; never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch.distributed  # noqa: E402,F401  # imported once: each burn's budget starts at its fork

from envcheck.burn.coordinator import BurnRun, Coordinator  # noqa: E402
from envcheck.burn.measures import cost  # noqa: E402
from envcheck.burn.outcome import results  # noqa: E402
from envcheck.burn.plan import make_plan  # noqa: E402
from envcheck.core.result import Result  # noqa: E402
from tests.helpers import burn_faults  # noqa: E402
from tests.helpers.cpu_throttle import WHY_NOT, can_throttle, quota_group  # noqa: E402


def burn(budget: float, workers: int, *faults: str) -> tuple[BurnRun, dict[str, Result], float]:
    """One burn with `faults`; its run, its results by name, and its wall time."""
    for key in ("ENVCHECK_BURN_HOOK", burn_faults.ENV_VAR):
        os.environ.pop(key, None)
    if faults:
        os.environ.update(burn_faults.env(*faults))
    began = time.monotonic()
    run = Coordinator(make_plan(budget, allow_cpu=True, cpu_workers=workers)).run()
    return run, {r.name: r for r in results(run)}, time.monotonic() - began


def healthy(count: int, budget: float, workers: int) -> list[dict[str, Any]]:
    """`count` healthy burns: each one's statuses, wall time and costs."""
    out = []
    for k in range(count):
        run, found, wall = burn(budget, workers)
        statuses = {name: r.status.value for name, r in found.items()}
        out.append(
            {"statuses": statuses, "wall": wall, "cost": cost(run.tally), "results": found, "run": run}
        )
        bad = {n: s for n, s in statuses.items() if s != "pass"}
        print(
            f"  healthy {k + 1:2d}/{count}: wall {wall:5.1f} s, rounds "
            f"{min(w.rounds for w in run.tally.workers.values())}, {bad or 'all pass'}",
            flush=True,
        )
        for name, r in found.items():
            if r.status.value != "pass":
                print(f"      {name}: {r.summary}", flush=True)
    return out


def detection(rate: float, runs: int, budget: float, workers: int) -> tuple[list[float | None], list[float]]:
    """Per run: seconds to the first named wrong result of worker 1 (None: not named within the budget), and worker
    1's outputs per second of burning (what the rate multiplies)."""
    times: list[float | None] = []
    per_s: list[float] = []
    for _ in range(runs):
        run, found, _ = burn(budget, workers, f"worker=1:flip:{rate}")
        sdc = found["burn.corruption"]
        named = sdc.code == "burn.sdc" and sdc.summary.startswith("CPU worker 1 ")
        blamed_other = "CPU worker 0" in sdc.summary
        times.append(sdc.measured.get("first_wrong_at_s") if named and not blamed_other else None)
        worker = run.tally.workers.get(1)
        if worker is not None and worker.ready_at is not None and worker.last_at > worker.ready_at:
            per_s.append(sum(worker.calls.values()) / (worker.last_at - worker.ready_at))
    return times, per_s


def quota(pct: int, runs: int, budget: float, workers: int) -> list[tuple[str, str]]:
    """Per run: burn.stragglers' status and summary with worker 1 under a `pct`% CPU quota."""
    out = []
    for _ in range(runs):
        with quota_group("envcheck-burn-bench", pct) as group:
            _, found, _ = burn(budget, workers, f"worker=1:cgroup:{group}")
        slow = found["burn.stragglers"]
        out.append((slow.status.value, slow.summary))
    return out


def main() -> int:
    """Print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--healthy", type=int, default=20)
    p.add_argument("--budget", type=float, default=8.0)
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--rates", default="0.001,0.01,0.1")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--fault-budget", type=float, default=12.0)
    p.add_argument("--quotas", default="10,25")
    p.add_argument("--quota-runs", type=int, default=3)
    args = p.parse_args()
    print(f"load average at the start: {os.getloadavg()}; {os.cpu_count()} CPUs; {args.workers} workers")

    print(f"\n== {args.healthy} healthy burns of {args.budget:g} s, every CPU workload ==")
    runs = healthy(args.healthy, args.budget, args.workers)
    if not runs:
        print("  none asked for (--healthy 0)")
    fails = Counter(n for r in runs for n, s in r["statuses"].items() if s in ("fail", "error"))
    warns = Counter(n for r in runs for n, s in r["statuses"].items() if s == "warn")
    failed = sum(1 for r in runs if any(s in ("fail", "error") for s in r["statuses"].values()))
    warned = sum(1 for r in runs if any(s == "warn" for s in r["statuses"].values()))
    print(
        f"false positives: {failed} of {len(runs)} healthy burns failed {dict(fails) or ''}; {warned} warned "
        f"{dict(warns) or ''}"
    )
    walls = [r["wall"] for r in runs] or [0.0]
    print(
        f"wall time per burn: median {statistics.median(walls):.1f} s, max {max(walls):.1f} s "
        f"(budget {args.budget:g} s)"
    )
    print("cost per workload (median over the healthy burns): seconds per call, share of compute time")
    names = sorted({n for r in runs for n in r["cost"]})
    for name in names:
        per_call = [r["cost"][name]["seconds_per_call"] for r in runs if name in r["cost"]]
        share = [r["cost"][name]["share_pct"] for r in runs if name in r["cost"]]
        print(
            f"  {name:24s} {1000 * statistics.median(per_call):8.2f} ms/call  {statistics.median(share):5.1f}%"
        )

    print(
        f"\n== detection: worker 1 flips one bit per output with probability RATE; {args.runs} burns of "
        f"{args.fault_budget:g} s each =="
    )
    for rate in (float(r) for r in args.rates.split(",")):
        times, per_s = detection(rate, args.runs, args.fault_budget, args.workers)
        named = [t for t in times if t is not None]
        shown = ", ".join("missed" if t is None else f"{t:.1f}" for t in times)
        summary = (
            f"median {statistics.median(named):.1f} s, max {max(named):.1f} s" if named else "never named"
        )
        outputs = statistics.median(per_s) if per_s else 0.0
        print(
            f"  rate {rate:<6g}: named in {len(named)}/{len(times)} burns; detected at [{shown}] s; {summary}; "
            f"worker 1 made {outputs:.0f} outputs/s, so {rate * outputs:.2g} flips/s"
        )

    print(
        f"\n== stragglers: worker 1 under a CFS quota; {args.quota_runs} burns of {args.fault_budget:g} s =="
    )
    if not can_throttle():
        print(f"  not run: {WHY_NOT}")
        return 0
    for pct in (int(q) for q in args.quotas.split(",")):
        for status, summary in quota(pct, args.quota_runs, args.fault_budget, args.workers):
            print(f"  quota {pct:3d}%: {status}: {summary[:220]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
