"""What workers send (one JSON object per line on a pipe of their own) and what the coordinator keeps of it: the
tally, aggregated as it arrives, so a burn of hours holds counters, not every result.

Lines: `hello` (the device and the software stack), `ready` (the workloads that run and those that cannot, with why),
`result` (one workload in one round: the seed, calls, seconds, the work of one call, each distinct digest with its
count, and the error against the reference of each digest not seen before), `error` (the worker's own exception) and
`done`. Times are CLOCK_MONOTONIC, which every process of the machine shares; the tally keeps them as seconds since
the burn began.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

DISTINCT_MAX = (
    200  # distinct digests kept per worker, workload and seed; a GPU past this is corrupt beyond counting
)


class BadRecord(ValueError):
    """A line that is not a worker record (envcheck's own failure, never the device's)."""


@dataclass
class Seen:
    """One distinct output (worker, workload, seed, digest): how often, first when and in which round."""

    count: int
    first_at: float
    first_round: int


@dataclass
class WorkerTally:
    """Everything one worker reported."""

    index: int
    hello: dict[str, Any] = field(default_factory=dict)
    workloads: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    ready_at: float | None = None  # seconds after the start when its workloads were ready
    rounds: int = 0
    done: bool = False
    error: str | None = None
    calls: Counter[str] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu_seconds: defaultdict[str, float] = field(
        default_factory=lambda: defaultdict(float)
    )  # this process's CPU
    work: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    # (workload, bucket) -> [work, seconds]: throughput over time
    timeline: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    last_at: float = 0.0

    def throughput(self, workload: str) -> float | None:
        """Work per second over the whole burn (FLOP/s or bytes/s), or None when it never ran."""
        return self.work[workload] / self.seconds[workload] if self.seconds[workload] > 0 else None

    def cpu_throughput(self, workload: str) -> float | None:
        """Work per second of the worker's own CPU time (a CPU worker: the core's speed, whatever else the host ran),
        or None when not measured."""
        cpu = self.cpu_seconds[workload]
        return self.work[workload] / cpu if cpu > 0 else None


@dataclass
class Tally:
    """The burn so far: per worker, per workload and seed, each distinct digest; each digest's reference error."""

    began: float  # CLOCK_MONOTONIC at the start
    bucket_s: float
    workers: dict[int, WorkerTally] = field(default_factory=dict)
    # (workload, seed) -> worker -> digest -> Seen
    digests: dict[tuple[str, int], dict[int, dict[str, Seen]]] = field(default_factory=dict)
    errors: dict[tuple[str, int, str], float] = field(
        default_factory=dict
    )  # (workload, seed, digest) -> error
    overflow: Counter[tuple[int, str]] = field(
        default_factory=Counter
    )  # (worker, workload) -> digests not kept

    def worker(self, index: int) -> WorkerTally:
        """The tally of worker `index` (made on first use)."""
        return self.workers.setdefault(index, WorkerTally(index))

    def take(self, index: int, line: str) -> None:
        """Fold one line from worker `index` in; BadRecord when it is not a record."""
        try:
            rec = json.loads(line)
        except ValueError:
            raise BadRecord(f"worker {index} wrote a line that is not JSON: {line[:120]!r}") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            raise BadRecord(f"worker {index} wrote a record without a type: {line[:120]!r}")
        tally = self.worker(index)
        kind = rec["type"]
        if kind == "hello":
            tally.hello = {k: v for k, v in rec.items() if k != "type"}
        elif kind == "ready":
            tally.workloads = [str(n) for n in rec.get("workloads") or []]
            tally.skipped = {str(k): str(v) for k, v in (rec.get("skipped") or {}).items()}
            if isinstance(rec.get("at"), (int, float)):
                tally.ready_at = float(rec["at"]) - self.began
        elif kind == "result":
            self._result(tally, rec)
        elif kind == "error":
            tally.error = str(rec.get("what") or "no message")[:4000]
        elif kind == "done":
            tally.done = True
            tally.rounds = max(tally.rounds, int(rec.get("rounds") or 0))
        else:
            raise BadRecord(f"worker {index} wrote an unknown record type {kind!r}")

    def _result(self, tally: WorkerTally, rec: dict[str, Any]) -> None:
        try:
            name, rnd, seed = str(rec["w"]), int(rec["r"]), int(rec["s"])
            calls, seconds, work = int(rec["n"]), float(rec["t"]), float(rec["work"])
            cpu = float(rec.get("c") or 0.0)  # None from a GPU worker
            at = float(rec["at"]) - self.began
            counts = {str(d): int(c) for d, c in dict(rec["d"]).items()}
            errors = {str(d): float(e) for d, e in dict(rec.get("e") or {}).items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise BadRecord(f"worker {tally.index} wrote a malformed result ({exc}): {rec!r:.200}") from None
        tally.calls[name] += calls
        tally.seconds[name] += seconds
        tally.cpu_seconds[name] += cpu
        tally.work[name] += work * calls
        tally.rounds = max(tally.rounds, rnd + 1)
        tally.last_at = max(tally.last_at, at)
        slot = tally.timeline.setdefault((name, int(at // self.bucket_s)), [0.0, 0.0])
        slot[0] += work * calls
        slot[1] += seconds
        mine = self.digests.setdefault((name, seed), {}).setdefault(tally.index, {})
        for dig, count in counts.items():
            if dig in mine:
                mine[dig].count += count
            elif len(mine) < DISTINCT_MAX:
                mine[dig] = Seen(count, at, rnd)
            else:
                self.overflow[(tally.index, name)] += count
        for dig, err in errors.items():
            self.errors.setdefault((name, seed, dig), err if math.isfinite(err) else math.inf)

    def workload_names(self) -> list[str]:
        """Every workload some worker ran, in the order they were first reported."""
        seen: dict[str, None] = {}
        for tally in self.workers.values():
            seen.update(dict.fromkeys(tally.workloads))
        return list(seen)
