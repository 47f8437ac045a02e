"""The whole fleet verdict: loaded documents -> nodes -> groups -> baselines and violations, as one JSON document."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envcheck.cluster.fleet.checksums import Mismatch, mismatches
from envcheck.cluster.fleet.drift import Drift, version_drift
from envcheck.cluster.fleet.learn import (
    Baseline,
    GroupResult,
    Rule,
    Violation,
    by_group,
    code_counts,
    judge_group,
)
from envcheck.cluster.fleet.nodes import FleetNode, NotAReport, to_node
from envcheck.cluster.fleet.sources import FleetInputError, Loaded
from envcheck.core.errors import ExitCode

FLEET_SCHEMA_VERSION = 1


@dataclass
class Survey:
    """Everything `envcheck fleet` reports."""

    rule: Rule
    sources: int
    nodes: list[FleetNode]
    skipped: list[tuple[str, str]]
    duplicates: list[str]
    groups: list[GroupResult] = field(default_factory=list)
    stored: str | None = None  # the stored baseline judged against, instead of learning one
    drift: list[Drift] = field(default_factory=list)  # per GPU model, nodes off the majority's versions
    checksums: list[Mismatch] = field(default_factory=list)  # burn checksums that differ across nodes

    @property
    def violations(self) -> list[Violation]:
        """Every group's violations."""
        return [v for g in self.groups for v in g.violations]

    def outlier_nodes(self) -> dict[str, list[Violation]]:
        """Each node with at least one violation, and its violations (most extreme first)."""
        out: dict[str, list[Violation]] = {}
        for v in self.violations:
            out.setdefault(v.node, []).append(v)
        return dict(sorted(out.items()))


def survey(
    loaded: Loaded,
    rule: Rule,
    stored: Mapping[str, Mapping[tuple[str, str], Baseline]] | None = None,
    stored_name: str | None = None,
) -> Survey:
    """Judge every node; FleetInputError when not one document was an envcheck report."""
    nodes: dict[str, FleetNode] = {}
    skipped = list(loaded.skipped)
    duplicates = []
    for source, doc in loaded.documents:
        try:
            node = to_node(doc, source)
        except NotAReport as exc:
            skipped.append((source, str(exc)))
            continue
        if node.node in nodes:
            duplicates.append(f"{node.node}: {nodes[node.node].source} replaced by {source}")
        nodes[node.node] = node
    if not nodes:
        first = f"; first: {skipped[0][0]}: {skipped[0][1]}" if skipped else ""
        raise FleetInputError(f"no envcheck report among {loaded.sources} source(s){first}")
    result = Survey(rule, loaded.sources, list(nodes.values()), skipped, duplicates, stored=stored_name)
    for group, members in by_group(nodes.values()).items():
        given = None if stored is None else dict(stored.get(group, {}))
        result.groups.append(judge_group(group, members, rule, given))
    result.drift = version_drift((n.node, n.model, dict(n.versions)) for n in result.nodes if n.model)
    result.checksums = mismatches((n.node, n.checksums) for n in result.nodes)
    return result


def _num(value: float) -> float | str:
    return value if math.isfinite(value) else "inf"


def to_dict(s: Survey) -> dict[str, Any]:
    """The JSON document of `envcheck fleet --json` (kind envcheck-fleet)."""
    from envcheck import __version__

    outliers = s.outlier_nodes()
    drifted = sorted({node for d in s.drift for node, _ in d.odd})
    wrong = sorted({node for m in s.checksums for node, _ in m.odd})
    codes = code_counts(s.nodes, s.violations)
    for d in s.drift:
        codes[d.code] = codes.get(d.code, 0) + len(d.odd)
    if wrong:
        codes[s.checksums[0].code] = codes.get(s.checksums[0].code, 0) + len(wrong)
    return {
        "kind": "envcheck-fleet",
        "schema_version": FLEET_SCHEMA_VERSION,
        "envcheck_version": __version__,
        "read": {
            "sources": s.sources,
            "reports": len(s.nodes) + len(s.duplicates),
            "nodes": len(s.nodes),
            "skipped": [{"source": a, "why": b} for a, b in s.skipped],
            "duplicates": s.duplicates,
        },
        "rule": {
            "center": "median",
            "spread": "MAD (median absolute deviation); sigma = MAD / 0.6745",
            "margin_pct": s.rule.margin_pct,
            "z_max": s.rule.z_max,
            "min_nodes": s.rule.min_nodes,
            "text": s.rule.describe(),
            "baseline": s.stored or "learned from these reports",
        },
        "groups": [
            {
                "group": g.group,
                "nodes": len(g.nodes),
                "baselines": [b.to_dict(s.rule) for b in g.baselines.values()],
                "too_few_nodes": g.too_few,
                "outlier_nodes": sorted({v.node for v in g.violations}),
            }
            for g in s.groups
        ],
        "outlier_nodes": [
            {
                "node": node,
                "group": vs[0].group,
                "violations": [
                    {
                        "metric": v.metric,
                        "scope": v.scope,
                        "subject": v.subject,
                        "value": v.value,
                        "median": v.median,
                        "unit": v.unit,
                        "worse_pct": v.worse_pct,
                        "z": _num(v.z),
                        "code": v.code,
                    }
                    for v in vs
                ],
            }
            for node, vs in outliers.items()
        ],
        "version_drift": [d.to_dict() for d in s.drift],
        "version_outlier_nodes": drifted,
        "burn_checksums": [m.to_dict() for m in s.checksums],
        "checksum_outlier_nodes": wrong,
        "codes": dict(sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "exit_code": ExitCode.FAILED if outliers or drifted or wrong else ExitCode.OK,
    }
