"""Stragglers: a device slower than its peers over the whole burn, slower at the end than at the start under
sustained load, or slower than the fleet's baseline for its model; each named with the reason its samples give
(pure, over the tally and the samples).

- Peers: for each workload (the collective aside: every rank of it waits for the slowest), a device's deficit is how
  far below the best device of its model it is; its deficit is the median over the workloads, so one noisy workload
  does not name it. More than `margin_pct` below: a straggler (gpu-fryer's rule, huggingface/gpu-fryer: "TFLOPS
  tolerance (%) compared to best GPU", default 10). A CPU worker is judged as a core: slower per second of its own
  CPU time, or held by its cgroup's quota; one that only got less of its core than its peers (other processes ran
  there) is excused: that time went to the host's load, which says nothing of the core.
- Sustained load: the median throughput of the last third of the burn against the first third, named only when the
  samples give a reason (a clock-event reason, a CPU quota), since a shared host's load also changes over time.
- Fleet: the throughput against a stored baseline (`envcheck fleet --write-baseline`): worse than its median by more
  than the margin and a modified z-score above `z_max` is a warning, as the fleet verdict; by more than `far_pct` a
  failure: a device that far outside its fleet slows every job it joins.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.burn.records import Tally
from envcheck.probe.nvml_fields import (
    CLOCK_EVENTS,
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    SW_POWER_CAP,
    SW_THERMAL,
)

# Finding codes (each one is in envcheck.cluster.finding_codes.TABLE).
STRAGGLER = "burn.straggler"
FLEET_FAR = "burn.straggler_fleet"
DEFAULT_MARGIN_PCT = 10.0
DEFAULT_FAR_PCT = 20.0
Z_CONSISTENCY = (
    0.6745  # modified z = 0.6745 (median - x) / MAD (Iglewicz and Hoaglin), as envcheck fleet uses
)
SLOWDOWN_BITS = (HW_THERMAL, SW_THERMAL, HW_POWER_BRAKE, HW_SLOWDOWN, SW_POWER_CAP)
REASON_SHARE = 0.05  # a reason seen in at least 5% of a device's samples is named
NOT_PEERS = ("all_reduce",)  # collectives: every rank runs at the slowest rank's pace
# A device that ran a workload fewer times has measured too little of it to be the best its peers are held to. Counted
# in calls, not rounds: the rounds are in lockstep (each starts with an all-reduce, envcheck.burn.loop), so a device
# whose calls are slow holds every device to as few rounds as it manages, while its peers still fit many calls in
# each round.
MIN_CALLS = 3


@dataclass(frozen=True)
class FleetLine:
    """One metric's stored baseline for this node's group (from `envcheck fleet --write-baseline`)."""

    median: float
    mad: float
    unit: str


@dataclass
class Slow:
    """One device found slow, how, and why its samples say."""

    worker: int
    how: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    far: bool = False  # far outside the fleet: a failure
    deficit_pct: float = 0.0
    excused: str | None = None  # slower for a reason outside the device (the host's load): not named


def throughputs(tally: Tally, per_cpu_second: bool = False) -> dict[int, dict[str, float]]:
    """Work per second of each worker and workload over the whole burn (of wall time, or of the worker's own CPU
    time)."""
    return {
        i: {
            w: t
            for w in worker.workloads
            if (t := worker.cpu_throughput(w) if per_cpu_second else worker.throughput(w)) is not None
        }
        for i, worker in tally.workers.items()
    }


def _median_share(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else None


def reasons(rows: Sequence[Mapping[str, Any]], peers: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a device's samples say held it back: NVML's clock-event reasons (with the share of samples, its hottest
    temperature and its SM clock against its peers'), or its CPU quota; then (not the device's own) its share of a
    core against its peers'."""
    out = []
    events = [int(r["clock_events"]) for r in rows if isinstance(r.get("clock_events"), (int, float))]
    for bit in SLOWDOWN_BITS:
        share = sum(1 for e in events if e & bit) / len(events) if events else 0.0
        if share >= REASON_SHARE:
            out.append(f"{CLOCK_EVENTS[bit]} in {100 * share:.0f}% of samples")
    temps = [float(r["temperature_c"]) for r in rows if isinstance(r.get("temperature_c"), (int, float))]
    if out and temps:
        out.append(f"up to {max(temps):.0f} C")
    clock, theirs = _median_share(rows, "sm_clock_mhz"), _median_share(peers, "sm_clock_mhz")
    if clock is not None and theirs and clock < 0.95 * theirs:
        out.append(f"SM clock {clock:.0f} MHz against {theirs:.0f} MHz on its peers")
    throttled = _median_share(rows, "throttled_share")
    if throttled is not None and throttled >= REASON_SHARE:
        quota = next((r["quota_cpus"] for r in rows if r.get("quota_cpus") is not None), None)
        limit = f" of {quota:g} CPU" if isinstance(quota, (int, float)) else ""
        out.append(f"its cgroup's CPU quota{limit} throttled it {100 * throttled:.0f}% of the time")
    load = host_load(rows, peers)
    return [*out, load] if load else out


def host_load(rows: Sequence[Mapping[str, Any]], peers: Sequence[Mapping[str, Any]]) -> str | None:
    """A CPU worker that got less of its core than its peers (other processes ran there): the host's load."""
    got, peer_got = _median_share(rows, "cpu_share"), _median_share(peers, "cpu_share")
    if got is not None and peer_got and got < 0.9 * peer_got:
        return f"it got {100 * got:.0f}% of a core against {100 * peer_got:.0f}% for its peers"
    return None


def _paced_alone(workload: str) -> bool:
    """Whether a device runs `workload` at its own pace (not a collective, which runs at the slowest rank's)."""
    return workload.split(".", 1)[0] not in NOT_PEERS


def _peer_deficits(
    tally: Tally, groups: Mapping[str, Sequence[int]], per_cpu_second: bool = False
) -> tuple[dict[int, float], set[int]]:
    """Each device's deficit against the best of its model (median over workloads), and the devices whose deficit
    rests only on workloads they ran fewer than MIN_CALLS times. Each workload's best is taken over the devices that
    ran it MIN_CALLS times; a device with fewer calls (the slowest may make one a round) is judged against it by the
    calls it made."""
    speeds = throughputs(tally, per_cpu_second)
    out: dict[int, float] = {}
    thin: set[int] = set()
    for group in groups.values():
        if len(group) < 2:
            continue
        best: dict[str, float] = {}
        for j in group:
            for workload, value in speeds.get(j, {}).items():
                if tally.workers[j].calls[workload] >= MIN_CALLS:
                    best[workload] = max(best.get(workload, 0.0), value)
        for i in group:
            judged = [
                (workload, value)
                for workload, value in speeds.get(i, {}).items()
                if _paced_alone(workload) and best.get(workload, 0.0) > 0
            ]
            if judged:
                out[i] = statistics.median(100.0 * (best[w] - v) / best[w] for w, v in judged)
                if all(tally.workers[i].calls[w] < MIN_CALLS for w, _ in judged):
                    thin.add(i)
    return out, thin


def too_few_calls(tally: Tally, groups: Mapping[str, Sequence[int]]) -> list[int]:
    """The devices with peers whose speed was measured by fewer than MIN_CALLS calls of every workload they share
    with them (or not compared at all: no device of their model made MIN_CALLS calls)."""
    judged, thin = _peer_deficits(tally, groups)
    speeds = throughputs(tally)
    return sorted(
        i
        for group in groups.values()
        if len(group) >= 2
        for i in group
        if (i not in judged or i in thin) and any(_paced_alone(w) for w in speeds.get(i, {}))
    )


def _drop(tally: Tally, worker: int) -> float | None:
    """How far (%) the median throughput of the last third of the burn is below the first third's."""
    drops = []
    for workload in tally.workers[worker].workloads:
        if not _paced_alone(workload):
            continue
        series = sorted(
            (bucket, w / s)
            for (name, bucket), (w, s) in tally.workers[worker].timeline.items()
            if name == workload and s
        )
        if len(series) < 6:
            continue
        third = len(series) // 3
        first = statistics.median(v for _, v in series[:third])
        last = statistics.median(v for _, v in series[-third:])
        if first > 0:
            drops.append(100.0 * (first - last) / first)
    return statistics.median(drops) if drops else None


def judge(
    tally: Tally,
    samples: Sequence[Mapping[str, Any]],
    groups: Mapping[str, Sequence[int]],
    *,
    margin_pct: float = DEFAULT_MARGIN_PCT,
    fleet: Mapping[str, FleetLine] | None = None,
    z_max: float = 3.5,
    fleet_margin_pct: float = 5.0,
    far_pct: float = DEFAULT_FAR_PCT,
    scale: Mapping[str, float] | None = None,
) -> list[Slow]:
    """Every slow device (see the module docstring), slowest first. `scale`: workload -> the factor from work per
    second to the baseline's unit (1e-12 for TFLOP/s)."""
    rows: dict[int, list[Mapping[str, Any]]] = {}
    for row in samples:
        rows.setdefault(int(row["worker"]), []).append(row)
    found: dict[int, Slow] = {}
    peers_of = {i: [j for j in members if j != i] for members in groups.values() for i in members}
    peer_rows = {i: [r for j in peers_of.get(i, []) for r in rows.get(j, [])] for i in tally.workers}
    own = {
        i: [
            r for r in reasons(rows.get(i, []), peer_rows[i]) if r != host_load(rows.get(i, []), peer_rows[i])
        ]
        for i in tally.workers
    }
    per_cpu, _ = _peer_deficits(tally, groups, per_cpu_second=True)
    deficits, thin = _peer_deficits(tally, groups)
    for i, deficit in deficits.items():
        # measured by one or two calls and nothing in its samples says why: a first call's warm-up can make that gap
        if deficit > margin_pct and not (i in thin and not own[i]):
            slow = found.setdefault(i, Slow(i, deficit_pct=round(deficit, 1)))
            slow.how.append(
                f"{deficit:.1f}% below the best of the {len(peers_of[i]) + 1} devices of its model (median over workloads)"
            )
            # A CPU worker's core is slow when it computes less per second of its own CPU time, or its cgroup's quota
            # holds it back; one that merely got less of its core than its peers lost time to the host's other work.
            cpu = tally.workers[i].hello.get("kind") == "cpu"
            if cpu and i in per_cpu and per_cpu[i] <= margin_pct and not own[i]:
                slow.excused = host_load(rows.get(i, []), peer_rows[i]) or (
                    f"per second of its own CPU time it is within {margin_pct:g}% of its peers"
                )
    for i in tally.workers:
        drop = _drop(tally, i)
        if drop is not None and drop > margin_pct and own[i]:
            found.setdefault(i, Slow(i)).how.append(
                f"its throughput fell {drop:.1f}% from the first third to the last"
            )
    for i, speeds in throughputs(tally).items():
        for workload, value in speeds.items():
            line = (fleet or {}).get(f"burn.{workload}")
            if line is None or line.median <= 0:
                continue
            value *= (scale or {}).get(workload, 1.0)
            worse = 100.0 * (line.median - value) / line.median
            z = (
                Z_CONSISTENCY * (line.median - value) / line.mad
                if line.mad > 0
                else (float("inf") if worse > 0 else 0.0)
            )
            if worse > fleet_margin_pct and z > z_max:
                slow = found.setdefault(i, Slow(i))
                slow.far = slow.far or worse > far_pct
                slow.how.append(
                    f"{workload} {value:.4g} {line.unit}, {worse:.1f}% below the fleet's median {line.median:.4g}"
                )
    for i, slow in found.items():
        slow.reasons = reasons(rows.get(i, []), peer_rows[i])
    return sorted(found.values(), key=lambda s: (not s.far, -s.deficit_pct, s.worker))
