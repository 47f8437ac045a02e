"""`envcheck fleet`'s text output, rendered from its JSON document (one source for text, JSON and HTML). Every name
from a report passes through core.text.one_line: a report's text never steers the terminal."""

from __future__ import annotations

from typing import Any

from envcheck.core.text import one_line

MAX_VIOLATIONS_SHOWN = 4


def _fmt(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def violation_line(v: dict[str, Any]) -> str:
    """'GPU 3 matmul.bfloat16 612 TFLOP/s: 22.5% below the median 790 (z 9.1) [fleet.matmul_slow]'."""
    where = {"gpu": f"GPU {v['subject']} ", "pair": f"GPU pair {v['subject']} "}.get(v["scope"], "")
    side = "below" if v["value"] < v["median"] else "above"
    return (
        f"{one_line(where)}{one_line(v['metric'])} {_fmt(v['value'])} {one_line(v['unit'])}: {v['worse_pct']:g}% "
        f"worse, {side} the median {_fmt(v['median'])} (z {_fmt(v['z'])}) [{v['code']}]"
    )


def drift_line(d: dict[str, Any]) -> str:
    """'NVIDIA H100 80GB HBM3 nccl: node-e has 2.21.5 where 4 node(s) have 2.27.3 [fleet.stack_drift]'."""
    odd = ", ".join(f"{one_line(n['node'])} has {one_line(n['value'])}" for n in d["nodes"])
    return (
        f"{one_line(d['model'])} {d['field']}: {odd} where {d['majority_nodes']} node(s) have "
        f"{one_line(d['majority'])} [{d['code']}]"
    )


def drift_lines(doc: dict[str, Any]) -> list[str]:
    """The version drift section: nodes whose driver, CUDA, torch, NCCL or cuDNN differs from their model's majority."""
    drift = doc.get("version_drift") or []
    head = f"version outlier nodes: {len(doc.get('version_outlier_nodes') or [])} of {doc['read']['nodes']}"
    return [head + ("" if drift else " (driver, CUDA, torch, NCCL, cuDNN agree per GPU model)")] + [
        f"  {drift_line(d)}" for d in drift
    ]


def checksum_line(m: dict[str, Any]) -> str:
    """'matmul.bfloat16 on NVIDIA H100 ... (torch 2.9.0 ...): node-c has 1f..e0 where 4 node(s) have 9a..04
    [fleet.burn_checksum]'; without a majority, the nodes that disagree."""
    odd = ", ".join(f"{one_line(n['node'])} has {one_line(n['checksum'])}" for n in m["nodes"])
    where = (
        f"where {m['majority_nodes']} node(s) have {one_line(m['majority'])}"
        if m["majority"]
        else "(no majority: which is right is not known)"
    )
    return (
        f"{one_line(m['workload'])} on {one_line(m['model'])} ({one_line(m['stack'])}, {m['seeds']} seeds): {odd} "
        f"{where} [{m['code']}]"
    )


def checksum_lines(doc: dict[str, Any]) -> list[str]:
    """The burn checksum section: nodes whose burn computed other bits than their model's majority."""
    sums = doc.get("burn_checksums") or []
    head = f"burn checksum outlier nodes: {len(doc.get('checksum_outlier_nodes') or [])} of {doc['read']['nodes']}"
    return [head] + [f"  {checksum_line(m)}" for m in sums]


def render_text(doc: dict[str, Any]) -> list[str]:
    """The lines `envcheck fleet` prints."""
    read = doc["read"]
    lines = [
        f"envcheck fleet: read {read['reports']} report(s) from {read['sources']} source(s), "
        f"{len(read['skipped'])} skipped, {len(read['duplicates'])} duplicate(s); {read['nodes']} node(s) in "
        f"{len(doc['groups'])} group(s)"
    ]
    lines += [f"  skipped {one_line(s['source'])}: {one_line(s['why'])}" for s in read["skipped"]]
    lines += [f"  duplicate {one_line(d)}" for d in read["duplicates"]]
    lines.append(f"rule: {doc['rule']['text']}; baseline {one_line(doc['rule']['baseline'])}")
    for g in doc["groups"]:
        lines.append(
            f"group {one_line(g['group'])}: {g['nodes']} node(s), {len(g['outlier_nodes'])} outlier(s)"
        )
        if g["baselines"]:
            lines.append(
                f"  {'metric':<28} {'scope':<5} {'median':>10} {'MAD':>9} {'limit':>10} {'unit':<8} {'n':>6}"
            )
        for b in g["baselines"]:
            lines.append(
                f"  {one_line(b['metric'])[:28]:<28} {b['scope']:<5} {_fmt(b['median']):>10} "
                f"{_fmt(b['mad']):>9} {_fmt(b['limit']):>10} {one_line(b['unit'])[:8]:<8} {b['values']:>6}"
            )
        for metric, count in g["too_few_nodes"].items():
            lines.append(
                f"  {one_line(metric)}: not judged, {count} node(s) (needs {doc['rule']['min_nodes']})"
            )
    outliers = doc["outlier_nodes"]
    lines.append(f"outlier nodes: {len(outliers)} of {read['nodes']}")
    for o in outliers:
        vs = o["violations"]
        more = f" (+{len(vs) - MAX_VIOLATIONS_SHOWN} more)" if len(vs) > MAX_VIOLATIONS_SHOWN else ""
        lines.append(
            f"  {one_line(o['node'])} ({one_line(o['group'])}): "
            + "; ".join(violation_line(v) for v in vs[:MAX_VIOLATIONS_SHOWN])
            + more
        )
    lines += drift_lines(doc)
    lines += checksum_lines(doc)
    lines.append("nodes per finding code:" if doc["codes"] else "nodes per finding code: none")
    lines += [f"  {one_line(code):<32} {count}" for code, count in doc["codes"].items()]
    return lines
