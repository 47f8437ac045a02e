"""Burn checksums across a fleet (pure): the same inputs, algorithms and software on GPUs of one model give the same
bits on every node, so a node whose burn checksum of a workload differs from the one most nodes of its model and
stack agree on computed wrong bits, even where it has a single GPU and nothing inside it to compare with.

Read from `envcheck burn --json` reports: burn.corruption's `measured.checksums` (model, workload, the seeds covered,
the software stack, the checksum). Compared only between the same model, stack, workload and seeds. A strict majority
names the nodes that differ; without one (two nodes, or an even split) every node that disagrees is named, and the
fleet cannot say which is right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CHECKSUM_CODE = "fleet.burn_checksum"


@dataclass(frozen=True)
class Checksum:
    """One workload's checksum from one node's burn."""

    model: str
    stack: str
    workload: str
    seeds: int
    checksum: str


@dataclass(frozen=True)
class Mismatch:
    """One (model, stack, workload, seeds) whose nodes' checksums differ: the majority (None: no strict majority) and
    the nodes that differ from it, with theirs."""

    model: str
    stack: str
    workload: str
    seeds: int
    majority: str | None
    majority_nodes: int
    odd: tuple[tuple[str, str], ...]

    @property
    def code(self) -> str:
        """fleet.burn_checksum."""
        return CHECKSUM_CODE

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "model": self.model,
            "stack": self.stack,
            "workload": self.workload,
            "seeds": self.seeds,
            "majority": self.majority,
            "majority_nodes": self.majority_nodes,
            "nodes": [{"node": n, "checksum": c} for n, c in self.odd],
            "code": self.code,
        }


def _text(value: Any, limit: int = 120) -> str:
    return str(value)[:limit] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""


def report_checksums(result: Mapping[str, Any]) -> tuple[Checksum, ...]:
    """The checksums one burn.corruption result of a run report carries (malformed entries are left out)."""
    if result.get("name") != "burn.corruption" or not isinstance(result.get("measured"), dict):
        return ()
    out = []
    for entry in result["measured"].get("checksums") or []:
        if not isinstance(entry, dict):
            continue
        raw = entry.get("stack")
        stack: dict[str, Any] = raw if isinstance(raw, dict) else {}
        seeds = entry.get("seeds")
        fields = (_text(entry.get("model")), _text(entry.get("workload")), _text(entry.get("checksum"), 64))
        if all(fields) and isinstance(seeds, int) and not isinstance(seeds, bool):
            words = " ".join(f"{k} {_text(v, 40)}" for k, v in sorted(stack.items()) if _text(v, 40))
            out.append(Checksum(fields[0], words, fields[1], seeds, fields[2]))
    return tuple(out)


def mismatches(nodes: Iterable[tuple[str, Iterable[Checksum]]]) -> list[Mismatch]:
    """Every (model, stack, workload, seeds) on which two or more nodes reported different checksums."""
    by_key: dict[tuple[str, str, str, int], dict[str, str]] = {}
    for node, sums in nodes:
        for s in sums:
            by_key.setdefault((s.model, s.stack, s.workload, s.seeds), {})[node] = s.checksum
    found = []
    for (model, stack, workload, seeds), values in sorted(by_key.items()):
        if len(set(values.values())) < 2:
            continue
        value, count = Counter(values.values()).most_common(1)[0]
        majority = value if 2 * count > len(values) else None
        odd = tuple(sorted((n, c) for n, c in values.items() if c != majority))
        found.append(Mismatch(model, stack, workload, seeds, majority, count if majority else 0, odd))
    return found
