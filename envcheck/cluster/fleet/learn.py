"""Baselines learned from a fleet, and the nodes and GPUs outside them (pure).

Per group (GPU model and count) and metric: the median and the median absolute deviation (MAD). A value is an
outlier when it is worse than the median (lower where higher is better) by BOTH
- more than `margin_pct` of the median (SuperBench's diagnosis rule `variance` with condition -0.05: "more than 5%
  below the baseline"), so a fleet so uniform that its MAD is tiny does not flag a 1% difference; and
- a modified z-score above `z_max` (Iglewicz and Hoaglin: 0.6745 (median - x) / MAD > 3.5), so a metric that is
  noisy across healthy nodes does not flag its normal spread.
Median and MAD, not mean and standard deviation: both have a 50% breakdown point, so a few broken nodes cannot drag
the baseline toward themselves or widen the spread until they hide inside it (the "masking" of mean/SD rules).
A GPU-scope metric's baseline pools every GPU of every node of the group; a pair's, every pair.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.cluster.fleet.nodes import FleetNode, Metric

Z_CONSISTENCY = 0.6745  # the normal distribution's MAD / sigma: modified z = 0.6745 (x - median) / MAD
DEFAULT_Z = 3.5
DEFAULT_MARGIN_PCT = 5.0
DEFAULT_MIN_NODES = 3

# Finding codes of the fleet verdict by the metric's family (its name's first part); any other metric:
# fleet.worse_than_baseline.
FAMILY_CODES = {
    "matmul": "fleet.matmul_slow",
    "cpu_matmul": "fleet.matmul_slow",
    "hbm": "fleet.hbm_slow",
    "memory": "fleet.memory_slow",
    "cpu_memory": "fleet.memory_slow",
    "h2d": "fleet.h2d_slow",
    "d2h": "fleet.d2h_slow",
    "peer": "fleet.peer_slow",
    "dist": "fleet.busbw_slow",
    "burn": "fleet.burn_slow",
}
OTHER_CODE = "fleet.worse_than_baseline"
CODES = (*dict.fromkeys(FAMILY_CODES.values()), OTHER_CODE)


def code_of(metric: str) -> str:
    """The finding code of a value of `metric` outside its baseline."""
    return FAMILY_CODES.get(metric.split(".", 1)[0], OTHER_CODE)


@dataclass(frozen=True)
class Rule:
    """How far from the baseline is an outlier (see the module docstring)."""

    margin_pct: float = DEFAULT_MARGIN_PCT
    z_max: float = DEFAULT_Z
    min_nodes: int = DEFAULT_MIN_NODES

    def describe(self) -> str:
        """The rule in words, for every output."""
        return (
            f"worse than the median by more than {self.margin_pct:g}% and by a modified z-score above "
            f"{self.z_max:g} (0.6745 x deviation / MAD); a metric needs {self.min_nodes}+ nodes"
        )


@dataclass(frozen=True)
class Baseline:
    """One metric's baseline in one group."""

    metric: str
    scope: str
    unit: str
    better: str
    median: float
    mad: float
    values: int
    nodes: int

    def limit(self, rule: Rule) -> float:
        """The value past which (below where higher is better) a figure is an outlier under `rule`."""
        by_z = rule.z_max * self.mad / Z_CONSISTENCY
        step = max(abs(self.median) * rule.margin_pct / 100.0, by_z)
        return self.median - step if self.better == "higher" else self.median + step

    def to_dict(self, rule: Rule) -> dict[str, Any]:
        """JSON and TOML form: the center, the spread (MAD and its sigma-equivalent) and the outlier limit."""
        return {
            "metric": self.metric,
            "scope": self.scope,
            "unit": self.unit,
            "better": self.better,
            "median": round(self.median, 6),
            "mad": round(self.mad, 6),
            "sigma": round(self.mad / Z_CONSISTENCY, 6),
            "values": self.values,
            "nodes": self.nodes,
            "limit": round(self.limit(rule), 6),
        }


@dataclass(frozen=True)
class Violation:
    """One value of one node outside its group's baseline."""

    node: str
    group: str
    metric: str
    scope: str
    subject: str
    value: float
    median: float
    unit: str
    worse_pct: float
    z: float
    code: str

    def where(self) -> str:
        """'GPU 3', 'GPUs 0-3' or '' for the node itself."""
        return {"gpu": f"GPU {self.subject}", "pair": f"GPU pair {self.subject}"}.get(self.scope, "")


@dataclass
class GroupResult:
    """A group's baselines, its violations, and the metrics it had too few nodes to judge."""

    group: str
    nodes: list[str]
    baselines: dict[tuple[str, str], Baseline] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    too_few: dict[str, int] = field(default_factory=dict)


def learn(metric: str, scope: str, samples: Sequence[tuple[str, Metric]]) -> Baseline:
    """The median and MAD of `samples` ((node, metric) pairs of one metric and scope)."""
    values = [m.value for _, m in samples]
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    first = samples[0][1]
    return Baseline(
        metric, scope, first.unit, first.better, median, mad, len(values), len({n for n, _ in samples})
    )


def deviation(value: float, base: Baseline) -> tuple[float, float]:
    """(how much worse than the median in %, modified z-score in the worse direction); both <= 0 when better."""
    worse = (base.median - value) if base.better == "higher" else (value - base.median)
    pct = 100.0 * worse / abs(base.median) if base.median else (math.inf if worse > 0 else 0.0)
    z = Z_CONSISTENCY * worse / base.mad if base.mad > 0 else (math.inf if worse > 0 else 0.0)
    return pct, z


def judge_value(node: str, group: str, m: Metric, base: Baseline, rule: Rule) -> Violation | None:
    """The violation of one value under `rule`, or None."""
    pct, z = deviation(m.value, base)
    if pct > rule.margin_pct and z > rule.z_max:
        return Violation(
            node,
            group,
            m.name,
            m.scope,
            m.subject,
            m.value,
            base.median,
            m.unit,
            round(pct, 2),
            round(z, 2) if math.isfinite(z) else z,
            code_of(m.name),
        )
    return None


def _samples(nodes: Iterable[FleetNode]) -> dict[tuple[str, str], list[tuple[str, Metric]]]:
    out: dict[tuple[str, str], list[tuple[str, Metric]]] = {}
    for node in nodes:
        for m in node.metrics:
            out.setdefault((m.name, m.scope), []).append((node.node, m))
    return out


def judge_group(
    group: str,
    nodes: Sequence[FleetNode],
    rule: Rule,
    given: Mapping[tuple[str, str], Baseline] | None = None,
) -> GroupResult:
    """Learn each metric's baseline from `nodes` (or take `given`, a stored baseline) and find the violations."""
    result = GroupResult(group, [n.node for n in nodes])
    for key, samples in sorted(_samples(nodes).items()):
        base = (given or {}).get(key)
        if base is None and given is None:
            count = len({n for n, _ in samples})
            if count < rule.min_nodes:
                result.too_few[key[0]] = count
                continue
            base = learn(key[0], key[1], samples)
        if base is None:
            continue
        result.baselines[key] = base
        result.violations += [v for node, m in samples if (v := judge_value(node, group, m, base, rule))]
    result.violations.sort(key=lambda v: (-(v.z if math.isfinite(v.z) else 1e18), v.node))
    return result


def by_group(nodes: Iterable[FleetNode]) -> dict[str, list[FleetNode]]:
    """Nodes by group, groups in name order."""
    out: dict[str, list[FleetNode]] = {}
    for node in nodes:
        out.setdefault(node.group, []).append(node)
    return dict(sorted(out.items()))


def code_counts(nodes: Sequence[FleetNode], violations: Iterable[Violation]) -> dict[str, int]:
    """Per finding code, how many nodes have it: the codes in their own reports and the fleet's."""
    holders: dict[str, set[str]] = {}
    for node in nodes:
        for code in node.codes:
            holders.setdefault(code, set()).add(node.node)
    for v in violations:
        holders.setdefault(v.code, set()).add(v.node)
    return dict(sorted(((c, len(n)) for c, n in holders.items()), key=lambda kv: (-kv[1], kv[0])))
