"""Version drift across a fleet: per GPU model, the nodes whose driver, CUDA, torch, NCCL or cuDNN version differs from
the majority of that model's nodes (a node that missed a rollout). Mixed NCCL versions across the ranks of one job
hang or fail its collectives (NVIDIA/nccl#354, #1328), so a version outlier is named even when every figure is fine.

Read from `envcheck run --json` reports' facts (gpu.driver_version, torch.version, torch.cuda_compiled,
torch.nccl_loaded, torch.cudnn_loaded); a bench document carries none and is not judged here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Who acts on each: the driver is the node's (its admin), the rest came with the image or venv the node ran.
DRIVER_DRIFT = "fleet.driver_drift"
STACK_DRIFT = "fleet.stack_drift"
CODES = (DRIVER_DRIFT, STACK_DRIFT)
# (field, where in a run report's facts, code), in the order they are shown.
FIELDS: tuple[tuple[str, tuple[str, str], str], ...] = (
    ("driver", ("gpu", "driver_version"), DRIVER_DRIFT),
    ("cuda", ("torch", "cuda_compiled"), STACK_DRIFT),
    ("torch", ("torch", "version"), STACK_DRIFT),
    ("nccl", ("torch", "nccl_loaded"), STACK_DRIFT),
    ("cudnn", ("torch", "cudnn_loaded"), STACK_DRIFT),
)
CODE_OF = {name: code for name, _, code in FIELDS}


@dataclass(frozen=True)
class Drift:
    """One field of one GPU model's nodes: the majority value and the nodes that differ from it, with theirs."""

    model: str
    field: str
    majority: str
    majority_nodes: int
    odd: tuple[tuple[str, str], ...]  # (node, its value), by node name

    @property
    def code(self) -> str:
        """fleet.driver_drift or fleet.stack_drift."""
        return CODE_OF[self.field]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "model": self.model,
            "field": self.field,
            "majority": self.majority,
            "majority_nodes": self.majority_nodes,
            "nodes": [{"node": n, "value": v} for n, v in self.odd],
            "code": self.code,
        }


def report_versions(facts: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(field, value) for each version a run report's facts name; a missing or non-text value is left out."""
    out = []
    for name, (section, key), _ in FIELDS:
        part = facts.get(section)
        value = part.get(key) if isinstance(part, Mapping) else None
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
            out.append((name, str(value).strip()[:40]))
    return tuple(out)


def version_drift(nodes: Iterable[tuple[str, str, Mapping[str, str]]]) -> list[Drift]:
    """Per (model, field): the nodes whose value differs from the strict majority of that model's nodes that report
    the field. No strict majority (two nodes, or an even split) is no drift to name: who is odd is not known."""
    by_model: dict[str, list[tuple[str, Mapping[str, str]]]] = {}
    for node, model, versions in nodes:
        by_model.setdefault(model, []).append((node, versions))
    found = []
    for model in sorted(by_model):
        members = by_model[model]
        for name, _, _ in FIELDS:
            values = {node: v[name] for node, v in members if name in v}
            if len(values) < 3:
                continue
            value, count = Counter(values.values()).most_common(1)[0]
            if count * 2 <= len(values) or count == len(values):
                continue
            odd = tuple(sorted((n, v) for n, v in values.items() if v != value))
            found.append(Drift(model, name, value, count, odd))
    return found
