"""Bit for bit: which device computed bits the others did not (pure, over the tally).

Devices of one model, given the same inputs, the same algorithms and deterministic settings, compute the same bits
(cuBLAS documents it for GPUs of one architecture and SM count; a CPU worker with one thread does the same). For each
workload, seed and model the expected digest ("the truth") is:
- three or more devices: the digest most of them give (a strict majority of each device's usual digest);
- two: the digest both give; if they differ, the one within tolerance of the float64 reference, when only one is;
- one: its usual digest over the repeats of that seed; on a tie, the one within tolerance.
Every result whose digest is not the truth is a wrong result of that device: a device that disagrees with its peers
(persistently), or with its own repeats (now and then). Where no truth can be found (two devices, both usual digests
within tolerance, or both outside), the devices disagree and neither is named as wrong: both are suspects, and the
fleet's checksums (`envcheck fleet`) say which. A truth outside tolerance of the reference is a systematic error
every device shares (accuracy, not corruption).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from envcheck.burn.records import Seen, Tally

# Finding codes (each one is in envcheck.cluster.finding_codes.TABLE).
SDC = "burn.sdc"
UNRESOLVED = "burn.sdc_unresolved"
INACCURATE = "burn.inaccurate"


@dataclass(frozen=True)
class Wrong:
    """Results of one device that differ from the truth: one distinct wrong digest of one workload and seed."""

    worker: int
    workload: str
    seed: int
    digest: str
    count: int
    first_at: float
    first_round: int
    error: float | None  # its error against the float64 reference, when the worker measured it
    against: str  # 'peers' or 'repeats'


@dataclass(frozen=True)
class Disagreement:
    """Two devices of one model whose usual digests differ, with nothing to say which is right."""

    model: str
    workload: str
    seed: int
    workers: tuple[int, ...]
    errors: tuple[float | None, ...]


@dataclass(frozen=True)
class Drift:
    """A truth (what every device of a model agrees on) outside tolerance of the float64 reference."""

    model: str
    workload: str
    seed: int
    error: float
    tolerance: float


@dataclass
class Verdict:
    """Everything bit-for-bit comparison found, and the checksums of what the devices agreed on."""

    wrong: list[Wrong] = field(default_factory=list)
    unresolved: list[Disagreement] = field(default_factory=list)
    inaccurate: list[Drift] = field(default_factory=list)
    results: Counter[int] = field(default_factory=Counter)  # worker -> results compared
    checksums: dict[tuple[str, str], tuple[str, int]] = field(
        default_factory=dict
    )  # (model, workload) -> (sum, seeds)
    overflow: dict[tuple[int, str], int] = field(default_factory=dict)
    agreed_error: dict[str, float] = field(
        default_factory=dict
    )  # workload -> worst error of what devices agreed on

    def wrong_workers(self) -> list[int]:
        """The devices with wrong results, most wrong results first."""
        counts: Counter[int] = Counter()
        for w in self.wrong:
            counts[w.worker] += w.count
        for (worker, _), n in self.overflow.items():
            counts[worker] += n
        return [worker for worker, _ in counts.most_common()]


def _usual(seen: Mapping[str, Seen]) -> str | None:
    """A device's most frequent digest, or None on a tie."""
    top = max(s.count for s in seen.values())
    most = [d for d, s in seen.items() if s.count == top]
    return most[0] if len(most) == 1 else None


def _within(
    errors: Mapping[tuple[str, int, str], float], key: tuple[str, int, str], tolerance: float
) -> bool | None:
    error = errors.get(key)
    return None if error is None else error <= tolerance


def _truth(
    present: Mapping[int, Mapping[str, Seen]], workload: str, seed: int, tally: Tally, tolerance: float
) -> str | None:
    usual = {i: _usual(seen) for i, seen in present.items()}
    if len(present) >= 3:
        votes = Counter(d for d in usual.values() if d is not None)
        if votes:
            digest, count = votes.most_common(1)[0]
            if 2 * count > len(present):
                return digest
        return None
    candidates = set(usual.values())
    if len(candidates) == 1 and None not in candidates:
        return next(iter(candidates))
    if len(present) == 1:
        candidates = set(next(iter(present.values())))
    fits = [d for d in candidates if d is not None and _within(tally.errors, (workload, seed, d), tolerance)]
    return fits[0] if len(fits) == 1 else None


def models(tally: Tally) -> dict[str, list[int]]:
    """Workers by the model their hello named (bit-for-bit comparison never crosses models)."""
    out: dict[str, list[int]] = {}
    for index, worker in sorted(tally.workers.items()):
        out.setdefault(str(worker.hello.get("model") or "unknown device"), []).append(index)
    return out


def judge(tally: Tally, tolerances: Mapping[str, float]) -> Verdict:
    """Compare every device's digests with the truth of its model; see the module docstring."""
    verdict = Verdict(overflow=dict(tally.overflow))
    truths: dict[tuple[str, str], dict[int, str]] = {}
    for (workload, seed), by_worker in sorted(tally.digests.items()):
        tolerance = tolerances.get(workload, 0.0)
        for model, members in models(tally).items():
            present = {i: by_worker[i] for i in members if by_worker.get(i)}
            if not present:
                continue
            truth = _truth(present, workload, seed, tally, tolerance)
            for i, seen in present.items():
                verdict.results[i] += sum(s.count for s in seen.values())
            if truth is None:
                _unresolved(verdict, model, workload, seed, present, tally)
                continue
            truths.setdefault((model, workload), {})[seed] = truth
            error = tally.errors.get((workload, seed, truth))
            if error is not None:
                verdict.agreed_error[workload] = max(verdict.agreed_error.get(workload, 0.0), error)
            if error is not None and error > tolerance:
                verdict.inaccurate.append(Drift(model, workload, seed, error, tolerance))
            against = "peers" if len(present) > 1 else "repeats"
            for i, seen in present.items():
                verdict.wrong += _differing(i, workload, seed, seen, truth, tally, against)
    for (model, workload), by_seed in truths.items():
        text = "|".join(f"{seed}:{digest}" for seed, digest in sorted(by_seed.items()))
        verdict.checksums[(model, workload)] = (hashlib.sha256(text.encode()).hexdigest()[:16], len(by_seed))
    verdict.wrong.sort(key=lambda w: (w.first_at, w.worker))
    return verdict


def _differing(
    worker: int, workload: str, seed: int, seen: Mapping[str, Seen], right: str, tally: Tally, against: str
) -> list[Wrong]:
    """One device's results for one workload and seed whose digest is not `right`, judged `against` peers or repeats."""
    return [
        Wrong(
            worker,
            workload,
            seed,
            d,
            s.count,
            s.first_at,
            s.first_round,
            tally.errors.get((workload, seed, d)),
            against,
        )
        for d, s in seen.items()
        if d != right
    ]


def _unresolved(
    verdict: Verdict,
    model: str,
    workload: str,
    seed: int,
    present: Mapping[int, Mapping[str, Seen]],
    tally: Tally,
) -> None:
    """No truth: each device's results that differ from its own usual digest are still wrong (its repeats say so);
    the usual digests that differ are a disagreement with no side named."""
    usual = {i: _usual(seen) for i, seen in present.items()}
    for i, seen in present.items():
        own = usual[i]
        if own is not None:
            verdict.wrong += _differing(i, workload, seed, seen, own, tally, "repeats")
    workers = tuple(sorted(present))
    verdict.unresolved.append(
        Disagreement(
            model,
            workload,
            seed,
            workers,
            tuple(tally.errors.get((workload, seed, usual[i] or "")) for i in workers),
        )
    )
